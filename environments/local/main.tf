# ENV=local: a testbed of containers on this machine that goes through the
# same chain as every real testbed (nodes -> inventory -> Ansible -> checks).
# Feature switches: inventory/group_vars/all.yml beside this file.
module "testbed" {
  source         = "../../terraform/modules/docker_testbed"
  name           = var.name
  node_count     = var.node_count
  image          = var.image
  subnet         = var.subnet
  cpus_per_node  = var.cpus_per_node
  cpu_period_us  = var.cpu_period_us
  host_cpus      = var.host_cpus
  ssh_public_key = file(var.ssh_public_key_file)
  ssh_port_base  = var.ssh_port_base
  jupyter_port   = var.jupyter_port
  # Slurm's jobs may run in containers (enroot and pyxis, LRZ's way).
  user_containers = var.enable_slurm
  image_store     = var.image_store
}

module "inventory" {
  source               = "../../terraform/modules/inventory"
  env                  = local.env
  nodes                = module.testbed.nodes
  ssh_private_key_file = var.ssh_private_key_file
  known_hosts_file     = local.known_hosts_file
  path                 = local.inventory_path
  node_link_rates      = var.node_link_rates
  deploy_vars = {
    hpcbench_state_dir = local.state_dir
    stack_image        = module.testbed.image
    hpcbench_iface     = "eth0" # the container's only interface
    link_rate          = var.link_rate
    testbed_subnet     = module.testbed.subnet
    enable_slurm       = var.enable_slurm
    cpus_per_node      = module.testbed.cpus_per_node
    jupyter_host_port  = module.testbed.jupyter_port
    testbed_network    = module.testbed.network
    # Empty: left out, the slurm role's one partition of every node.
    slurm_partitions = length(var.slurm_partitions) > 0 ? var.slurm_partitions : null
    # The stack as a .sqsh where the nodes see the image store: what verify starts.
    pyxis_image = var.image_store != null && var.image_store != "" ? "/images/${var.pyxis_image_file}" : null
  }
}
