"""What a sweep or a probe is asked to do, as typed, frozen specs, and the
parsers of their textual forms (node counts, batch sizes, host lists, sizes).

The CLI (hpcbench.options) builds the specs once from the command line;
nothing below it sees the argparse Namespace. Every parser raises UsageError
with one line that names the bad value, so that nothing is launched on bad input.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import ModuleType

from hpcbench import paths
from hpcbench.errors import UsageError
from hpcbench.launchers.slurm import SlurmOptions


def _load_units() -> ModuleType:
    """bench/units.py, which the nodes run without hpcbench: loaded from its file."""
    spec = importlib.util.spec_from_file_location("_bench_units", paths.BENCH_DIR / "units.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_units = _load_units()

# Bounds that catch typos ("1-1000") before they turn into hours of launches.
MAX_NODES = 4096
MAX_BATCH = 65536


def _int(text: str, what: str) -> int:
    if not re.fullmatch(r"\s*[0-9]{1,18}\s*", text):  # ASCII digits; 18 keep int() cheap
        raise UsageError(f"{what}: {text.strip()!r} is not a whole number")
    return int(text)


def parse_int_list(spec: str, what: str, maximum: int) -> list[int]:
    """'1-4,8' -> [1, 2, 3, 4, 8]: sorted, unique, each in 1..maximum."""
    if not spec or not spec.strip():
        raise UsageError(f"{what}: empty; give numbers like 1-4 or 1,2,4,8")
    values: set[int] = set()
    for part in spec.split(","):
        if "-" in part:
            lo_text, _, hi_text = part.partition("-")
            lo, hi = _int(lo_text, what), _int(hi_text, what)
            if lo > hi:
                raise UsageError(f"{what}: range {part.strip()!r} runs backwards; write {hi}-{lo}")
            bounds = [lo, hi]
        else:
            bounds = [_int(part, what)]
        # Checked before a range is built: 1-10000000000 must not fill the memory first.
        bad = next((v for v in bounds if not 1 <= v <= maximum), None)
        if bad is not None:
            raise UsageError(f"{what}: {bad} is out of range; use 1 to {maximum}")
        values.update(range(bounds[0], bounds[-1] + 1))
    return sorted(values)


def format_int_list(values: Sequence[int]) -> str:
    """[1, 2, 3, 4, 8] -> '1-4,8': parse_int_list's inverse, for messages."""
    parts: list[str] = []
    ordered = sorted(set(values))
    start = 0
    for i, value in enumerate(ordered):
        if i + 1 == len(ordered) or ordered[i + 1] != value + 1:
            lo = ordered[start]
            parts.append(str(lo) if lo == value else f"{lo}-{value}")
            start = i + 1
    return ",".join(parts)


def parse_nodes(spec: str, available: int | None = None) -> list[int]:
    """Node counts; `available` (the testbed's size) bounds them when known."""
    nodes = parse_int_list(spec, "--nodes", MAX_NODES)
    return nodes if available is None else check_node_counts(nodes, available, spec)


def check_node_counts(counts: Sequence[int], available: int, spec: str = "") -> list[int]:
    """The counts, if the testbed (known once it is resolved) has that many nodes."""
    if counts and max(counts) > available:
        given = spec or format_int_list(counts)
        raise UsageError(
            f"--nodes {given}: asks for {max(counts)} nodes but the testbed has {available}"
        )
    return sorted(counts)


def parse_batch(spec: str) -> list[int]:
    return parse_int_list(spec, "--batch", MAX_BATCH)


@dataclass(frozen=True)
class HostSlots:
    """A host and how many workers (GPUs or processes) it runs."""

    name: str
    slots: int


_HOST = re.compile(r"[A-Za-z0-9_.\-\[\]:]+")


def parse_hosts(spec: str) -> list[HostSlots]:
    """'h1:4,h2:4' -> hosts in the given order; a missing ':slots' means one slot."""
    if not spec or not spec.strip():
        raise UsageError("--hosts: empty; give host:slots pairs like h1:4,h2:4")
    hosts: list[HostSlots] = []
    for part in spec.split(","):
        part = part.strip()
        name, sep, slots_text = part.rpartition(":")
        if not sep:
            name, slots_text = part, "1"
        if not name or not _HOST.fullmatch(name):
            raise UsageError(f"--hosts: {part!r} is not host:slots")
        slots = _int(slots_text, f"--hosts {name}")
        if slots < 1:
            raise UsageError(f"--hosts {name}: slots must be at least 1")
        if any(h.name == name for h in hosts):
            raise UsageError(f"--hosts: {name} is listed twice")
        hosts.append(HostSlots(name, slots))
    return hosts


def parse_size(spec: str, what: str) -> int:
    """'64M' -> 67108864 (binary units, as nccl-tests prints sizes), with the
    workload's own parser so that what passes here is what it measures."""
    try:
        return _units.parse_size(spec)
    except ValueError as err:
        raise UsageError(f"{what}: {err}") from None


class TestbedKind(StrEnum):
    """How the harness finds the nodes; the value is the `env` the records carry
    (a deployed testbed's records carry its environment's name instead)."""

    DEPLOYED = "deployed"  # an environment's inventory (`make deploy ENV=...`)
    LOCALHOST = "localhost"  # worker processes on this machine
    HOSTS = "hosts"  # --hosts: ad-hoc nodes on a shared file system
    SLURM = "slurm"  # the nodes Slurm allocates, sbatch on this machine


@dataclass(frozen=True)
class WorkloadSpec:
    """What each run trains (bench/train.py's options), batch sizes aside."""

    model: str
    image_size: int
    data: str = "synthetic"
    data_workers: int = 4
    warmup: int = 10
    windows: int = 5
    steps: int = 20
    device: str = "auto"
    threads: int = 0
    amp: str = "auto"
    fp16_allreduce: bool = False
    fusion_threshold_mb: float | None = None
    bucket_cap_mb: float | None = None


@dataclass(frozen=True)
class TargetSpec:
    """Where runs go and how they are launched."""

    env: str  # a deployed environment, or a TestbedKind value
    node_counts: tuple[int, ...]
    hosts: tuple[HostSlots, ...] = ()  # --hosts; empty: --env decides
    gpus_per_node: int | None = None  # workers per node; None: the node's GPUs, else 1
    backend: str = "horovod"
    launcher: str = "auto"
    horovod_controller: str = "gloo"
    slurm: SlurmOptions = SlurmOptions()

    @property
    def kind(self) -> TestbedKind:
        if self.hosts:
            return TestbedKind.HOSTS
        if self.env in (TestbedKind.LOCALHOST, TestbedKind.SLURM):
            return TestbedKind(self.env)
        return TestbedKind.DEPLOYED


@dataclass(frozen=True)
class ProbeSpec:
    """The all-reduce probe: a size sweep up to max_bytes on every worker."""

    max_bytes: str = "64M"
    device: str = "auto"
    threads: int = 0
    timeout_s: int = 1800


@dataclass(frozen=True)
class SweepSpec:
    """How the sweep runs: repeats, order, where results go, what it may skip."""

    batches: tuple[int, ...]
    out: Path = Path("results")
    repeats: int = 3
    seed: int = 0
    resume: bool = False
    probe: ProbeSpec | None = ProbeSpec()  # None: --no-probe
    timeout_s: int = 1800
    dry_run: bool = False
    verbose: bool = False
