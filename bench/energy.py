"""Energy over the timed windows: RAPL on each host, NVML's counter on each GPU.

RAPL: the kernel's powercap zones (Documentation/power/powercap/powercap.rst):
each /sys/class/powercap/intel-rapl:N is a package (`name` package-N) whose
`energy_uj` counts microjoules and wraps at `max_energy_range_uj`; its subzones
(intel-rapl:N:M) are parts of it (core, uncore), except `dram`, a domain of its
own. A host's energy is its packages plus its dram zones, read once before the
first window and once after the last; the packages count everything that runs on
them, not this run alone. Since the fix of the PLATYPUS side channel
(CVE-2020-8694, November 2020) `energy_uj` is readable by root only, so the reason
is kept where it cannot be read.

NVML: bench/gpumon.py reads nvmlDeviceGetTotalEnergyConsumption (millijoules since
the driver was loaded; Volta and newer) at the same two moments on every rank's GPU.

merge() turns the ranks' readings into the run's record: joules per source, the
samples the timed windows trained, and each source's reason where it has no figure.
Runs on the nodes: never imports hpcbench, and not torch.
"""

from __future__ import annotations

import contextlib
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

POWERCAP = Path("/sys/class/powercap")


@dataclass
class Zone:
    path: Path
    name: str
    wrap_uj: int


@dataclass
class RaplReading:
    """What start() found: the zones it reads and their counters, or why none."""

    zones: list[Zone] = field(default_factory=list)
    start_uj: list[int] = field(default_factory=list)
    wall: float = 0.0
    unknown: str = ""


def _read_int(path: Path) -> int:
    return int(path.read_text().strip())


def zones(root: Path = POWERCAP) -> tuple[list[Zone], str]:
    """The zones a host's energy is the sum of (packages and dram), or why none."""
    if not root.is_dir():
        return [], f"{root} is absent (no RAPL driver here, as in most virtual machines)"
    found = []
    for top in sorted(root.glob("intel-rapl:*")):
        depth = top.name.count(":")
        try:
            name = (top / "name").read_text().strip()
        except OSError:
            continue
        if (depth == 1 and name.startswith("package")) or name == "dram":
            wrap = 0
            with contextlib.suppress(OSError, ValueError):
                wrap = _read_int(top / "max_energy_range_uj")
            found.append(Zone(top, name, wrap))
    if not found:
        return [], f"{root} has no RAPL package zone"
    return found, ""


def rapl_start(root: Path = POWERCAP) -> RaplReading:
    found, why = zones(root)
    if why:
        return RaplReading(unknown=why)
    readings = []
    for z in found:
        try:
            readings.append(_read_int(z.path / "energy_uj"))
        except PermissionError:
            return RaplReading(
                unknown=f"{z.path / 'energy_uj'} is readable by root only (since the "
                "fix of CVE-2020-8694)"
            )
        except (OSError, ValueError) as err:
            return RaplReading(unknown=f"{z.path / 'energy_uj'}: {err}")
    return RaplReading(found, readings, time.monotonic())


def rapl_stop(first: RaplReading) -> dict[str, Any]:
    """This host's joules since rapl_start, or why there is no figure."""
    host = socket.gethostname()
    if first.unknown:
        return {"host": host, "unknown": first.unknown}
    joules = 0.0
    for z, before in zip(first.zones, first.start_uj, strict=True):
        try:
            after = _read_int(z.path / "energy_uj")
        except (OSError, ValueError) as err:
            return {"host": host, "unknown": f"{z.path / 'energy_uj'}: {err}"}
        delta = after - before
        if delta < 0:  # the counter wrapped (at most once: windows are seconds to minutes)
            delta += z.wrap_uj
        if delta < 0:  # went back by more than its range, or its range is unreadable
            return {
                "host": host,
                "unknown": f"{z.path / 'energy_uj'} went back ({before} to {after})",
            }
        joules += delta / 1e6
    return {
        "host": host,
        "joules": joules,
        "seconds": time.monotonic() - first.wall,
        "zones": [f"{z.path.name} ({z.name})" for z in first.zones],
    }


def _reasons(readings: list[dict[str, Any]], key: str = "unknown") -> str:
    return "; ".join(sorted({str(r.get(key)) for r in readings if r.get(key)})) or "no reading"


def merge_rapl(per_rank: list[dict[str, Any]]) -> dict[str, Any]:
    """One reading per host (its first rank's): their sum, or the reasons there is none."""
    hosts: dict[str, dict[str, Any]] = {}
    for r in per_rank:
        hosts.setdefault(str(r.get("host")), r)
    read = [r for r in hosts.values() if isinstance(r.get("joules"), int | float)]
    if len(read) < len(hosts) or not read:
        missing = [r for r in hosts.values() if r not in read]
        return {"unknown": _reasons(missing or list(hosts.values()))}
    return {
        "joules": sum(r["joules"] for r in read),
        "seconds": max(r["seconds"] for r in read),
        "hosts": len(read),
        "zones": sorted({z for r in read for z in r["zones"]}),
        "covers": "the CPU packages and DRAM of every host, whatever else runs on them",
    }


def merge_nvml(per_rank: list[dict[str, Any]]) -> dict[str, Any]:
    """Each GPU once (ranks sharing one count it once): their sum, or why none."""
    gpus: dict[tuple[str, str], dict[str, Any]] = {}
    for g in per_rank:
        gpus.setdefault((str(g.get("host")), str(g.get("uuid") or g.get("gpu"))), g)
    read = [g for g in gpus.values() if isinstance(g.get("energy_j"), int | float)]
    if len(read) < len(gpus) or not read:
        missing = [g for g in gpus.values() if g not in read]
        why = _reasons(missing or list(gpus.values()), "energy_unknown")
        skipped = _reasons(missing or list(gpus.values()), "skipped")
        return {"unknown": why if why != "no reading" else skipped}
    return {
        "joules": sum(g["energy_j"] for g in read),
        "seconds": max(g.get("energy_s") or 0.0 for g in read),
        "gpus": len(read),
        "covers": "the GPUs alone (NVML's total energy counter)",
    }


def merge(
    gpu: list[dict[str, Any]], rapl: list[dict[str, Any]], samples: int, unit: str
) -> dict[str, Any]:
    """The run's energy record: each source's joules over the timed windows (or why
    none), and the samples those windows trained, in the run's unit."""
    return {"samples": samples, "unit": unit, "nvml": merge_nvml(gpu), "rapl": merge_rapl(rapl)}
