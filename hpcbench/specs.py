"""Parsing of the sweep's command-line specs: node counts, batch sizes, host lists.

Every parser raises UsageError with one line that names the bad value, so that
nothing is launched on bad input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hpcbench.errors import UsageError

# Bounds that catch typos ("1-1000") before they turn into hours of launches.
MAX_NODES = 4096
MAX_BATCH = 65536


def _int(text: str, what: str) -> int:
    if not re.fullmatch(r"\s*\d+\s*", text):
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
            values.update(range(lo, hi + 1))
        else:
            values.add(_int(part, what))
    bad = [v for v in sorted(values) if not 1 <= v <= maximum]
    if bad:
        raise UsageError(f"{what}: {bad[0]} is out of range; use 1 to {maximum}")
    return sorted(values)


def parse_nodes(spec: str, available: int | None = None) -> list[int]:
    """Node counts; `available` (the testbed's size) bounds them when known."""
    nodes = parse_int_list(spec, "--nodes", MAX_NODES)
    if available is not None and nodes[-1] > available:
        raise UsageError(
            f"--nodes {spec}: asks for {nodes[-1]} nodes but the testbed has {available}"
        )
    return nodes


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


_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMG]?)i?B?\s*", re.IGNORECASE)


def parse_size(spec: str, what: str) -> int:
    """'64M' -> 67108864 (binary units, as nccl-tests prints sizes)."""
    match = _SIZE.fullmatch(spec or "")
    if not match:
        raise UsageError(f"{what}: {spec!r} is not a size like 4K, 64M or 1G")
    scale = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[match.group(2).upper()]
    size = int(float(match.group(1)) * scale)
    if size < 4:
        raise UsageError(f"{what}: {spec!r} is below one float (4 bytes)")
    return size
