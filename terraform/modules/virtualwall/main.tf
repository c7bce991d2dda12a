# Virtual Wall testbed through jFed CLI 2: no Terraform provider exists for the
# GENI AM API, so Terraform renders the RSpec and the jFed action files, runs
# jFed from terraform_data (create) and its destroy-time provisioner (delete),
# reads jFed's Ansible inventory back into the `nodes` contract and waits until
# every node's boot script has finished.
locals {
  # wall1 moved to the imec.be domain; wall2 keeps iminds.be (current RSpecs of
  # both testbeds, docs/testbeds.md).
  domain            = { wall1 = "wall1.ilabt.imec.be", wall2 = "wall2.ilabt.iminds.be" }[var.testbed]
  component_manager = "urn:publicid:IDN+${local.domain}+authority+cm"
  state_dir         = abspath(pathexpand(var.state_dir))
  link_name         = "lan0"
  # The boot script's last act; the create step waits for it on every node.
  bootstrap_marker = "/var/lib/hpcbench/bootstrap.done"

  files = {
    rspec         = "${local.state_dir}/virtualwall.rspec"
    run_action    = "${local.state_dir}/jfed-run.yaml"
    delete_action = "${local.state_dir}/jfed-delete.yaml"
    ansible_dir   = "${local.state_dir}/jfed-ansible"
    inventory     = "${local.state_dir}/jfed-inventory.ini"
    # Lease contract shared with `hpcbench destroy`: written before jFed creates
    # the slice, removed only after a confirmed delete.
    lease       = "${local.state_dir}/leases/${var.slice_name}.json"
    known_hosts = "${local.state_dir}/jfed-known_hosts"
  }

  # Everything known before jFed runs: names, experiment addresses, roles.
  planned = [for i in range(var.node_count) : {
    name    = format("node%d", i)
    address = cidrhost(var.lan_cidr, i + 1)
    role    = i == 0 ? "head" : "worker"
  }]

  bootstrap = templatefile("${path.module}/templates/bootstrap.sh.tftpl", {
    ssh_user   = var.ssh_user
    public_key = trimspace(file(var.ssh_public_key_file))
    marker     = local.bootstrap_marker
  })

  rspec = templatefile("${path.module}/templates/rspec.xml.tftpl", {
    nodes             = local.planned
    component_manager = local.component_manager
    disk_image        = var.disk_image
    hardware_type     = var.hardware_type
    netmask           = cidrnetmask(var.lan_cidr)
    link_name         = local.link_name
    capacity_kbps     = var.link_capacity_mbps * 1000 # RSpec capacity is in kbit/s
    bootstrap_b64     = base64encode(local.bootstrap)
  })

  action_vars = {
    project         = var.project
    slice_name      = var.slice_name
    pem_path        = abspath(pathexpand(var.pem_path))
    rspec_path      = local.files.rspec
    ansible_dir     = local.files.ansible_dir
    expire_time_min = var.expire_time_min
    wait_ready_min  = var.wait_ready_min
  }
  run_action    = templatefile("${path.module}/templates/jfed-action.yaml.tftpl", merge(local.action_vars, { action = "RUN" }))
  delete_action = templatefile("${path.module}/templates/jfed-action.yaml.tftpl", merge(local.action_vars, { action = "DELETE" }))
}

resource "local_file" "rspec" {
  filename        = local.files.rspec
  content         = local.rspec
  file_permission = "0644"

  lifecycle {
    precondition {
      condition     = strcontains(var.disk_image, "+${local.domain}+")
      error_message = "disk_image belongs to another testbed than ${var.testbed}: use an image URN of ${local.domain} (jFed: node properties, \"Disk image\")."
    }
  }
}

resource "local_file" "run_action" {
  filename        = local.files.run_action
  content         = local.run_action
  file_permission = "0600"
}

resource "local_file" "delete_action" {
  filename        = local.files.delete_action
  content         = local.delete_action
  file_permission = "0600"
}

resource "terraform_data" "experiment" {
  # A new RSpec means a new slice: jFed cannot change a running one.
  triggers_replace = [sha256(local.rspec), var.project, var.slice_name, var.testbed]

  # Only what the destroy-time provisioner needs (it may read nothing but self).
  input = {
    script        = abspath("${path.module}/scripts/jfed.sh")
    java          = var.java
    jar           = abspath(pathexpand(var.jfed_cli_jar))
    delete_action = local.files.delete_action
    lease         = local.files.lease
    slice_name    = var.slice_name
  }

  # The PEM password is read by jfed.sh from HPCBENCH_PEM_PASSWORD in the
  # environment Terraform inherits: it never enters a variable, plan or state.
  provisioner "local-exec" {
    command = "'${self.input.script}' '${local.files.run_action}'"
    environment = {
      JFED_JAVA        = self.input.java
      JFED_JAR         = self.input.jar
      JFED_ANSIBLE_DIR = local.files.ansible_dir
      JFED_INVENTORY   = local.files.inventory
      JFED_LEASE       = self.input.lease
      JFED_SLICE       = self.input.slice_name
      JFED_DELETE      = self.input.delete_action
    }
  }

  provisioner "local-exec" {
    when    = destroy
    command = "'${self.input.script}' '${self.input.delete_action}'"
    environment = {
      JFED_JAVA  = self.input.java
      JFED_JAR   = self.input.jar
      JFED_LEASE = self.input.lease
    }
  }

  depends_on = [local_file.rspec, local_file.run_action, local_file.delete_action]
}

# What jFed reports: its Ansible inventory (INI), read after the slice is ready.
data "local_file" "jfed_inventory" {
  filename   = local.files.inventory
  depends_on = [terraform_data.experiment]
}

module "readback" {
  source         = "./readback"
  planned        = local.planned
  inventory_text = data.local_file.jfed_inventory.content
  dns_suffix     = lower("${var.slice_name}.${var.project}.${local.domain}")
  ssh_user       = var.ssh_user
  gpus_per_node  = var.gpus_per_node
  proxy_jump     = var.ssh_proxy_jump
  # The jFed proxy authenticates with the Fed4FIRE login key (gpulab-cli's own
  # ssh passes -i <login PEM> to it).
  proxy_identity_file = abspath(pathexpand(var.pem_path))
}

# <execute> services run after jFed reports ready, as the experimenter, at
# their own pace: hand the nodes on only once the boot script has finished
# on every one (its marker file, checked over ssh as ssh_user with the
# controller key: that also proves the account and the key work).
resource "terraform_data" "bootstrap_done" {
  triggers_replace = [terraform_data.experiment.id]

  provisioner "local-exec" {
    command = "'${abspath("${path.module}/scripts/wait-bootstrap.sh")}'"
    environment = {
      WAIT_NODES       = join(" ", [for n in module.readback.nodes : "${n.name}=${n.ssh_host}:${n.ssh_port}"])
      WAIT_USER        = var.ssh_user
      WAIT_KEY         = abspath(pathexpand(var.ssh_private_key_file))
      WAIT_MARKER      = local.bootstrap_marker
      WAIT_TIMEOUT_S   = var.bootstrap_wait_min * 60
      WAIT_KNOWN_HOSTS = local.files.known_hosts
      WAIT_PROXY_JUMP  = var.ssh_proxy_jump
      # The jFed proxy takes the Fed4FIRE login key, not ssh's defaults.
      WAIT_PROXY_KEY = abspath(pathexpand(var.pem_path))
    }
  }
}
