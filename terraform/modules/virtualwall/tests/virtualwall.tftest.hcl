# `terraform test` for the Virtual Wall module, plan only, no credentials
# (driven by tests/terraform/test_terraform.py).
mock_provider "local" {}

variables {
  project              = "myproj"
  pem_path             = "/nonexistent/login.pem"
  disk_image           = "urn:publicid:IDN+wall2.ilabt.iminds.be+image+emulab-ops:UBUNTU22-64-STD"
  node_count           = 10
  link_capacity_mbps   = 1000
  ssh_public_key_file  = "../../../tests/terraform/fixtures/id_ed25519.pub"
  ssh_private_key_file = "/nonexistent/id_ed25519"
  state_dir            = "/tmp/hpcbench-tftest/virtualwall"
}

run "ten_nodes_on_a_1g_lan" {
  command = plan

  assert {
    condition     = length(regexall("<node client_id=\"node[0-9]+\" exclusive=\"true\"", output.rspec)) == 10
    error_message = "the RSpec must request exactly 10 exclusive nodes"
  }
  assert {
    condition     = length(regexall("<sliver_type name=\"raw-pc\">", output.rspec)) == 10
    error_message = "every node must be a raw-pc"
  }
  assert {
    condition     = length(regexall("<link client_id=", output.rspec)) == 1 && length(regexall("<link_type name=\"lan\"/>", output.rspec)) == 1
    error_message = "the RSpec must hold exactly one LAN"
  }
  assert {
    condition     = length(regexall("<interface_ref client_id=", output.rspec)) == 10
    error_message = "the LAN must join all 10 nodes"
  }
  assert {
    # every ordered pair of interfaces, each at 1 Gbit/s = 1000000 kbit/s
    condition     = length(regexall("capacity=\"1000000\"", output.rspec)) == 90 && length(regexall("capacity=", output.rspec)) == 90
    error_message = "the LAN capacity must be 1000000 kbit/s on all 90 interface pairs"
  }
  assert {
    condition     = strcontains(output.rspec, "component_manager_id=\"urn:publicid:IDN+wall2.ilabt.iminds.be+authority+cm\"")
    error_message = "nodes must be requested from wall2"
  }
  assert {
    condition     = length(output.nodes) == 10 && output.nodes[0].role == "head" && length([for n in output.nodes : n if n.role == "worker"]) == 9
    error_message = "nodes must hold one head and 9 workers"
  }
  assert {
    condition     = [for n in output.nodes : n.address] == [for i in range(10) : "192.168.100.${i + 1}"]
    error_message = "experiment addresses must be 192.168.100.1-10 in node order"
  }
  assert {
    # Not the unprivileged testbed user (hpcbench, fixed uid, made by the base role).
    condition     = alltrue([for n in output.nodes : n.kind == "vm" && n.ssh_user == "hpcbench-admin"])
    error_message = "Virtual Wall nodes are kind vm, reached as the hpcbench-admin user"
  }
  assert {
    condition     = strcontains(output.jfed_run_action, "action: RUN") && strcontains(output.jfed_run_action, "sliceName: \"hpcbench\"") && strcontains(output.jfed_run_action, "project: \"myproj\"") && strcontains(output.jfed_run_action, "providedContentSource: \"/tmp/hpcbench-tftest/virtualwall/virtualwall.rspec\"")
    error_message = "the jFed run action must create slice hpcbench in myproj from the rendered RSpec"
  }
  assert {
    condition     = strcontains(output.jfed_delete_action, "action: DELETE") && !can(regex("(?m)^\\s*password:", output.jfed_run_action))
    error_message = "the delete action must delete, and no action file may hold the PEM password"
  }
  assert {
    condition     = strcontains(output.bootstrap_script, trimspace(file("../../../tests/terraform/fixtures/id_ed25519.pub")))
    error_message = "the boot script must authorise the controller key"
  }
}

run "ten_gigabit" {
  command = plan
  variables {
    link_capacity_mbps = 10000
    node_count         = 4
  }

  assert {
    condition     = length(regexall("capacity=\"10000000\"", output.rspec)) == 12 && length(regexall("capacity=", output.rspec)) == 12
    error_message = "a 10 Gbit/s LAN of 4 nodes must carry capacity=10000000 on all 12 interface pairs"
  }
  assert {
    condition     = length(output.nodes) == 4
    error_message = "node_count 4 must give 4 nodes"
  }
}

run "wall1_hardware_type_and_image" {
  command = plan
  variables {
    testbed       = "wall1"
    node_count    = 2
    hardware_type = "pcgen03"
    disk_image    = "urn:publicid:IDN+wall1.ilabt.imec.be+image+emulab-ops:UBUNTU24-04-01-CIv4"
  }

  assert {
    # Current wall1 RSpecs name the imec.be domain (docs/testbeds.md).
    condition     = length(regexall("<hardware_type name=\"pcgen03\"/>", output.rspec)) == 2 && length(regexall("component_manager_id=\"urn:publicid:IDN\\+wall1\\.ilabt\\.imec\\.be\\+authority\\+cm\"", output.rspec)) == 2 && !strcontains(output.rspec, "wall1.ilabt.iminds.be")
    error_message = "wall1 nodes must be requested from urn:publicid:IDN+wall1.ilabt.imec.be+authority+cm, with the hardware type on every node"
  }
  assert {
    condition     = strcontains(output.jfed_run_action, "sliceName: \"hpcbench\"") && output.nodes[0].role == "head"
    error_message = "wall1 must plan like wall2"
  }
}

run "wall1_image_of_the_old_domain_is_refused" {
  command = plan
  variables {
    testbed    = "wall1"
    node_count = 2
    disk_image = "urn:publicid:IDN+wall1.ilabt.iminds.be+image+emulab-ops:UBUNTU22-64-STD"
  }
  expect_failures = [local_file.rspec]
}

run "disk_image_must_be_an_image_urn" {
  command = plan
  variables {
    disk_image = "UBUNTU22-64-STD"
  }
  expect_failures = [var.disk_image]
}

run "boot_script_runs_through_sudo_and_leaves_a_marker" {
  command = plan
  variables {
    node_count = 2
  }

  assert {
    # <execute> runs as the experimenter, not root: only sudo can add users.
    condition     = length(regexall("<execute shell=\"sh\" command=\"echo [A-Za-z0-9+/=]+ \\| base64 -d \\| sudo sh\"/>", output.rspec)) == 2
    error_message = "every node's <execute> must pipe the boot script into sudo sh"
  }
  assert {
    condition     = strcontains(output.bootstrap_script, "id -u") && strcontains(output.bootstrap_script, "/var/lib/hpcbench/bootstrap.done")
    error_message = "the boot script must refuse to run without root and end by writing its marker"
  }
  assert {
    condition     = output.lease == "/tmp/hpcbench-tftest/virtualwall/leases/hpcbench.json"
    error_message = "the slice's lease must be <state_dir>/leases/<slice>.json"
  }
}

run "image_of_another_testbed_is_refused" {
  command = plan
  variables {
    testbed    = "wall1"
    node_count = 2
  }
  expect_failures = [local_file.rspec]
}

run "module_hands_the_login_pem_to_the_proxy" {
  command = plan
  variables {
    node_count     = 2
    ssh_proxy_jump = "jdoe@bastion.ilabt.imec.be"
  }

  assert {
    condition     = alltrue([for n in output.nodes : n.proxy_identity_file == "/nonexistent/login.pem" && n.proxy_jump == "jdoe@bastion.ilabt.imec.be"])
    error_message = "with ssh_proxy_jump every node must jump with the login PEM"
  }
}

run "login_user_is_not_the_testbed_user" {
  command = plan
  variables {
    ssh_user = "hpcbench"
  }
  expect_failures = [var.ssh_user]
}

run "one_node_is_refused" {
  command = plan
  variables {
    node_count = 1
  }
  expect_failures = [var.node_count]
}

run "readback_from_jfed_inventory" {
  command = plan
  module {
    source = "./readback"
  }
  variables {
    planned = [
      { name = "node0", address = "192.168.100.1", role = "head" },
      { name = "node1", address = "192.168.100.2", role = "worker" },
      { name = "node2", address = "192.168.100.3", role = "worker" },
      { name = "node3", address = "192.168.100.4", role = "worker" },
    ]
    inventory_text      = file("../../../tests/terraform/fixtures/jfed-ansible-hosts.ini")
    dns_suffix          = "hpcbench.myproj.wall2.ilabt.iminds.be"
    ssh_user            = "hpcbench"
    gpus_per_node       = 0
    proxy_jump          = "jdoe@bastion.example.org:22"
    proxy_identity_file = "/home/jdoe/login.pem"
  }

  assert {
    condition     = jsonencode(output.reported_hosts) == jsonencode(["node0", "node1", "node2"])
    error_message = "hosts must be read from host lines only, not groups or group variables"
  }
  assert {
    condition     = jsonencode([for n in output.nodes : n.ssh_host]) == jsonencode(["n095-01.wall2.ilabt.iminds.be", "n095-02.wall2.ilabt.iminds.be", "n095-03.wall2.ilabt.iminds.be", "node3.hpcbench.myproj.wall2.ilabt.iminds.be"])
    error_message = "ssh hosts must come from jFed (ansible_host or ansible_ssh_host), DNS only for a node jFed left out"
  }
  assert {
    condition     = jsonencode([for n in output.nodes : n.ssh_port]) == jsonencode([22, 2201, 22, 22])
    error_message = "ssh ports must come from jFed, 22 where it names none"
  }
  assert {
    condition     = alltrue([for n in output.nodes : n.proxy_jump == "jdoe@bastion.example.org:22"])
    error_message = "every node must carry the ProxyJump"
  }
  assert {
    condition     = alltrue([for n in output.nodes : n.proxy_identity_file == "/home/jdoe/login.pem"])
    error_message = "the jFed proxy must be reached with the login PEM, not ssh's default keys"
  }
}
