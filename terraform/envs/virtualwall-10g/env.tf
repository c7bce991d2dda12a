# ENV=virtualwall-10g: the virtualwall environment with a 10 Gbit/s experiment
# LAN. main.tf, variables.tf, outputs.tf and versions.tf are links to
# ../virtualwall so the two can never drift apart.
locals {
  default_link_capacity_mbps = 10000
}
