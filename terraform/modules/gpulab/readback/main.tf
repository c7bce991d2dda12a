locals {
  reported = [for s in var.job_states : jsondecode(s).state.resources]
  # Host port GPULab published for the job's own sshd (empty if none).
  published = [for r in local.reported : [
    for m in try(r.portMappings, []) : m.hostPort
    if m.containerPort == var.stack_ssh_port && try(m.hostPort, null) != null
  ]]

  nodes = [for i, r in local.reported : {
    name    = var.names[i]
    address = r.slaveHost
    # The job's own sshd (root, the controller key) on its published port;
    # GPULab's built-in SSH endpoint only if no port came back.
    ssh_host   = length(local.published[i]) > 0 ? r.slaveHost : try(r.sshHost, r.slaveHost)
    ssh_port   = length(local.published[i]) > 0 ? local.published[i][0] : r.sshPort
    ssh_user   = length(local.published[i]) > 0 ? "root" : r.sshUsername
    role       = i == 0 ? "head" : "worker"
    gpus       = var.gpus_per_job
    kind       = "job"
    proxy_jump = var.use_proxy ? format("%s@%s:%d", r.sshProxyUsername, r.sshProxyHost, try(r.sshProxyPort, 22)) : null
  }]
}
