# --- Credentials and site: no defaults. `hpcbench deploy` names the first one missing.

variable "cloud" {
  description = "Your clouds.yaml entry (~/.config/openstack/clouds.yaml). Set TF_VAR_cloud=<entry> (the name you would pass as OS_CLOUD)."
  type        = string
  validation {
    condition     = can(regex("^[A-Za-z0-9_.-]+$", var.cloud))
    error_message = "cloud must name an entry of clouds.yaml: set TF_VAR_cloud=<entry>."
  }
}

variable "allowed_cidr" {
  description = "Where SSH and Jupyter may come from (your public address /32). Set TF_VAR_allowed_cidr=$(curl -s ifconfig.me)/32."
  type        = string
  validation {
    condition     = can(cidrnetmask(var.allowed_cidr)) && var.allowed_cidr != "0.0.0.0/0"
    error_message = "allowed_cidr must be an IPv4 CIDR narrower than 0.0.0.0/0: set TF_VAR_allowed_cidr=<your address>/32."
  }
}

variable "flavor_name" {
  description = "Instance flavor (`openstack flavor list`), a GPU flavor for GPU runs. Set TF_VAR_flavor_name=<flavor>."
  type        = string
  validation {
    condition     = length(var.flavor_name) > 0
    error_message = "flavor_name must name a flavor: set TF_VAR_flavor_name=<flavor>."
  }
}

variable "network_name" {
  description = "Tenant network of the instances (`openstack network list`). Set TF_VAR_network_name=<network>."
  type        = string
  validation {
    condition     = length(var.network_name) > 0
    error_message = "network_name must name a tenant network: set TF_VAR_network_name=<network>."
  }
}

# --- Topology and image.

variable "node_count" {
  description = "Number of instances (the first is the head). Set NODES=N with make, or TF_VAR_node_count."
  type        = number
  default     = 4
  validation {
    condition     = floor(var.node_count) == var.node_count && var.node_count >= 1 && var.node_count <= 32
    error_message = "node_count must be a whole number from 1 to 32: set NODES=1..32."
  }
}

variable "name" {
  description = "Prefix of the instance, key pair and security group names."
  type        = string
  default     = "hpcbench"
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,30}$", var.name))
    error_message = "name must be 1-31 lower-case letters, digits or '-', starting with a letter."
  }
}

variable "image_name" {
  description = "Glance image of every instance (`openstack image list`)."
  type        = string
  default     = "Ubuntu 22.04"
  validation {
    condition     = length(var.image_name) > 0
    error_message = "image_name must name an image: set TF_VAR_image_name."
  }
}

variable "ssh_user" {
  description = "Login user of the image (ubuntu for Ubuntu images, debian for Debian)."
  type        = string
  default     = "ubuntu"
  validation {
    condition     = can(regex("^[a-z_][a-z0-9_-]{0,31}$", var.ssh_user))
    error_message = "ssh_user must be the image's login user: set TF_VAR_ssh_user."
  }
}

variable "gpus_per_node" {
  description = "GPUs of the flavor."
  type        = number
  default     = 1
  validation {
    condition     = floor(var.gpus_per_node) == var.gpus_per_node && var.gpus_per_node >= 0 && var.gpus_per_node <= 16
    error_message = "gpus_per_node must be a whole number from 0 to 16: set TF_VAR_gpus_per_node."
  }
}

variable "floating_ip_pool" {
  description = "External network for the head's floating IP; empty = none (the controller must reach the tenant network)."
  type        = string
  default     = ""
  validation {
    condition     = var.floating_ip_pool != null
    error_message = "floating_ip_pool must be an external network name or empty."
  }
}

variable "experiment_iface" {
  description = "Interface Horovod/NCCL use on the instances; \"auto\" = the one holding the instance's fixed address."
  type        = string
  default     = "auto"
  validation {
    condition     = can(regex("^[a-zA-Z0-9_.-]{1,15}$", var.experiment_iface))
    error_message = "experiment_iface must be an interface name (e.g. ens3) or \"auto\"."
  }
}

variable "stack_image" {
  description = "Stack image the instances run as a host-network container."
  type        = string
  default     = "hpcbench/stack:latest"
  validation {
    condition     = length(var.stack_image) > 0
    error_message = "stack_image must name an image reference."
  }
}

variable "stack_ssh_port" {
  description = "Port of the stack container's sshd (host networking: must not clash with the host's sshd)."
  type        = number
  default     = 2222
  validation {
    condition     = var.stack_ssh_port >= 1024 && var.stack_ssh_port <= 65535
    error_message = "stack_ssh_port must lie between 1024 and 65535."
  }
}

# --- Controller.

