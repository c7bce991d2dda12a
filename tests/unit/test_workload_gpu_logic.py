"""The GPU path's logic, on the CPU: what the H100 run (evaluation/gpu_steps.py) found
and what its checks decide. The GPU itself is exercised by `make bench-gpu`."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "evaluation"))
torch = pytest.importorskip("torch")

import gpu_steps  # noqa: E402
import runtime  # noqa: E402
import train  # noqa: E402


def test_nhwc_with_amp_on_cuda_under_both_backends() -> None:
    # Horovod now takes NHWC as the contiguous views it is (steps.ChannelsLastSafe), so auto
    # gives both backends NHWC with AMP on CUDA, and neither without CUDA or AMP.
    for backend in ("horovod", "ddp"):
        args = train.parse_args(["--backend", backend, "--amp", "on"])
        assert train.precision(args, cuda=True) == (True, True)
        assert train.precision(args, cuda=False) == (True, False)
    assert train.precision(train.parse_args(["--amp", "off"]), cuda=True) == (False, False)
    assert train.precision(train.parse_args([]), cuda=False) == (False, False)
    on = train.parse_args(["--backend", "horovod", "--channels-last", "on"])
    assert train.precision(on, cuda=False) == (False, True)


def test_dist_backend_rules() -> None:
    cpu, gpu = torch.device("cpu"), torch.device("cuda", 0)
    assert runtime.dist_backend_for(cpu) == "gloo"
    assert runtime.dist_backend_for(gpu) == "nccl"
    # Two ranks sharing one GPU: NCCL refuses that, Gloo moves CUDA tensors through the host.
    assert runtime.dist_backend_for(gpu, "gloo") == "gloo"
    with pytest.raises(SystemExit, match="needs a CUDA device"):
        runtime.dist_backend_for(cpu, "nccl")


def test_slowest_rank_per_window() -> None:
    assert runtime.slowest([[1.0, 3.0], [2.0, 1.0]]) == [2.0, 3.0]
    assert runtime.slowest([[1.0], None]) is None  # a CPU rank has no device times
    assert runtime.DeviceWindows(torch.device("cpu")).seconds() is None


def test_timing_check_flags_a_disagreement() -> None:
    assert gpu_steps.timing_faults([0.10, 0.20], [0.0999, 0.1995]) == []
    assert "differ by 10.0%" in gpu_steps.timing_faults([0.10, 0.20], [0.09, 0.20])[0]
    assert gpu_steps.timing_faults([0.1], None)


def test_a_gpu_record_without_its_gpu_fields_fails_the_check() -> None:
    record = {
        "fingerprint": {"gpu": "H100", "cuda": "13.0", "nccl": "2.28.9", "driver": ""},
        "gpu": {"skipped": "NVML unavailable"},
        "loss": float("nan"),
        "weights_in_sync": False,
        "window_times": [0.1],
        "device_window_times": [0.1],
    }
    faults = " | ".join(gpu_steps.workload_faults(record))
    for what in ("no driver", "NVML unavailable", "loss is nan", "weights differ"):
        assert what in faults


def test_the_workload_reads_back_every_value_the_harness_passes() -> None:
    # Every field off its default: a field the harness keeps but bench/workload_options.py
    # does not declare (or declares under another name) fails here.
    from hpcbench.launchers.specs import WorkloadSpec
    from hpcbench.measure import sweep

    spec = WorkloadSpec(
        model="resnet34",
        image_size=48,
        data="/tmp/imagenet",
        data_workers=3,
        warmup=2,
        windows=4,
        steps=7,
        min_window_s=1.5,
        device="cpu",
        threads=2,
        amp="off",
        step="compile",
        decode="workers",
        compile_backend="aot_eager",
        fp16_allreduce=True,
        fusion_threshold_mb=8.0,
    )
    # Each backend's message size under its own backend (the other's is refused).
    ddp = dataclasses.replace(spec, fusion_threshold_mb=None, bucket_cap_mb=5.0)
    for one, backend in ((spec, "horovod"), (ddp, "ddp")):
        args = train.parse_args(sweep.workload_args(one, backend, 16))
        for field in dataclasses.fields(one):
            assert getattr(args, field.name) == getattr(one, field.name), field.name
        assert (args.batch, args.backend) == (16, backend)
