# ENV=virtualwall (and its variant virtualwall-10g.tfvars): raw-pc nodes on
# the imec Virtual Wall, joined by one experiment LAN of fixed capacity,
# created through jFed CLI 2. Feature switches: inventory/group_vars/all.yml.
module "testbed" {
  source              = "../../terraform/modules/virtualwall"
  project             = var.project
  pem_path            = var.pem_path
  slice_name          = var.slice_name != "" ? var.slice_name : "hpcbench-${replace(local.env, "virtualwall", "vw")}"
  node_count          = var.node_count
  testbed             = var.testbed
  hardware_type       = var.hardware_type
  disk_image          = var.disk_image
  gpus_per_node       = var.gpus_per_node
  link_capacity_mbps  = var.link_capacity_mbps
  lan_cidr            = var.lan_cidr
  expire_time_min     = var.expire_time_min
  ssh_public_key_file = var.ssh_public_key_file
  # The create step logs in with it to wait for the boot scripts.
  ssh_private_key_file = var.ssh_private_key_file
  bootstrap_wait_min   = var.bootstrap_wait_min
  ssh_proxy_jump       = var.ssh_proxy_jump
  jfed_cli_jar         = var.jfed_cli_jar
  java                 = var.java
  state_dir            = local.state_dir
}

module "inventory" {
  source               = "../../terraform/modules/inventory"
  env                  = local.env
  nodes                = module.testbed.nodes
  ssh_private_key_file = var.ssh_private_key_file
  known_hosts_file     = local.known_hosts_file
  path                 = local.inventory_path
  deploy_vars = {
    hpcbench_state_dir = local.state_dir
    stack_image        = var.stack_image
    stack_ssh_port     = var.stack_ssh_port
    # Multi-homed nodes: experiment_iface pins Gloo/NCCL to the experiment LAN
    # (interface names differ between hardware types); "auto" names none and leaves
    # the choice to them (docs/testbeds.md).
    hpcbench_iface     = var.experiment_iface
    testbed_subnet     = module.testbed.lan_cidr
    link_capacity_mbps = module.testbed.link_capacity_mbps
  }
}
