# `terraform test` for the GPULab module, plan only, no credentials
# (driven by tests/terraform/test_terraform.py; the job JSON is also checked
# against GPULab's own pydantic schema there).
mock_provider "local" {}

variables {
  project             = "myproj"
  pem_path            = "/nonexistent/login.pem"
  stack_image         = "gitlab.ilabt.imec.be:4567/hpcbench/stack:1.0"
  ssh_public_key_file = "../../../tests/terraform/fixtures/id_ed25519.pub"
  state_dir           = "/tmp/hpcbench-tftest/gpulab"
}

run "one_job_with_ten_gpus" {
  command = plan
  variables {
    jobs         = 1
    gpus_per_job = 10
  }

  assert {
    condition     = output.topology == "1x10" && length(output.job_definitions) == 1
    error_message = "1x10 must render exactly one job"
  }
  assert {
    condition     = jsondecode(output.job_definitions[0]).request.resources.gpus == 10 && jsondecode(output.job_definitions[0]).request.resources.cpus == 40 && jsondecode(output.job_definitions[0]).request.resources.cpuMemoryGb == 160
    error_message = "the 1x10 job must ask for 10 GPUs, 40 CPUs and 160 GB"
  }
  assert {
    condition     = length(output.nodes) == 1 && output.nodes[0].role == "head" && output.nodes[0].gpus == 10 && output.nodes[0].kind == "job"
    error_message = "1x10 must give one head node of kind job with 10 GPUs"
  }
}

run "ten_jobs_with_one_gpu" {
  command = plan
  variables {
    jobs         = 10
    gpus_per_job = 1
  }

  assert {
    condition     = output.topology == "10x1" && length(output.job_definitions) == 10
    error_message = "10x1 must render ten jobs"
  }
  assert {
    condition     = alltrue([for j in output.job_definitions : jsondecode(j).request.resources.gpus == 1])
    error_message = "every 10x1 job must ask for exactly one GPU"
  }
  assert {
    condition     = length(distinct([for j in output.job_definitions : jsondecode(j).name])) == 10
    error_message = "job names must be unique"
  }
  assert {
    condition     = alltrue([for j in output.job_definitions : jsondecode(j).request.scheduling.maxDuration == "4h" && jsondecode(j).request.docker.image == "gitlab.ilabt.imec.be:4567/hpcbench/stack:1.0"])
    error_message = "every job must run the stack image with maxDuration 4h"
  }
  assert {
    condition     = alltrue([for j in output.job_definitions : jsondecode(j).request.extra.sshPubKeys == [trimspace(file("../../../tests/terraform/fixtures/id_ed25519.pub"))]])
    error_message = "every job must carry the controller key in sshPubKeys"
  }
  assert {
    condition     = alltrue([for j in output.job_definitions : jsondecode(j).request.docker.storage[0].hostPath == "PROJECT_SHARE_AUTO" && jsondecode(j).request.docker.storage[0].containerPath == "/project"])
    error_message = "every job must mount the project storage"
  }
  assert {
    condition     = alltrue([for j in output.job_definitions : jsondecode(j).request.docker.portMappings[0].containerPort == 2222 && strcontains(jsondecode(j).request.docker.command[2], "exec /usr/sbin/sshd -D -e -p 2222")])
    error_message = "every job must start sshd on 2222 and publish it"
  }
  assert {
    condition     = length(output.nodes) == 10 && output.nodes[0].role == "head" && length([for n in output.nodes : n if n.role == "worker" && n.gpus == 1]) == 9
    error_message = "10x1 must give one head and nine one-GPU workers"
  }
}

run "optional_resources_only_when_asked" {
  command = plan
  variables {
    jobs             = 2
    gpus_per_job     = 2
    cluster_id       = 7
    gpu_models       = ["A100"]
    min_cuda_version = 12
  }

  assert {
    condition     = jsondecode(output.job_definitions[0]).request.resources.clusterId == 7 && jsondecode(output.job_definitions[0]).request.resources.gpuModel == ["A100"] && jsondecode(output.job_definitions[0]).request.resources.minCudaVersion == 12
    error_message = "cluster, GPU model and CUDA version must reach the job"
  }
}

run "too_many_jobs_refused" {
  command = plan
  variables {
    jobs         = 21
    gpus_per_job = 1
  }
  expect_failures = [var.jobs]
}

run "gpulab_duration_format" {
  command = plan
  variables {
    jobs         = 1
    gpus_per_job = 1
    max_duration = "1d" # GPULab's parser rejects "d"
  }
  expect_failures = [var.max_duration]
}

run "readback_from_job_states" {
  command = plan
  module {
    source = "./readback"
  }
  variables {
    names = ["job0", "job1", "job2"]
    job_states = [
      file("../../../tests/terraform/fixtures/gpulab-job-state-0.json"),
      file("../../../tests/terraform/fixtures/gpulab-job-state-1.json"),
      # A port bound to one address (not 0.0.0.0): reached there.
      file("../../../tests/terraform/fixtures/gpulab-job-state-2.json"),
    ]
    gpus_per_job        = 1
    stack_ssh_port      = 2222
    use_proxy           = true
    proxy_identity_file = "/home/u/login.pem"
  }

  assert {
    condition     = output.nodes[0].ssh_host == "gpu0.ilabt.imec.be" && output.nodes[0].ssh_port == 33000 && output.nodes[0].ssh_user == "root"
    error_message = "a job with a published sshd port must be reached there as root"
  }
  assert {
    condition     = output.nodes[1].ssh_host == "gpu1.ilabt.imec.be" && output.nodes[1].ssh_port == 22 && output.nodes[1].ssh_user == "jdoe"
    error_message = "without a published port the node must fall back to GPULab's SSH endpoint"
  }
  assert {
    condition     = output.nodes[0].proxy_jump == "fffjdoe@bastion.ilabt.imec.be:22" && output.nodes[0].role == "head" && output.nodes[1].role == "worker"
    error_message = "ProxyJump must come from the job's proxy fields; job0 is the head"
  }
  assert {
    condition     = output.nodes[2].ssh_host == "172.26.0.1" && output.nodes[2].ssh_port == 32768 && output.nodes[2].address == "172.26.0.2"
    error_message = "a port GPULab bound to one address must be reached at that address"
  }
  assert {
    condition     = alltrue([for n in output.nodes : n.proxy_identity_file == "/home/u/login.pem"])
    error_message = "the proxy must be reached with the login PEM, not ssh's default keys"
  }
}
