"""The campaign's forecasts scored against what it measured: per testbed and
configuration, E forecast before anything was booked (the journal's "plan" forecast)
and just before its testbed was (its latest "booking" forecast), against the measured
E; the error is forecast minus measured (above 0: the forecast was optimistic).

A configuration is told by its testbed, parallelism (a transformer's sweep parts, one
per `parallel:`; 'ddp' for a CNN), batch, workers and workers per node; the forecast's
throughput (the journal's, in its record's unit: journal.per_s) is carried as
forecast_<made>_<unit>_per_s: images, or tokens for a transformer."""

from __future__ import annotations

import random
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hpcbench.campaign.journal import FORECASTS, Journal, per_s
from hpcbench.measure.analysis import UNITS, ConfigSummary

Key = tuple[str, str, int, int, int]  # testbed, parallel, batch, workers, gpus_per_node


@dataclass(frozen=True)
class Forecasts:
    """Each configuration's forecast cell record, by when it was made."""

    made: dict[str, dict[Key, dict[str, Any]]]

    def of(self, testbed: str, s: ConfigSummary, made: str) -> dict[str, Any] | None:
        key = (testbed, s.parallel or "ddp", s.batch, s.workers, s.gpus_per_node)
        return self.made[made].get(key)

    def efficiency(self, testbed: str, s: ConfigSummary, made: str) -> float | None:
        cell = self.of(testbed, s, made)
        value = None if cell is None else cell.get("efficiency")
        return float(value) if isinstance(value, int | float) else None

    def error(self, testbed: str, s: ConfigSummary, made: str) -> float | None:
        """Forecast minus measured E, where both exist (several workers only)."""
        forecast = self.efficiency(testbed, s, made)
        if forecast is None or s.efficiency is None or s.workers < 2:
            return None
        return forecast - s.efficiency

    def fields(self, testbed: str, s: ConfigSummary) -> dict[str, float | None]:
        """The configuration's forecasts as the report's JSON and CSV carry them."""
        out: dict[str, float | None] = {}
        for made in FORECASTS:
            cell = self.of(testbed, s, made) or {}
            out[f"forecast_{made}_efficiency"] = self.efficiency(testbed, s, made)
            # The journal's forecast names its figure by its unit, said beside it
            # (forecast.CellForecast.record; none before transformers: images).
            rate = per_s(cell)
            said = cell.get("unit") or "images"
            for unit in UNITS:
                out[f"forecast_{made}_{unit}_per_s"] = (
                    float(rate)
                    if unit == s.unit == said and isinstance(rate, int | float)
                    else None
                )
            out[f"forecast_{made}_error"] = self.error(testbed, s, made)
        return out


FIELDS = tuple(
    f"forecast_{made}_{what}"
    for made in FORECASTS
    for what in ("efficiency", *(f"{unit}_per_s" for unit in UNITS), "error")
)


def load(journal: Journal, parallel_of: Mapping[str, str] | None = None) -> Forecasts:
    """The plan's forecast (the first made: a resumed campaign keeps it) and the latest
    booking forecast of every configuration; parallel_of: each cell id's parallelism
    (its sweep part's; a cell not named there, 'ddp')."""
    made: dict[str, dict[Key, dict[str, Any]]] = {m: {} for m in FORECASTS}
    records = journal.forecasts() if journal.store.exists() else []
    parallel = parallel_of or {}
    for r in records:
        for c in r["cells"]:
            key = (
                r["testbed"],
                parallel.get(c["cell"], "ddp"),
                c["batch"],
                c["workers"],
                c.get("gpus_per_node") or 1,
            )
            if r["made"] == "plan" and key in made["plan"]:
                continue
            made[r["made"]][key] = c
    return Forecasts(made)


@dataclass(frozen=True)
class Ranked:
    """The configurations' throughput as forecast beside as measured: how many, Spearman's
    rank correlation of the two (None below 3, or where one side is all ties), the
    forecast's best and the measured best (labels), and whether the forecast's best was
    the measured best or inside its measured 95% interval. rho_interval is the 95%
    interval of the correlation that the measurements' own noise leaves
    (spearman_interval)."""

    count: int
    rho: float | None
    forecast_best: str
    measured_best: str
    best_held: bool
    rho_interval: tuple[float, float] | None = None


def _ranks(values: list[float]) -> list[float]:
    """Each value's rank from 1, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rank correlation (Pearson's of the ranks, ties at their mean rank)."""
    if len(xs) < 3:
        return None
    rx, ry = _ranks(xs), _ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    sx = sum((a - mx) ** 2 for a in rx)
    sy = sum((b - my) ** 2 for b in ry)
    if not sx or not sy:
        return None
    return sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True)) / (sx * sy) ** 0.5


# Draws of spearman_interval: the 2.5th and 97.5th percentiles of 2,000 draws move
# by about 0.01 between seeds on six configurations.
DRAWS = 2000


def spearman_interval(
    xs: list[float], ys: list[float], halves: list[float], seed: int = 0
) -> tuple[float, float] | None:
    """The 95% interval of Spearman's correlation of xs (the forecast, taken as given)
    with ys (measured means whose 95% interval is +- halves): ys drawn again from a
    normal of each mean and its standard error (half / 1.96), the correlation of each
    draw, its 2.5th and 97.5th percentiles. So two configurations whose intervals
    overlap count as either order, as the report's other comparisons do; it leaves out
    the uncertainty of the configurations' choice (six are six, not a sample)."""
    if spearman(xs, ys) is None:
        return None
    rng = random.Random(seed)
    rhos = []
    for _ in range(DRAWS):
        drawn = [rng.gauss(y, h / 1.96) if h > 0 else y for y, h in zip(ys, halves, strict=True)]
        rho = spearman(xs, drawn)
        if rho is not None:
            rhos.append(rho)
    if not rhos:
        return None
    cuts = statistics.quantiles(rhos, n=40, method="inclusive")
    return cuts[0], cuts[-1]


def ranked(
    forecasts: Forecasts, measured: list[tuple[str, str, ConfigSummary]], made: str
) -> Ranked | None:
    """The measured configurations (testbed, label, summary) that have a forecast
    throughput `made` then, ranked both ways; None where none has both."""
    pairs = []
    for testbed, label, s in measured:
        cell = forecasts.of(testbed, s, made) or {}
        rate = per_s(cell)
        if isinstance(rate, int | float) and s.throughput is not None:
            pairs.append((label, float(rate), s))
    if not pairs:
        return None
    xs, ys = [p[1] for p in pairs], [p[2].throughput or 0.0 for p in pairs]
    rho = spearman(xs, ys)
    interval = spearman_interval(xs, ys, [p[2].ci95 or 0.0 for p in pairs])
    advised = max(pairs, key=lambda p: p[1])
    best = max(pairs, key=lambda p: p[2].throughput or 0.0)

    def low(s: ConfigSummary) -> float:
        return (s.throughput or 0.0) - (s.ci95 or 0.0)

    def high(s: ConfigSummary) -> float:
        return (s.throughput or 0.0) + (s.ci95 or 0.0)

    held = advised is best or high(advised[2]) >= low(best[2])
    return Ranked(len(pairs), rho, advised[0], best[0], held, interval)


def median_abs(errors: list[float | None]) -> tuple[float, int] | None:
    """The median |error| and how many errors it is over (None: none)."""
    known = [abs(e) for e in errors if e is not None]
    return (statistics.median(known), len(known)) if known else None
