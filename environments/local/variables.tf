# Settings of modules/docker_testbed (TF_VAR_<name>, `--var name=value`, make's
# NODES=...): declared once, there, with type, default, description and check;
# null here hands over to the module's default.
variable "name" { default = null }
variable "node_count" { default = null }
variable "image" { default = null }
variable "subnet" { default = null }
variable "cpus_per_node" { default = null }
variable "cpu_period_us" { default = null }
variable "host_cpus" { default = null } # hpcbench deploy passes the controller's CPU count
variable "ssh_port_base" { default = null }
variable "jupyter_port" { default = null }

# Settings of this environment alone (they go to the inventory).

variable "link_rate" {
  description = "Rate each node's link is shaped to with tc tbf (e.g. 1gbit, 10gbit, 200mbit); empty leaves links unshaped. Set LINK_RATE=..."
  type        = string
  default     = "1gbit"
  validation {
    condition     = var.link_rate == "" || can(regex("^[0-9]+(kbit|mbit|gbit)$", var.link_rate))
    error_message = "link_rate must be empty or a tc rate such as 100mbit, 1gbit or 10gbit."
  }
}

variable "enable_slurm" {
  description = "Also configure Slurm (slurmctld on the head, slurmd on every node) so the slurm launcher can run here."
  type        = bool
  default     = false
}
