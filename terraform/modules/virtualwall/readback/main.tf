locals {
  lines = [
    for l in split("\n", replace(var.inventory_text, "\r", "")) : trimspace(l)
    # Skip blanks, [groups], comments and group-variable lines (key=value).
    if trimspace(l) != "" && !can(regex("^[\\[#;]", trimspace(l))) && !can(regex("^[^\\s=]+=", trimspace(l)))
  ]
  # host => { ansible_host = ..., ansible_user = ..., ... }; a host listed in
  # several groups contributes all its lines.
  reported = {
    for host, settings in {
      for l in local.lines : regex("^(\\S+)", l)[0] => {
        for kv in regexall("([A-Za-z_]+)=(\"[^\"]*\"|'[^']*'|\\S+)", l) : kv[0] => trim(kv[1], "\"'")
      }...
    } : host => merge(settings...)
  }

  nodes = [for n in var.planned : {
    name    = n.name
    address = n.address
    # jFed's answer (ansible_host, or the older ansible_ssh_host); the
    # testbed's DNS scheme only for a node jFed left out.
    ssh_host = try(local.reported[n.name].ansible_host, local.reported[n.name].ansible_ssh_host,
    "${n.name}.${var.dns_suffix}")
    ssh_port   = tonumber(try(local.reported[n.name].ansible_port, local.reported[n.name].ansible_ssh_port, 22))
    ssh_user   = var.ssh_user
    role       = n.role
    gpus       = var.gpus_per_node
    kind       = "vm"
    proxy_jump = var.proxy_jump == "" ? null : var.proxy_jump
    # A bare ProxyJump would log in to the proxy with ssh's default keys.
    proxy_identity_file = var.proxy_jump == "" || var.proxy_identity_file == "" ? null : var.proxy_identity_file
  }]
}
