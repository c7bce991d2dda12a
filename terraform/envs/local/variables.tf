variable "name" {
  description = "Prefix of the Docker objects (containers, network, volume) of this testbed."
  type        = string
  default     = "hpcbench-local"
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,30}$", var.name))
    error_message = "name must be 2-31 lowercase letters, digits or dashes, starting with a letter."
  }
}

variable "node_count" {
  description = "Number of nodes in the local testbed (node1 is the head). Set NODES=N with make, or TF_VAR_node_count."
  type        = number
  default     = 4
  validation {
    condition     = var.node_count >= 1 && var.node_count <= 16 && floor(var.node_count) == var.node_count
    error_message = "node_count must be a whole number from 1 to 16: set NODES=1..16."
  }
}

variable "link_rate" {
  description = "Rate each node's link is shaped to with tc tbf (e.g. 1gbit, 10gbit, 200mbit); empty leaves links unshaped. Set LINK_RATE=..."
  type        = string
  default     = "1gbit"
  validation {
    condition     = var.link_rate == "" || can(regex("^[0-9]+(kbit|mbit|gbit)$", var.link_rate))
    error_message = "link_rate must be empty or a tc rate such as 100mbit, 1gbit or 10gbit."
  }
}

variable "cpus_per_node" {
  description = "CPU quota of each node container; keeps per-node compute fixed as the node count grows. Set CPUS_PER_NODE=..."
  type        = number
  default     = 1
  validation {
    condition     = var.cpus_per_node > 0 && var.cpus_per_node <= 64
    error_message = "cpus_per_node must be greater than 0 (fractions allowed) and at most 64."
  }
}

variable "enable_slurm" {
  description = "Also configure Slurm (slurmctld on the head, slurmd on every node) so the slurm launcher can run here."
  type        = bool
  default     = false
}

variable "image" {
  description = "Image the nodes run (built by `make images`)."
  type        = string
  default     = "hpcbench/stack:latest"
  validation {
    condition     = length(var.image) > 0
    error_message = "image must name a local Docker image; build it with `make images`."
  }
}

variable "subnet" {
  description = "IPv4 /24 of the testbed network."
  type        = string
  default     = "172.30.0.0/24"
  validation {
    condition     = can(cidrhost(var.subnet, 30)) && endswith(var.subnet, "/24")
    error_message = "subnet must be an IPv4 /24 such as 172.30.0.0/24."
  }
}

variable "ssh_port_base" {
  description = "Node i's sshd is published on 127.0.0.1:(ssh_port_base + i)."
  type        = number
  default     = 22200
  validation {
    condition     = var.ssh_port_base >= 1024 && var.ssh_port_base <= 65000
    error_message = "ssh_port_base must lie between 1024 and 65000."
  }
}

variable "jupyter_port" {
  description = "127.0.0.1 port where the head node's JupyterLab is published."
  type        = number
  default     = 28888
  validation {
    condition     = var.jupyter_port >= 1024 && var.jupyter_port <= 65535
    error_message = "jupyter_port must lie between 1024 and 65535."
  }
}

