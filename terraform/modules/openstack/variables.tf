variable "name" {
  description = "Prefix of every resource name."
  type        = string
  default     = "hpcbench"
  nullable    = false

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,30}$", var.name))
    error_message = "name must be 1-31 lower-case letters, digits or '-', starting with a letter."
  }
}

variable "node_count" {
  description = "Number of instances (the first is the head). Set NODES=N with make, or TF_VAR_node_count."
  type        = number
  default     = 4
  nullable    = false

  validation {
    condition     = floor(var.node_count) == var.node_count && var.node_count >= 1 && var.node_count <= 32
    error_message = "node_count must be a whole number from 1 to 32: set NODES=1..32."
  }
}

variable "image_name" {
  description = "Glance image of every instance (`openstack image list`)."
  type        = string
  default     = "Ubuntu 22.04"
  nullable    = false

  validation {
    condition     = length(var.image_name) > 0
    error_message = "image_name must name an image from `openstack image list`: set TF_VAR_image_name."
  }
}

variable "flavor_name" {
  description = "Flavor of every instance (`openstack flavor list`); a GPU flavor for GPU runs. Set TF_VAR_flavor_name=<flavor>."
  type        = string

  validation {
    condition     = length(var.flavor_name) > 0
    error_message = "flavor_name must name a flavor from `openstack flavor list`: set TF_VAR_flavor_name."
  }
}

variable "network_name" {
  description = "Tenant network the instances join (`openstack network list`). Set TF_VAR_network_name=<network>."
  type        = string

  validation {
    condition     = length(var.network_name) > 0
    error_message = "network_name must name a network from `openstack network list`: set TF_VAR_network_name."
  }
}

variable "floating_ip_pool" {
  description = "External network for the head's floating IP; empty = no floating IP (the controller must reach the tenant network)."
  type        = string
  default     = ""
  nullable    = false

  validation {
    condition     = var.floating_ip_pool != null
    error_message = "floating_ip_pool must be an external network name or empty."
  }
}

variable "allowed_cidr" {
  description = "The only source of SSH traffic (your address as a /32; JupyterLab goes through an SSH tunnel). Set TF_VAR_allowed_cidr=$(curl -s ifconfig.me)/32."
  type        = string

  validation {
    # /8 is the widest block one organisation holds; wider (1.2.3.4/0 included)
    # opens SSH to a good part of the internet.
    condition     = can(cidrnetmask(var.allowed_cidr)) && try(tonumber(split("/", var.allowed_cidr)[1]) >= 8, false)
    error_message = "allowed_cidr must be an IPv4 CIDR of /8 or narrower: set TF_VAR_allowed_cidr=<your address>/32."
  }
}

variable "testbed_subnet" {
  description = "IPv4 CIDR the NFS export and sshd trust go to; empty = the IPv4 subnet of network_name, looked up in the cloud."
  type        = string
  default     = ""
  nullable    = false

  validation {
    condition     = var.testbed_subnet == "" || can(cidrnetmask(var.testbed_subnet))
    error_message = "testbed_subnet must be an IPv4 CIDR such as 10.0.0.0/24, or empty: set TF_VAR_testbed_subnet."
  }
}

variable "ssh_user" {
  description = "Login user of the image."
  type        = string
  default     = "ubuntu"
  nullable    = false

  validation {
    condition     = can(regex("^[a-z_][a-z0-9_-]{0,31}$", var.ssh_user))
    error_message = "ssh_user must be the image's login user, e.g. ubuntu: set TF_VAR_ssh_user."
  }
}

variable "gpus_per_node" {
  description = "GPUs of the flavor."
  type        = number
  default     = 1
  nullable    = false

  validation {
    condition     = floor(var.gpus_per_node) == var.gpus_per_node && var.gpus_per_node >= 0 && var.gpus_per_node <= 16
    error_message = "gpus_per_node must be a whole number from 0 to 16: set TF_VAR_gpus_per_node."
  }
}

variable "ssh_public_key_file" {
  description = "Controller public key registered as the instances' key pair."
  type        = string

  validation {
    condition     = fileexists(var.ssh_public_key_file)
    error_message = "ssh_public_key_file does not exist: run `hpcbench deploy`, which creates the controller key."
  }
}
