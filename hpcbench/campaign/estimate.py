"""How long a campaign will take, and what it books: `campaign plan`, and the ETA of
`campaign run`.

Each figure says where it comes from, best first:
- measured: the same cell's (or the same testbed's phase's) earlier duration in this
  campaign's results;
- predicted: a run's length from the single-worker images/s (this testbed's baseline
  measured earlier, else `expect: images_per_s` in the campaign file) and the step
  time at N workers from the point prediction of `hpcbench predict` over the
  testbed's nominal link (none known: no slowdown, said so);
- assumed: a stated default (DEFAULT_PHASE_S), never passed off as a measurement.
A run lasts its launch overhead plus (warm-up + windows x steps) steps; a cell
runs --repeats times, at most --max-repeats while its interval is wide.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from functools import cache
from typing import Any

from hpcbench import analysis, paths, prediction
from hpcbench.campaign.spec import Campaign, Cell, SweepPart, TestbedPlan
from hpcbench.errors import UsageError
from hpcbench.predict import (
    DEFAULT_LATENCY_US,
    TCP_EFFICIENCY,
    Plan,
    model_layers,
    parse_link,
    predictions,
)
from hpcbench.specs import TestbedKind
from hpcbench.store import Store

# Stated defaults where nothing was measured or given (expect: in the campaign file).
# They are planning figures, not measurements: real testbeds differ widely (a
# Virtual Wall slice can take up to 30 minutes to come up; a GPULab job waits in a
# queue as long as the cluster is full).
DEFAULT_PHASE_S = {"deploy": 600.0, "verify": 300.0, "destroy": 120.0}
# A partition's or host list's only phase: the stack check on one node, once it runs.
DEFAULT_CHECK_S = 120.0
DEFAULT_OVERHEAD_S = 20.0  # launch to first timed step of one run (ssh, launcher, import)


@dataclass(frozen=True)
class Estimate:
    seconds: float | None  # None: unknown (no figure to plan from)
    source: str  # where it comes from, for the plan's reader


# ------------------------------------------------------------------ phases
def phases(tb: TestbedPlan, phase_records: list[dict[str, Any]]) -> dict[str, Estimate]:
    """deploy, verify and destroy: this testbed's earlier ok phases, else the same
    environment's in this campaign, else expect:, else the stated default."""
    given = {"deploy": tb.expect.deploy_s, "verify": tb.expect.verify_s,
             "destroy": tb.expect.destroy_s}  # fmt: skip
    defaults = DEFAULT_PHASE_S if tb.deployed else {"verify": DEFAULT_CHECK_S}
    out = {}
    for phase, default in defaults.items():
        ok = [r for r in phase_records if r["phase"] == phase and r["status"] == "ok"]
        own = [r["seconds"] for r in ok if r.get("fingerprint") == tb.fingerprint]
        same_env = [r["seconds"] for r in ok if r.get("env") == tb.env]
        if own:
            out[phase] = Estimate(statistics.fmean(own), "measured earlier")
        elif same_env:
            out[phase] = Estimate(statistics.fmean(same_env), f"measured on {tb.env}")
        elif given[phase] is not None:
            out[phase] = Estimate(float(given[phase]), "expect:")  # type: ignore[arg-type]
        else:
            out[phase] = Estimate(default, "assumed")
    return out


# ------------------------------------------------------------------- cells
def link_rate_bits(tb: TestbedPlan) -> float | None:
    """The testbed's nominal link between nodes in bits/s, where its settings (or its
    variant's file) say: link_rate ('1gbit') or link_capacity_mbps. A partition's or
    a host list's is not known before it is probed."""
    if not tb.deployed:
        return None
    values: dict[str, Any] = {}
    var_file = paths.env_layout(tb.env).var_file
    if var_file is not None:
        values.update(json.loads(var_file.read_text()))
    values.update(dict(tb.settings))
    if "link_capacity_mbps" in values:
        try:
            return float(values["link_capacity_mbps"]) * 1e6
        except (TypeError, ValueError):
            return None
    rate = values.get("link_rate")
    if isinstance(rate, str) and rate:
        try:
            return parse_link(rate)
        except UsageError:
            return None
    return None


@cache
def _layers(model: str, image_size: int) -> tuple[tuple[float, float], ...]:
    return tuple(model_layers(model, image_size))


def point_efficiency(part: SweepPart, tb: TestbedPlan, cell: Cell, step_s: float) -> float | None:
    """The point prediction of E at the cell's workers over the nominal link, from one
    worker's step time."""
    rate = link_rate_bits(tb)
    if cell.workers == 1 or rate is None:
        return None
    model, image_size, backend = part.workload.model, part.workload.image_size, part.target.backend
    plan = Plan(model=model, image_size=image_size, batch=cell.batch,
                workers=[cell.workers], gpus_per_node=cell.gpus_per_node, step_time_s=step_s,
                busbw=rate / 8 * TCP_EFFICIENCY, latency_s=DEFAULT_LATENCY_US * 1e-6,
                backend=backend, grouping=prediction.Grouping(backend, None, None))  # fmt: skip
    try:
        row = predictions(plan, list(_layers(model, image_size)))[0]
    except UsageError:
        return None
    return float(row["efficiency"])


def _runs(campaign: Campaign, tb: TestbedPlan, ok_only: bool = True) -> list[dict[str, Any]]:
    store = Store(campaign.testbed_out(tb))
    if not store.exists():
        return []
    return [r for r in store.runs() if r.get("status") == "ok" or not ok_only]


def queue_wait(campaign: Campaign, tb: TestbedPlan) -> Estimate | None:
    """A job's wait in a partition's queue: the mean of this testbed's jobs so far, or
    unknown before any ran (None: not a partition)."""
    if tb.kind is not TestbedKind.SLURM:
        return None
    waits = [float(r["queue_wait_s"]) for r in _runs(campaign, tb, ok_only=False)
             if isinstance(r.get("queue_wait_s"), int | float)]  # fmt: skip
    if not waits:
        return Estimate(None, "unknown until a job has run")
    return Estimate(statistics.fmean(waits), f"mean of {len(waits)} job(s) measured")


def cell_seconds(campaign: Campaign, tb: TestbedPlan, part: SweepPart, cell: Cell) -> Estimate:
    """One cell's time on its testbed: `repeats` runs, each with its queue wait where
    a partition's is known."""
    run = one_run_seconds(campaign, tb, part, cell)
    queued = queue_wait(campaign, tb)
    if run.seconds is None or queued is None or queued.seconds is None:
        return run
    repeats = part.sweep.repeats
    return Estimate(run.seconds + repeats * queued.seconds,
                    f"{run.source}, + {repeats} x {queued.seconds:.0f} s queue wait")  # fmt: skip


def one_run_seconds(campaign: Campaign, tb: TestbedPlan, part: SweepPart, cell: Cell
                    ) -> Estimate:  # fmt: skip
    """`repeats` runs of the cell, from its own earlier runs or its testbed's baseline."""
    repeats, workload = part.sweep.repeats, part.workload
    runs = _runs(campaign, tb)
    same = [r for r in runs if (r.get("batch"), r.get("nodes"), r.get("workers"),
                                r.get("gpus_per_node")) == (*cell.config.key, cell.gpus_per_node)]
    if same:
        took = statistics.fmean(float(r.get("duration_s") or 0.0) for r in same)
        return Estimate(repeats * took, f"{repeats} x {took:.0f} s measured earlier")
    base = [r for r in runs if r.get("batch") == cell.batch and r.get("workers") == 1]
    if base:
        ips = statistics.fmean(analysis.run_stats(r)["images_per_sec"] for r in base)
        source = f"{ips:.1f} images/s measured on one worker"
        overheads = [r["overhead_s"] for r in base if isinstance(r.get("overhead_s"), int | float)]
        overhead = statistics.fmean(overheads) if overheads else DEFAULT_OVERHEAD_S
    elif tb.expect.images_per_s is not None:
        ips, source, overhead = tb.expect.images_per_s, f"{tb.expect.images_per_s:g} images/s "\
            "given in expect:", DEFAULT_OVERHEAD_S  # fmt: skip
    else:
        return Estimate(None, "unknown")
    step = cell.batch / ips
    efficiency = point_efficiency(part, tb, cell, step)
    if efficiency:
        step /= efficiency
        source += f", E {efficiency:.2f} predicted"
    elif cell.workers > 1:
        source += ", no prediction (no nominal link): no slowdown assumed"
    steps = workload.steps
    if workload.min_window_s:
        steps = max(steps, math.ceil(workload.min_window_s / step))
    run_s = overhead + (workload.warmup + workload.windows * steps) * step
    return Estimate(repeats * run_s, f"{repeats} x {run_s:.0f} s from {source}")


# ------------------------------------------------------------ the campaign
@dataclass(frozen=True)
class TestbedEstimate:
    tb: TestbedPlan
    phases: dict[str, Estimate]
    cells: list[tuple[Cell, Estimate]]
    most_repeats: int  # --max-repeats of its sweep (the upper bound of a cell's runs)
    repeats: int
    # --budget of its sweep: no extra repeat starts that would end past it (sweep.run).
    budget_s: float | None = None
    queue: Estimate | None = None  # a partition's queue wait per job (queue_wait)

    @property
    def known(self) -> bool:
        return all(e.seconds is not None for _, e in self.cells)

    def _runs_s(self, cells: list[Cell] | None) -> float:
        """The cells' runs at --repeats (every cell where cells is None)."""
        wanted = None if cells is None else {c.id for c in cells}
        return sum(e.seconds or 0.0 for c, e in self.cells if wanted is None or c.id in wanted)

    def _phases_s(self) -> float:
        return sum(e.seconds or 0.0 for e in self.phases.values())

    def wall_s(self, cells: list[Cell] | None = None) -> float:
        return self._runs_s(cells) + self._phases_s()

    def wall_max_s(self, cells: list[Cell] | None = None) -> float:
        """At most: every cell at --max-repeats, but no longer than --budget allows
        beyond the --repeats every cell runs anyway."""
        run_s = self._runs_s(cells)
        sweep_s = run_s * self.most_repeats / max(1, self.repeats)
        if self.budget_s is not None:
            sweep_s = min(sweep_s, max(run_s, self.budget_s))
        return sweep_s + self._phases_s()

    @property
    def nodes(self) -> int:
        return self.tb.nodes_available or max(c.nodes for c, _ in self.cells)

    def gpus(self, device: str) -> int | None:
        """GPUs the testbed books while it exists: none on CPU runs, None where its
        settings do not say (Virtual Wall without gpus_per_node)."""
        if device == "cpu":
            return 0
        return None if self.tb.gpus_per_node is None else self.nodes * self.tb.gpus_per_node

    def node_hours(self) -> float:
        """What it books: a deployed testbed its nodes for its whole wall time; a
        partition each job's nodes while it runs (the check job one node); your own
        hosts nothing."""
        if self.tb.deployed:
            return self.nodes * self.wall_s() / 3600
        if self.tb.kind is not TestbedKind.SLURM:
            return 0.0
        runs = sum((e.seconds or 0.0) * c.nodes for c, e in self.cells)
        return (runs + sum(e.seconds or 0.0 for e in self.phases.values())) / 3600

    def gpu_hours(self, device: str) -> float | None:
        """GPU-hours booked (None: the settings do not say how many GPUs a node has)."""
        if device == "cpu" or self.tb.kind is TestbedKind.HOSTS:
            return 0.0
        if self.tb.deployed:
            gpus = self.gpus(device)
            return None if gpus is None else gpus * self.wall_s() / 3600
        # A job asks for one GPU per worker (--gres=gpu:workers per node).
        runs = sum((e.seconds or 0.0) * c.workers for c, e in self.cells)
        return (runs + sum(e.seconds or 0.0 for e in self.phases.values())) / 3600


def testbed(campaign: Campaign, tb: TestbedPlan, phase_records: list[dict[str, Any]]
            ) -> TestbedEstimate:  # fmt: skip
    cells = [(c, cell_seconds(campaign, tb, part, c)) for part in tb.parts for c in part.cells]
    first = tb.parts[0].sweep  # the parts differ in gpus_per_node only
    return TestbedEstimate(tb, phases(tb, phase_records), cells, first.max_repeats,
                           first.repeats, first.budget_s, queue_wait(campaign, tb))  # fmt: skip


def remaining(
    campaign: Campaign, records: list[dict[str, Any]], measured: set[str],
    todo: list[TestbedPlan],
) -> tuple[dict[str, dict[str, float]], dict[str, float]]:  # fmt: skip
    """What the testbeds left will take, for the Clock: per testbed, each phase
    ('deploy', 'verify', 'destroy') and each unmeasured cell (by its id) in seconds,
    and how much longer the testbed may take at most (cells at --max-repeats within
    --budget)."""
    phase_records = [r for r in records if r["kind"] == "phase"]
    pieces: dict[str, dict[str, float]] = {}
    extra: dict[str, float] = {}
    for tb in todo:
        est = testbed(campaign, tb, phase_records)
        left = [c for c in tb.cells if c.id not in measured]
        ids = {c.id for c in left}
        own = {name: e.seconds or 0.0 for name, e in est.phases.items()}
        own.update({c.id: e.seconds or 0.0 for c, e in est.cells if c.id in ids})
        pieces[tb.name] = own
        extra[tb.name] = est.wall_max_s(left) - est.wall_s(left)
    return pieces, extra


class Clock:
    """The campaign's ETA: the plan's estimates of the work not yet done, about and at
    most, scaled by how the finished work compared with the same estimates. Each piece
    (a testbed's phase, or a cell) is told once, by its key; when a testbed is done,
    whatever of it did not run (cells of a failed deploy, a kept testbed's destroy)
    leaves the plan."""

    def __init__(self) -> None:
        self.left: dict[str, dict[str, float]] = {}  # testbed -> key -> planned seconds
        self.extra: dict[str, float] = {}  # testbed -> how much longer it may take
        self.expected_done_s = 0.0
        self.actual_done_s = 0.0

    def plan(self, pieces: dict[str, dict[str, float]], extra: dict[str, float]) -> None:
        self.left = {tb: dict(own) for tb, own in pieces.items()}
        self.extra = dict(extra)

    def finished(self, testbed: str, key: str, actual_s: float) -> None:
        """A piece done in actual_s; one the plan does not hold (the sweep phase, whose
        cells are told instead) counts for nothing."""
        expected = self.left.get(testbed, {}).pop(key, None)
        if expected is not None:
            self.expected_done_s += expected
            self.actual_done_s += actual_s

    def settled(self, testbed: str) -> None:
        """The testbed is done with: what of it is left will not run."""
        self.left.pop(testbed, None)
        self.extra.pop(testbed, None)

    def eta(self) -> tuple[float, float] | None:
        """Seconds left, about and at most; None before a plan."""
        if not self.left:
            return None
        pace = 1.0
        if self.expected_done_s > 0:
            pace = min(4.0, max(0.25, self.actual_done_s / self.expected_done_s))
        about = sum(sum(own.values()) for own in self.left.values()) * pace
        return about, about + sum(self.extra.values()) * pace
