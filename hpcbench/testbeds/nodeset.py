"""Where a sweep runs: its nodes, how each is reached, and the Python and bench/ they
start from. Each kind of testbed (hpcbench.testbeds.kinds) makes its own; the nodes of a
deployed environment are read here from its Ansible inventory.

A deployed environment is read from its Ansible inventory
(`.hpcbench/<env>/inventory.yml`, written by terraform/modules/inventory);
nothing here knows which testbed produced it. docs/testbeds.md describes them.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hpcbench.core import files, paths, ssh
from hpcbench.core.bench import units as _units
from hpcbench.core.errors import UsageError
from hpcbench.core.ssh import SshAccess
from hpcbench.launchers.parse import MAX_SLOTS

LOCALHOST = "localhost"  # the node name of this machine
MAX_GPUS = MAX_SLOTS  # per node: bounds a typo in an inventory
DEFAULT_PYTHON = "/opt/hpcbench/venv/bin/python"
DEFAULT_BENCH_DIR = "/opt/hpcbench/bench"


@dataclass(frozen=True)
class Node:
    name: str  # how the other nodes reach it (testbed-internal name)
    address: str
    gpus: int
    access: SshAccess | None  # None: this machine


@dataclass
class Testbed:
    env: str  # what the records carry: the environment's name, or the kind's value
    nodes: list[Node]
    head: str
    kind: str = ""  # the name of its kind (hpcbench.testbeds.kinds), set by the kind
    # The nodes' interpreter and bench/; the controller's own unless an inventory says.
    python: str = sys.executable
    bench_dir: str = str(paths.BENCH_DIR)
    iface: str = ""
    link_rate: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def on_controller(self) -> bool:
        """No node is reached over SSH: every rank starts from this machine (its own
        processes, or srun under sbatch here) and sees this machine's files."""
        return all(n.access is None for n in self.nodes)

    def slots(self, node: Node, per_node: int | None = None) -> int:
        """Workers on a node: --gpus-per-node if given, else its GPUs, else one process."""
        return per_node or max(1, node.gpus)

    def head_node(self) -> Node:
        return next(n for n in self.nodes if n.name == self.head)


def _ssh_args(host: dict[str, Any], source: str, name: str) -> tuple[str, ...]:
    """Ansible's ssh arguments of a host (common, then extra), as one argv."""
    args: list[str] = []
    for key in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        text = host.get(key) or ""
        try:
            args += shlex.split(str(text))
        except ValueError as err:
            raise UsageError(f"{source}: {name}: {key} is not valid shell words ({err})") from None
    return tuple(args)


def _port(value: Any, source: str, name: str) -> int:
    try:
        port = int(str(value))
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise UsageError(f"{source}: {name}: ansible_port {value!r} is not a port (1 to 65535)")
    return port


def _whole(value: Any, source: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        value = repr(value)
    try:
        return _units.parse_whole(str(value), 0, MAX_GPUS)
    except ValueError as err:
        raise UsageError(f"{source}: {what}: {err}") from None


def from_inventory(
    data: dict[str, Any], source: str = "inventory", known_hosts: str | None = None
) -> Testbed:
    """Build a Testbed from the parsed inventory (shape: terraform/modules/inventory).

    ssh checks host keys against the known_hosts file Ansible's arguments name
    (the deploy learned the keys into it), else `known_hosts` if given."""
    try:
        top = data["all"]
        vars_ = top.get("vars") or {}
        hosts = top.get("hosts") or {}
        listed = vars_["testbed_nodes"]
        head = vars_["testbed_head"]
        if not isinstance(listed, list) or not isinstance(hosts, dict):
            raise TypeError("testbed_nodes is not a list")
    except (KeyError, TypeError, AttributeError) as err:
        raise UsageError(f"{source}: not an hpcbench inventory (missing {err})") from err
    nodes = []
    for entry in listed:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise UsageError(f"{source}: a testbed_nodes entry has no name: {entry!r:.80}")
        name = entry["name"]
        host = hosts.get(name)
        if not isinstance(host, dict):
            raise UsageError(f"{source}: node {name} is listed in testbed_nodes but not in hosts")
        args, own = ssh.split_options(_ssh_args(host, source, name))
        access = SshAccess(
            host=str(host.get("ansible_host", name)),
            port=_port(host.get("ansible_port", 22), source, name),
            user=host.get("ansible_user"),
            key_file=host.get("ansible_ssh_private_key_file"),
            extra_args=args,
            known_hosts=own.get("userknownhostsfile") or known_hosts,
        )
        gpus = _whole(entry.get("gpus", host.get("node_gpus", 0)) or 0, source, f"{name}: gpus")
        nodes.append(Node(name, str(entry.get("address", name)), gpus, access))
    if not nodes:
        raise UsageError(f"{source}: testbed_nodes is empty")
    if head not in {n.name for n in nodes}:
        raise UsageError(f"{source}: testbed_head {head} is not among testbed_nodes")
    return Testbed(
        env=str(vars_.get("hpcbench_env", "")),
        nodes=nodes,
        head=head,
        python=str(vars_.get("hpcbench_python") or DEFAULT_PYTHON),
        bench_dir=str(vars_.get("hpcbench_bench_dir") or DEFAULT_BENCH_DIR),
        iface=_iface(vars_.get("hpcbench_iface")),
        link_rate=str(vars_.get("link_rate") or ""),
    )


def _iface(value: object) -> str:
    """The testbed interface; "auto" (the real testbeds' default) names none, so Horovod,
    Gloo and NCCL pick the one that routes to the other nodes themselves."""
    return "" if value in (None, "auto") else str(value)


def load_inventory(path: Path, root: Path | None = None) -> Testbed:
    """The testbed of an inventory file (`root`: the state folder it is in, below
    which no link is followed; None: its own folder)."""
    try:
        data = yaml.safe_load(files.read_bounded(path, files.INVENTORY, root))
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror}") from err
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as err:
        why = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise UsageError(f"{path}: not valid YAML ({why})") from err
    # The per-testbed known_hosts beside the inventory (environments/common/controller.tf).
    return from_inventory(data, str(path), str(path.parent / "ssh" / "known_hosts"))
