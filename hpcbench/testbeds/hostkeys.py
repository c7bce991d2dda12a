"""Which host keys a deploy may forget: those of machines Terraform replaced or
destroyed, read from the saved plan (`terraform show -json`), and no others.
Every other node keeps its learned key, so a changed key there still stops
ssh and Ansible (StrictHostKeyChecking=accept-new refuses a changed key).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

# Resources of this provider are files on the controller, never a machine.
FILES_PROVIDER = "hashicorp/local"


def prior_nodes(shown: dict[str, Any]) -> list[dict[str, Any]]:
    """The `nodes` output before this plan (empty on a first deploy)."""
    try:
        nodes = shown["prior_state"]["values"]["outputs"]["nodes"]["value"]
    except (KeyError, TypeError):
        return []
    return [n for n in nodes if isinstance(n, dict)] if isinstance(nodes, list) else []


def replaced_hosts(shown: dict[str, Any]) -> list[tuple[str, int]]:
    """(ssh_host, ssh_port) of every node whose machine the plan deletes or replaces.

    A counted resource's index i is node i (every module here builds its nodes
    from its machines in count order); a for_each key names the node; a
    deleted machine resource without either (a Virtual Wall slice, a network)
    takes every node with it.
    """
    nodes = prior_nodes(shown)
    hit: set[int] = set()
    for change in shown.get("resource_changes") or []:
        actions = (change.get("change") or {}).get("actions") or []
        if "delete" not in actions or change.get("mode") != "managed":
            continue
        if str(change.get("provider_name", "")).endswith(FILES_PROVIDER):
            continue
        index = change.get("index")
        if isinstance(index, int) and not isinstance(index, bool):
            hit |= {index} if index < len(nodes) else set()
        elif isinstance(index, str):
            hit |= {i for i, n in enumerate(nodes) if n.get("name") == index}
        else:
            hit = set(range(len(nodes)))
    out = []
    for i in sorted(hit):
        try:
            out.append((str(nodes[i]["ssh_host"]), int(nodes[i]["ssh_port"])))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def known_hosts_name(host: str, port: int) -> str:
    """How ssh names a host in known_hosts."""
    return host if port == 22 else f"[{host}]:{port}"


def forget(known_hosts: Path, hosts: list[tuple[str, int]]) -> None:
    """Removes these hosts' keys (hashed entries too: ssh-keygen -R finds them)."""
    if not known_hosts.is_file():
        return
    for host, port in hosts:
        subprocess.run(
            ["ssh-keygen", "-R", known_hosts_name(host, port), "-f", str(known_hosts)],
            capture_output=True,
            timeout=30,
            check=False,
        )
    known_hosts.with_name(known_hosts.name + ".old").unlink(missing_ok=True)  # ssh-keygen's backup
