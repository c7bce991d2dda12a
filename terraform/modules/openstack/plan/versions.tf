# Provider-free on purpose: names, firewall rules and the `nodes` mapping are
# tested with `terraform test` even where the OpenStack provider is missing.
terraform {
  required_version = ">= 1.6"
}
