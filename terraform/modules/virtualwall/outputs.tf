output "nodes" {
  description = "The testbed's machines in the shared `nodes` contract."
  value       = module.readback.nodes
  # Only once every node's boot script has finished may Ansible connect.
  depends_on = [terraform_data.bootstrap_done]
}

output "rspec" {
  description = "The rendered request RSpec (also written to state_dir)."
  value       = local.rspec
}

output "jfed_run_action" {
  description = "The rendered jFed CLI 2 action file that creates the slice."
  value       = local.run_action
}

output "jfed_delete_action" {
  description = "The rendered jFed CLI 2 action file that deletes the slice."
  value       = local.delete_action
}

output "bootstrap_script" {
  description = "The boot script every node runs (it authorises the controller key)."
  value       = local.bootstrap
}

output "lease" {
  description = "The lease file that keeps the slice name from before jFed runs until a confirmed delete (`hpcbench destroy` runs what it names)."
  value       = local.files.lease
}

output "files" {
  description = "Where the generated artefacts are written."
  value       = local.files
}

output "lan_cidr" {
  description = "Subnet of the experiment LAN (the interface Horovod/NCCL must use)."
  value       = var.lan_cidr
}

output "link_capacity_mbps" {
  description = "Capacity of the experiment LAN in Mbit/s."
  value       = var.link_capacity_mbps
}
