# Credentials and site: no defaults, so that `plan` stops at the first missing
# one and `hpcbench deploy` names it. cloud is this environment's own (the
# provider reads it); the others are declared once, with their checks, in
# terraform/modules/openstack/variables.tf.

variable "cloud" {
  description = "Your clouds.yaml entry (~/.config/openstack/clouds.yaml). Set TF_VAR_cloud=<entry> (the name you would pass as OS_CLOUD)."
  type        = string
  validation {
    condition     = can(regex("^[A-Za-z0-9_.-]+$", var.cloud))
    error_message = "cloud must name an entry of clouds.yaml: set TF_VAR_cloud=<entry>."
  }
}

variable "allowed_cidr" {}
variable "flavor_name" {}
variable "network_name" {}

# Settings of modules/openstack (TF_VAR_<name>, `--var name=value`, make's
# NODES=...): declared once, there, with type, default, description and check;
# null here hands over to the module's default.
variable "node_count" { default = null }
variable "name" { default = null }
variable "image_name" { default = null }
variable "ssh_user" { default = null }
variable "gpus_per_node" { default = null }
variable "floating_ip_pool" { default = null }
variable "testbed_subnet" { default = null }

# experiment_iface, stack_image, stack_ssh_port: stack_container.tf (shared with virtualwall).
