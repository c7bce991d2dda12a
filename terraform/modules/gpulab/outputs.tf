output "nodes" {
  description = "The jobs in the shared `nodes` contract."
  value       = module.readback.nodes
}

output "topology" {
  description = "jobs x GPUs per job, e.g. 10x1."
  value       = local.topology
}

output "job_definitions" {
  description = "The rendered GPULab job definitions (version 2), one JSON text per job, in order."
  value       = [for j in local.jobs : jsonencode(j.definition)]
}

output "job_files" {
  description = "Where the job definitions are written."
  value       = [for j in local.jobs : j.file]
}
