output "nodes" {
  description = "The nodes in the shared `nodes` contract."
  value       = local.nodes
}

output "reported_hosts" {
  description = "Host names jFed's inventory lists (for checks)."
  value       = sort(keys(local.reported))
}
