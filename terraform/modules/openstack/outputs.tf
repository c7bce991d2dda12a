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

output "testbed_subnet" {
  description = "The tenant network's IPv4 subnet (ansible testbed_subnet: NFS exports, sshd trust)."
  value       = module.plan.testbed_subnet
}
