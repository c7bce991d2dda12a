# Inputs every environment takes from `hpcbench deploy`, and where its
# generated files go. One file, linked into each environment folder as
# controller.tf, so that the environments cannot drift apart.

variable "env" {
  description = "Name of the environment (a folder, or a variant's tfvars file); empty = the folder's name. hpcbench deploy passes it; a variant's tfvars sets it."
  type        = string
  default     = ""
  validation {
    condition     = can(regex("^[a-z0-9-]*$", var.env))
    error_message = "env must be an environment name: lower-case letters, digits or '-'."
  }
}

variable "ssh_public_key_file" {
  description = "Controller public key authorised on every node; hpcbench deploy creates it under .hpcbench/<env>/ssh/."
  type        = string
  validation {
    condition     = fileexists(var.ssh_public_key_file)
    error_message = "ssh_public_key_file does not exist: run `make deploy ENV=<env>`, which creates the controller key."
  }
}

variable "ssh_private_key_file" {
  description = "Controller private key the inventory points Ansible at (a path; the key never enters state)."
  type        = string
  validation {
    condition     = length(var.ssh_private_key_file) > 0
    error_message = "ssh_private_key_file must be a path: hpcbench deploy passes .hpcbench/<env>/ssh/id_ed25519."
  }
}

variable "state_dir" {
  description = "Directory for generated files (inventory, rendered artefacts, known_hosts); empty = .hpcbench/<env> in the repository."
  type        = string
  default     = ""
  validation {
    condition     = var.state_dir != null
    error_message = "state_dir must be a path or empty."
  }
}

variable "inventory_path" {
  description = "Where the Ansible inventory is written; empty = <state_dir>/inventory.yml."
  type        = string
  default     = ""
  validation {
    condition     = var.inventory_path != null
    error_message = "inventory_path must be a path or empty."
  }
}

locals {
  env              = var.env != "" ? var.env : basename(abspath(path.root))
  state_dir        = var.state_dir != "" ? abspath(var.state_dir) : abspath("${path.root}/../../.hpcbench/${local.env}")
  inventory_path   = var.inventory_path != "" ? var.inventory_path : "${local.state_dir}/inventory.yml"
  known_hosts_file = "${local.state_dir}/ssh/known_hosts"
}
