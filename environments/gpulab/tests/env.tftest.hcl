# ENV=gpulab at plan time: the seed topologies 1x10 and 10x1 (driven by tests/terraform).
mock_provider "local" {}

variables {
  project              = "myproj"
  pem_path             = "/nonexistent/login.pem"
  stack_image          = "gitlab.ilabt.imec.be:4567/hpcbench/stack:1.0"
  ssh_public_key_file  = "../../tests/terraform/fixtures/id_ed25519.pub"
  ssh_private_key_file = "/nonexistent/id_ed25519"
  state_dir            = "/tmp/hpcbench-tftest/env-gpulab"
}

run "default_is_one_job_with_ten_gpus" {
  command = plan

  assert {
    condition     = length(output.job_files) == 1 && length(output.nodes) == 1 && output.nodes[0].gpus == 10
    error_message = "the default topology must be 1x10: one job, ten GPUs"
  }
}

run "ten_jobs_with_one_gpu" {
  command = plan
  variables {
    topology = "10x1"
  }

  assert {
    condition     = length(output.job_files) == 10 && length(output.nodes) == 10 && alltrue([for n in output.nodes : n.gpus == 1 && n.kind == "job"])
    error_message = "10x1 must give ten one-GPU jobs"
  }
  assert {
    condition     = jsonencode(output.job_files) == jsonencode([for i in range(10) : "/tmp/hpcbench-tftest/env-gpulab/gpulab-job${i}.json"])
    error_message = "job files must go to <state_dir>/gpulab-job<i>.json"
  }
}

run "bad_topology_refused" {
  command = plan
  variables {
    topology = "10"
  }
  expect_failures = [var.topology]
}
