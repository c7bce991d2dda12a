"""The real probe (bench/allreduce.py on two processes over loopback) stops once its
budget is spent and exits cleanly (the budget's arithmetic and options:
tests/unit/test_probe_budget.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcbench.launchers.base import free_port
from hpcbench.measure import probe
from tests.unit.test_probe_budget import _own_state  # noqa: F401  (autouse)

pytestmark = pytest.mark.integration


REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------ the real probe, here
def test_the_real_probe_stops_when_its_budget_is_spent_and_exits_cleanly(tmp_path):
    """bench/allreduce.py on two processes over loopback (Gloo), a budget of 1 s: it
    stops after its first size (the imports alone take longer), every rank exits 0 and
    within the budget plus the harness's grace, and the record says it stopped."""
    pytest.importorskip("torch")
    port, out = free_port(), tmp_path / "probe.json"
    script = [sys.executable, str(REPO / "bench" / "allreduce.py"), "--backend", "ddp"]
    script += ["--device", "cpu", "--max-bytes", "64M", "--budget-s", "1", "--cpu-work-s", "0"]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MASTER_", "RANK"))}
    env = {**base, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "2"}
    env |= {"LOCAL_WORLD_SIZE": "2", "GLOO_SOCKET_IFNAME": "lo", "PYTHONUNBUFFERED": "1"}
    bound = 1 + probe.GRACE_S
    started = time.monotonic()
    ranks = [
        subprocess.Popen(
            [*script, *(["--out", str(out)] if rank == 0 else [])],
            env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in (0, 1)
    ]
    try:
        outputs = [p.communicate(timeout=bound)[0] for p in ranks]
    finally:
        for p in ranks:
            p.kill()
    took = time.monotonic() - started
    assert [p.returncode for p in ranks] == [0, 0], outputs
    assert not any("terminate called" in o for o in outputs), outputs
    assert took < bound
    record = json.loads(out.read_text())
    assert record["stopped_early"] is True and record["budget_s"] == 1
    assert [r["bytes"] for r in record["results"]] == [4096]
    said = [line for line in outputs[0].splitlines() if "probe budget" in line]
    # The all-reduce's sweep runs first; FSDP's collectives get what it leaves: nothing.
    assert said == [
        "probe budget of 1 s: stopped after 4096 B, 1 of 8 sizes (up to 67108864 B asked); "
        "the next would not fit",
        "probe budget of 1 s: all_gather not probed, 0 of 8 sizes: the budget was spent",
        "probe budget of 1 s: reduce_scatter not probed, 0 of 8 sizes: the budget was spent",
    ]
    assert record["all_gather"] == [] and record["reduce_scatter"] == []
