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
  # A CFS quota alone lets a node run on any core, a slice at a time: its
  # compute then varies with what else runs there. Where the quota is whole
  # cores and every node fits, each node gets cores of its own, from the last
  # core down (CPU 0 takes the machine's interrupts and the controller). A
  # fractional quota stays unpinned: nodes would have to share a core anyway.
  cpu_quota_us = ceil(var.cpus_per_node * var.cpu_period_us)
  cores        = floor(var.cpus_per_node)
  pinned       = var.host_cpus > 0 && local.cores == var.cpus_per_node && var.node_count * local.cores <= var.host_cpus
  cpu_sets = [for i in range(var.node_count) :
    local.pinned ? (local.cores == 1 ? tostring(var.host_cpus - 1 - i) :
    "${var.host_cpus - (i + 1) * local.cores}-${var.host_cpus - i * local.cores - 1}") : null
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
  # enroot (user_containers) makes user namespaces and pivot_root()s into them:
  # Docker's default seccomp profile lets the first happen and refuses the second
  # ("enroot-switchroot: failed to switch root: ... Operation not permitted").
  # No capability is added for it.
  security_opts = var.user_containers ? ["seccomp=unconfined"] : []
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
  # Read-only: the nodes start images from it, and nothing there is theirs to change.
  dynamic "volumes" {
    for_each = var.image_store == "" ? [] : [var.image_store]
    content {
      host_path      = volumes.value
      container_path = "/images"
      read_only      = true
    }
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

  # The quota as period and quota rather than `cpus`, so that the period can
  # be chosen. The provider neither reads these two back nor applies a change
  # to them in place (resourceDockerContainerUpdate in kreuzwerker's
  # resource_docker_container_funcs.go updates cpu_set, memory and a few
  # more, not these): a change replaces the node instead (replace_triggered_by).
  cpu_period = var.cpu_period_us
  cpu_quota  = local.cpu_quota_us
  cpu_set    = local.cpu_sets[count.index]
  memory     = var.memory_mb == 0 ? null : var.memory_mb

  upload {
    file    = "/root/.ssh/authorized_keys"
    content = "${trimspace(var.ssh_public_key)}\n"
  }

  stop_signal           = "SIGRTMIN+3"
  destroy_grace_seconds = 10
  must_run              = true
  restart               = "unless-stopped"

  lifecycle {
    replace_triggered_by = [terraform_data.cpu_limit]
  }
}

# What the nodes' CPU limit is made of: a change replaces every node.
resource "terraform_data" "cpu_limit" {
  input = { period_us = var.cpu_period_us, quota_us = local.cpu_quota_us }
  lifecycle {
    precondition {
      condition     = local.cpu_quota_us >= 1000
      error_message = "cpus_per_node x cpu_period_us is under 1000 us, the kernel's smallest CFS quota: raise cpus_per_node or cpu_period_us."
    }
  }
}
