"""Windows sized by time (--min-window-s): the workload grows B to fill them, every rank
the same, and the harness counts the steps run while keying the run by the steps asked."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
torch = pytest.importorskip("torch")

import train  # noqa: E402

from hpcbench.launchers.specs import WorkloadSpec  # noqa: E402
from hpcbench.measure import sweep  # noqa: E402
from hpcbench.schedulers.base import Outcome  # noqa: E402


class _Comm:
    """Two ranks: this one and a slower one whose per-step time gather() reports."""

    def __init__(self, other_rank_step_s: float) -> None:
        self.other = other_rank_step_s

    def barrier(self) -> None:
        pass

    def gather(self, obj: float) -> list[float]:
        return [obj, self.other]


def _step_taking(seconds: list[float]):
    clock = {"now": 0.0}
    times = iter(seconds)

    def step() -> None:
        clock["now"] += next(times)

    return step, clock


def test_steps_grow_to_fill_the_window_by_the_slowest_ranks_median_step(monkeypatch) -> None:
    cpu = torch.device("cpu")
    step, clock = _step_taking([0.5, 0.125, 0.125])  # a slow first step, then 1/8 s
    monkeypatch.setattr(train.time, "perf_counter", lambda: clock["now"])
    assert train.window_steps(5, 2.0, step, cpu, _Comm(0.0625)) == 16  # 2 s / median 1/8 s
    step, clock = _step_taking([0.125] * 3)
    monkeypatch.setattr(train.time, "perf_counter", lambda: clock["now"])
    assert train.window_steps(5, 2.0, step, cpu, _Comm(0.5)) == 5  # slowest rank: 4 < 5


def test_without_min_window_the_steps_asked_are_run() -> None:
    def never() -> None:
        raise AssertionError("no sizing steps without --min-window-s")

    assert train.window_steps(7, 0.0, never, torch.device("cpu"), _Comm(1.0)) == 7


def test_harness_passes_min_window_and_counts_the_steps_run() -> None:
    spec = WorkloadSpec(model="resnet18", image_size=32, steps=3, min_window_s=2.5)
    args = sweep.workload_args(spec, "ddp", 8)
    assert args[args.index("--min-window-s") + 1] == "2.5"
    assert "--min-window-s" not in sweep.workload_args(WorkloadSpec("resnet18", 32), "ddp", 8)
    record = {"steps": 3, "workers": 1, "fingerprint": {}}
    result = {"workers": 1, "steps": 12, "window_times": [1.0], "fingerprint": {}}
    done = sweep.complete(record, Outcome([0], [result], [], 0.0, 1.0))
    assert done["steps"] == 12
