variable "nodes" {
  description = "The testbed's machines, the contract every environment ends in."
  type = list(object({
    name       = string # host name inside the testbed
    address    = string # address on the testbed (experiment) network
    ssh_host   = string # where the controller reaches sshd
    ssh_port   = number
    ssh_user   = string
    role       = string # "head" or "worker"
    gpus       = number
    kind       = string           # "vm", "container" or "job"
    proxy_jump = optional(string) # user@host:port of a bastion, or null
    # Key for the bastion when it differs from the nodes' (the jFed and GPULab
    # proxies want the Fed4FIRE PEM); a path, never the key itself.
    proxy_identity_file = optional(string)
  }))

  validation {
    condition     = length(var.nodes) > 0
    error_message = "nodes is empty: an environment must produce at least one node."
  }
  validation {
    condition     = length([for n in var.nodes : n if n.role == "head"]) == 1
    error_message = "nodes must hold exactly one node with role = \"head\"."
  }
  validation {
    condition     = alltrue([for n in var.nodes : contains(["head", "worker"], n.role)])
    error_message = "every node's role must be \"head\" or \"worker\"."
  }
  validation {
    condition     = alltrue([for n in var.nodes : contains(["vm", "container", "job"], n.kind)])
    error_message = "every node's kind must be \"vm\", \"container\" or \"job\"."
  }
  validation {
    condition     = length(distinct([for n in var.nodes : n.name])) == length(var.nodes)
    error_message = "node names must be unique."
  }
}

variable "env" {
  description = "Name of the environment, recorded in the inventory and in every result."
  type        = string
}

variable "ssh_private_key_file" {
  description = "Controller key the inventory tells Ansible to use (a path, never the key itself)."
  type        = string
}

variable "known_hosts_file" {
  description = "Per-testbed known_hosts the controller's ssh learns host keys into (accept-new); empty: ssh's default."
  type        = string
  default     = ""
}

variable "deploy_vars" {
  description = "Inventory-wide values known only when Terraform runs (this deploy's settings and paths), written to all.vars; the harness reads the same file. Static settings belong in environments/<env>/inventory/group_vars, never here: a group_vars/all file outranks an inventory file's all.vars."
  type = object({
    hpcbench_state_dir = string # generated files on the controller (tokens, keys)
    stack_image        = string # image the nodes run or pull
    hpcbench_iface     = string # testbed interface; "auto" = the one in testbed_subnet
    link_rate          = optional(string, "")
    hpcbench_python    = optional(string, "/opt/hpcbench/venv/bin/python")
    hpcbench_bench_dir = optional(string, "/opt/hpcbench/bench")
    # Only where an environment knows them per deploy; null leaves them out.
    testbed_subnet     = optional(string)
    enable_slurm       = optional(bool)
    cpus_per_node      = optional(number)
    stack_ssh_port     = optional(number)
    jupyter_host_port  = optional(number)
    link_capacity_mbps = optional(number)
    gpulab_topology    = optional(string)
  })

  validation {
    condition     = var.deploy_vars.link_rate == "" || can(regex("^[0-9]+(kbit|mbit|gbit)$", var.deploy_vars.link_rate))
    error_message = "deploy_vars.link_rate must be empty or a tc rate such as 100mbit, 1gbit or 10gbit."
  }
  validation {
    condition     = startswith(var.deploy_vars.hpcbench_state_dir, "/")
    error_message = "deploy_vars.hpcbench_state_dir must be an absolute path."
  }
}

variable "path" {
  description = "Where to write the inventory file; empty means only the `yaml` output."
  type        = string
  default     = ""
}
