output "names" {
  description = "Instance names, head first."
  value       = local.names
}

output "security_group_rules" {
  description = "Ingress rules of the testbed's security group, by name."
  value       = local.security_group_rules
}

output "nodes" {
  description = "The instances in the shared `nodes` contract."
  value       = local.nodes
}

output "testbed_subnet" {
  description = "The tenant network's IPv4 subnet: the inventory's testbed_subnet (NFS exports, sshd trust)."
  value       = var.subnet_cidr

  precondition {
    # Every instance must sit in the subnet the NFS export and sshd trust go to.
    condition = var.subnet_cidr == null ? true : alltrue([
      for i in var.instances : cidrhost(var.subnet_cidr, 0) == cidrhost("${i.address}/${split("/", var.subnet_cidr)[1]}", 0)
    ])
    error_message = "an instance address lies outside the tenant subnet: the NFS export would not reach it."
  }
}
