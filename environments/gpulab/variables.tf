# Credentials: no default, so that `plan` stops at the first missing one and
# `hpcbench deploy` names it. Declared once, with their checks, in
# terraform/modules/gpulab/variables.tf. The PEM's password is no Terraform
# variable (it would land in saved plans): export HPCBENCH_PEM_PASSWORD.
variable "project" {}
variable "pem_path" {}
variable "stack_image" {}

# Settings of modules/gpulab (TF_VAR_<name>, `--var name=value`): declared
# once, there, with type, default, description and check; null here hands
# over to the module's default.
variable "cluster_id" { default = null }
variable "max_duration" { default = null }
variable "use_proxy" { default = null }
variable "start_timeout" { default = null }
variable "cpus_per_gpu" { default = null }
variable "memory_gb_per_gpu" { default = null }
variable "features" {
  type    = list(string) # so that TF_VAR_features='["UNFIREWALLED_PORTS"]' reads as a list
  default = null
}
variable "gpu_models" {
  type    = list(string) # so that TF_VAR_gpu_models='["A100"]' reads as a list
  default = null
}

# Settings of this environment alone.

variable "topology" {
  description = "<jobs>x<GPUs per job>: 1x10 (one job, 10 GPUs), 10x1 (10 jobs, 1 GPU each) or any JxG. Set TOPOLOGY=... with make, or TF_VAR_topology."
  type        = string
  default     = "1x10"
  validation {
    condition     = can(regex("^([1-9]|1[0-9]|20)x([1-9]|1[0-6])$", var.topology))
    error_message = "topology must be <jobs>x<gpus>, jobs 1-20 and gpus 1-16, e.g. 1x10 or 10x1: set TF_VAR_topology."
  }
}
