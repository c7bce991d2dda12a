# ENV=openstack: GPU instances on an OpenStack cloud.
module "testbed" {
  source              = "../../modules/openstack"
  name                = var.name
  node_count          = var.node_count
  image_name          = var.image_name
  flavor_name         = var.flavor_name
  network_name        = var.network_name
  floating_ip_pool    = var.floating_ip_pool
  allowed_cidr        = var.allowed_cidr
  ssh_user            = var.ssh_user
  gpus_per_node       = var.gpus_per_node
  ssh_public_key_file = var.ssh_public_key_file
}

module "inventory" {
  source               = "../../modules/inventory"
  env                  = local.env
  nodes                = module.testbed.nodes
  ssh_private_key_file = var.ssh_private_key_file
  known_hosts_file     = local.known_hosts_file
  path                 = local.inventory_path
  vars = {
    # VMs: driver (CUDA repository), container toolkit, Docker and enroot on
    # the host; the stack image runs with host networking and its own sshd.
    enable_docker       = true
    enable_nvidia       = true
    enable_enroot       = true
    enable_nfs          = true
    enable_jupyter      = true
    enable_stack        = true
    enable_link_shaping = false
    enable_ssh_mesh     = true
    enable_slurm        = false
    stack_mode          = "container"
    stack_image         = var.stack_image
    stack_ssh_port      = var.stack_ssh_port
    link_rate           = ""
    shared_dir          = "/shared"
    jupyter_port        = 8888
    hpcbench_state_dir  = local.state_dir
    hpcbench_iface      = var.experiment_iface
    hpcbench_python     = "/opt/hpcbench/venv/bin/python"
    hpcbench_bench_dir  = "/opt/hpcbench/bench"
    hpcbench_launcher   = "horovodrun"
  }
}
