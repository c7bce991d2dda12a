variable "name" {
  description = "Prefix of every Docker object this testbed creates (network, volume, containers)."
  type        = string
  default     = "hpcbench-local"
  nullable    = false
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,30}$", var.name))
    error_message = "name must be 2-31 lowercase letters, digits or dashes, starting with a letter."
  }
}

variable "node_count" {
  description = "Number of node containers; node1 is the head. Set NODES=N with make, or TF_VAR_node_count."
  type        = number
  default     = 4
  nullable    = false
  validation {
    condition     = var.node_count >= 1 && var.node_count <= 16 && floor(var.node_count) == var.node_count
    error_message = "node_count must be a whole number from 1 to 16 (one machine cannot hold more): set NODES=1..16."
  }
}

variable "image" {
  description = "Image the nodes run: the stack image (node image + torch/horovod/jupyterlab), built by `make images`."
  type        = string
  default     = "hpcbench/stack:latest"
  nullable    = false
  validation {
    condition     = length(var.image) > 0
    error_message = "image must name a local Docker image; build it with `make images`."
  }
}

variable "subnet" {
  description = "IPv4 /24 of the testbed network; node i gets host address 10+i."
  type        = string
  default     = "172.30.0.0/24"
  nullable    = false
  validation {
    condition     = can(cidrhost(var.subnet, 30)) && endswith(var.subnet, "/24")
    error_message = "subnet must be an IPv4 /24 such as 172.30.0.0/24 that no other Docker network uses."
  }
}

variable "cpus_per_node" {
  description = "CPU quota per node (CFS), so that per-node compute stays fixed while the node count grows. Set CPUS_PER_NODE=..."
  type        = number
  default     = 1
  nullable    = false
  validation {
    condition     = var.cpus_per_node > 0 && var.cpus_per_node <= 64
    error_message = "cpus_per_node must be greater than 0 (fractions allowed) and at most 64."
  }
}

variable "cpu_period_us" {
  description = "CFS period of each node's CPU quota, in microseconds (the quota is cpus_per_node x this). Docker's default, 100000, is what the figures in docs/benchmarks.md were measured with; a shorter period shortens the stalls of a node that used up its quota, but measured here at 10000 it halved a half-core node's training throughput and slowed small all-reduces (docs/method.md)."
  type        = number
  default     = 100000
  nullable    = false
  validation {
    condition     = var.cpu_period_us >= 1000 && var.cpu_period_us <= 1000000 && floor(var.cpu_period_us) == var.cpu_period_us
    error_message = "cpu_period_us must be a whole number of microseconds from 1000 to 1000000 (the kernel's bounds for cpu.cfs_period_us)."
  }
}

variable "host_cpus" {
  description = "CPUs the Docker engine's machine offers (hpcbench deploy passes the controller's). With a whole-core cpus_per_node that fits, node i is pinned to cores of its own (a CPU set), counted down from the last, so that no two nodes share a core and CPU 0 is the last one taken; 0 = never pin."
  type        = number
  default     = 0
  nullable    = false
  validation {
    condition     = var.host_cpus >= 0 && var.host_cpus <= 4096 && floor(var.host_cpus) == var.host_cpus
    error_message = "host_cpus must be a whole number from 0 (never pin) to 4096."
  }
}

variable "memory_mb" {
  description = "Memory limit per node in MiB; 0 means no limit."
  type        = number
  default     = 0
  nullable    = false
  validation {
    condition     = var.memory_mb == 0 || var.memory_mb >= 512
    error_message = "memory_mb must be 0 (no limit) or at least 512."
  }
}

variable "ssh_public_key" {
  description = "Controller public key (the key text) installed for root on every node."
  type        = string
  validation {
    condition     = can(regex("^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp256) ", var.ssh_public_key))
    error_message = "ssh_public_key must be an OpenSSH public key line (ssh-ed25519 ...)."
  }
}

variable "ssh_port_base" {
  description = "Node i's sshd is published on 127.0.0.1:(ssh_port_base + i) for the controller."
  type        = number
  default     = 22200
  nullable    = false
  validation {
    condition     = var.ssh_port_base >= 1024 && var.ssh_port_base <= 65000
    error_message = "ssh_port_base must lie between 1024 and 65000."
  }
}

variable "jupyter_port" {
  description = "Host port (127.0.0.1 only) where the head node's JupyterLab is published."
  type        = number
  default     = 28888
  nullable    = false
  validation {
    condition     = var.jupyter_port >= 1024 && var.jupyter_port <= 65535
    error_message = "jupyter_port must lie between 1024 and 65535."
  }
}

variable "user_containers" {
  description = "Nodes run containers of their own (enroot, under Slurm's pyxis): no seccomp filter, which enroot needs to switch into a container's root (docs/testbeds.md says what it opens). false keeps Docker's default profile."
  type        = bool
  default     = false
  nullable    = false
}

variable "image_store" {
  description = "A folder of this machine mounted read-only at /images on every node: container images (.sqsh) that jobs start with pyxis, as a cluster's shared image store; \"\" mounts none."
  type        = string
  default     = ""
  nullable    = false
  validation {
    condition     = var.image_store == "" || startswith(var.image_store, "/")
    error_message = "image_store must be an absolute path of this machine, or \"\"."
  }
}
