"""Layer testbeds (above schedulers): machines and where runs go. Deploy, verify and
destroy (Terraform, Ansible, testinfra), leases and host keys, the testbed kinds
(registered by name), the node set a testbed offers, whether it answers (reach,
readiness), and the Target that places a run on it and hands it to a scheduler."""
