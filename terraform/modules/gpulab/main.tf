# GPULab testbed: `jobs` jobs of `gpus_per_job` GPUs each. Terraform renders
# one job definition (version 2) per job, submits it with gpulab-cli from
# terraform_data, reads the running job's state (`gpulab-cli jobs ID -r`) back
# into the `nodes` contract, and cancels the job at destroy.
locals {
  state_dir  = abspath(pathexpand(var.state_dir))
  topology   = "${var.jobs}x${var.gpus_per_job}"
  public_key = trimspace(file(var.ssh_public_key_file))

  # The job's own sshd. GPULab hands `command` to Docker as docker-py does
  # (imecilabt/gpulab/schemas/job2.py:917-923, JobRequestDocker.command): a
  # string is split into words (docker/utils/utils.py:486-487, shlex.split)
  # and run with no shell, so `&&`, `>>` and `$VAR` would reach the first
  # program as arguments. The list form runs bash, which gpulab-cli's own
  # `interactive` command also does (imecilabt/gpulab/cli/__main__.py:740).
  # A job runs no systemd, and the image's host keys are made by a systemd
  # unit (images/node): `ssh-keygen -A` makes them before sshd starts. The
  # key comes from the environment (not baked into the image); sshd runs in
  # the foreground and keeps the job alive.
  script = join("\n", [
    "set -eu",
    "mkdir -p /root/.ssh /run/sshd",
    "chmod 700 /root/.ssh",
    "printf '%s\\n' \"$HPCBENCH_SSH_PUBKEY\" >> /root/.ssh/authorized_keys",
    "chmod 600 /root/.ssh/authorized_keys",
    "ssh-keygen -A",
    # stack_ssh_port is published for the controller; 22 is where the other
    # nodes (ssh mesh, horovodrun) look. sshd goes on if one of them is taken.
    "exec /usr/sbin/sshd -D -e -p ${var.stack_ssh_port} -p 22",
  ])
  command = ["/bin/bash", "-c", local.script]

  jobs = [for i in range(var.jobs) : {
    name = format("job%d", i)
    file = "${local.state_dir}/gpulab-job${i}.json"
    definition = {
      name        = "${var.name_prefix}-${local.topology}-job${i}"
      description = "hpcbench ${local.topology}: job ${i + 1} of ${var.jobs}"
      request = {
        resources = merge(
          {
            gpus        = var.gpus_per_job
            cpus        = var.gpus_per_job * var.cpus_per_gpu
            cpuMemoryGb = var.gpus_per_job * var.memory_gb_per_gpu
          },
          var.cluster_id == null ? {} : { clusterId = var.cluster_id },
          length(var.gpu_models) == 0 ? {} : { gpuModel = var.gpu_models },
          var.min_cuda_version == null ? {} : { minCudaVersion = var.min_cuda_version },
          length(var.features) == 0 ? {} : { features = var.features },
        )
        docker = {
          image   = var.stack_image
          command = local.command
          environment = {
            HPCBENCH_SSH_PUBKEY = local.public_key
            HPCBENCH_TOPOLOGY   = local.topology
            HPCBENCH_JOB_INDEX  = i
          }
          storage = [{
            hostPath      = var.project_storage.host_path
            containerPath = var.project_storage.container_path
          }]
          portMappings = [{ containerPort = var.stack_ssh_port }]
        }
        scheduling = {
          interactive = var.interactive
          maxDuration = var.max_duration
        }
        extra = {
          sshPubKeys = [local.public_key]
        }
      }
    }
  }]
}

resource "local_file" "job" {
  count           = var.jobs
  filename        = local.jobs[count.index].file
  content         = jsonencode(local.jobs[count.index].definition)
  file_permission = "0644"
}

resource "terraform_data" "job" {
  count = var.jobs
  # A changed definition is a new job: GPULab jobs cannot be edited.
  triggers_replace = [sha256(local_file.job[count.index].content), var.project]

  # Only what the destroy-time provisioner needs (it may read nothing but self).
  # No password here: gpulab.sh reads HPCBENCH_PEM_PASSWORD from the
  # environment Terraform runs in, so it never enters plan or state.
  input = {
    script = abspath("${path.module}/scripts/gpulab.sh")
    # The job id is kept in this lease from the moment GPULab returns it
    # (`hpcbench destroy` cancels what a lease names if Terraform cannot).
    lease = "${local.state_dir}/leases/gpulab-job${count.index}.json"
  }

  provisioner "local-exec" {
    command = "'${self.input.script}' submit '${local.jobs[count.index].file}' '${self.input.lease}' '${local.state_dir}/gpulab-job${count.index}.state.json'"
    environment = {
      GPULAB_CLI          = var.gpulab_cli
      GPULAB_CERT         = abspath(pathexpand(var.pem_path))
      GPULAB_PROJECT      = var.project
      GPULAB_RUN_DEADLINE = var.start_timeout
    }
  }

  provisioner "local-exec" {
    when    = destroy
    command = "'${self.input.script}' cancel '${self.input.lease}'"
  }
}

# What GPULab reports for each running job (`gpulab-cli jobs ID -r`).
data "local_file" "job_state" {
  count      = var.jobs
  filename   = "${local.state_dir}/gpulab-job${count.index}.state.json"
  depends_on = [terraform_data.job]
}

module "readback" {
  source         = "./readback"
  names          = [for j in local.jobs : j.name]
  job_states     = [for s in data.local_file.job_state : s.content]
  gpus_per_job   = var.gpus_per_job
  stack_ssh_port = var.stack_ssh_port
  use_proxy      = var.use_proxy
  # The GPULab/jFed proxy wants the login key, not ssh's defaults.
  proxy_identity_file = var.use_proxy ? abspath(pathexpand(var.pem_path)) : null
}
