# ENV=openstack: GPU instances on an OpenStack cloud.
# Feature switches: inventory/group_vars/all.yml beside this file.
module "testbed" {
  source              = "../../terraform/modules/openstack"
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
  testbed_subnet      = var.testbed_subnet
}

module "inventory" {
  source               = "../../terraform/modules/inventory"
  env                  = local.env
  nodes                = module.testbed.nodes
  ssh_private_key_file = var.ssh_private_key_file
  known_hosts_file     = local.known_hosts_file
  # Workers are reached through the head, which holds only the controller key.
  proxy_identity_file = var.ssh_private_key_file
  path                = local.inventory_path
  deploy_vars = {
    hpcbench_state_dir = local.state_dir
    stack_image        = var.stack_image
    stack_ssh_port     = var.stack_ssh_port
    hpcbench_iface     = var.experiment_iface
    # The tenant network's subnet: NFS exports and sshd trust (looked up in the
    # cloud unless TF_VAR_testbed_subnet says).
    testbed_subnet = module.testbed.testbed_subnet
  }
}
