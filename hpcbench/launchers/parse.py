"""The parsers of a sweep's and a probe's textual forms (node counts, batch sizes, host
lists, durations, sizes, names and paths) and the bounds they hold them to.

Every parser raises UsageError with one line that names the bad value, so that nothing
is launched on bad input (hpcbench.launchers.specs holds what they are parsed into).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hpcbench.core.bench import units
from hpcbench.core.errors import UsageError

# Bounds that catch typos ("1-1000") before they turn into hours of launches.
MAX_NODES = 4096
MAX_BATCH = units.COUNTS["batch"][1]
MAX_SLOTS = 1024  # workers on one host (--hosts h:N, --gpus-per-node)
# The harness's own counts (the workload's are units.COUNTS): (low, high) inclusive.
COUNTS: dict[str, tuple[int, int]] = {
    "timeout": (1, 7 * 24 * 3600),  # seconds per run
    "repeats": (1, 1000),
    "max-repeats": (1, 1000),
    "gpus-per-node": (1, MAX_SLOTS),
    "slurm-gpus": (0, 64),
    "slurm-time": (0, 28 * 24 * 60),  # minutes; 0: from --timeout
    "slurm-queue-wait": (0, 30 * 24 * 3600),
    "slurm-cpus-per-task": (0, 4096),  # 0: from the node's CPUs (sinfo)
    "container-import-time": (0, 24 * 3600),  # seconds
    # advise: samples per optimizer step (a transformer's sequences), and its node bound.
    "global-batch": (1, 10**8),
    "max-nodes": (1, 100_000),
}


def count(name: str, text: str) -> int:
    """A bounded count by its option's name: the workload's bounds (bench/units.py),
    shared with bench/train.py, else the harness's own (COUNTS)."""
    return units.parse_whole(text, *(units.COUNTS.get(name) or COUNTS[name]))


# --target-ci in percent of the throughput; --budget from a second to a week.
TARGET_CI_PERCENT = (0.1, 50.0)
BUDGET_S = (1, 7 * 24 * 3600)
_DURATION_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600}


def target_ci(text: str) -> float:
    """'5%' or '5' -> 0.05: the 95% interval's half-width as a share of the throughput."""
    stripped = text.strip() if isinstance(text, str) else str(text)
    return units.parse_real(stripped.removesuffix("%"), *TARGET_CI_PERCENT) / 100


def duration_s(text: str) -> int:
    """'90', '90s', '30m', '2h' -> seconds (whole), within BUDGET_S."""
    stripped = text.strip() if isinstance(text, str) else str(text)
    unit = stripped[-1:] if stripped[-1:] in ("s", "m", "h") else ""
    number = units.parse_whole(stripped.removesuffix(unit), 1, 10**9)
    seconds = number * _DURATION_UNITS[unit]
    low, high = BUDGET_S
    if not low <= seconds <= high:
        raise ValueError(f"{seconds} s is out of range: use {low} s to {high // 3600} h")
    return seconds


def target_ci_type() -> Callable[[str], float]:
    return units.argtype(lambda _name, text: target_ci(text), "target-ci")


def duration_type(name: str) -> Callable[[str], int]:
    return units.argtype(lambda _name, text: duration_s(text), name)


def count_type(name: str) -> Callable[[str], int]:
    """argparse type= of a count: bad input is one line naming the option."""
    return units.argtype(count, name)


def seconds_type(name: str) -> Callable[[str], float]:
    return units.argtype(units.seconds, name)


def megabytes_type(name: str) -> Callable[[str], float]:
    return units.argtype(units.megabytes, name)


def _int(text: str, what: str, low: int = 0, high: int = 10**18 - 1) -> int:
    try:
        return units.parse_whole(text, low, high)
    except ValueError as err:
        raise UsageError(f"{what}: {err}") from None


def parse_int_list(spec: str, what: str, maximum: int) -> list[int]:
    """'1-4,8' -> [1, 2, 3, 4, 8]: sorted, unique, each in 1..maximum."""
    if not spec or not spec.strip():
        raise UsageError(f"{what}: empty; give numbers like 1-4 or 1,2,4,8")
    values: set[int] = set()
    for part in spec.split(","):
        if not part.strip():
            raise UsageError(f"{what}: {spec.strip()[:40]!r} has an empty item between commas")
        if "-" in part:
            lo_text, _, hi_text = part.partition("-")
            if not lo_text.strip() or not hi_text.strip():  # '-1', '4-': no range
                raise UsageError(
                    f"{what}: {part.strip()[:40]!r} is not a number from 1 to {maximum} "
                    "or a range like 1-4"
                )
            # Each end within bounds before a range is built: 1-10000000000 must not
            # fill the memory first.
            lo, hi = _int(lo_text, what, 1, maximum), _int(hi_text, what, 1, maximum)
            if lo > hi:
                raise UsageError(f"{what}: range {part.strip()!r} runs backwards; write {hi}-{lo}")
            bounds = [lo, hi]
        else:
            bounds = [_int(part, what, 1, maximum)]
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


# A host name or an IPv4 address: never an ssh option ("-Fevil"), a user or a port.
_HOST = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}", re.ASCII)


_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}", re.ASCII)


def parse_login(text: str, what: str = "--slurm-login") -> tuple[str | None, str, int]:
    """'[user@]host[:port]' -> (user or None, host, port); one line naming what to fix."""
    user, at, rest = text.rpartition("@")
    host, sep, port_text = rest.partition(":")
    port = _int(port_text, what) if sep else 22
    if (at and not _USER.fullmatch(user)) or not _HOST.fullmatch(host) or not 1 <= port <= 65535:
        raise UsageError(
            f"{what}: {text[:60]!r} is not [user@]host[:port] (a login node, e.g. "
            "login.ai.lrz.de or me@glogin.hlrn.de:22)"
        )
    return user or None, host, port


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
            raise UsageError(
                f"--hosts: {part[:60]!r} is not host:slots (a host name or IPv4 address)"
            )
        slots = _int(slots_text, f"--hosts {name}")
        if not 1 <= slots <= MAX_SLOTS:
            raise UsageError(f"--hosts {name}: {slots} slots is out of range; use 1 to {MAX_SLOTS}")
        if any(h.name == name for h in hosts):
            raise UsageError(f"--hosts: {name} is listed twice")
        hosts.append(HostSlots(name, slots))
    return hosts


# Text that ends up in a command line or a batch script: a name (partition, account,
# qos, srun --mpi), an image reference, a path. Shell metacharacters, spaces and a
# leading dash are refused here; what passes is quoted (shlex.quote) where it is used.
WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.,+-]*", re.ASCII)
IMAGE = re.compile(r"[A-Za-z0-9_./~][A-Za-z0-9_.:/#@+~-]*", re.ASCII)
SAFE_PATH = re.compile(r"[A-Za-z0-9_./~][A-Za-z0-9_./~+@=,-]*", re.ASCII)
MOUNT = re.compile(r"[A-Za-z0-9_./~][A-Za-z0-9_./~+@=:-]*", re.ASCII)  # SRC:DST[:FLAGS]
MAX_PATH_BYTES = 4095  # PATH_MAX less its NUL
MAX_NAME_BYTES = 255  # NAME_MAX


def check_text(text: str, what: str, pattern: re.Pattern[str], example: str) -> str:
    """`text` if the whole of it matches `pattern` (and fits a path); else one line."""
    if not pattern.fullmatch(text or "") or len(text) > MAX_PATH_BYTES:
        raise UsageError(f"{what}: {text[:60]!r} is not {example}")
    return text


def check_path(text: str, what: str) -> str:
    """A path the harness reads or writes: any characters a file name may hold but
    control characters, and within the kernel's limits (ENAMETOOLONG otherwise)."""
    if not text or not text.strip():
        raise UsageError(f"{what}: empty; give a path")
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise UsageError(f"{what}: {text[:60]!r} holds control characters")
    raw = text.encode("utf-8", "surrogateescape")
    if len(raw) > MAX_PATH_BYTES or any(len(p) > MAX_NAME_BYTES for p in raw.split(b"/")):
        raise UsageError(
            f"{what}: {text[:60]!r}... is too long (at most {MAX_NAME_BYTES} bytes a name, "
            f"{MAX_PATH_BYTES} in all)"
        )
    return text


def parse_size(spec: str, what: str) -> int:
    """'64M' -> 67108864 (binary units, as nccl-tests prints sizes), with the
    workload's own parser so that what passes here is what it measures."""
    try:
        return units.parse_size(spec)
    except ValueError as err:
        raise UsageError(f"{what}: {err}") from None
