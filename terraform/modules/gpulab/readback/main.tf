locals {
  reported = [for s in var.job_states : jsondecode(s).state.resources]
  # Host port GPULab published for the job's own sshd (empty if none).
  mappings = [for r in local.reported : [
    for m in try(r.portMappings, []) : m
    if m.containerPort == var.stack_ssh_port && try(m.hostPort, null) != null
  ]]
  published = [for ms in local.mappings : [for m in ms : m.hostPort]]
  # A port bound to one address is reached there; bound to every address
  # ("0.0.0.0", "::" or none, as Docker reports it), at the worker's host.
  bound = [for i, ms in local.mappings : (
    length(ms) > 0 && !contains(["", "0.0.0.0", "::"], try(coalesce(ms[0].hostIp, ""), ""))
    ? ms[0].hostIp : local.reported[i].slaveHost
  )]

  nodes = [for i, r in local.reported : {
    name    = var.names[i]
    address = r.slaveHost
    # The job's own sshd (root, the controller key) on its published port;
    # GPULab's built-in SSH endpoint only if no port came back.
    ssh_host   = length(local.published[i]) > 0 ? local.bound[i] : try(r.sshHost, r.slaveHost)
    ssh_port   = length(local.published[i]) > 0 ? local.published[i][0] : r.sshPort
    ssh_user   = length(local.published[i]) > 0 ? "root" : r.sshUsername
    role       = i == 0 ? "head" : "worker"
    gpus       = var.gpus_per_job
    kind       = "job"
    proxy_jump = var.use_proxy ? format("%s@%s:%d", r.sshProxyUsername, r.sshProxyHost, try(r.sshProxyPort, 22)) : null
    # gpulab-cli's own ssh logs in to the proxy with the login PEM
    # (imecilabt/gpulab/cli/__main__.py:1894-1896, `ssh -i <PEM> ... -W %h:%p`).
    proxy_identity_file = var.use_proxy ? var.proxy_identity_file : null
  }]
}
