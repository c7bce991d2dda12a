# Provider-free: turns what jFed reports into `nodes`, tested on its own.
terraform {
  required_version = ">= 1.6"
}
