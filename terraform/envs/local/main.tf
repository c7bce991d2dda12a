# ENV=local: a testbed of containers on this machine that goes through the
# same chain as every real testbed (nodes -> inventory -> Ansible -> checks).
module "testbed" {
  source         = "../../modules/docker_testbed"
  name           = var.name
  node_count     = var.node_count
  image          = var.image
  subnet         = var.subnet
  cpus_per_node  = var.cpus_per_node
  ssh_public_key = file(var.ssh_public_key_file)
  ssh_port_base  = var.ssh_port_base
  jupyter_port   = var.jupyter_port
}

module "inventory" {
  source               = "../../modules/inventory"
  env                  = local.env
  nodes                = module.testbed.nodes
  ssh_private_key_file = var.ssh_private_key_file
  known_hosts_file     = local.known_hosts_file
  path                 = local.inventory_path
  vars = {
    # Containers: no Docker-in-Docker, no GPU driver; the node already runs
    # the stack image.
    enable_docker       = false
    enable_nvidia       = false
    enable_enroot       = false
    enable_nfs          = true
    enable_jupyter      = true
    enable_stack        = true
    enable_link_shaping = var.link_rate != ""
    enable_ssh_mesh     = true
    enable_slurm        = var.enable_slurm
    stack_mode          = "image"
    stack_image         = var.image
    link_rate           = var.link_rate
    testbed_subnet      = var.subnet
    shared_dir          = "/shared"
    cpus_per_node       = var.cpus_per_node
    jupyter_port        = 8888
    jupyter_host_port   = var.jupyter_port
    hpcbench_state_dir  = local.state_dir
    hpcbench_iface      = "eth0"
    hpcbench_python     = "/opt/hpcbench/venv/bin/python"
    hpcbench_bench_dir  = "/opt/hpcbench/bench"
    hpcbench_launcher   = "horovodrun"
  }
}
