variable "names" {
  description = "Node names, one per job, head first."
  type        = list(string)

  validation {
    condition     = length(var.names) > 0
    error_message = "names must hold at least one job."
  }
}

variable "job_states" {
  description = "`gpulab-cli jobs <id> --raw` output (JSON text) of each job, in the order of names."
  type        = list(string)
}

variable "gpus_per_job" {
  description = "GPUs per job."
  type        = number

  validation {
    condition     = var.gpus_per_job >= 1
    error_message = "gpus_per_job must be at least 1."
  }
}

variable "stack_ssh_port" {
  description = "Container port of the job's own sshd."
  type        = number

  validation {
    condition     = var.stack_ssh_port >= 1 && var.stack_ssh_port <= 65535
    error_message = "stack_ssh_port must be a TCP port."
  }
}

variable "use_proxy" {
  description = "Reach the jobs through GPULab's SSH proxy."
  type        = bool
}

variable "proxy_identity_file" {
  description = "Key ssh logs in to GPULab's SSH proxy with (the login PEM; a path, never the key); null: ssh's default keys."
  type        = string
  default     = null
}
