# The shared inventory module: groups, host variables and bastion handling.
mock_provider "local" {}

variables {
  env                  = "testenv"
  ssh_private_key_file = "/keys/id_ed25519"
  path                 = "/tmp/hpcbench-tftest/inventory.yml"
  deploy_vars          = { hpcbench_state_dir = "/state", stack_image = "hpcbench/stack:latest", hpcbench_iface = "eth0", link_rate = "1gbit" }
  nodes = [
    { name = "node1", address = "10.0.0.11", ssh_host = "127.0.0.1", ssh_port = 22201, ssh_user = "root", role = "head", gpus = 0, kind = "container" },
    { name = "node2", address = "10.0.0.12", ssh_host = "127.0.0.1", ssh_port = 22202, ssh_user = "root", role = "worker", gpus = 0, kind = "container" },
    { name = "node3", address = "10.0.0.13", ssh_host = "127.0.0.1", ssh_port = 22203, ssh_user = "root", role = "worker", gpus = 0, kind = "container" },
  ]
}

run "groups_and_host_vars" {
  command = plan
  assert {
    condition     = keys(yamldecode(output.yaml).all.children.workers.hosts) == ["node2", "node3"]
    error_message = "workers must hold every non-head node"
  }
  assert {
    condition = alltrue([for g in ["head", "nfs_server", "jupyter"] :
    keys(yamldecode(output.yaml).all.children[g].hosts) == ["node1"]])
    error_message = "head, nfs_server and jupyter must hold the head node"
  }
  assert {
    condition     = yamldecode(output.yaml).all.hosts.node2.ansible_port == 22202 && yamldecode(output.yaml).all.hosts.node2.testbed_address == "10.0.0.12"
    error_message = "host variables must carry the ssh port and the testbed address"
  }
  assert {
    condition     = yamldecode(output.yaml).all.vars.link_rate == "1gbit" && length(yamldecode(output.yaml).all.vars.testbed_nodes) == 3
    error_message = "inventory vars must carry the env's settings and every node"
  }
  assert {
    # Only this deploy's values: switches live in group_vars, unset options stay out.
    condition     = toset(keys(yamldecode(output.yaml).all.vars)) == toset(["hpcbench_env", "testbed_nodes", "testbed_head", "hpcbench_state_dir", "stack_image", "hpcbench_iface", "link_rate", "hpcbench_python", "hpcbench_bench_dir"])
    error_message = "all.vars must hold the deploy's facts and the harness's keys, nothing else"
  }
  assert {
    condition     = !can(yamldecode(output.yaml).all.hosts.node1.ansible_ssh_extra_args)
    error_message = "without known_hosts_file, ssh keeps its defaults"
  }
  assert {
    condition     = !can(yamldecode(output.yaml).all.hosts.node1.ansible_ssh_common_args)
    error_message = "nodes without a bastion get no ssh_common_args"
  }
}

run "bastion_with_its_own_key" {
  command = plan
  variables {
    known_hosts_file = "/state/ssh/known_hosts"
    nodes = [
      { name = "n1", address = "10.0.0.1", ssh_host = "n1.example", ssh_port = 22, ssh_user = "u", role = "head", gpus = 1, kind = "vm", proxy_jump = "fff@proxy.example:2222", proxy_identity_file = "/keys/login.pem" },
      { name = "n2", address = "10.0.0.2", ssh_host = "n2.example", ssh_port = 22, ssh_user = "u", role = "worker", gpus = 1, kind = "vm", proxy_jump = "fff@proxy.example" },
    ]
  }
  assert {
    condition     = yamldecode(output.yaml).all.hosts.n1.ansible_ssh_common_args == "-o \"ProxyCommand=ssh -i '/keys/login.pem' -o IdentitiesOnly=yes -o UserKnownHostsFile='/state/ssh/known_hosts' -o StrictHostKeyChecking=accept-new -p 2222 -W %h:%p 'fff@proxy.example'\""
    error_message = "a bastion key must turn into a ProxyCommand with that key, this testbed's known_hosts and the port"
  }
  assert {
    condition     = yamldecode(output.yaml).all.hosts.n2.ansible_ssh_common_args == "-o ProxyJump=fff@proxy.example"
    error_message = "a bastion without its own key stays a ProxyJump"
  }
  assert {
    condition     = yamldecode(output.yaml).all.hosts.n2.ansible_ssh_extra_args == "-o UserKnownHostsFile=/state/ssh/known_hosts -o StrictHostKeyChecking=accept-new"
    error_message = "a known_hosts_file must reach every host's ssh arguments"
  }
}

run "exactly_one_head" {
  command = plan
  variables {
    nodes = [
      { name = "a", address = "10.0.0.1", ssh_host = "h", ssh_port = 22, ssh_user = "u", role = "worker", gpus = 0, kind = "vm" },
    ]
  }
  expect_failures = [var.nodes]
}

run "proxy_identity_file_for_every_jump" {
  command = plan
  variables {
    # The jFed/GPULab proxy wants the user's login PEM; a path with a space,
    # shell characters and a "%" (ssh's token character) stays one path.
    proxy_identity_file = "/home/me/My Keys/$(touch pwned);%d.pem"
    nodes = [
      { name = "n1", address = "10.0.0.1", ssh_host = "n1.example", ssh_port = 22, ssh_user = "u", role = "head", gpus = 1, kind = "job", proxy_jump = "fff@proxy.example:2222" },
      { name = "n2", address = "10.0.0.2", ssh_host = "n2.example", ssh_port = 22, ssh_user = "u", role = "worker", gpus = 1, kind = "job", proxy_jump = "fff@proxy.example", proxy_identity_file = "/keys/own.pem" },
      { name = "n3", address = "10.0.0.3", ssh_host = "n3.example", ssh_port = 22, ssh_user = "u", role = "worker", gpus = 1, kind = "job" },
    ]
  }
  assert {
    condition     = yamldecode(output.yaml).all.hosts.n1.ansible_ssh_common_args == "-o \"ProxyCommand=ssh -i '/home/me/My Keys/$(touch pwned);%%d.pem' -o IdentitiesOnly=yes -p 2222 -W %h:%p 'fff@proxy.example'\""
    error_message = "the module's proxy_identity_file must reach every jump, single-quoted for sh and with % doubled for ssh"
  }
  assert {
    condition     = strcontains(yamldecode(output.yaml).all.hosts.n2.ansible_ssh_common_args, "ssh -i '/keys/own.pem' ")
    error_message = "a node's own proxy_identity_file wins over the module's"
  }
  assert {
    condition     = !can(yamldecode(output.yaml).all.hosts.n3.ansible_ssh_common_args)
    error_message = "a node without a jump host gets no ProxyCommand"
  }
}

run "proxy_jump_must_not_be_an_option" {
  command = plan
  variables {
    nodes = [
      { name = "n1", address = "10.0.0.1", ssh_host = "h", ssh_port = 22, ssh_user = "u", role = "head", gpus = 0, kind = "vm", proxy_jump = "-oProxyCommand=touch /tmp/x" },
    ]
  }
  expect_failures = [var.nodes]
}

run "proxy_identity_file_must_not_break_quoting" {
  command = plan
  variables {
    proxy_identity_file = "/keys/it's.pem"
  }
  expect_failures = [var.proxy_identity_file]
}

run "stack_image_must_be_an_image_reference" {
  command = plan
  variables {
    deploy_vars = { hpcbench_state_dir = "/state", stack_image = "hpcbench/stack:latest --privileged -v /:/host", hpcbench_iface = "eth0" }
  }
  expect_failures = [var.deploy_vars]
}

run "stack_image_with_registry_port_and_digest" {
  command = plan
  variables {
    deploy_vars = { hpcbench_state_dir = "/state", stack_image = "registry.example.org:5000/hpc-bench/stack_x:1.0-rc.1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", hpcbench_iface = "eth0" }
  }
  assert {
    condition     = startswith(yamldecode(output.yaml).all.vars.stack_image, "registry.example.org:5000/")
    error_message = "a full image reference (registry, port, tag, digest) must pass"
  }
}

# Nodes that differ: a rate of their own, Slurm partitions over them.
run "a_node_of_its_own_rate_gets_it_as_a_host_variable" {
  command = plan
  variables {
    node_link_rates = { node3 = "200mbit", node2 = "" }
  }
  assert {
    condition     = yamldecode(output.yaml).all.hosts.node3.link_rate == "200mbit" && yamldecode(output.yaml).all.hosts.node2.link_rate == ""
    error_message = "a node named in node_link_rates must carry its own link_rate (\"\": unshaped) as a host variable"
  }
  assert {
    condition     = !can(yamldecode(output.yaml).all.hosts.node1.link_rate) && yamldecode(output.yaml).all.vars.link_rate == "1gbit"
    error_message = "nodes not named keep the testbed's link_rate (all.vars), with no host variable"
  }
}

run "a_rate_for_a_node_the_testbed_does_not_have_is_refused" {
  command = plan
  variables {
    node_link_rates = { node9 = "200mbit" }
  }
  expect_failures = [output.yaml]
}

run "a_node_rate_must_be_a_tc_rate" {
  command = plan
  variables {
    node_link_rates = { node3 = "200 mbit; reboot" }
  }
  expect_failures = [var.node_link_rates]
}

run "partitions_reach_all_vars" {
  command = plan
  variables {
    deploy_vars = {
      hpcbench_state_dir = "/state", stack_image = "hpcbench/stack:latest", hpcbench_iface = "eth0",
      slurm_partitions   = [{ name = "fast", nodes = ["node1", "node2"] }, { name = "slow", nodes = ["node2", "node3"] }]
    }
  }
  assert {
    condition     = yamldecode(output.yaml).all.vars.slurm_partitions == [{ name = "fast", nodes = ["node1", "node2"] }, { name = "slow", nodes = ["node2", "node3"] }]
    error_message = "slurm_partitions must reach all.vars in order (the first is the default), nodes shared"
  }
}

run "a_partition_of_an_unknown_node_is_refused" {
  command = plan
  variables {
    deploy_vars = {
      hpcbench_state_dir = "/state", stack_image = "hpcbench/stack:latest", hpcbench_iface = "eth0",
      slurm_partitions   = [{ name = "fast", nodes = ["node1", "node2", "node3", "node4"] }]
    }
  }
  expect_failures = [output.yaml]
}

run "a_node_in_no_partition_is_refused" {
  command = plan
  variables {
    deploy_vars = {
      hpcbench_state_dir = "/state", stack_image = "hpcbench/stack:latest", hpcbench_iface = "eth0",
      slurm_partitions   = [{ name = "fast", nodes = ["node1", "node2"] }]
    }
  }
  expect_failures = [output.yaml]
}

run "partition_names_are_one_word_and_not_default" {
  command = plan
  variables {
    deploy_vars = {
      hpcbench_state_dir = "/state", stack_image = "hpcbench/stack:latest", hpcbench_iface = "eth0",
      slurm_partitions   = [{ name = "Default", nodes = ["node1", "node2", "node3"] }]
    }
  }
  expect_failures = [var.deploy_vars]
}
