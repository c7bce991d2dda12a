# OpenStack testbed: instances, a key pair, a security group and an optional
# floating IP for the head. Names, rules and the `nodes` mapping live in the
# provider-free ./plan module so that they are tested without a cloud.
module "plan" {
  source        = "./plan"
  name          = var.name
  node_count    = var.node_count
  allowed_cidr  = var.allowed_cidr
  ssh_user      = var.ssh_user
  gpus_per_node = var.gpus_per_node
  instances = [for i in openstack_compute_instance_v2.node : {
    name    = i.name
    address = i.network[0].fixed_ip_v4
  }]
  head_floating_ip = var.floating_ip_pool == "" ? null : openstack_networking_floatingip_v2.head[0].address
  subnet_cidr      = var.testbed_subnet != "" ? var.testbed_subnet : one(data.openstack_networking_subnet_v2.testbed[*].cidr)
}

# The tenant network's IPv4 subnet, unless given: the NFS export and sshd trust
# go to it (ansible testbed_subnet).
data "openstack_networking_network_v2" "testbed" {
  name = var.network_name
}

data "openstack_networking_subnet_v2" "testbed" {
  count      = var.testbed_subnet == "" ? 1 : 0
  network_id = data.openstack_networking_network_v2.testbed.id
  ip_version = 4
}

resource "openstack_compute_keypair_v2" "controller" {
  name       = "${var.name}-controller"
  public_key = trimspace(file(var.ssh_public_key_file))
}

resource "openstack_networking_secgroup_v2" "testbed" {
  name        = var.name
  description = "hpcbench testbed: SSH from ${var.allowed_cidr} (JupyterLab through an SSH tunnel), everything inside the group"
}

resource "openstack_networking_secgroup_rule_v2" "ingress" {
  for_each          = module.plan.security_group_rules
  security_group_id = openstack_networking_secgroup_v2.testbed.id
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = each.value.protocol == "any" ? null : each.value.protocol
  port_range_min    = each.value.protocol == "any" ? null : each.value.port_min
  port_range_max    = each.value.protocol == "any" ? null : each.value.port_max
  remote_ip_prefix  = each.value.remote == "group" ? null : each.value.remote
  remote_group_id   = each.value.remote == "group" ? openstack_networking_secgroup_v2.testbed.id : null
  description       = "hpcbench ${each.key}"
}

resource "openstack_compute_instance_v2" "node" {
  count           = var.node_count
  name            = module.plan.names[count.index]
  image_name      = var.image_name
  flavor_name     = var.flavor_name
  key_pair        = openstack_compute_keypair_v2.controller.name
  security_groups = [openstack_networking_secgroup_v2.testbed.name]

  network {
    name = var.network_name
  }

  metadata = {
    hpcbench_role = count.index == 0 ? "head" : "worker"
  }
}

resource "openstack_networking_floatingip_v2" "head" {
  count = var.floating_ip_pool == "" ? 0 : 1
  pool  = var.floating_ip_pool
}

resource "openstack_networking_floatingip_associate_v2" "head" {
  count       = var.floating_ip_pool == "" ? 0 : 1
  floating_ip = openstack_networking_floatingip_v2.head[0].address
  port_id     = openstack_compute_instance_v2.node[0].network[0].port
}
