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
  validation {
    # Goes into ssh's command line: no option-like or shell-active text.
    condition = alltrue([for n in var.nodes : n.proxy_jump == null ? true :
    can(regex("^[A-Za-z0-9_][A-Za-z0-9._-]*@[A-Za-z0-9][A-Za-z0-9.-]*(:[0-9]{1,5})?$", n.proxy_jump))])
    error_message = "every node's proxy_jump must be user@host or user@host:port (letters, digits, '.', '_', '-'), or null."
  }
  validation {
    condition = alltrue([for n in var.nodes : n.proxy_identity_file == null ? true :
    can(regex("^[^-'\"\\\\[:cntrl:]][^'\"\\\\[:cntrl:]]*$", n.proxy_identity_file))])
    error_message = "every node's proxy_identity_file must be a key file path without quotes, backslashes or control characters, not starting with '-', or null."
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
  nullable    = false
  validation {
    # ssh splits UserKnownHostsFile at whitespace: such a path cannot be passed.
    condition     = can(regex("^[^\\s'\"\\\\[:cntrl:]]*$", var.known_hosts_file))
    error_message = "known_hosts_file must be a path without spaces, quotes, backslashes or control characters (ssh splits UserKnownHostsFile at spaces): move the checkout or set state_dir."
  }
}

variable "proxy_identity_file" {
  description = "Key ssh uses for the jump host (proxy_jump) of every node that names none itself: the user's login PEM for the jFed/GPULab proxies, the controller key for OpenStack workers behind the head. A path, never the key; empty: a bare ProxyJump with ssh's default keys."
  type        = string
  default     = ""
  nullable    = false
  validation {
    condition     = var.proxy_identity_file == "" || can(regex("^[^-'\"\\\\[:cntrl:]][^'\"\\\\[:cntrl:]]*$", var.proxy_identity_file))
    error_message = "proxy_identity_file must be a key file path without quotes, backslashes or control characters, not starting with '-' (or empty)."
  }
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
    # The local testbed's Docker network (tests/infra starts a stranger on it).
    testbed_network = optional(string)
    # Slurm partitions for the slurm role (the first is the default); null: its one partition of every node.
    slurm_partitions = optional(list(object({ name = string, nodes = list(string) })))
    # The stack's .sqsh as the nodes see it (pyxis: verify starts it); null: none.
    pyxis_image = optional(string)
  })

  validation {
    # tc's rate grammar as hpcbench/performance/allreduce_model.py states it (TC_RATE);
    # tests/unit/test_link_rate_grammar.py keeps the two the same.
    condition     = var.deploy_vars.link_rate == "" || can(regex("^([0-9]+(?:[.][0-9]+)?)(bit|kbit|mbit|gbit|tbit)$", var.deploy_vars.link_rate))
    error_message = "deploy_vars.link_rate must be empty or a tc rate such as 100mbit, 1gbit or 10gbit."
  }
  validation {
    # Partition names go into slurm.conf and `srun --partition`: one word, and
    # not DEFAULT (slurm.conf's line of defaults for every partition).
    condition = var.deploy_vars.slurm_partitions == null ? true : (
      length(var.deploy_vars.slurm_partitions) > 0
      && alltrue([for p in var.deploy_vars.slurm_partitions :
        can(regex("^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$", p.name)) && lower(p.name) != "default"
        && length(p.nodes) > 0 && length(distinct(p.nodes)) == length(p.nodes)
      ])
      && length(distinct([for p in var.deploy_vars.slurm_partitions : p.name])) == length(var.deploy_vars.slurm_partitions)
    )
    error_message = "slurm_partitions must list at least one partition as {name = \"fast\", nodes = [\"node1\", \"node2\"]}: distinct names of letters, digits, '_', '.' or '-' (not DEFAULT), each with one or more distinct nodes."
  }
  validation {
    condition     = startswith(var.deploy_vars.hpcbench_state_dir, "/")
    error_message = "deploy_vars.hpcbench_state_dir must be an absolute path."
  }
  validation {
    # Docker's reference grammar (distribution/reference), as the roles check
    # it (ansible/plugins/test/hpcbench.py): it reaches `docker run` and
    # systemd units, so nothing else -- no option, space or quote -- may pass.
    condition = length(var.deploy_vars.stack_image) <= 512 && can(regex(join("", [
      "^(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(?::[0-9]+)?/)?",
      "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*",
      "(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?",
      "(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$",
    ]), var.deploy_vars.stack_image))
    error_message = "stack_image must be an image reference such as registry.example.org/hpcbench/stack:1.0 (docker's grammar): set TF_VAR_stack_image (or the local env's image)."
  }
}

variable "node_link_rates" {
  description = "Link rate of single nodes, by node name (the `nodes` names): each becomes that host's own link_rate, which outranks deploy_vars.link_rate (all.vars) in Ansible's stock precedence; nodes not named keep deploy_vars.link_rate. \"\" leaves a node unshaped."
  type        = map(string)
  default     = {}
  nullable    = false
  validation {
    # tc's rate grammar as hpcbench/performance/allreduce_model.py states it (TC_RATE);
    # tests/unit/test_link_rate_grammar.py keeps the two the same.
    condition     = alltrue([for rate in values(var.node_link_rates) : rate == "" || can(regex("^([0-9]+(?:[.][0-9]+)?)(bit|kbit|mbit|gbit|tbit)$", rate))])
    error_message = "node_link_rates must map node names to tc rates such as 100mbit, 1gbit or 10gbit (or \"\" for an unshaped node), e.g. {\"node3\" = \"200mbit\"}."
  }
}

variable "path" {
  description = "Where to write the inventory file; empty means only the `yaml` output."
  type        = string
  default     = ""
}
