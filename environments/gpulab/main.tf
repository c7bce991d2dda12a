# ENV=gpulab: GPU jobs on imec GPULab, as `topology` = <jobs>x<gpus per job>:
# 1x10 (one job, ten GPUs on one machine) or 10x1 (ten jobs, one GPU each).
# Feature switches: inventory/group_vars/all.yml beside this file.
locals {
  shape = [for n in split("x", var.topology) : tonumber(n)]
}

module "testbed" {
  source              = "../../terraform/modules/gpulab"
  project             = var.project
  pem_path            = var.pem_path
  jobs                = local.shape[0]
  gpus_per_job        = local.shape[1]
  cluster_id          = var.cluster_id
  gpu_models          = var.gpu_models
  max_duration        = var.max_duration
  features            = var.features
  start_timeout       = var.start_timeout
  cpus_per_gpu        = var.cpus_per_gpu
  memory_gb_per_gpu   = var.memory_gb_per_gpu
  stack_image         = var.stack_image
  ssh_public_key_file = var.ssh_public_key_file
  use_proxy           = var.use_proxy
  state_dir           = local.state_dir
}

module "inventory" {
  source               = "../../terraform/modules/inventory"
  env                  = local.env
  nodes                = module.testbed.nodes
  ssh_private_key_file = var.ssh_private_key_file
  known_hosts_file     = local.known_hosts_file
  path                 = local.inventory_path
  deploy_vars = {
    hpcbench_state_dir = local.state_dir
    stack_image        = var.stack_image
    hpcbench_iface     = "eth0" # the container's only interface
    gpulab_topology    = module.testbed.topology
  }
}
