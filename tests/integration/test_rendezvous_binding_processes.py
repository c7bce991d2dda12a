"""Where a run's rendezvous listens, from runs made here: a one-node torchrun run meets
at its master port statically, and Gloo under a local run's environment listens on
loopback alone (the command lines and the store: tests/unit/test_rendezvous_binding.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpcbench.core import paths
from hpcbench.launchers import LocalLauncher, Placement, RunSpec, TorchrunLauncher
from hpcbench.launchers.base import free_port
from hpcbench.launchers.specs import TargetSpec
from hpcbench.schedulers import ProcessScheduler
from hpcbench.testbeds.target import Target

pytestmark = pytest.mark.integration


# A worker that says which rendezvous its agent made: the static one serves the store
# at the master port asked for; --standalone's c10d would serve it at a free port.
WORKER = """
import json, os
print("HPCBENCH_RESULT " + json.dumps({"port": os.environ["MASTER_PORT"],
                                       "addr": os.environ["MASTER_ADDR"]}), flush=True)
"""


def test_a_one_node_torchrun_run_meets_at_its_master_port_statically(tmp_path: Path) -> None:
    pytest.importorskip("torch.distributed.run")
    for script in ("leash.py", "bind_rendezvous.py"):
        shutil.copy(paths.BENCH_DIR / script, tmp_path)
    (tmp_path / "worker.py").write_text(WORKER)
    spec = RunSpec(
        script="worker.py",
        args=(),
        python=sys.executable,
        workdir=str(tmp_path),
        placements=(Placement("localhost", 1),),
        master_port=free_port(),
        iface="lo",
    )
    out = ProcessScheduler(TorchrunLauncher()).run(spec, timeout_s=120)
    assert out.ok, out.error()
    assert out.records == [{"port": str(spec.master_port), "addr": "127.0.0.1"}]


# A rank of a local run: a two-rank Gloo group (its store a file, so that only Gloo's
# own sockets are open), then it holds them until the test has looked.
RANK = """
import sys, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=int(sys.argv[2]),
                        world_size=2)
t = torch.ones(1)
dist.all_reduce(t)
print("ready", flush=True)
sys.stdin.read()
"""


def _tcp_sockets(pid: int) -> list[tuple[str, int, str]]:
    """(local address, port, state) of a process's TCP sockets, from /proc."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        link = os.readlink(f"/proc/{pid}/fd/{fd}") if os.path.islink(f"/proc/{pid}/fd/{fd}") else ""
        if link.startswith("socket:["):
            inodes.add(link[len("socket:[") : -1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if fields[9] in inodes:
                address, port = fields[1].split(":")
                found.append((address, int(port, 16), "listen" if fields[3] == "0A" else "open"))
    return found


def test_gloo_under_a_local_runs_environment_listens_on_loopback_only(tmp_path: Path) -> None:
    pytest.importorskip("torch.distributed")
    target = Target.resolve(
        TargetSpec(env="localhost", node_counts=(2,), backend="ddp", launcher="local")
    )
    [command, _] = LocalLauncher().commands(target.spec("train.py", [], 2, 2))
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", RANK, str(tmp_path / "store"), str(rank)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=command.environ(),
        )
        for rank in (0, 1)
    ]
    try:
        for rank in ranks:
            assert rank.stdout is not None and rank.stdout.readline().strip() == "ready"
        sockets = [s for rank in ranks for s in _tcp_sockets(rank.pid)]
        assert any(state == "listen" for _, _, state in sockets), sockets
        # 127.0.0.1 as /proc/net/tcp writes it (little-endian hex); never 0.0.0.0 or ::
        assert {address for address, _, _ in sockets} == {"0100007F"}, sockets
    finally:
        for rank in ranks:
            rank.kill()
            rank.wait(30)
