output "nodes" {
  description = "The instances (the contract every environment ends in)."
  value       = module.testbed.nodes
}

output "inventory_path" {
  description = "The generated Ansible inventory."
  value       = module.inventory.path
}
