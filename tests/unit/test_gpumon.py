"""bench/gpumon.py: skipped with a reason without a GPU; summaries from (fake) NVML samples."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import gpumon  # noqa: E402


def test_cpu_runs_are_skipped_with_a_reason():
    summary = gpumon.start(SimpleNamespace(type="cpu", index=None)).stop()
    assert summary["skipped"] == "no GPU: the run is on the cpu"
    assert gpumon.merge([summary, summary]) == {"skipped": "no GPU: the run is on the cpu"}


class FakeNvml:
    def __init__(self):
        self.readings = iter([(50, 10, 2), (100, 30, 4)])

    def nvmlDeviceGetUtilizationRates(self, handle):
        gpu, mem, _ = self.current = next(self.readings, (100, 30, 4))
        return SimpleNamespace(gpu=gpu, memory=mem)

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(used=self.current[2] * 1024**2, total=16 * 1024**2)


def test_summary_of_samples():
    monitor = gpumon.Monitor(handle="h", nvml=FakeNvml(), name="Fake GPU")
    monitor.sample()
    monitor.sample()
    summary = monitor.summary()
    assert summary["gpu"] == "Fake GPU" and summary["samples"] == 2
    assert summary["util_mean"] == 75 and summary["util_max"] == 100
    assert summary["mem_used_max_mib"] == 4 and summary["mem_total_mib"] == 16


def test_sampling_thread_takes_at_least_one_sample():
    summary = gpumon.Monitor(handle="h", nvml=FakeNvml(), name="g").start().stop()
    assert summary["samples"] >= 1 and summary["errors"] == 0


def test_merge_over_ranks():
    a = {"host": "n1", "samples": 3, "util_mean": 90.0, "mem_used_max_mib": 1000.0}
    b = {"host": "n2", "samples": 3, "util_mean": 70.0, "mem_used_max_mib": 3000.0}
    merged = gpumon.merge([a, b])
    assert merged["util_mean"] == 80.0 and merged["util_min_rank"] == 70.0
    assert merged["mem_used_max_mib"] == 3000.0 and merged["per_rank"] == [a, b]
