variable "name" {
  description = "Prefix of every resource name (instances, key pair, security group)."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,30}$", var.name))
    error_message = "name must be 1-31 lower-case letters, digits or '-', starting with a letter."
  }
}

variable "node_count" {
  description = "Number of instances (the first is the head)."
  type        = number

  validation {
    condition     = floor(var.node_count) == var.node_count && var.node_count >= 1 && var.node_count <= 32
    error_message = "node_count must be a whole number from 1 to 32."
  }
}

variable "allowed_cidr" {
  description = "The only source from which SSH is reachable (your address, e.g. 192.0.2.10/32); JupyterLab is reached through an SSH tunnel, never a public port."
  type        = string

  validation {
    # /8 is the widest block one organisation holds; anything wider (1.2.3.4/0
    # included, whatever its host bits) opens SSH to a good part of the internet.
    condition     = can(cidrnetmask(var.allowed_cidr)) && try(tonumber(split("/", var.allowed_cidr)[1]) >= 8, false)
    error_message = "allowed_cidr must be an IPv4 CIDR of /8 or narrower, e.g. your public address /32: set TF_VAR_allowed_cidr."
  }
}

variable "ssh_port" {
  description = "Port of the hosts' sshd."
  type        = number
  default     = 22

  validation {
    condition     = var.ssh_port >= 1 && var.ssh_port <= 65535
    error_message = "ssh_port must be a TCP port (1-65535)."
  }
}

variable "ssh_user" {
  description = "Login user of the image (ubuntu, debian, ...)."
  type        = string

  validation {
    condition     = can(regex("^[a-z_][a-z0-9_-]{0,31}$", var.ssh_user))
    error_message = "ssh_user must be the image's login user, e.g. ubuntu."
  }
}

variable "gpus_per_node" {
  description = "GPUs of the flavor."
  type        = number

  validation {
    condition     = floor(var.gpus_per_node) == var.gpus_per_node && var.gpus_per_node >= 0 && var.gpus_per_node <= 16
    error_message = "gpus_per_node must be a whole number from 0 to 16."
  }
}

variable "instances" {
  description = "The created instances, in order: name and fixed address on the testbed network. Empty while planning names and rules."
  type = list(object({
    name    = string
    address = string
  }))
  default = []

  validation {
    condition     = alltrue([for i in var.instances : can(cidrhost("${i.address}/32", 0))])
    error_message = "every instance address must be an IPv4 address."
  }
}

variable "head_floating_ip" {
  description = "Floating IP of the head, or null: then the controller must reach the fixed addresses."
  type        = string
  default     = null

  validation {
    condition     = var.head_floating_ip == null ? true : can(cidrhost("${var.head_floating_ip}/32", 0))
    error_message = "head_floating_ip must be an IPv4 address or null."
  }
}

variable "subnet_cidr" {
  description = "CIDR of the tenant network's IPv4 subnet (NFS exports and sshd trust go to it); null while planning names and rules."
  type        = string
  default     = null

  validation {
    condition     = var.subnet_cidr == null ? true : can(cidrnetmask(var.subnet_cidr))
    error_message = "subnet_cidr must be an IPv4 CIDR such as 10.0.0.0/24, or null."
  }
}
