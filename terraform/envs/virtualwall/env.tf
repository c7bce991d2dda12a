# What sets ENV=virtualwall apart from ENV=virtualwall-10g: everything else is
# shared (virtualwall-10g links main.tf, variables.tf, outputs.tf and versions.tf).
locals {
  default_link_capacity_mbps = 1000
}
