output "nodes" {
  description = "The jobs (the contract every environment ends in)."
  value       = module.testbed.nodes
}

output "inventory_path" {
  description = "The generated Ansible inventory."
  value       = module.inventory.path
}

output "job_files" {
  description = "The GPULab job definitions handed to gpulab-cli."
  value       = module.testbed.job_files
}
