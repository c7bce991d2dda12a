"""The GPU path's logic, run on the CPU through bench/train.py: wrap_on at world size one
under DDP and Horovod, the single worker's gradient timeline, and the record's fields
as the harness keeps them. The GPU itself is exercised by `make bench-gpu` (the logic
in one process: tests/unit/test_workload_gpu_logic.py)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpcbench.launchers.base import free_port

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
pytest.importorskip("torch")

import runtime  # noqa: E402
import workload_record  # noqa: E402

TINY = shlex.split(
    "--model resnet18 --image-size 32 --batch 2"
    " --warmup 1 --windows 2 --steps 1 --threads 1 --device cpu"
)


def _record(argv: list[str], env: dict[str, str] | None = None) -> dict:
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env={**os.environ, **(env or {})},
    )
    lines = [ln for ln in proc.stdout.splitlines() if runtime.RESULT_MARKER in ln]
    assert proc.returncode == 0 and lines, proc.stderr[-2000:]
    return json.loads(lines[-1].split(runtime.RESULT_MARKER, 1)[1])


def _one_worker(*options: str) -> dict:
    """train.py's record from one worker under torch.distributed's variables."""
    env = {
        "RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_RANK": "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
    }
    return _record([sys.executable, str(REPO / "bench" / "train.py"), *options], env)


def test_wrap_on_runs_ddp_at_world_size_one() -> None:
    plain = _one_worker(*TINY)
    wrapped = _one_worker(*TINY, "--wrap", "on")
    assert (plain["wrapped"], wrapped["wrapped"]) == (False, True)
    assert wrapped["dist_backend"] == "gloo" and wrapped["device_window_times"] is None


@pytest.mark.skipif(
    not shutil.which("horovodrun", path=str(Path(sys.executable).parent)),
    reason="horovodrun is not installed in this venv",
)
def test_wrap_on_runs_horovods_optimizer_at_world_size_one() -> None:
    horovodrun = str(Path(sys.executable).parent / "horovodrun")
    rec = _record(
        [
            horovodrun,
            "-np",
            "1",
            "-H",
            "localhost:1",
            "--gloo",
            sys.executable,
            str(REPO / "bench" / "train.py"),
            *TINY,
            "--backend",
            "horovod",
            "--wrap",
            "on",
            "--amp",
            "off",
        ]
    )
    assert rec["wrapped"] is True and rec["weights_in_sync"] is True


def test_the_single_worker_records_when_each_gradient_is_ready() -> None:
    rec = _one_worker(*TINY)
    timeline = rec["grad_timeline"]
    assert sum(b for _, b in timeline) == rec["grad_bytes"]
    offsets = [t for t, _ in timeline]
    assert offsets == sorted(offsets) and offsets[0] > 0
    # Backward runs from the output: the classifier's gradients come first.
    assert timeline[0][1] in (4000, 2048000)  # resnet18's fc bias (1000 x 4 B) or weight


TINY_LM = shlex.split(
    "--model gpt-tiny --seq-len 32 --batch 2 --warmup 1 --windows 2 --steps 1 --threads 1"
    " --device cpu"
)


@pytest.mark.parametrize(
    "options, own",
    [(TINY, workload_record.IMAGES), (TINY_LM, workload_record.TOKENS)],
    ids=["cnn", "transformer"],
)
def test_the_record_holds_the_declared_fields_and_the_harness_keeps_them(
    options: list[str], own: tuple[str, ...]
) -> None:
    from hpcbench.measure import sweep
    from hpcbench.schedulers import Outcome

    groups = (
        workload_record.MEASURED,
        workload_record.BETWEEN_NODES,
        workload_record.MODEL,
        workload_record.IMAGES,
        workload_record.TOKENS,
    )
    names = [name for group in groups for name in group]
    assert len(names) == len(set(names)) and workload_record.NOT_KEPT.issubset(names)
    record = _one_worker(*options)
    # Both ways: every field written is declared, every field declared is written (one
    # worker: no fabric between nodes).
    assert set(record) == {*workload_record.MEASURED, *workload_record.MODEL, *own}
    run = sweep.complete(
        {"workers": 1, "steps": 1, "fingerprint": {}},
        Outcome([0], [record], [], launched_at=0.0, duration_s=1.0),
    )
    kept = set(record) - workload_record.NOT_KEPT
    assert run["status"] == "ok" and {k: run[k] for k in kept} == {k: record[k] for k in kept}
