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
