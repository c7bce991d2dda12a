# ENV=virtualwall end to end at plan time: 1 Gbit/s LAN, the inventory's
# settings for bare-metal hosts (driven by tests/terraform).
mock_provider "local" {}

variables {
  project              = "myproj"
  pem_path             = "/nonexistent/login.pem"
  disk_image           = "urn:publicid:IDN+wall2.ilabt.iminds.be+image+emulab-ops:UBUNTU22-64-STD"
  ssh_public_key_file  = "../../tests/terraform/fixtures/id_ed25519.pub"
  ssh_private_key_file = "/nonexistent/id_ed25519"
  state_dir            = "/tmp/hpcbench-tftest/env-virtualwall"
}

run "ten_nodes_at_one_gigabit" {
  command = plan

  assert {
    condition     = length(regexall("<node client_id=", module.testbed.rspec)) == 10 && length(output.nodes) == 10
    error_message = "ENV=virtualwall must request 10 nodes by default"
  }
  assert {
    condition     = length(regexall("capacity=\"1000000\"", module.testbed.rspec)) == 90 && length(regexall("capacity=", module.testbed.rspec)) == 90
    error_message = "ENV=virtualwall must ask for a 1 Gbit/s LAN (1000000 kbit/s)"
  }
  assert {
    condition     = strcontains(module.testbed.jfed_run_action, "sliceName: \"hpcbench-vw\"")
    error_message = "the slice must be named hpcbench-vw"
  }
  assert {
    condition     = output.inventory_path == "/tmp/hpcbench-tftest/env-virtualwall/inventory.yml"
    error_message = "the inventory must go to <state_dir>/inventory.yml"
  }
}
