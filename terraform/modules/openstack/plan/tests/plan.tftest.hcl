# `terraform test` for the provider-free part of the OpenStack module: names,
# security group rules and the `nodes` mapping (driven by tests/terraform).
variables {
  name          = "hpcbench"
  node_count    = 4
  allowed_cidr  = "192.0.2.10/32"
  ssh_user      = "ubuntu"
  gpus_per_node = 1
}

run "rules_open_ssh_to_one_cidr_only" {
  command = plan

  assert {
    # JupyterLab listens on the head's loopback and is reached through an SSH
    # tunnel: no rule may publish it (plain HTTP to the internet).
    condition     = jsonencode(sort(keys(output.security_group_rules))) == jsonencode(["ssh", "testbed"])
    error_message = "the group must hold exactly the ssh and intra-testbed rules (no jupyter rule)"
  }
  assert {
    condition     = alltrue([for r in values(output.security_group_rules) : r.protocol == "any" || (r.port_min == 22 && r.port_max == 22)])
    error_message = "no port but SSH may be open from outside the group"
  }
  assert {
    condition     = output.security_group_rules.ssh.protocol == "tcp" && output.security_group_rules.ssh.port_min == 22 && output.security_group_rules.ssh.port_max == 22 && output.security_group_rules.ssh.remote == "192.0.2.10/32"
    error_message = "SSH must be open on tcp/22 from the allowed CIDR only"
  }
  assert {
    condition     = output.security_group_rules.testbed.protocol == "any" && output.security_group_rules.testbed.remote == "group"
    error_message = "everything must be open between members of the testbed group"
  }
  assert {
    condition     = alltrue([for r in values(output.security_group_rules) : r.remote != "0.0.0.0/0"])
    error_message = "no rule may be open to the world"
  }
  assert {
    condition     = jsonencode(output.names) == jsonencode(["hpcbench-node0", "hpcbench-node1", "hpcbench-node2", "hpcbench-node3"])
    error_message = "instances must be named <name>-node<i>"
  }
}

run "open_world_refused" {
  command = plan
  variables {
    allowed_cidr = "0.0.0.0/0"
  }
  expect_failures = [var.allowed_cidr]
}

run "zero_prefix_with_host_bits_refused" {
  command = plan
  variables {
    allowed_cidr = "1.2.3.4/0"
  }
  expect_failures = [var.allowed_cidr]
}

run "wider_than_slash_8_refused" {
  command = plan
  variables {
    allowed_cidr = "10.0.0.0/7"
  }
  expect_failures = [var.allowed_cidr]
}

run "slash_8_accepted" {
  command = plan
  variables {
    allowed_cidr = "10.0.0.0/8"
  }

  assert {
    condition     = output.security_group_rules.ssh.remote == "10.0.0.0/8"
    error_message = "a /8 is the widest allowed_cidr accepted"
  }
}

run "testbed_subnet_is_the_tenant_subnet" {
  command = plan
  variables {
    node_count = 2
    instances = [
      { name = "hpcbench-node0", address = "10.0.0.11" },
      { name = "hpcbench-node1", address = "10.0.0.12" },
    ]
    subnet_cidr = "10.0.0.0/24"
  }

  assert {
    condition     = output.testbed_subnet == "10.0.0.0/24"
    error_message = "testbed_subnet must be the tenant network's subnet (the NFS export goes to it)"
  }
}

run "instance_outside_the_subnet_refused" {
  command = plan
  variables {
    node_count = 2
    instances = [
      { name = "hpcbench-node0", address = "10.0.0.11" },
      { name = "hpcbench-node1", address = "10.0.1.12" },
    ]
    subnet_cidr = "10.0.0.0/24"
  }
  expect_failures = [output.testbed_subnet]
}

run "nodes_through_the_head_floating_ip" {
  command = plan
  variables {
    node_count = 3
    instances = [
      { name = "hpcbench-node0", address = "10.0.0.11" },
      { name = "hpcbench-node1", address = "10.0.0.12" },
      { name = "hpcbench-node2", address = "10.0.0.13" },
    ]
    head_floating_ip = "203.0.113.5"
  }

  assert {
    condition     = length(output.nodes) == 3 && output.nodes[0].role == "head" && output.nodes[0].ssh_host == "203.0.113.5" && output.nodes[0].proxy_jump == null
    error_message = "the head is reached on its floating IP, directly"
  }
  assert {
    condition     = alltrue([for n in slice(output.nodes, 1, 3) : n.role == "worker" && n.proxy_jump == "ubuntu@203.0.113.5:22" && n.ssh_host == n.address])
    error_message = "workers are reached on their fixed address through the head"
  }
  assert {
    condition     = jsonencode([for n in output.nodes : n.address]) == jsonencode(["10.0.0.11", "10.0.0.12", "10.0.0.13"]) && alltrue([for n in output.nodes : n.kind == "vm" && n.gpus == 1 && n.ssh_user == "ubuntu"])
    error_message = "addresses are the fixed IPs; every node is a vm with the flavor's GPUs"
  }
}

run "nodes_without_floating_ip" {
  command = plan
  variables {
    node_count = 2
    instances = [
      { name = "hpcbench-node0", address = "10.0.0.11" },
      { name = "hpcbench-node1", address = "10.0.0.12" },
    ]
  }

  assert {
    condition     = alltrue([for n in output.nodes : n.ssh_host == n.address && n.proxy_jump == null])
    error_message = "without a floating IP every node is reached directly on its fixed address"
  }
}
