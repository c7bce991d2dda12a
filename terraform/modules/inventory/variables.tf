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

variable "vars" {
  description = "Extra inventory-wide variables: the environment's feature switches and settings."
  type        = any
  default     = {}
}

variable "path" {
  description = "Where to write the inventory file; empty means only the `yaml` output."
  type        = string
  default     = ""
}
