# A testbed of containers that behave like small VMs: systemd as PID 1, sshd,
# a dedicated network with fixed addresses, a shared volume and a CPU quota per
# node. The rest of the chain (Ansible, testinfra, the harness) treats them as
# it treats real machines.
locals {
  names = [for i in range(var.node_count) : "node${i + 1}"]
  # DAC_READ_SEARCH lets nfs-ganesha open files by handle (open_by_handle_at).
  # With Docker's default seccomp profile it also re-enables that call, a
  # known way to reach host files from a container: only the NFS server
  # (node1, the head: the inventory's nfs_server group) gets it.
  node_caps = [for i in range(var.node_count) :
    i == 0 ? ["CAP_DAC_READ_SEARCH", "CAP_NET_ADMIN", "CAP_SYS_ADMIN"] : ["CAP_NET_ADMIN", "CAP_SYS_ADMIN"]
  ]
}

data "docker_image" "node" {
  name = var.image
}

resource "docker_network" "testbed" {
  name = var.name
  ipam_config {
    subnet  = var.subnet
    gateway = cidrhost(var.subnet, 1)
  }
}

# The local stand-in for the shared file system: this kernel cannot mount NFS,
# so every node mounts this volume at /shared and the head exports the same
# directory over NFS (nfs-ganesha), which the checks reach over the protocol.
resource "docker_volume" "shared" {
  name = "${var.name}-shared"
}

resource "docker_container" "node" {
  count    = var.node_count
  name     = "${var.name}-${local.names[count.index]}"
  hostname = local.names[count.index]
  # The image ID, not its tag: a rebuilt image replaces the nodes.
  image = data.docker_image.node.id

  # systemd needs SYS_ADMIN; --privileged is neither needed nor available
  # here. NET_ADMIN lets a node shape its own link (tc tbf).
  capabilities {
    # Spelled as Docker reports them back, or every plan would replace the nodes.
    add  = local.node_caps[count.index]
    drop = []
  }
  tmpfs = {
    "/run"      = "rw,exec"
    "/run/lock" = "rw"
  }
  volumes {
    host_path      = "/sys/fs/cgroup"
    container_path = "/sys/fs/cgroup"
    read_only      = true
  }
  volumes {
    volume_name    = docker_volume.shared.name
    container_path = "/shared"
  }

  networks_advanced {
    name         = docker_network.testbed.name
    ipv4_address = cidrhost(var.subnet, 11 + count.index)
  }
  ports {
    internal = 22
    external = var.ssh_port_base + count.index + 1
    ip       = "127.0.0.1"
  }
  dynamic "ports" {
    for_each = count.index == 0 ? [var.jupyter_port] : []
    content {
      internal = 8888
      external = ports.value
      ip       = "127.0.0.1"
    }
  }

  # Written the way the provider reads it back ("1.0", "0.6"), or every
  # plan would replace the nodes.
  cpus   = floor(var.cpus_per_node) == var.cpus_per_node ? format("%.1f", var.cpus_per_node) : tostring(var.cpus_per_node)
  memory = var.memory_mb == 0 ? null : var.memory_mb

  upload {
    file    = "/root/.ssh/authorized_keys"
    content = "${trimspace(var.ssh_public_key)}\n"
  }

  stop_signal           = "SIGRTMIN+3"
  destroy_grace_seconds = 10
  must_run              = true
  restart               = "unless-stopped"
}
