locals {
  names = [for i in range(var.node_count) : format("%s-node%d", var.name, i)]

  # Ingress only; OpenStack security groups allow all egress by default.
  # remote = a CIDR, or "group" for members of the testbed's own group (all
  # protocols: Gloo/NCCL/Horovod pick ports at run time). No rule for
  # JupyterLab: it listens on 127.0.0.1 and is reached through an SSH tunnel
  # (ssh -L 8888:127.0.0.1:8888 <head>), never over plain HTTP.
  security_group_rules = {
    ssh = {
      protocol = "tcp", port_min = var.ssh_port, port_max = var.ssh_port, remote = var.allowed_cidr
    }
    testbed = {
      protocol = "any", port_min = 0, port_max = 0, remote = "group"
    }
  }

  # The controller enters through the head's floating IP, if there is one, and
  # jumps from there to the workers' fixed addresses.
  nodes = [for i, inst in var.instances : {
    name       = inst.name
    address    = inst.address
    ssh_host   = i == 0 && var.head_floating_ip != null ? var.head_floating_ip : inst.address
    ssh_port   = var.ssh_port
    ssh_user   = var.ssh_user
    role       = i == 0 ? "head" : "worker"
    gpus       = var.gpus_per_node
    kind       = "vm"
    proxy_jump = i > 0 && var.head_floating_ip != null ? format("%s@%s:%d", var.ssh_user, var.head_floating_ip, var.ssh_port) : null
  }]
}

