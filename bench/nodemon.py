"""A node's CPU and network during the timed windows, from /proc and the cgroup.

Each rank reads two snapshots, one as the timed windows start and one as they end;
rank 0 keeps one summary per host. CPU time is counted where the node's CPU is
limited: the nearest cgroup with a quota (a container: cgroup v2 cpu.stat, or v1
cpuacct.usage), set against that quota; without one, the machine's /proc/stat
against the CPUs this process may run on. Bytes are per interface from /proc/net/dev
(per network namespace, so a container sees its own). Runs on the nodes: never
imports hpcbench, and not torch. Without cgroup v2 or /proc, the summary says why.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

CGROUP = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")
PROC_STAT = Path("/proc/stat")
NET_DEV = Path("/proc/net/dev")


def _own_cgroups(proc_cgroup: Path) -> dict[str, str]:
    """Controller -> this process's cgroup path ('' for the cgroup v2 hierarchy)."""
    out: dict[str, str] = {}
    try:
        for line in proc_cgroup.read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                out[c] = path
    except (OSError, ValueError):
        pass
    return out


def _ancestors(base: Path, path: str) -> list[Path]:
    """base/path, its parents, ..., base itself: the cgroups this process is in."""
    parts = [p for p in path.split("/") if p]
    return [base.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _ranges(cpus: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2,5' (the kernel's cpuset notation)."""
    runs: list[list[int]] = []
    for c in sorted(cpus):
        if runs and runs[-1][1] == c - 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def placement(affinity: set[int] | None = None, total: int | None = None) -> str:
    """Which CPUs this process may run on: a CPU set (pinned) or any of the machine's."""
    if affinity is None:
        affinity = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set()
    total = total or os.cpu_count() or len(affinity) or 1
    if affinity and len(affinity) < total:
        return f"pinned to CPU set {_ranges(sorted(affinity))} of {total} CPUs"
    return f"not pinned (any of {total} CPUs)"


def cpu_source(
    root: Path = CGROUP, proc_cgroup: Path = PROC_CGROUP, where: str | None = None
) -> dict[str, Any]:
    """Where this node's CPU time is counted and what limits it: the nearest cgroup with a
    CPU quota (a container's, under cgroup v1 or v2; `period_s` the CFS period it is
    counted over), else the whole machine (`period_s` None); `limit`
    says both the quota and the CPU placement (`where`: placement() unless given). With
    the host's cgroup namespace (Docker's default on cgroup v1) /sys/fs/cgroup is the
    host's tree, so the node's own cgroup is found from /proc/self/cgroup."""
    where = placement() if where is None else where
    own = _own_cgroups(proc_cgroup)
    v2 = root if (root / "cgroup.controllers").exists() else root / "unified"
    if "" in own and (v2 / "cgroup.controllers").exists():
        for d in _ancestors(v2, own[""]):
            quota = (_read(d / "cpu.max") or "max").split()
            if quota[0] != "max":
                return {
                    "usage": (d / "cpu.stat", "usage_usec", 1e-6),
                    "cpus": int(quota[0]) / int(quota[1]),
                    "period_s": int(quota[1]) / 1e6,
                    "limit": f"cgroup quota {quota[0]}/{quota[1]} us, {where}",
                }
    if "cpu" in own:
        cpu_dir = root / "cpu" if (root / "cpu").is_dir() else root / "cpu,cpuacct"
        acct_dir = root / "cpuacct" if (root / "cpuacct").is_dir() else cpu_dir
        for d in _ancestors(cpu_dir, own["cpu"]):
            quota = _read(d / "cpu.cfs_quota_us")
            if quota and quota.lstrip("-").isdigit() and int(quota) > 0:
                rel = d.relative_to(cpu_dir)
                period = int(_read(d / "cpu.cfs_period_us") or 100000)
                return {
                    "usage": (acct_dir / rel / "cpuacct.usage", "", 1e-9),
                    "cpus": int(quota) / period,
                    "period_s": period / 1e6,
                    "limit": f"cgroup quota {quota}/{period} us, {where}",
                }
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0
    total = os.cpu_count() or 1
    return {
        "usage": None,
        "cpus": float(cpus or total),
        "period_s": None,
        "limit": f"no quota, {where}",
    }


def cpu_usage_s(source: dict[str, Any], proc_stat: Path = PROC_STAT) -> float | None:
    """CPU seconds used so far where `source` counts them (the machine: /proc/stat)."""
    if source["usage"] is not None:
        path, key, scale = source["usage"]
        text = _read(path)
        if text is None:
            return None
        if not key:
            return int(text) * scale if text.isdigit() else None
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name == key and value.isdigit():
                return int(value) * scale
        return None
    text = _read(proc_stat)
    if not text or not text.startswith("cpu "):
        return None
    # user nice system idle iowait irq softirq steal: busy is all but idle and iowait.
    fields = [int(x) for x in text.splitlines()[0].split()[1:9]]
    busy = sum(fields) - fields[3] - fields[4]
    return busy / os.sysconf("SC_CLK_TCK") / (os.cpu_count() or 1) * source["cpus"]


def net_bytes(path: Path = NET_DEV) -> dict[str, tuple[int, int]]:
    """Bytes (received, sent) per interface, loopback left out."""
    out: dict[str, tuple[int, int]] = {}
    try:
        lines = path.read_text().splitlines()[2:]
    except OSError:
        return out
    for line in lines:
        name, _, counters = line.partition(":")
        fields = counters.split()
        if name.strip() == "lo" or len(fields) < 9:
            continue
        try:
            out[name.strip()] = (int(fields[0]), int(fields[8]))
        except ValueError:
            continue
    return out


class Snapshot:
    def __init__(self, source: dict[str, Any], net_dev: Path = NET_DEV) -> None:
        self.source = source
        self.wall = time.monotonic()
        self.cpu = cpu_usage_s(source)
        self.net = net_bytes(net_dev)


def start(root: Path = CGROUP, proc_cgroup: Path = PROC_CGROUP) -> Snapshot:
    return Snapshot(cpu_source(root, proc_cgroup))


def stop(first: Snapshot, net_dev: Path = NET_DEV) -> dict[str, Any]:
    """This node's summary between the two snapshots."""
    last = Snapshot(first.source, net_dev)
    wall = max(last.wall - first.wall, 1e-9)
    cpus = first.source["cpus"]
    summary: dict[str, Any] = {
        "host": socket.gethostname(),
        "seconds": wall,
        "cpus": cpus,
        "cpu_limit": first.source["limit"],
    }
    if first.cpu is None or last.cpu is None:
        summary["cpu_skipped"] = "no readable CPU accounting (cgroup or /proc/stat)"
    else:
        summary["cpu_util"] = (last.cpu - first.cpu) / (wall * cpus)
    rates = {}
    for name, (rx, tx) in last.net.items():
        if name in first.net:
            rates[name] = {
                "rx_bytes_per_s": (rx - first.net[name][0]) / wall,
                "tx_bytes_per_s": (tx - first.net[name][1]) / wall,
            }
    summary["net"] = rates
    return summary


def merge(per_rank: list[dict[str, Any]]) -> dict[str, Any]:
    """One summary per host (the first rank's on it), in rank order."""
    hosts: dict[str, dict[str, Any]] = {}
    for s in per_rank:
        hosts.setdefault(s["host"], s)
    return {"per_host": list(hosts.values())}
