output "nodes" {
  description = "The instances in the shared `nodes` contract."
  # Only once the floating IP is attached can the controller use it.
  value      = module.plan.nodes
  depends_on = [openstack_networking_floatingip_associate_v2.head]
}

output "security_group_rules" {
  description = "Ingress rules of the testbed's security group."
  value       = module.plan.security_group_rules
}
