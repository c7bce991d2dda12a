# Inputs of the environments whose nodes are hosts that run the stack image
# as a host-network container (virtualwall, openstack). One file, linked into
# each of those folders as stack_container.tf; the values go to the inventory.

variable "experiment_iface" {
  description = "Interface Horovod/Gloo/NCCL use on the nodes; \"auto\" names none, so they pick one that routes between the nodes themselves (set it to the experiment LAN's interface where the control network would also route)."
  type        = string
  default     = "auto"
  validation {
    condition     = can(regex("^[a-zA-Z0-9_.-]{1,15}$", var.experiment_iface))
    error_message = "experiment_iface must be an interface name (e.g. enp4s0f1 or ens3) or \"auto\": set TF_VAR_experiment_iface."
  }
}

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
