"""A layout that cannot run, refused by the workload itself: bench/train.py, run on this
machine, says why in one line and exits 2 (the layout in one process and the harness's
refusal: tests/unit/test_layout.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpcbench.launchers.base import free_port

pytestmark = pytest.mark.integration
pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]


def test_a_tp_group_larger_than_a_nodes_workers_is_one_line_and_status_2():
    env = {
        **os.environ,
        "RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
    }
    argv = [sys.executable, str(REPO / "bench" / "train.py"), "--model", "gpt-tiny"]
    argv += ["--parallel", "fsdp2", "--tp", "2", "--device", "cpu", "--seq-len", "32"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [
        "train.py: --tp 2: a TP group is 2 workers of one node, and this run has 1 per node: "
        "use a --tp that divides 1"
    ]
