# Credentials: no default, so that `plan` stops at the first missing one and
# `hpcbench deploy` names it. Declared once, with their checks, in
# terraform/modules/virtualwall/variables.tf.
variable "project" {}
variable "pem_path" {}
# No default on purpose: which image URNs a testbed offers is checked in jFed
# (node properties, "Disk image"), not guessed here.
variable "disk_image" {}
# The PEM's password is no variable: export HPCBENCH_PEM_PASSWORD (jfed.sh reads it).

# Settings of modules/virtualwall (TF_VAR_<name>, `--var name=value`, make's
# NODES=...): declared once, there, with type, default, description and check;
# null here hands over to the module's default.
variable "node_count" { default = null }
variable "link_capacity_mbps" { default = null } # virtualwall-10g.tfvars: 10000
variable "testbed" { default = null }
variable "hardware_type" { default = null }
variable "gpus_per_node" { default = null }
variable "lan_cidr" { default = null }
variable "expire_time_min" { default = null }
variable "ssh_proxy_jump" { default = null }
variable "jfed_cli_jar" { default = null }
variable "java" { default = null }
variable "bootstrap_wait_min" { default = null }
variable "slice_name" { default = "" } # empty: hpcbench-vw, hpcbench-vw-10g (from the env name)

# experiment_iface, stack_image, stack_ssh_port: stack_container.tf (shared with openstack).
