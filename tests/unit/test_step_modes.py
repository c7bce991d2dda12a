"""The step modes (bench/steps.py) on the CPU: what can run here runs for real (eager,
torch.compile, NHWC under Horovod, the refusals); CUDA graphs run in `make bench-gpu`."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpcbench.launchers import torchrun
from hpcbench.launchers.base import free_port

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
torch = pytest.importorskip("torch")

import runtime  # noqa: E402
import steps  # noqa: E402

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


def test_the_capture_follows_where_the_all_reduce_can_run() -> None:
    assert steps.capture_kind("eager", True, "ddp", "nccl") is None
    assert steps.capture_kind("compile", True, "ddp", "nccl") is None
    # A single worker has no all-reduce, DDP over NCCL's is captured with the backward.
    assert steps.capture_kind("graph", False, "ddp", "nccl") == "whole"
    assert steps.capture_kind("graph", False, "horovod", "horovod") == "whole"
    assert steps.capture_kind("graph", True, "ddp", "nccl") == "whole"
    # Gloo works in host memory, Horovod in its own thread: outside the graph.
    assert steps.capture_kind("graph", True, "ddp", "gloo") == "partial"
    assert steps.capture_kind("graph", True, "horovod", "horovod+nccl") == "partial"


@pytest.mark.filterwarnings("ignore:CUDA is not available")
def test_graphs_get_autocast_without_its_weight_cache() -> None:
    assert steps.autocast_factory(False, "whole")().__class__.__name__ == "nullcontext"
    for capture, cached in ((None, True), ("whole", False), ("partial", False)):
        cast = steps.autocast_factory(True, capture)()
        assert isinstance(cast, torch.autocast) and cast._cache_enabled is cached


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


def test_the_graph_timeline_keeps_eagers_order_within_the_graphs_backward() -> None:
    marks = [[0.5, 10], [0.6, 20], [0.9, 30]]
    out = steps.stretch(marks, forward_end=0.4, forward_s=0.01, backward_s=0.02)
    assert [b for _, b in out] == [10, 20, 30]
    assert out[0][0] == pytest.approx(0.01 + 0.1 / 0.5 * 0.02)
    assert out[-1][0] == pytest.approx(0.03)
    assert steps.stretch([], 0.4, 0.01, 0.02) == []


@given(
    st.lists(st.floats(0, 10, allow_nan=False), min_size=1, max_size=30),
    st.floats(0, 5, allow_nan=False),
    st.floats(0, 1, allow_nan=False),
    st.floats(1e-6, 1, allow_nan=False),
)
def test_a_stretched_timeline_lies_within_the_graphs_backward(times, forward_end, fwd, bwd):
    marks = [[t, i] for i, t in enumerate(sorted(times))]
    out = steps.stretch(marks, forward_end, fwd, bwd)
    moments = [t for t, _ in out]
    assert moments == sorted(moments)
    assert all(fwd - 1e-12 <= t <= fwd + bwd * (1 + 1e-9) for t in moments)
    assert [b for _, b in out] == [b for _, b in marks]


def _nhwc(shape=(4, 3, 5, 5), dtype=None) -> torch.Tensor:
    t = torch.randn(*shape) if dtype is None else torch.randn(*shape).to(dtype)
    return t.contiguous(memory_format=torch.channels_last)


def test_nhwc_reaches_horovod_as_a_contiguous_view_of_its_own_memory() -> None:
    t = _nhwc()
    assert not t.is_contiguous()  # what Horovod's _check_function refuses
    view = steps.as_contiguous_view(t)
    assert view.is_contiguous() and view.data_ptr() == t.data_ptr()
    before = t.clone()
    view.mul_(2)  # an in-place all-reduce on the view sums the tensor itself
    assert torch.equal(t, before * 2)
    plain = torch.randn(4, 3, 5, 5)
    assert steps.as_contiguous_view(plain) is plain
    odd = torch.randn(3, 4).t()  # neither layout: left for Horovod to refuse, as before
    assert steps.as_contiguous_view(odd) is odd
    names = dict(steps.contiguous_views({"b": t, "a": plain}))
    assert list(names) == ["a", "b"] and names["b"].is_contiguous()


def test_the_compressor_gives_back_the_gradient_in_its_own_layout() -> None:
    compression = pytest.importorskip("horovod.torch.compression").Compression
    for inner, tolerance in ((compression.none, 0.0), (compression.fp16, 1e-2)):
        grad = _nhwc()
        safe = steps.ChannelsLastSafe(inner)
        sent, ctx = safe.compress(grad)
        assert sent.is_contiguous()
        back = safe.decompress(sent, ctx)
        assert back.shape == grad.shape and back.dtype == grad.dtype
        assert back.is_contiguous(memory_format=torch.channels_last)
        assert torch.allclose(back, grad, atol=tolerance, rtol=tolerance)
        flat = torch.randn(7)
        sent, ctx = safe.compress(flat)
        assert torch.allclose(safe.decompress(sent, ctx), flat, atol=tolerance)


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
