output "yaml" {
  description = "The inventory as YAML text."
  value       = local.yaml
  precondition {
    condition     = length(local.unknown_rated) == 0
    error_message = "node_link_rates names ${join(", ", local.unknown_rated)}, which this testbed does not have: name its nodes (${join(", ", local.node_names)})."
  }
  precondition {
    condition     = length(local.unknown_partitioned) == 0
    error_message = "slurm_partitions names ${join(", ", local.unknown_partitioned)}, which this testbed does not have: list its nodes (${join(", ", local.node_names)})."
  }
  precondition {
    # Said once: a node misspelt is also one left out.
    condition     = length(local.unknown_partitioned) > 0 || length(local.unpartitioned) == 0
    error_message = "slurm_partitions leaves ${join(", ", local.unpartitioned)} in no partition: add each node to at least one (partitions may share nodes)."
  }
}

output "path" {
  description = "Where the inventory was written (empty when not written)."
  value       = var.path
}
