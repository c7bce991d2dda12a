# The local testbed's containers: which node holds which capability.
mock_provider "docker" {
  mock_data "docker_image" {
    defaults = {
      id = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
    }
  }
}

variables {
  node_count     = 3
  ssh_public_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdTAfb5S9r2cM0Bo1u2tTMpQd6qTtRyqzS6WLXh3GZ3 test"
}

run "only_the_nfs_server_reads_by_handle" {
  command = plan
  assert {
    condition     = contains(one(docker_container.node[0].capabilities).add, "CAP_DAC_READ_SEARCH")
    error_message = "node1 (head, NFS server: nfs-ganesha's open_by_handle_at) must hold CAP_DAC_READ_SEARCH"
  }
  assert {
    condition = alltrue([for c in slice(docker_container.node, 1, 3) :
    !contains(one(c.capabilities).add, "CAP_DAC_READ_SEARCH")])
    error_message = "workers must not hold CAP_DAC_READ_SEARCH (open_by_handle_at reaches host files)"
  }
  assert {
    condition = alltrue([for c in docker_container.node :
    contains(one(c.capabilities).add, "CAP_NET_ADMIN") && contains(one(c.capabilities).add, "CAP_SYS_ADMIN")])
    error_message = "every node keeps NET_ADMIN (link shaping) and SYS_ADMIN (systemd)"
  }
}

run "the_seccomp_filter_stays_unless_nodes_run_containers" {
  command = plan
  assert {
    condition     = alltrue([for c in docker_container.node : length(c.security_opts) == 0])
    error_message = "without user_containers every node keeps Docker's default seccomp profile"
  }
}

run "nodes_that_run_containers_lose_the_seccomp_filter_and_gain_no_capability" {
  command = plan
  variables {
    user_containers = true
  }
  assert {
    condition     = alltrue([for c in docker_container.node : c.security_opts == toset(["seccomp=unconfined"])])
    error_message = "with user_containers every node runs without a seccomp filter (enroot's pivot_root)"
  }
  assert {
    condition = alltrue([for c in slice(docker_container.node, 1, 3) :
    !contains(one(c.capabilities).add, "CAP_DAC_READ_SEARCH")])
    error_message = "workers must still not hold CAP_DAC_READ_SEARCH"
  }
}

run "a_single_node_is_the_nfs_server" {
  command = plan
  variables {
    node_count = 1
  }
  assert {
    condition     = contains(one(docker_container.node[0].capabilities).add, "CAP_DAC_READ_SEARCH")
    error_message = "a one-node testbed still serves NFS from node1"
  }
}

# CPU sets: whole-core quotas that fit get cores of their own, from the last down.
run "whole_cores_that_fit_are_pinned_from_the_last_core_down" {
  command = plan
  variables {
    cpus_per_node = 2
    host_cpus     = 8
  }
  assert {
    condition     = [for c in docker_container.node : c.cpu_set] == ["6-7", "4-5", "2-3"]
    error_message = "3 nodes of 2 cores on 8 CPUs must get 6-7, 4-5 and 2-3 (CPU 0 and 1 left to the machine)"
  }
}

run "one_core_per_node_is_one_cpu_each" {
  command = plan
  variables {
    cpus_per_node = 1
    host_cpus     = 3
  }
  assert {
    condition     = output.cpu_sets == ["2", "1", "0"]
    error_message = "3 nodes of 1 core on 3 CPUs must get CPUs 2, 1 and 0"
  }
}

run "a_fractional_quota_is_not_pinned" {
  command = plan
  variables {
    cpus_per_node = 0.5
    host_cpus     = 2
  }
  assert {
    condition     = alltrue([for c in docker_container.node : c.cpu_set == null])
    error_message = "half-core nodes would share a core: they must stay unpinned"
  }
}

run "nodes_that_do_not_fit_are_not_pinned" {
  command = plan
  variables {
    cpus_per_node = 1
    host_cpus     = 2
  }
  assert {
    condition     = alltrue([for s in output.cpu_sets : s == null])
    error_message = "3 one-core nodes on 2 CPUs cannot each have a core: none is pinned"
  }
}

run "host_cpus_zero_never_pins" {
  command = plan
  variables {
    cpus_per_node = 1
    host_cpus     = 0
  }
  assert {
    condition     = alltrue([for s in output.cpu_sets : s == null])
    error_message = "host_cpus = 0 must leave every node unpinned"
  }
}

run "host_cpus_must_be_whole" {
  command = plan
  variables {
    host_cpus = 1.5
  }
  expect_failures = [var.host_cpus]
}

# The CPU quota as CFS period and quota; a change to either replaces the nodes.
run "quota_is_cpus_per_node_times_the_period" {
  command = plan
  variables {
    cpus_per_node = 0.5
    cpu_period_us = 10000
  }
  assert {
    condition     = alltrue([for c in docker_container.node : c.cpu_period == 10000 && c.cpu_quota == 5000 && c.cpus == null])
    error_message = "half a core at a 10 ms period must be quota 5000 us of 10000 us, with cpus unset"
  }
  assert {
    condition     = terraform_data.cpu_limit.input == { period_us = 10000, quota_us = 5000 }
    error_message = "the replacement trigger must hold period and quota"
  }
}

run "a_quota_under_one_millisecond_is_refused" {
  command = plan
  variables {
    cpus_per_node = 0.05
    cpu_period_us = 10000
  }
  expect_failures = [terraform_data.cpu_limit]
}
