output "nodes" {
  description = "The jobs in the shared `nodes` contract."
  value       = local.nodes
}
