output "nodes" {
  description = "The `nodes` contract: what every environment produces."
  value = [for i, c in docker_container.node : {
    name       = c.hostname
    address    = cidrhost(var.subnet, 11 + i)
    ssh_host   = "127.0.0.1"
    ssh_port   = var.ssh_port_base + i + 1
    ssh_user   = "root"
    role       = i == 0 ? "head" : "worker"
    gpus       = 0
    kind       = "container"
    proxy_jump = null
  }]
}

output "network" {
  description = "Name of the Docker network the nodes share."
  value       = docker_network.testbed.name
}

output "image" {
  description = "Image the nodes run."
  value       = var.image
}

output "subnet" {
  description = "IPv4 subnet of the testbed network."
  value       = var.subnet
}

output "cpus_per_node" {
  description = "CPU quota of each node."
  value       = var.cpus_per_node
}

output "cpu_sets" {
  description = "CPU set of each node (e.g. \"1\", \"2-3\"), or null where the node is limited by its quota alone."
  value       = local.cpu_sets
}

output "jupyter_port" {
  description = "127.0.0.1 port where the head node's JupyterLab is published."
  value       = var.jupyter_port
}
