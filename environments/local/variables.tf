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
variable "image_store" { default = null } # make deploy SLURM=true: ~/.cache/hpcbench/images

# Settings of this environment alone (they go to the inventory).

variable "link_rate" {
  description = "Rate each node's link is shaped to with tc tbf (e.g. 1gbit, 10gbit, 200mbit); empty leaves links unshaped. Set LINK_RATE=..."
  type        = string
  default     = "1gbit"
  validation {
    # tc's rate grammar as hpcbench/performance/allreduce_model.py states it (TC_RATE);
    # tests/unit/test_link_rate_grammar.py keeps the two the same.
    condition     = var.link_rate == "" || can(regex("^([0-9]+(?:[.][0-9]+)?)(bit|kbit|mbit|gbit|tbit)$", var.link_rate))
    error_message = "link_rate must be empty or a tc rate such as 100mbit, 1gbit or 10gbit."
  }
}

variable "node_link_rates" {
  description = "Nodes whose link is shaped to a rate of its own instead of link_rate, by inventory name: node1 (the head) to nodeN, whatever the testbed's name; e.g. {\"node3\" = \"200mbit\"}, on the command line --var 'node_link_rates={\"node3\":\"200mbit\"}'. \"\" leaves that node unshaped. Each becomes that host's link_rate in the inventory."
  type        = map(string)
  default     = {}
  nullable    = false
  validation {
    # tc's rate grammar as hpcbench/performance/allreduce_model.py states it (TC_RATE);
    # tests/unit/test_link_rate_grammar.py keeps the two the same.
    condition     = alltrue([for rate in values(var.node_link_rates) : rate == "" || can(regex("^([0-9]+(?:[.][0-9]+)?)(bit|kbit|mbit|gbit|tbit)$", rate))])
    error_message = "node_link_rates must map node names to tc rates such as 100mbit, 1gbit or 10gbit (or \"\" for an unshaped node): set --var 'node_link_rates={\"node3\":\"200mbit\"}'."
  }
  validation {
    condition     = alltrue([for name in keys(var.node_link_rates) : can(regex("^node[0-9]+$", name))])
    error_message = "node_link_rates must name nodes as the inventory does, node1 (the head) to nodeN, not by container name: set --var 'node_link_rates={\"node3\":\"200mbit\"}'."
  }
}

variable "enable_slurm" {
  description = "Also configure Slurm (slurmctld on the head, slurmd on every node) so the slurm launcher can run here."
  type        = bool
  default     = false
}

variable "slurm_partitions" {
  description = "Slurm partitions (with enable_slurm), the first the default: a list of {name, nodes}, nodes named node1 (the head) to nodeN; partitions may share nodes and every node must be in one. E.g. --var 'slurm_partitions=[{\"name\":\"fast\",\"nodes\":[\"node1\",\"node2\"]},{\"name\":\"slow\",\"nodes\":[\"node3\",\"node4\"]}]'. Empty: the slurm role's one partition (slurm_partition, \"testbed\") of every node."
  type        = list(object({ name = string, nodes = list(string) }))
  default     = []
  nullable    = false
  validation {
    condition = alltrue([for p in var.slurm_partitions :
      can(regex("^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$", p.name)) && lower(p.name) != "default"
      && length(p.nodes) > 0 && length(distinct(p.nodes)) == length(p.nodes)
    ]) && length(distinct(var.slurm_partitions[*].name)) == length(var.slurm_partitions)
    error_message = "slurm_partitions must be a list of {\"name\":..., \"nodes\":[...]}: distinct names of letters, digits, '_', '.' or '-' (not DEFAULT), each with one or more distinct nodes: set --var 'slurm_partitions=[{\"name\":\"fast\",\"nodes\":[\"node1\",\"node2\"]}]'."
  }
}

variable "pyxis_image_file" {
  description = "The stack's .sqsh in image_store (images/enroot-export.sh's default name)."
  type        = string
  default     = "hpcbench+stack.sqsh"
  nullable    = false
  validation {
    condition     = can(regex("^[A-Za-z0-9_.+-]+\\.sqsh$", var.pyxis_image_file))
    error_message = "pyxis_image_file must be a file name ending in .sqsh (letters, digits, '_.+-')."
  }
}
