terraform {
  # State lives in .hpcbench/<env>/, outside the source tree: hpcbench deploy
  # passes the path with `init -backend-config=path=...`.
  backend "local" {}
  required_version = ">= 1.6"
  required_providers {
    openstack = {
      source = "terraform-provider-openstack/openstack"
      # tools/providers.sh (make providers) builds 3.4.0 from the Go module
      # proxy; newer releases from the registry fit as well.
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
