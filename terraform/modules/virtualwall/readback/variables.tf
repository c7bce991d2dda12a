variable "planned" {
  description = "The nodes as requested: name, experiment address and role, head first."
  type = list(object({
    name    = string
    address = string
    role    = string
  }))

  validation {
    condition     = length(var.planned) > 0
    error_message = "planned must hold at least one node."
  }
}

variable "inventory_text" {
  description = "jFed's Ansible inventory (INI) as text."
  type        = string
}

variable "dns_suffix" {
  description = "<slice>.<project>.<testbed domain>: node <n> is <n>.<dns_suffix> if jFed leaves it out."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9._-]+$", var.dns_suffix))
    error_message = "dns_suffix must be a DNS name such as hpcbench.myproj.wall2.ilabt.iminds.be."
  }
}

variable "ssh_user" {
  description = "Account the controller logs in with."
  type        = string

  validation {
    condition     = length(var.ssh_user) > 0
    error_message = "ssh_user must not be empty."
  }
}

variable "gpus_per_node" {
  description = "GPUs per node."
  type        = number

  validation {
    condition     = var.gpus_per_node >= 0
    error_message = "gpus_per_node must not be negative."
  }
}

variable "proxy_jump" {
  description = "user@host[:port] of the jFed proxy, or empty."
  type        = string

  validation {
    condition     = var.proxy_jump != null
    error_message = "proxy_jump must be a string (empty for none)."
  }
}

variable "proxy_identity_file" {
  description = "Key for the jFed proxy (the login PEM: the proxy wants the Fed4FIRE key, not ssh's defaults); used only with proxy_jump. A path, never the key."
  type        = string
  default     = ""
  nullable    = false
}
