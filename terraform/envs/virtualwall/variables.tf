# --- Credentials: no defaults. `hpcbench deploy` names the first one missing.

variable "project" {
  description = "Your Fed4FIRE/SLICES project name (imec portal). Set TF_VAR_project=<project>."
  type        = string
  validation {
    condition     = can(regex("^[a-zA-Z0-9][a-zA-Z0-9_-]{0,31}$", var.project))
    error_message = "project must be your portal project name: set TF_VAR_project=<project>."
  }
}

variable "pem_path" {
  description = "Path to your Fed4FIRE login PEM (certificate + key, downloaded from the imec portal). Set TF_VAR_pem_path=/path/to/login.pem."
  type        = string
  validation {
    condition     = endswith(var.pem_path, ".pem")
    error_message = "pem_path must name your login .pem file (download it from the imec portal): set TF_VAR_pem_path=/path/to/login.pem."
  }
}

variable "pem_password" {
  description = "Password of your login PEM. Set TF_VAR_pem_password=... (export TF_VAR_pem_password='' if the key has none)."
  type        = string
  sensitive   = true
  validation {
    condition     = var.pem_password != null
    error_message = "pem_password may be empty but must be set: export TF_VAR_pem_password='' for a key without password."
  }
}

# --- Topology.

variable "node_count" {
  description = "Number of raw-pc nodes (node0 is the head). Set NODES=N with make, or TF_VAR_node_count."
  type        = number
  default     = 10
  validation {
    condition     = floor(var.node_count) == var.node_count && var.node_count >= 2 && var.node_count <= 32
    error_message = "node_count must be a whole number from 2 to 32: set NODES=2..32 (1-node baselines come from `hpcbench scale --nodes 1-N`)."
  }
}

variable "link_capacity_mbps" {
  description = "Experiment LAN capacity in Mbit/s; null takes the environment's rate (1000 for virtualwall, 10000 for virtualwall-10g)."
  type        = number
  default     = null
  validation {
    condition     = var.link_capacity_mbps == null ? true : (var.link_capacity_mbps >= 1 && var.link_capacity_mbps <= 100000)
    error_message = "link_capacity_mbps must be between 1 and 100000 (Mbit/s), or unset to take the environment's rate."
  }
}

variable "testbed" {
  description = "Virtual Wall instance: wall1 or wall2. Set TF_VAR_testbed."
  type        = string
  default     = "wall2"
  validation {
    condition     = contains(["wall1", "wall2"], var.testbed)
    error_message = "testbed must be wall1 or wall2: set TF_VAR_testbed."
  }
}

variable "hardware_type" {
  description = "Hardware type of every node (e.g. pcgen05); empty lets the testbed choose. For 10 Gbit/s pick a type with 10 GbE NICs."
  type        = string
  default     = ""
  validation {
    condition     = can(regex("^[a-zA-Z0-9_-]*$", var.hardware_type))
    error_message = "hardware_type must be a hardware type name such as pcgen05, or empty: set TF_VAR_hardware_type."
  }
}

variable "disk_image" {
  description = "Disk image URN of every node (must belong to the chosen testbed); empty = testbed default."
  type        = string
  default     = "urn:publicid:IDN+wall2.ilabt.iminds.be+image+emulab-ops:UBUNTU22-64-STD"
  validation {
    condition     = var.disk_image == "" || startswith(var.disk_image, "urn:publicid:IDN+")
    error_message = "disk_image must be an image URN (urn:publicid:IDN+<testbed>+image+<project>:<NAME>) or empty: set TF_VAR_disk_image."
  }
}

variable "gpus_per_node" {
  description = "GPUs per node of the chosen hardware type (0 on the CPU-only types)."
  type        = number
  default     = 0
  validation {
    condition     = floor(var.gpus_per_node) == var.gpus_per_node && var.gpus_per_node >= 0 && var.gpus_per_node <= 16
    error_message = "gpus_per_node must be a whole number from 0 to 16: set TF_VAR_gpus_per_node."
  }
}

variable "lan_cidr" {
  description = "IPv4 subnet of the experiment LAN (node i gets host i+1)."
  type        = string
  default     = "192.168.100.0/24"
  validation {
    condition     = can(cidrnetmask(var.lan_cidr))
    error_message = "lan_cidr must be an IPv4 subnet such as 192.168.100.0/24: set TF_VAR_lan_cidr."
  }
}

variable "experiment_iface" {
  description = "Interface Horovod/NCCL use on the nodes; \"auto\" = the one holding an address in the experiment LAN."
  type        = string
  default     = "auto"
  validation {
    condition     = can(regex("^[a-zA-Z0-9_.-]{1,15}$", var.experiment_iface))
    error_message = "experiment_iface must be an interface name (e.g. enp4s0f1) or \"auto\": set TF_VAR_experiment_iface."
  }
}

variable "slice_name" {
  description = "jFed experiment (slice) name; empty = hpcbench-vw / hpcbench-vw-10g."
  type        = string
  default     = ""
  validation {
    condition     = var.slice_name == "" || can(regex("^[a-z][a-z0-9-]{0,18}$", var.slice_name))
    error_message = "slice_name must be 1-19 lower-case letters, digits or '-' starting with a letter: set TF_VAR_slice_name."
  }
}

variable "expire_time_min" {
  description = "Minutes until the slice expires (fair use: no longer than the run needs; renew in jFed)."
  type        = number
  default     = 480
  validation {
    condition     = var.expire_time_min >= 60 && var.expire_time_min <= 10080
    error_message = "expire_time_min must be between 60 and 10080: set TF_VAR_expire_time_min."
  }
}

# --- Software and access.

variable "stack_image" {
  description = "Stack image the nodes run as a host-network container."
  type        = string
  default     = "hpcbench/stack:latest"
  validation {
    condition     = length(var.stack_image) > 0
    error_message = "stack_image must name an image reference: set TF_VAR_stack_image."
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

variable "ssh_proxy_jump" {
  description = "user@host[:port] of the jFed SSH proxy when this machine has no IPv6; empty = direct. Set TF_VAR_ssh_proxy_jump."
  type        = string
  default     = ""
  validation {
    condition     = var.ssh_proxy_jump == "" || can(regex("^[^@\\s]+@[^:\\s]+(:[0-9]+)?$", var.ssh_proxy_jump))
    error_message = "ssh_proxy_jump must look like user@host[:port] (see jFed's proxy preferences) or be empty."
  }
}

variable "jfed_cli_jar" {
  description = "Path to jFed's experimenter-cli2.jar (https://jfed.ilabt.imec.be/downloads/). Set TF_VAR_jfed_cli_jar."
  type        = string
  default     = "~/.cache/hpcbench/tools/jfed/experimenter-cli2.jar"
  validation {
    condition     = endswith(var.jfed_cli_jar, ".jar")
    error_message = "jfed_cli_jar must be the path of experimenter-cli2.jar: set TF_VAR_jfed_cli_jar."
  }
}

variable "java" {
  description = "Java 11+ runtime for jFed."
  type        = string
  default     = "java"
  validation {
    condition     = length(var.java) > 0
    error_message = "java must name a Java runtime (apt-get install default-jre-headless)."
  }
}

