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
    condition     = yamldecode(output.yaml).all.hosts.n1.ansible_ssh_common_args == "-o ProxyCommand=\"ssh -i /keys/login.pem -p 2222 -W %h:%p fff@proxy.example\""
    error_message = "a bastion key must turn into a ProxyCommand with that key and port"
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
