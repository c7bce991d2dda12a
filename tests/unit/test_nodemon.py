"""bench/nodemon.py: a node's CPU use against its limit, and bytes per interface, read
from fake /proc and cgroup trees laid out as cgroup v1 (Docker, host namespace) and v2."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import nodemon  # noqa: E402

from hpcbench.measure import analysis  # noqa: E402

NET = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets
    lo: 999 1 0 0 0 0 0 0 999 1 0 0 0 0 0 0
  eth0: {rx} 10 0 0 0 0 0 0 {tx} 10 0 0 0 0 0 0
"""


def _v1(tmp: Path, quota: int) -> tuple[Path, Path]:
    root, own = tmp / "cgroup", "/docker/abc"
    (root / "cpu" / "docker" / "abc").mkdir(parents=True)
    (root / "cpuacct" / "docker" / "abc").mkdir(parents=True)
    (root / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")  # the host: no quota
    (root / "cpu" / "docker" / "abc" / "cpu.cfs_quota_us").write_text(f"{quota}\n")
    (root / "cpu" / "docker" / "abc" / "cpu.cfs_period_us").write_text("100000\n")
    (root / "cpuacct" / "docker" / "abc" / "cpuacct.usage").write_text("5000000000\n")
    proc = tmp / "cgroup.proc"
    proc.write_text(f"4:cpu:{own}/init.scope\n3:cpuacct:{own}\n0::/\n")
    return root, proc


def test_v1_container_quota_found_from_its_own_cgroup(tmp_path) -> None:
    root, proc = _v1(tmp_path, 50000)
    source = nodemon.cpu_source(root, proc, where="not pinned (any of 2 CPUs)")
    assert source["cpus"] == 0.5 and source["period_s"] == pytest.approx(0.1)
    assert source["limit"] == "cgroup quota 50000/100000 us, not pinned (any of 2 CPUs)"
    assert nodemon.cpu_usage_s(source) == 5.0


def test_v2_quota_and_usage(tmp_path) -> None:
    root = tmp_path / "cgroup"
    (root / "node").mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu\n")
    (root / "node" / "cgroup.controllers").write_text("cpu\n")
    (root / "node" / "cpu.max").write_text("200000 50000\n")
    (root / "node" / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 1\n")
    proc = tmp_path / "cgroup.proc"
    proc.write_text("0::/node\n")
    source = nodemon.cpu_source(root, proc)
    assert source["cpus"] == 4.0 and source["period_s"] == pytest.approx(0.05)
    assert nodemon.cpu_usage_s(source) == 2.5


def test_no_quota_falls_back_to_the_machine(tmp_path) -> None:
    root, proc = _v1(tmp_path, -1)
    source = nodemon.cpu_source(root, proc)
    assert source["usage"] is None and source["period_s"] is None
    assert source["limit"].startswith("no quota, ")
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1 1 1 1\n")
    assert nodemon.cpu_usage_s(source, stat) is not None


def test_placement_says_whether_and_where_a_node_is_pinned() -> None:
    assert nodemon.placement({3}, 4) == "pinned to CPU set 3 of 4 CPUs"
    assert nodemon.placement({0, 1, 2, 5, 7, 8}, 16) == "pinned to CPU set 0-2,5,7-8 of 16 CPUs"
    assert nodemon.placement({0, 1}, 2) == "not pinned (any of 2 CPUs)"


def test_a_pinned_node_says_so_beside_its_quota(tmp_path) -> None:
    root, proc = _v1(tmp_path, 100000)
    source = nodemon.cpu_source(root, proc, where=nodemon.placement({2, 3}, 4))
    assert source["limit"] == "cgroup quota 100000/100000 us, pinned to CPU set 2-3 of 4 CPUs"


def test_bytes_per_interface_leave_loopback_out(tmp_path) -> None:
    dev = tmp_path / "dev"
    dev.write_text(NET.format(rx=1000, tx=2000))
    assert nodemon.net_bytes(dev) == {"eth0": (1000, 2000)}
    first = nodemon.Snapshot({"usage": None, "cpus": 1.0, "limit": "none"}, dev)
    dev.write_text(NET.format(rx=1000 + 10**6, tx=2000 + 3 * 10**6))
    first.wall -= 1.0  # a second ago
    summary = nodemon.stop(first, dev)
    rx, tx = summary["net"]["eth0"].values()
    assert 0.9e6 < rx < 1.1e6 and 2.7e6 < tx < 3.3e6


def test_report_figures_from_node_use_and_rank_windows() -> None:
    run = {
        "kind": "run",
        "status": "ok",
        "env": "e",
        "model": "m",
        "backend": "ddp",
        "batch": 8,
        "image_size": 32,
        "data": "synthetic",
        "gpus_per_node": 1,
        "nodes": 2,
        "workers": 2,
        "repeat": 0,
        "steps": 10,
        "window_times": [2.0, 2.0],
        "rank_window_times": [[1.0, 2.0], [2.0, 1.0], [1.0, 1.0]],
        "fingerprint": {"hosts": ["a", "b", "c"]},
        "nodes_use": {
            "per_host": [
                {
                    "host": "a",
                    "cpu_util": 0.5,
                    "cpu_limit": "cgroup quota 50000/100000 us",
                    "net": {"eth0": {"rx_bytes_per_s": 10.0, "tx_bytes_per_s": 30.0}},
                },
                {
                    "host": "b",
                    "cpu_util": 0.7,
                    "net": {"eth0": {"rx_bytes_per_s": 50.0, "tx_bytes_per_s": 1.0}},
                },
            ]
        },
    }
    [s] = analysis.summarise([run])
    assert s.straggler_lead == 1.0  # each window: slowest 2 s, median 1 s
    assert s.straggler in ("a", "b")
    assert abs(s.cpu_util - 0.6) < 1e-9 and s.net_bytes_per_s == 40.0
    assert s.cpu_limit == "cgroup quota 50000/100000 us"


def test_auto_threads_are_whole_cores_of_the_quota_per_worker() -> None:
    import runtime  # bench/ is on sys.path (above); imports torch

    # Half a core: one thread, not the machine's two (the demo's nodes had 2).
    assert runtime.auto_threads(0.5, 1) == 1
    assert runtime.auto_threads(1.5, 1) == 1
    assert runtime.auto_threads(4.0, 2) == 2
    assert runtime.auto_threads(2.0, 4) == 1
    assert 0 < runtime.usable_cores() <= (os.cpu_count() or 1)
