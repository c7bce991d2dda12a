# ENV=virtualwall-10g at plan time: this folder with virtualwall-10g.tfvars.json,
# read here as hpcbench deploy passes it (driven by tests/terraform).
mock_provider "local" {}

variables {
  env                  = jsondecode(file("virtualwall-10g.tfvars.json")).env
  link_capacity_mbps   = jsondecode(file("virtualwall-10g.tfvars.json")).link_capacity_mbps
  project              = "myproj"
  pem_path             = "/nonexistent/login.pem"
  disk_image           = "urn:publicid:IDN+wall2.ilabt.iminds.be+image+emulab-ops:UBUNTU22-64-STD"
  ssh_public_key_file  = "../../tests/terraform/fixtures/id_ed25519.pub"
  ssh_private_key_file = "/nonexistent/id_ed25519"
  state_dir            = "/tmp/hpcbench-tftest/env-virtualwall-10g"
}

run "ten_nodes_at_ten_gigabit" {
  command = plan

  assert {
    condition     = length(regexall("<node client_id=", module.testbed.rspec)) == 10 && length(output.nodes) == 10
    error_message = "ENV=virtualwall-10g must request 10 nodes by default"
  }
  assert {
    condition     = length(regexall("capacity=\"10000000\"", module.testbed.rspec)) == 90 && length(regexall("capacity=", module.testbed.rspec)) == 90
    error_message = "ENV=virtualwall-10g must ask for a 10 Gbit/s LAN (10000000 kbit/s)"
  }
  assert {
    condition     = strcontains(module.testbed.jfed_run_action, "sliceName: \"hpcbench-vw-10g\"")
    error_message = "the slice must be named hpcbench-vw-10g (so both envs can live at once)"
  }
}

run "node_count_override" {
  command = plan
  variables {
    node_count = 5
  }

  assert {
    condition     = length(regexall("<node client_id=", module.testbed.rspec)) == 5 && length(regexall("capacity=\"10000000\"", module.testbed.rspec)) == 20
    error_message = "NODES=5 must give 5 nodes on the 10 Gbit/s LAN"
  }
}
