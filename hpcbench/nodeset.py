"""Where a sweep runs: the nodes of a deployed environment, a host list, the
nodes of a Slurm cluster, or this machine (see specs.TestbedKind).

A deployed environment is read from its Ansible inventory
(`.hpcbench/<env>/inventory.yml`, written by terraform/modules/inventory);
nothing here knows which testbed produced it. docs/testbeds.md describes them.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hpcbench import files, paths, ssh
from hpcbench.errors import UsageError
from hpcbench.specs import MAX_SLOTS, HostSlots, TestbedKind
from hpcbench.specs import units as _units
from hpcbench.ssh import SshAccess

LOCALHOST = "localhost"  # the node name of this machine
MAX_GPUS = MAX_SLOTS  # per node: bounds a typo in an inventory
CLUSTER_NODES = 64  # the most nodes `--env slurm` offers; Slurm refuses what it lacks
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
    kind: TestbedKind = TestbedKind.DEPLOYED
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


def lock_files(tb: Testbed) -> list[Path]:
    """What marks the testbed busy while a sweep or probe measures on it (one at a
    time, whatever its --out): a deployed environment's lock in its state folder, a
    lock per machine for --hosts and localhost; none for `--env slurm`, where Slurm
    shares the nodes out itself."""
    if tb.kind is TestbedKind.SLURM:
        return []
    if tb.kind is TestbedKind.DEPLOYED:
        return [paths.env_state(tb.env) / "testbed.lock"]
    machines = paths.private_dir(paths.state_root() / "machines", paths.state_root())
    return [machines / f"{name}.lock" for name in sorted({n.name for n in tb.nodes})]


def for_env(env: str) -> Testbed:
    """The testbed of a deployed environment; 'localhost' is this machine."""
    if env == TestbedKind.LOCALHOST:
        return localhost()
    paths.env_dir(env)  # unknown names: UsageError listing the known ones
    inventory = paths.inventory_path(env)
    if not files.present(inventory, paths.state_root()):  # a FIFO there: read says so
        raise UsageError(
            f"environment {env} is not deployed ({inventory} missing): run make deploy ENV={env}"
        )
    testbed = load_inventory(inventory, paths.state_root())
    testbed.env = testbed.env or env
    return testbed


def localhost(cores: int | None = None) -> Testbed:
    """Worker processes on this machine: each 'node' is one process, up to one per core."""
    cores = cores or os.cpu_count() or 1
    nodes = [Node(LOCALHOST, "127.0.0.1", 0, None) for _ in range(cores)]
    return Testbed(
        env=TestbedKind.LOCALHOST.value,
        nodes=nodes,
        head=LOCALHOST,
        kind=TestbedKind.LOCALHOST,
        iface="lo",
    )


def from_hosts(hosts: list[HostSlots], user: str | None = None) -> Testbed:
    """An ad-hoc host list reached with the user's own SSH setup.

    The nodes must see this checkout's bench/ and Python at the same paths
    (a shared file system, as on most clusters).
    """
    nodes = [
        Node(
            h.name,
            h.name,
            h.slots,
            None if h.name == LOCALHOST else SshAccess(host=h.name, user=user),
        )
        for h in hosts
    ]
    return Testbed(
        env=TestbedKind.HOSTS.value, nodes=nodes, head=hosts[0].name, kind=TestbedKind.HOSTS
    )


def slurm_cluster(gpus_per_node: int | None, python: str = "", bench_dir: str = "") -> Testbed:
    """`--env slurm`: the nodes Slurm will allocate, seen from a login node with a
    shared file system: the stack's Python and bench/ there (--slurm-python,
    --slurm-bench-dir), this machine's where they are not given (sbatch runs here), or
    the container's Python."""
    nodes = [Node(f"slurm{i}", "", gpus_per_node or 0, None) for i in range(CLUSTER_NODES)]
    return Testbed(
        env=TestbedKind.SLURM.value,
        nodes=nodes,
        head=nodes[0].name,
        kind=TestbedKind.SLURM,
        python=python or sys.executable,
        bench_dir=bench_dir or str(paths.BENCH_DIR),
    )
