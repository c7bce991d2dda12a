# --- Credentials: no defaults, so a missing one stops `plan` with its description.

variable "project" {
  description = "GPULab project to run the jobs in (your SLICES/Fed4FIRE project). Set TF_VAR_project=<project> (gpulab-cli's GPULAB_PROJECT)."
  type        = string

  validation {
    condition     = can(regex("^[a-zA-Z0-9][a-zA-Z0-9_-]{0,31}$", var.project))
    error_message = "project must be your GPULab project name: set TF_VAR_project=<project>."
  }
}

variable "pem_path" {
  description = "Path to your login PEM (certificate + key, from the imec portal). Set TF_VAR_pem_path=/path/to/login.pem (gpulab-cli's GPULAB_CERT)."
  type        = string

  validation {
    condition     = endswith(var.pem_path, ".pem")
    error_message = "pem_path must name your login .pem file: set TF_VAR_pem_path=/path/to/login.pem."
  }
}

# --- Topology: `jobs` jobs with `gpus_per_job` GPUs each (1x10, 10x1, ...).

variable "jobs" {
  description = "Number of GPULab jobs (one machine or slot each); job0 is the head."
  type        = number

  validation {
    condition     = floor(var.jobs) == var.jobs && var.jobs >= 1 && var.jobs <= 20
    error_message = "jobs must be a whole number from 1 to 20 (GPULab fair use: about 10 concurrent jobs per user, 20 per project)."
  }
}

variable "gpus_per_job" {
  description = "GPUs per job; all GPUs of one job sit on one worker machine."
  type        = number

  validation {
    condition     = floor(var.gpus_per_job) == var.gpus_per_job && var.gpus_per_job >= 1 && var.gpus_per_job <= 16
    error_message = "gpus_per_job must be a whole number from 1 to 16 (no GPULab worker has more)."
  }
}

variable "name_prefix" {
  description = "Job names are <name_prefix>-<topology>-job<i>."
  type        = string
  default     = "hpcbench"

  validation {
    condition     = can(regex("^[a-zA-Z][a-zA-Z0-9_-]{0,39}$", var.name_prefix))
    error_message = "name_prefix must start with a letter and hold letters, digits, '-' or '_' (at most 40)."
  }
}

variable "cpus_per_gpu" {
  description = "CPU cores requested per GPU (data loading and Horovod's background thread need a few)."
  type        = number
  default     = 4
  nullable    = false

  validation {
    condition     = floor(var.cpus_per_gpu) == var.cpus_per_gpu && var.cpus_per_gpu >= 1 && var.cpus_per_gpu <= 32
    error_message = "cpus_per_gpu must be a whole number from 1 to 32."
  }
}

variable "memory_gb_per_gpu" {
  description = "System memory (GB) requested per GPU."
  type        = number
  default     = 16
  nullable    = false

  validation {
    condition     = floor(var.memory_gb_per_gpu) == var.memory_gb_per_gpu && var.memory_gb_per_gpu >= 1 && var.memory_gb_per_gpu <= 256
    error_message = "memory_gb_per_gpu must be a whole number of GB from 1 to 256."
  }
}

variable "cluster_id" {
  description = "GPULab cluster to run on (gpulab-cli clusters); null lets GPULab choose."
  type        = number
  default     = null

  validation {
    condition     = var.cluster_id == null ? true : (floor(var.cluster_id) == var.cluster_id && var.cluster_id >= 1)
    error_message = "cluster_id must be a cluster number from `gpulab-cli clusters`, or null."
  }
}

variable "gpu_models" {
  description = "Acceptable GPU models (substrings, e.g. [\"A100\"]); empty accepts any. Use one model so that jobs are comparable."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for m in var.gpu_models : length(m) >= 2])
    error_message = "each gpu_models entry must have at least 2 characters, e.g. \"A100\" or \"V100\"."
  }
}

variable "min_cuda_version" {
  description = "Lowest CUDA major version the worker's driver must support (e.g. 12); null for any."
  type        = number
  default     = null

  validation {
    condition     = var.min_cuda_version == null ? true : (var.min_cuda_version >= 9 && var.min_cuda_version <= 20)
    error_message = "min_cuda_version must be a CUDA major version such as 12, or null."
  }
}

variable "max_duration" {
  description = "GPULab stops every job after this long (e.g. 4h); keep it to what the run needs (fair use)."
  type        = string
  default     = "4h"
  nullable    = false

  validation {
    condition     = can(regex("^[1-9][0-9]* ?(m|min|minutes?|h|hours?|days?)$", var.max_duration))
    error_message = "max_duration must be a number and a unit, at least one minute: e.g. 90m, 4h or 2 days."
  }
}

variable "interactive" {
  description = "Interactive jobs start at once or fail; batch jobs (false) wait in the queue until GPUs are free."
  type        = bool
  default     = false
}

# --- Software and access.

variable "stack_image" {
  description = "The stack image every job runs, in a registry GPULab can pull from. Set TF_VAR_stack_image=gitlab.ilabt.imec.be:4567/<group>/hpcbench-stack:<tag>."
  type        = string

  validation {
    condition     = can(regex("^(([\\w\\-+_.]+):([^@ ]+)@)?([\\w.\\-_]+(:\\d+|)/)?([a-z0-9.\\-_]+(/[a-z0-9.\\-_]+|)+)(:([\\w.\\-_]{1,127}))?$", var.stack_image))
    error_message = "stack_image must be an image reference GPULab accepts (registry/name:tag): push the stack image to a registry and set TF_VAR_stack_image."
  }
}

variable "stack_ssh_port" {
  description = "Port of the sshd the job starts inside the container; GPULab publishes it on a host port."
  type        = number
  default     = 2222

  validation {
    condition     = var.stack_ssh_port >= 1024 && var.stack_ssh_port <= 65535
    error_message = "stack_ssh_port must lie between 1024 and 65535."
  }
}

variable "project_storage" {
  description = "Project storage to mount: host path on the worker (PROJECT_SHARE_AUTO: the project share wherever the job runs; /project_ghent exists on Ghent workers only) and path in the container."
  type = object({
    host_path      = string
    container_path = string
  })
  # PROJECT_SHARE_AUTO is the project share wherever the job lands, what
  # gpulab-cli itself mounts (imecilabt/gpulab/cli/__main__.py:768,
  # JobStorage.is_project_share_auto in schemas/job2.py:873-875);
  # /project_ghent exists on Ghent workers only.
  default = { host_path = "PROJECT_SHARE_AUTO", container_path = "/project" }

  validation {
    condition     = (var.project_storage.host_path == "PROJECT_SHARE_AUTO" || startswith(var.project_storage.host_path, "/")) && startswith(var.project_storage.container_path, "/")
    error_message = "project_storage.host_path must be PROJECT_SHARE_AUTO or an absolute worker path, container_path absolute: e.g. { host_path = \"PROJECT_SHARE_AUTO\", container_path = \"/project\" }."
  }
}

variable "features" {
  description = "resources.features the workers must offer (GPULab's job schema: strings of 2+ characters). Empty by default: the feature names a published port needs are not in the client's code; add them (e.g. [\"UNFIREWALLED_PORTS\"]) if the jobs' sshd port turns out firewalled."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for f in var.features : can(regex("^[A-Za-z0-9_]{2,}$", f))])
    error_message = "each features entry must be a feature name of 2+ letters, digits or '_', e.g. \"UNFIREWALLED_PORTS\"."
  }
}

variable "start_timeout" {
  description = "Seconds deploy waits for each job to be RUNNING (queue plus image pull) before it cancels the job and fails."
  type        = number
  default     = 3600
  nullable    = false

  validation {
    condition     = floor(var.start_timeout) == var.start_timeout && var.start_timeout >= 10 && var.start_timeout <= 86400
    error_message = "start_timeout must be a whole number of seconds from 10 to 86400."
  }
}

variable "ssh_public_key_file" {
  description = "Controller public key: goes into sshPubKeys and the container's authorized_keys."
  type        = string

  validation {
    condition     = fileexists(var.ssh_public_key_file)
    error_message = "ssh_public_key_file does not exist: run `hpcbench deploy` (it generates .hpcbench/<env>/ssh/id_ed25519) or point TF_VAR_ssh_public_key_file at a public key."
  }
}

variable "use_proxy" {
  description = "Reach the jobs through GPULab's SSH proxy (ProxyJump) because this machine has no IPv6."
  type        = bool
  default     = false
  nullable    = false
}

variable "gpulab_cli" {
  description = "The gpulab-cli command (pip install imecilabt-gpulab-cli)."
  type        = string
  default     = "gpulab-cli"

  validation {
    condition     = length(var.gpulab_cli) > 0
    error_message = "gpulab_cli must name the gpulab-cli command: pip install imecilabt-gpulab-cli."
  }
}

variable "state_dir" {
  description = "Directory for generated artefacts (job JSON, job states, leases/ with the job ids); never committed."
  type        = string

  validation {
    condition     = trimspace(var.state_dir) != ""
    error_message = "state_dir must name a directory, e.g. .hpcbench/gpulab."
  }
}
