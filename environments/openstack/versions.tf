terraform {
  # State lives in .hpcbench/<env>/, outside the source tree: hpcbench deploy
  # passes the path with `init -backend-config=path=...`.
  backend "local" {}
  required_version = ">= 1.6"
  required_providers {
    openstack = {
      source  = "terraform-provider-openstack/openstack"
      version = ">= 2.0"
    }
    local = {
      source  = "hashicorp/local"
      version = "2.9.0"
    }
  }
}

# Credentials come from clouds.yaml (~/.config/openstack/clouds.yaml or
# OS_CLIENT_CONFIG_FILE), never from this repository.
provider "openstack" {
  cloud = var.cloud
}
