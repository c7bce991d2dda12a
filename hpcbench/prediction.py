"""Predicted scaling efficiency from the ring all-reduce (alpha-beta) model.

    T_ar = 2(N-1) a + 2(N-1)/N * S / B

S: bytes all-reduced per step (the model's gradients), N: workers, B: measured
bus bandwidth (nccl-tests definition, busbw = algbw * 2(N-1)/N), a: per-message
latency. With single-worker step time T1 the step time at N workers lies
between max(T1, T_ar) (communication fully hidden behind backward) and
T1 + T_ar (no overlap), so E(N) = T1 / T_N lies in [T1/(T1+T_ar), T1/max(T1,T_ar)].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def ring_factor(workers: int) -> float:
    """Bus bandwidth over algorithm bandwidth for a ring all-reduce: 2(N-1)/N."""
    return 2 * (workers - 1) / workers


def busbw(size_bytes: float, seconds: float, workers: int) -> float:
    """nccl-tests' bus bandwidth in bytes/s: algbw * 2(N-1)/N with algbw = S/t."""
    return size_bytes / seconds * ring_factor(workers)


@dataclass(frozen=True)
class LinkModel:
    """Alpha-beta parameters measured by the all-reduce probe on some workers."""

    workers: int
    latency_s: float  # a: per-message latency
    busbw: float  # B: bytes/s, at the largest probed size

    def allreduce_time(self, size_bytes: float) -> float:
        n = self.workers
        if n <= 1:
            return 0.0
        return 2 * (n - 1) * self.latency_s + ring_factor(n) * size_bytes / self.busbw


def link_model(probe: dict[str, Any]) -> LinkModel | None:
    """Fit a and B from a probe record's size sweep.

    B is the bus bandwidth of the largest message (as nccl-tests quotes peak
    busbw); a comes from the smallest message, whose time is almost all
    latency: t = 2(N-1) a + (tiny bandwidth term), so a = t / 2(N-1).
    """
    points = sorted(probe.get("results") or [], key=lambda p: p["bytes"])
    workers = int(probe.get("workers") or 0)
    if workers < 2 or not points:
        return None
    smallest, largest = points[0], points[-1]
    if largest["busbw"] <= 0:
        return None
    bandwidth_part = ring_factor(workers) * smallest["bytes"] / largest["busbw"]
    latency = max(0.0, smallest["time_s"] - bandwidth_part) / (2 * (workers - 1))
    return LinkModel(workers=workers, latency_s=latency, busbw=float(largest["busbw"]))


def efficiency_band(step_time_1: float, allreduce_s: float) -> tuple[float, float]:
    """(low, high) predicted efficiency: no overlap, full overlap."""
    if step_time_1 <= 0:
        raise ValueError("single-worker step time must be positive")
    low = step_time_1 / (step_time_1 + allreduce_s)
    high = step_time_1 / max(step_time_1, allreduce_s)
    return low, high


def predict(step_time_1: float, grad_bytes: float, model: LinkModel) -> dict[str, float]:
    t_ar = model.allreduce_time(grad_bytes)
    low, high = efficiency_band(step_time_1, t_ar)
    return {
        "allreduce_s": t_ar,
        "efficiency_low": low,
        "efficiency_high": high,
        "busbw": model.busbw,
        "latency_s": model.latency_s,
    }
