output "nodes" {
  description = "The testbed's machines (the contract every environment ends in)."
  value       = module.testbed.nodes
}

output "inventory_path" {
  description = "The generated Ansible inventory."
  value       = module.inventory.path
}

output "rspec_path" {
  description = "The request RSpec handed to jFed."
  value       = module.testbed.files.rspec
}
