"""Energy per sample (joules per image, or per token), each figure with its source.

A run's record carries what the workload read over its timed windows
(bench/energy.py): NVML's energy counter of every GPU, RAPL's packages and DRAM of
every host, each with its joules or the reason it has none, and the samples the
windows trained. A Slurm run's record adds what the cluster's accounting gives for
the whole job (`slurm_energy`: sacct's ConsumedEnergyRaw and ElapsedRaw, read by the
Slurm scheduler, hpcbench.schedulers.slurm.sacct_energy).

Which figure a run gets, in order:
    GPU runs: NVML (the GPUs alone); CPU runs: RAPL (the CPU packages and DRAM);
    then Slurm's ConsumedEnergy, prorated to the timed windows by their share of the
    job's elapsed time (the job's mean power, set-up included, is assumed over them);
    else "unknown: <the reasons>". Nothing is estimated from a power rating.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from typing import Any

# A figure's unit: per image or per token, as the run's `unit` (images, tokens) says.
UNITS = {"images": "image", "tokens": "token"}


def _number(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(value) and value >= 0 else None


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _unit(run: dict[str, Any]) -> str:
    return UNITS.get(str(run.get("unit") or "images"), "sample")


def of_run(run: dict[str, Any]) -> tuple[float | None, str]:
    """(joules per sample, source) of one ok run; (None, 'unknown: why') without one."""
    energy = _mapping(run.get("energy"))
    if not energy and not isinstance(run.get("slurm_energy"), dict):
        return None, "unknown: the run recorded no energy reading"
    samples = _number(energy.get("samples"))
    source = "nvml" if run.get("device") == "cuda" else "rapl"
    reading = _mapping(energy.get(source))
    joules = _number(reading.get("joules"))
    if joules is not None and samples:
        if source == "nvml":
            gpus = reading.get("gpus")
            return joules / samples, f"NVML energy counter of {gpus} GPU(s), the GPUs alone"
        hosts = reading.get("hosts")
        return joules / samples, (
            f"RAPL of {hosts} host(s), CPU packages and DRAM (whatever else runs on them)"
        )
    reasons = [f"{source.upper()}: {reading.get('unknown') or 'not recorded'}"]
    slurm = run.get("slurm_energy") if isinstance(run.get("slurm_energy"), dict) else None
    if slurm is not None:
        joules, elapsed = _number(slurm.get("joules")), _number(slurm.get("seconds"))
        windows = run.get("window_times") or []
        timed = sum(t for t in windows if _number(t) is not None)
        if joules and elapsed and timed and samples:
            share = min(1.0, timed / elapsed)
            return joules * share / samples, (
                "Slurm ConsumedEnergy of the job, prorated to the timed windows by time "
                "(true for exclusive nodes only)"
            )
        reasons.append(f"Slurm: {slurm.get('unknown') or 'no usable ConsumedEnergy'}")
    if not samples:
        reasons.append("no samples recorded")
    return None, "unknown: " + "; ".join(reasons)


def summary(runs: Iterable[dict[str, Any]]) -> tuple[float | None, str | None, str | None]:
    """(mean joules per sample, its source, its unit) over a configuration's ok runs;
    where no run has a figure, (None, 'unknown: ...', unit)."""
    runs = list(runs)
    if not runs:
        return None, None, None
    figures = [of_run(r) for r in runs]
    known = [(value, source) for value, source in figures if value is not None]
    unit = _unit(runs[0])
    if not known:
        return None, "; ".join(sorted({s for _, s in figures})), unit
    sources = sorted({source for _, source in known})
    note = f" ({len(known)} of {len(runs)} runs)" if len(known) < len(runs) else ""
    return statistics.fmean(v for v, _ in known), "; ".join(sources) + note, unit
