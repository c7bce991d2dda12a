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
