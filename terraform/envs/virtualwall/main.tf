# ENV=virtualwall / virtualwall-10g: raw-pc nodes on the imec Virtual Wall,
# joined by one experiment LAN of fixed capacity, created through jFed CLI 2.
module "testbed" {
  source              = "../../modules/virtualwall"
  project             = var.project
  pem_path            = var.pem_path
  pem_password        = var.pem_password
  slice_name          = var.slice_name != "" ? var.slice_name : "hpcbench-${replace(local.env, "virtualwall", "vw")}"
  node_count          = var.node_count
  testbed             = var.testbed
  hardware_type       = var.hardware_type
  disk_image          = var.disk_image
  gpus_per_node       = var.gpus_per_node
  link_capacity_mbps  = coalesce(var.link_capacity_mbps, local.default_link_capacity_mbps)
  lan_cidr            = var.lan_cidr
  expire_time_min     = var.expire_time_min
  ssh_public_key_file = var.ssh_public_key_file
  ssh_proxy_jump      = var.ssh_proxy_jump
  jfed_cli_jar        = var.jfed_cli_jar
  java                = var.java
  state_dir           = local.state_dir
}

module "inventory" {
  source               = "../../modules/inventory"
  env                  = local.env
  nodes                = module.testbed.nodes
  ssh_private_key_file = var.ssh_private_key_file
  known_hosts_file     = local.known_hosts_file
  path                 = local.inventory_path
  vars = {
    # Bare-metal hosts: driver, container runtime and enroot go on the host;
    # the stack image runs as a host-network container with its own sshd.
    # Roles without a GPU to serve skip themselves (they decide from facts).
    enable_docker       = true
    enable_nvidia       = true
    enable_enroot       = true
    enable_nfs          = true
    enable_jupyter      = true
    enable_stack        = true
    enable_link_shaping = false # the LAN itself runs at the requested rate
    enable_ssh_mesh     = true
    enable_slurm        = false
    stack_mode          = "container"
    stack_image         = var.stack_image
    stack_ssh_port      = var.stack_ssh_port
    link_rate           = ""
    link_capacity_mbps  = coalesce(var.link_capacity_mbps, local.default_link_capacity_mbps)
    testbed_subnet      = module.testbed.lan_cidr
    shared_dir          = "/shared"
    jupyter_port        = 8888
    hpcbench_state_dir  = local.state_dir
    # Multi-homed nodes: pin Gloo/NCCL to the experiment LAN, never the control
    # network. "auto" = the interface holding an address in testbed_subnet
    # (interface names differ between hardware types).
    hpcbench_iface     = var.experiment_iface
    hpcbench_python    = "/opt/hpcbench/venv/bin/python"
    hpcbench_bench_dir = "/opt/hpcbench/bench"
    hpcbench_launcher  = "horovodrun"
  }
}
