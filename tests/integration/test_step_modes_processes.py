"""The step modes (bench/steps.py) run for real on the CPU: eager, torch.compile, NHWC
under Horovod and the refusals of CUDA graphs, through bench/train.py; CUDA graphs run
in `make bench-gpu` (the modes in one process: tests/unit/test_step_modes.py)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpcbench.launchers import torchrun
from hpcbench.launchers.base import free_port

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
pytest.importorskip("torch")

import runtime  # noqa: E402

TRAIN = str(REPO / "bench" / "train.py")


TINY = shlex.split(
    "--model resnet18 --image-size 32 --batch 2"
    " --warmup 1 --windows 2 --steps 2 --threads 1 --device cpu"
)


# aot_eager: forward and backward traced and run as torch.compile does, without the
# minutes TorchInductor's code generation takes on two cores (--compile-backend).
QUICK_COMPILE = ["--compile-backend", "aot_eager"]


def _one_rank() -> dict[str, str]:
    return {
        "RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_RANK": "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
    }


def _run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        env={**os.environ, **(env or {})},
    )


def _record(argv: list[str], env: dict[str, str] | None = None) -> dict:
    proc = _run(argv, env)
    lines = [ln for ln in proc.stdout.splitlines() if runtime.RESULT_MARKER in ln]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1].split(runtime.RESULT_MARKER, 1)[1])


def test_graph_mode_on_the_cpu_is_one_line_and_status_2() -> None:
    proc = _run([sys.executable, TRAIN, *TINY, "--step", "graph"], _one_rank())
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [
        "train.py: --step graph needs a CUDA device (CUDA graphs); on the CPU use "
        "--step eager or --step compile"
    ]


def test_the_harness_refuses_graph_mode_on_the_cpu_before_anything_runs(tmp_path) -> None:
    out = tmp_path / "out"
    proc = _run(
        [
            sys.executable,
            "-m",
            "hpcbench",
            "scale",
            "--env",
            "localhost",
            "--nodes",
            "1",
            "--device",
            "cpu",
            "--step",
            "graph",
            "--out",
            str(out),
        ]
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "hpcbench: error: --step graph needs CUDA (CUDA graphs): drop --device cpu, or use "
        "--step eager or compile"
    ]
    assert not out.exists()


@pytest.mark.skipif(
    not shutil.which("horovodrun", path=str(Path(sys.executable).parent)),
    reason="horovodrun is not installed in this venv",
)
@pytest.mark.parametrize("compress", [[], ["--fp16-allreduce"]])
def test_horovod_trains_nhwc_on_two_ranks(compress) -> None:
    # Before steps.ChannelsLastSafe, the first broadcast_parameters failed with "Tensor is
    # required to be contiguous" (seen on an H100), so Horovod trained NCHW only.
    horovodrun = str(Path(sys.executable).parent / "horovodrun")
    rec = _record(
        [
            horovodrun,
            "-np",
            "2",
            "-H",
            "localhost:2",
            "--gloo",
            sys.executable,
            TRAIN,
            *TINY,
            "--backend",
            "horovod",
            "--channels-last",
            "on",
            *compress,
        ]
    )
    assert rec["channels_last"] is True and rec["workers"] == 2
    # Each rank trains on its own batch: equal weights mean the gradients were summed.
    assert rec["weights_in_sync"] is True


def test_the_compiled_step_trains_what_the_eager_step_trains() -> None:
    eager = _record([sys.executable, TRAIN, *TINY], _one_rank())
    compiled = _record(
        [sys.executable, TRAIN, *TINY, "--step", "compile", *QUICK_COMPILE], _one_rank()
    )
    assert (eager["step"], compiled["step"]) == ("eager", "compile")
    assert compiled["compile_backend"] == "aot_eager" and eager["compile_backend"] is None
    assert eager["graph_capture"] is None and compiled["graph_capture"] is None
    # The same steps on the same batch from the same weights: the same function trained.
    assert compiled["loss"] == pytest.approx(eager["loss"], rel=1e-3)
    assert compiled["params"] == eager["params"]
    # A compiled backward hands over every gradient as it returns: all of them at once.
    assert sum(b for _, b in compiled["grad_timeline"]) == compiled["grad_bytes"]


def test_ddp_compiled_around_the_wrapper_keeps_the_ranks_in_step() -> None:
    rec = _record(
        [*torchrun.here(2), TRAIN, *TINY, "--backend", "ddp", "--step", "compile", *QUICK_COMPILE],
        {},
    )
    assert rec["step"] == "compile" and rec["workers"] == 2 and rec["weights_in_sync"] is True
