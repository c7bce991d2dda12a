# ENV=local at plan time, Docker mocked: nodes that differ (a link rate of
# their own, Slurm partitions) reach the inventory; malformed ones stop the
# plan. Names of nodes the testbed does not have stop it in the inventory
# module, whose output a run here cannot expect to fail: tests/terraform
# checks those plans and their messages (driven by tests/terraform).
mock_provider "docker" {
  mock_data "docker_image" {
    defaults = {
      id = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
    }
  }
}
mock_provider "local" {}

variables {
  name                 = "hpcbench-tftest"
  ssh_public_key_file  = "../../tests/terraform/fixtures/id_ed25519.pub"
  ssh_private_key_file = "/nonexistent/id_ed25519"
  state_dir            = "/tmp/hpcbench-tftest/env-local"
}

run "every_node_at_link_rate_and_no_partitions_by_default" {
  command = plan
  assert {
    condition     = yamldecode(module.inventory.yaml).all.vars.link_rate == "1gbit" && length(output.nodes) == 4
    error_message = "ENV=local: 4 nodes at link_rate (1gbit) by default"
  }
  assert {
    condition     = alltrue([for h in values(yamldecode(module.inventory.yaml).all.hosts) : !can(h.link_rate)])
    error_message = "without node_link_rates no host carries a link_rate of its own"
  }
  assert {
    condition     = !can(yamldecode(module.inventory.yaml).all.vars.slurm_partitions)
    error_message = "without slurm_partitions the inventory leaves them to the slurm role (one partition of every node)"
  }
}

run "two_kinds_of_node_in_two_partitions" {
  command = plan
  variables {
    enable_slurm     = true
    link_rate        = "1gbit"
    node_link_rates  = { node3 = "200mbit", node4 = "200mbit" }
    slurm_partitions = [{ name = "fast", nodes = ["node1", "node2"] }, { name = "slow", nodes = ["node3", "node4"] }]
  }
  assert {
    condition = {
      for name, h in yamldecode(module.inventory.yaml).all.hosts : name => lookup(h, "link_rate", "all.vars")
    } == { node1 = "all.vars", node2 = "all.vars", node3 = "200mbit", node4 = "200mbit" }
    error_message = "node3 and node4 must carry link_rate 200mbit as host variables, node1 and node2 none (all.vars' 1gbit)"
  }
  assert {
    condition     = yamldecode(module.inventory.yaml).all.vars.slurm_partitions == [{ name = "fast", nodes = ["node1", "node2"] }, { name = "slow", nodes = ["node3", "node4"] }]
    error_message = "slurm_partitions must reach all.vars as given (the first is the default)"
  }
}

run "a_node_named_by_its_container_is_refused" {
  command = plan
  variables {
    node_link_rates = { hpcbench-tftest-node3 = "200mbit" }
  }
  expect_failures = [var.node_link_rates]
}

run "a_node_rate_must_be_a_tc_rate" {
  command = plan
  variables {
    node_link_rates = { node3 = "200M" }
  }
  expect_failures = [var.node_link_rates]
}

run "partition_names_must_be_distinct_words" {
  command = plan
  variables {
    slurm_partitions = [{ name = "fast", nodes = ["node1", "node2"] }, { name = "fast", nodes = ["node3", "node4"] }]
  }
  expect_failures = [var.slurm_partitions]
}
