# Provider-free: turns what GPULab reports into `nodes`, tested on its own.
terraform {
  required_version = ">= 1.6"
}
