terraform {
  required_version = ">= 1.6"
  required_providers {
    openstack = {
      source = "terraform-provider-openstack/openstack"
      # tools/providers.sh (make providers) builds 3.4.0 from the Go module
      # proxy; newer releases from the registry fit as well.
      version = ">= 2.0"
    }
  }
}
