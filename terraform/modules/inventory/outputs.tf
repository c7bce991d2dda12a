output "yaml" {
  description = "The inventory as YAML text."
  value       = local.yaml
}

output "path" {
  description = "Where the inventory was written (empty when not written)."
  value       = var.path
}
