# --- Credentials: no defaults. `hpcbench deploy` names the first one missing.

variable "project" {
  description = "GPULab project to run the jobs in. Set TF_VAR_project=<project>."
  type        = string
  validation {
    condition     = can(regex("^[a-zA-Z0-9][a-zA-Z0-9_-]{0,31}$", var.project))
    error_message = "project must be your GPULab project name: set TF_VAR_project=<project>."
  }
}

variable "pem_path" {
  description = "Path to your login PEM (certificate + key, from the imec portal). Set TF_VAR_pem_path=/path/to/login.pem."
  type        = string
  validation {
    condition     = endswith(var.pem_path, ".pem")
    error_message = "pem_path must name your login .pem file: set TF_VAR_pem_path=/path/to/login.pem."
  }
}

variable "pem_password" {
  description = "Password of your login PEM. Set TF_VAR_pem_password=... (export TF_VAR_pem_password='' if the key has none)."
  type        = string
  sensitive   = true
  validation {
    condition     = var.pem_password != null
    error_message = "pem_password may be empty but must be set: export TF_VAR_pem_password='' for a key without password."
  }
}

variable "stack_image" {
  description = "Stack image in a registry GPULab can pull. Set TF_VAR_stack_image=gitlab.ilabt.imec.be:4567/<group>/hpcbench-stack:<tag>."
  type        = string
  validation {
    condition     = can(regex("^[^\\s]+/[^\\s]+$", var.stack_image))
    error_message = "stack_image must be a registry/name[:tag] reference GPULab can pull: push the stack image and set TF_VAR_stack_image."
  }
}

# --- Topology.

variable "topology" {
  description = "<jobs>x<GPUs per job>: 1x10 (one job, 10 GPUs), 10x1 (10 jobs, 1 GPU each) or any JxG. Set TOPOLOGY=... with make, or TF_VAR_topology."
  type        = string
  default     = "1x10"
  validation {
    condition     = can(regex("^([1-9]|1[0-9]|20)x([1-9]|1[0-6])$", var.topology))
    error_message = "topology must be <jobs>x<gpus>, jobs 1-20 and gpus 1-16, e.g. 1x10 or 10x1: set TF_VAR_topology."
  }
}

variable "cluster_id" {
  description = "GPULab cluster (see `gpulab-cli clusters`); null lets GPULab choose. 1x10 needs a worker with 10 free GPUs."
  type        = number
  default     = null
  validation {
    condition     = var.cluster_id == null ? true : var.cluster_id >= 1
    error_message = "cluster_id must be a cluster number from `gpulab-cli clusters`, or null."
  }
}

variable "gpu_models" {
  description = "Acceptable GPU models (e.g. [\"A100\"]); one model keeps 1x10 and 10x1 comparable."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for m in var.gpu_models : length(m) >= 2])
    error_message = "each gpu_models entry must have at least 2 characters, e.g. \"A100\"."
  }
}

variable "max_duration" {
  description = "GPULab stops the jobs after this long (fair use: what the run needs)."
  type        = string
  default     = "4h"
  validation {
    condition     = can(regex("^[1-9][0-9]* ?(m|min|minutes?|h|hours?|days?)$", var.max_duration))
    error_message = "max_duration must be a number and a unit, e.g. 90m, 4h or 2 days."
  }
}

variable "use_proxy" {
  description = "Reach the jobs through GPULab's SSH proxy (this machine has no IPv6). Set TF_VAR_use_proxy=true."
  type        = bool
  default     = false
}

# --- Controller.

