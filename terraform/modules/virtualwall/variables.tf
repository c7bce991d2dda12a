# --- Credentials and account: no defaults, so a missing one stops `plan` with
# --- its description (hpcbench deploy prints that line).

variable "project" {
  description = "Your Fed4FIRE/SLICES project name (as shown in the imec portal). Set TF_VAR_project=<project>."
  type        = string

  validation {
    condition     = can(regex("^[a-zA-Z0-9][a-zA-Z0-9_-]{0,31}$", var.project))
    error_message = "project must be the portal project name (letters, digits, '-' or '_'): set TF_VAR_project=<project>."
  }
}

variable "pem_path" {
  description = "Path to your Fed4FIRE login PEM (certificate + private key, from the imec portal). Set TF_VAR_pem_path=/path/to/login.pem; export HPCBENCH_PEM_PASSWORD if its key has a password (never a Terraform variable: it would land in saved plans)."
  type        = string

  validation {
    condition     = trimspace(var.pem_path) != "" && endswith(var.pem_path, ".pem")
    error_message = "pem_path must be the path of your portal login .pem file: set TF_VAR_pem_path=/path/to/login.pem."
  }
}

# --- Topology.

variable "slice_name" {
  description = "Name of the jFed experiment (slice); unique within the project while it lives."
  type        = string
  default     = "hpcbench"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,18}$", var.slice_name))
    error_message = "slice_name: 1-19 lower-case letters, digits or '-', starting with a letter (GENI slice name rules); set TF_VAR_slice_name."
  }
}

variable "node_count" {
  description = "Number of raw-pc nodes on the experiment LAN (the first is the head). Set NODES=N with make, or TF_VAR_node_count."
  type        = number
  default     = 10
  nullable    = false

  validation {
    condition     = floor(var.node_count) == var.node_count && var.node_count >= 2 && var.node_count <= 32
    error_message = "node_count must be a whole number from 2 to 32 (set NODES=2..32); for 1-node baselines deploy 2+ nodes and run `hpcbench scale --nodes 1-N`."
  }
}

variable "testbed" {
  description = "Virtual Wall instance: wall1 or wall2."
  type        = string
  default     = "wall2"
  nullable    = false

  validation {
    condition     = contains(["wall1", "wall2"], var.testbed)
    error_message = "testbed must be \"wall1\" or \"wall2\": set TF_VAR_testbed."
  }
}

variable "hardware_type" {
  description = "Virtual Wall hardware type (e.g. pcgen05); empty lets the testbed choose. Pick one whose NICs carry the link rate you ask for."
  type        = string
  default     = ""
  nullable    = false

  validation {
    condition     = can(regex("^[a-zA-Z0-9_-]*$", var.hardware_type))
    error_message = "hardware_type must be a hardware type name such as pcgen05 (see jFed's resource list), or empty: set TF_VAR_hardware_type."
  }
}

variable "disk_image" {
  description = "Disk image URN for every node, required (an image name that no one checked would fail at the testbed): in jFed, open a node's properties and pick from its \"Disk image\" list, or copy the URN from a current RSpec of the testbed, e.g. urn:publicid:IDN+wall1.ilabt.imec.be+image+emulab-ops:UBUNTU24-04-01-CIv4 (wall1) or urn:publicid:IDN+wall2.ilabt.iminds.be+image+emulab-ops:UBUNTU22-64-STD (wall2). Set TF_VAR_disk_image."
  type        = string
  nullable    = false

  validation {
    condition     = can(regex("^urn:publicid:IDN\\+[a-z0-9.-]+\\+image\\+[A-Za-z0-9_.-]+:[A-Za-z0-9_.-]+$", var.disk_image))
    error_message = "disk_image must be an image URN such as urn:publicid:IDN+wall1.ilabt.imec.be+image+emulab-ops:UBUNTU24-04-01-CIv4 (jFed: node properties, \"Disk image\"): set TF_VAR_disk_image."
  }
}

variable "link_capacity_mbps" {
  description = "Capacity of the experiment LAN in Mbit/s (1000 for 1 Gbit/s, 10000 for 10 Gbit/s: ENV=virtualwall-10g)."
  type        = number
  default     = 1000
  nullable    = false

  validation {
    condition     = floor(var.link_capacity_mbps) == var.link_capacity_mbps && var.link_capacity_mbps >= 1 && var.link_capacity_mbps <= 100000
    error_message = "link_capacity_mbps must be a whole number of Mbit/s between 1 and 100000 (1000 = 1 Gbit/s)."
  }
}

variable "lan_cidr" {
  description = "IPv4 subnet of the experiment LAN; node i gets host address i+1."
  type        = string
  default     = "192.168.100.0/24"
  nullable    = false

  validation {
    condition     = can(cidrnetmask(var.lan_cidr)) && tonumber(split("/", var.lan_cidr)[1]) <= 26
    error_message = "lan_cidr must be an IPv4 subnet of /26 or larger, e.g. 192.168.100.0/24: set TF_VAR_lan_cidr."
  }
}

variable "expire_time_min" {
  description = "Minutes until the slice expires unless renewed (fair use: ask for what the run needs)."
  type        = number
  default     = 480
  nullable    = false

  validation {
    condition     = var.expire_time_min >= 60 && var.expire_time_min <= 10080
    error_message = "expire_time_min must be between 60 and 10080 minutes (one week): set TF_VAR_expire_time_min."
  }
}

variable "wait_ready_min" {
  description = "Minutes jFed waits for all nodes to become ready before it gives up (and deletes the slice)."
  type        = number
  default     = 30

  validation {
    condition     = var.wait_ready_min >= 5 && var.wait_ready_min <= 240
    error_message = "wait_ready_min must be between 5 and 240 minutes."
  }
}

variable "gpus_per_node" {
  description = "GPUs on each node of the chosen hardware type (0 for the CPU-only Virtual Wall types)."
  type        = number
  default     = 0
  nullable    = false

  validation {
    condition     = floor(var.gpus_per_node) == var.gpus_per_node && var.gpus_per_node >= 0 && var.gpus_per_node <= 16
    error_message = "gpus_per_node must be a whole number from 0 to 16 (what the hardware type has): set TF_VAR_gpus_per_node."
  }
}

# --- Access.

variable "ssh_public_key_file" {
  description = "Controller public key that the boot script authorises for ssh_user on every node."
  type        = string

  validation {
    condition     = fileexists(var.ssh_public_key_file)
    error_message = "ssh_public_key_file does not exist: run `hpcbench deploy` (it generates .hpcbench/<env>/ssh/id_ed25519) or point TF_VAR_ssh_public_key_file at a public key."
  }
}

variable "ssh_private_key_file" {
  description = "Private half of ssh_public_key_file: the create step logs in with it to wait until every node's boot script has finished (a path; the key never enters state)."
  type        = string

  validation {
    condition     = length(var.ssh_private_key_file) > 0
    error_message = "ssh_private_key_file must be a path: hpcbench deploy passes .hpcbench/<env>/ssh/id_ed25519."
  }
}

variable "bootstrap_wait_min" {
  description = "Minutes the create step waits, after jFed reports the nodes ready, for the boot script to finish on every node (it runs asynchronously, after ready)."
  type        = number
  default     = 10
  nullable    = false

  validation {
    condition     = var.bootstrap_wait_min >= 1 && var.bootstrap_wait_min <= 60
    error_message = "bootstrap_wait_min must be between 1 and 60 minutes: set TF_VAR_bootstrap_wait_min."
  }
}

variable "ssh_user" {
  description = "Account the boot script creates for the controller (passwordless sudo). Not the testbed user (Ansible's testbed_user, default hpcbench, uid 4242): that one is unprivileged, made by the base role, and runs JupyterLab; the login account only joins its group."
  type        = string
  default     = "hpcbench-admin"

  validation {
    # The base role gives the testbed user a fixed uid: were it the login
    # account, Ansible would change the uid of the user it is logged in as.
    condition     = can(regex("^[a-z_][a-z0-9_-]{0,31}$", var.ssh_user)) && var.ssh_user != "hpcbench"
    error_message = "ssh_user must be a valid Linux user name other than the testbed user hpcbench, e.g. hpcbench-admin."
  }
}

variable "ssh_proxy_jump" {
  description = "user@host[:port] of the jFed SSH proxy for controllers without IPv6; empty connects directly over IPv6."
  type        = string
  default     = ""
  nullable    = false

  validation {
    condition     = var.ssh_proxy_jump == "" || can(regex("^[^@\\s]+@[^:\\s]+(:[0-9]+)?$", var.ssh_proxy_jump))
    error_message = "ssh_proxy_jump must look like user@host or user@host:port (the jFed proxy in jFed's preferences), or be empty."
  }
}

# --- Tools and generated files.

variable "jfed_cli_jar" {
  description = "Path to jFed's experimenter-cli2.jar (https://jfed.ilabt.imec.be/downloads/). Set TF_VAR_jfed_cli_jar."
  type        = string
  default     = "~/.cache/hpcbench/tools/jfed/experimenter-cli2.jar"
  nullable    = false

  validation {
    condition     = endswith(var.jfed_cli_jar, ".jar")
    error_message = "jfed_cli_jar must be the path of experimenter-cli2.jar: set TF_VAR_jfed_cli_jar=/path/to/experimenter-cli2.jar."
  }
}

variable "java" {
  description = "Java runtime that runs jFed (11 or later)."
  type        = string
  default     = "java"
  nullable    = false

  validation {
    condition     = length(var.java) > 0
    error_message = "java must name a Java 11+ runtime (apt-get install default-jre-headless)."
  }
}

variable "state_dir" {
  description = "Directory for generated artefacts (RSpec, jFed action files, jFed output); never committed."
  type        = string

  validation {
    condition     = trimspace(var.state_dir) != ""
    error_message = "state_dir must name a directory, e.g. .hpcbench/virtualwall."
  }
}
