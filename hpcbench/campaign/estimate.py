"""How long a campaign will take, and what it books: `campaign plan`, and the ETA of
`campaign run`.

Each figure says where it comes from, best first:
- measured: the same cell's (or the same testbed's phase's) earlier duration in this
  campaign's results;
- predicted: a run's length from the single-worker images/s (this testbed's baseline
  measured earlier, else `expect: images_per_s` in the campaign file; a transformer's
  tokens/s, `expect: tokens_per_s`) and the step
  time at N workers from the point prediction (scaling_model, as `hpcbench predict`)
  over the testbed's nominal link (none known: no slowdown, said so);
- assumed: a stated default (a phase's: its kind's Kind.phases), never passed off as a
  measurement.
A run lasts its launch overhead plus its warm-up, the steps that size its windows
and its windows: each at least --min-window-s however fast the steps are, plus one
step; a cell runs --repeats times, at most --max-repeats while its interval is wide.

Each figure has an upper bound beside it ("at most", Estimate.most): the slowest
of what was measured times MARGIN, the low end of the predicted efficiency band,
and stated upper defaults where nothing was measured (DEFAULT_*_MOST_S). The
sweep's probe is a piece of its own; where the campaign gives probe_budget, each probe
takes at most that plus the grace after which the harness kills it (probe.GRACE_S).
A lease (a GPULab job's max_duration, a Virtual Wall slice's expiry) is sized from
the bound (lease_minutes).

Before anything is booked, each transformer cell that trains on GPUs gets its memory
per GPU (hpcbench.performance.memory, in the layout plans.memory_layout gives it, as
`predict` does) beside the testbed's accelerator memory (`hardware: accelerator`,
bench/peak_flops.py): a cell that does not fit is not run, books nothing and says
what would fit (memory.verdict); a testbed none of whose cells runs books nothing at
all. Where the accelerator's memory is not known, every cell runs and the plan says
so once, with the key that would give it.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from hpcbench.campaign import forecast
from hpcbench.campaign.campaign_file import Campaign, Cell, SweepPart, TestbedPlan
from hpcbench.campaign.forecast import CellForecast
from hpcbench.core.bench import peak_flops
from hpcbench.core.errors import UsageError
from hpcbench.launchers.specs import WorkloadSpec
from hpcbench.measure.probe import GRACE_S
from hpcbench.performance import memory, plans, sharded_model

# Stated defaults where nothing was measured or given (expect: in the campaign file;
# a phase's is its kind's, Kind.phases). They are planning figures, not measurements:
# real testbeds differ widely (a Virtual Wall slice can take up to 30 minutes to come
# up; a GPULab job waits in a queue as long as the cluster is full).
DEFAULT_OVERHEAD_S = 20.0  # launch to first timed step of one run (ssh, launcher, import)
# Upper defaults where nothing was measured: a run's launch on slow one-core nodes took
# up to 60 s here (horovodrun over SSH, torch imported on one core per rank).
DEFAULT_OVERHEAD_MOST_S = 90.0
# The sweep's all-reduce probes; at most DEFAULT_PROBE_MOST_S where no probe_budget bounds
# each.
DEFAULT_PROBE_S, DEFAULT_PROBE_MOST_S = 60.0, 240.0
# What a figure given in `expect:` or assumed may be off by, and what a measured one
# may grow by on the next run (a slow spell of the host, a busier queue).
GIVEN_MARGIN = 1.5
MARGIN = 1.25
# Steps a run takes besides warm-up and windows: sizing the windows (bench/train.py,
# SIZING_STEPS) and the single worker's gradient timeline.
EXTRA_STEPS = 4


LEASE_SLACK_S = 1800.0  # beyond the plan's bound x MARGIN: a slow destroy, a retry


@dataclass(frozen=True)
class Lease:
    variable: str
    value: str  # as the setting takes it
    minutes: int
    source: str  # how it was sized


@dataclass(frozen=True)
class Estimate:
    seconds: float | None  # None: unknown (no figure to plan from)
    source: str  # where it comes from, for the plan's reader
    most: float | None = None  # the upper bound; None: the same as seconds

    @property
    def upper(self) -> float | None:
        return self.most if self.most is not None else self.seconds


# ------------------------------------------------------------------ phases
def phases(tb: TestbedPlan, phase_records: list[dict[str, Any]]) -> dict[str, Estimate]:
    """deploy, verify and destroy: this testbed's earlier ok phases, else the same
    environment's in this campaign, else expect:, else the stated default."""
    given = {
        "deploy": tb.expect.deploy_s,
        "verify": tb.expect.verify_s,
        "destroy": tb.expect.destroy_s,
    }
    out = {}
    for phase, default in tb.kind.phases.items():
        ok = [r for r in phase_records if r["phase"] == phase and r["status"] == "ok"]
        own = [r["seconds"] for r in ok if r.get("fingerprint") == tb.fingerprint]
        same_env = [r["seconds"] for r in ok if r.get("env") == tb.env]
        if own:
            out[phase] = Estimate(statistics.fmean(own), "measured earlier", max(own) * MARGIN)
        elif same_env:
            out[phase] = Estimate(
                statistics.fmean(same_env), f"measured on {tb.env}", max(same_env) * MARGIN
            )
        elif given[phase] is not None:
            value = float(given[phase])  # type: ignore[arg-type]
            out[phase] = Estimate(value, "expect:", value * GIVEN_MARGIN)
        else:
            out[phase] = Estimate(default, "assumed", default * GIVEN_MARGIN)
    return out


def probe_seconds(
    campaign: Campaign, tb: TestbedPlan, runs: list[Cell] | None = None
) -> Estimate | None:
    """The sweep's all-reduce probes before the cells that run (runs; None: every cell of
    the testbed), or None where it runs none: the testbed's earlier probes, else a
    stated default, bounded by each probe's budget where it is given."""
    runs = tb.cells if runs is None else runs
    if all(part.sweep.probe is None for part in tb.parts) or not runs:
        return None
    store = campaign.testbed_store(tb)
    took = [
        float(r["duration_s"])
        for r in (store.probes() if store.exists() else [])
        if isinstance(r.get("duration_s"), int | float)
    ]
    if took:
        return Estimate(sum(took), "measured earlier", sum(took) * MARGIN)
    # One probe per count of several workers among the cells (the sweeps of a testbed's
    # parts share a store, and none probes a count of workers already probed), each
    # killed GRACE_S after its budget where the campaign gives one.
    probes = len({c.workers for c in runs if c.workers > 1})
    budgets = [part.sweep.probe.budget_s for part in tb.parts if part.sweep.probe is not None]
    known = [b for b in budgets if b is not None]
    if probes and len(known) == len(budgets):
        return Estimate(
            DEFAULT_PROBE_S,
            f"assumed; at most {probes} x (probe_budget + {GRACE_S} s)",
            probes * (max(known) + GRACE_S),
        )
    return Estimate(DEFAULT_PROBE_S, "assumed", DEFAULT_PROBE_MOST_S)


# ------------------------------------------------------------------ memory
NOT_RUN = "not run: it does not fit"


@dataclass(frozen=True)
class CellMemory:
    """A transformer cell's bytes per GPU in its layout beside its testbed's accelerator
    memory (size; None: not known), and memory.verdict where that is known."""

    need: int
    size: int | None = None
    verdict: str = ""

    @property
    def fits(self) -> bool:
        """Only a known size stops a cell: where it is not known the cell runs."""
        return self.size is None or memory.fit(self.need, self.size).fits

    def line(self) -> str:
        said = f"memory {self.need / 1e9:.1f} GB per GPU"
        if self.size is None:
            return said
        return f"{said} of {self.size / 1e9:.0f} GB" if self.fits else f"{said}: {self.verdict}"


@dataclass(frozen=True)
class TestbedMemory:
    """A testbed's transformer cells on GPUs (by cell id), beside its accelerator's
    memory; source: where that figure comes from, or why there is none."""

    accelerator: str | None
    size: int | None
    source: str
    cells: dict[str, CellMemory]

    def skipped(self) -> dict[str, str]:
        """The cells that do not fit, by id, each with its memory line."""
        return {cid: m.line() for cid, m in self.cells.items() if not m.fits}

    def source_line(self) -> str | None:
        """Where the cells' memory lines stand, once for the testbed (None: it has none)."""
        if not self.cells:
            return None
        if self.size is None:
            return (
                f"whether each cell fits: unknown, {self.source}: give `hardware: "
                "{accelerator: NAME}` as the GPU's name reads, with its size "
                "(A100-SXM4-80GB, V100-SXM2-16GB)"
            )
        return (
            f"memory per GPU beside {self.accelerator}'s {self.size / 1e9:.0f} GB "
            f'({self.source}), each cell\'s forecast as docs/method.md says ("Memory per GPU")'
        )


def testbed_memory(tb: TestbedPlan) -> TestbedMemory:
    """Each transformer cell's memory per GPU that trains on GPUs (a CNN's, or a run on
    CPUs, is not forecast), beside the testbed's accelerator memory."""
    name = tb.hardware.accelerator
    size, source = peak_flops.memory(name) if name else (None, "no accelerator named")
    cells = {}
    for part in tb.parts:
        for cell in part.cells:
            found = cell_memory(tb, part, cell, size)
            if found is not None:
                cells[cell.id] = found
    return TestbedMemory(name, size, source, cells)


def cell_memory(
    tb: TestbedPlan, part: SweepPart, cell: Cell, size: int | None
) -> CellMemory | None:
    """The cell's bytes per GPU at its workers in the part's layout (plans.memory_layout),
    and where `size` is known, whether they fit it and else the smallest layout that would
    on the testbed's GPUs (memory.smallest_layout: TP inside a node); None for a CNN or a
    run on CPUs."""
    job = forecast.job_of(tb, part, cell.batch)
    config = sharded_model.shape(job.model)
    if config is None or not job.cuda:
        return None
    try:
        layout = plans.memory_layout(job, cell.workers, cell.gpus_per_node)
        need = memory.breakdown(config, job.seq_len, cell.batch, layout).total
    except UsageError as err:
        raise UsageError(f"testbeds[{tb.index - 1}] ({tb.name}): {err} ({cell.label})") from None
    if size is None:
        return CellMemory(need)
    most = max(cell.workers, _gpus(tb))
    found = None
    if not memory.fit(need, size).fits:
        per_node = tb.gpus_per_node or max(p.gpus_per_node for p in tb.parts)
        found = memory.smallest_layout(
            config, job.seq_len, cell.batch, layout, size, most, per_node
        )
    return CellMemory(need, size, memory.verdict(need, size, layout, found, most))


def _gpus(tb: TestbedPlan) -> int:
    """The GPUs a testbed has as far as the file says: its nodes (else its cells' most)
    of its GPUs per node (else its sweep's most)."""
    per_node = tb.gpus_per_node or max(p.gpus_per_node for p in tb.parts)
    return (tb.nodes_available or max(c.nodes for c in tb.cells)) * per_node


# ------------------------------------------------------------------- cells
def _runs(campaign: Campaign, tb: TestbedPlan, ok_only: bool = True) -> list[dict[str, Any]]:
    store = campaign.testbed_store(tb)
    if not store.exists():
        return []
    return [r for r in store.runs() if r.get("status") == "ok" or not ok_only]


def queue_wait(campaign: Campaign, tb: TestbedPlan) -> Estimate | None:
    """A job's wait in a partition's queue: the mean of this testbed's jobs so far, or
    unknown before any ran (None: not a partition)."""
    if not tb.kind.queues_jobs:
        return None
    waits = [
        float(r["queue_wait_s"])
        for r in _runs(campaign, tb, ok_only=False)
        if isinstance(r.get("queue_wait_s"), int | float)
    ]
    if not waits:
        return Estimate(None, "unknown until a job has run")
    return Estimate(
        statistics.fmean(waits), f"mean of {len(waits)} job(s) measured", max(waits) * MARGIN
    )


def cell_seconds(
    campaign: Campaign, tb: TestbedPlan, part: SweepPart, cell: Cell, fc: CellForecast
) -> Estimate:
    """One cell's time on its testbed: `repeats` runs, each with its queue wait where
    a partition's is known."""
    run = one_run_seconds(campaign, tb, part, cell, fc)
    queued = queue_wait(campaign, tb)
    if run.seconds is None or queued is None or queued.seconds is None:
        return run
    repeats = part.sweep.repeats
    return Estimate(
        run.seconds + repeats * queued.seconds,
        f"{run.source}, + {repeats} x {queued.seconds:.0f} s queue wait",
        (run.upper or 0.0) + repeats * (queued.upper or 0.0),
    )


def one_run_seconds(
    campaign: Campaign, tb: TestbedPlan, part: SweepPart, cell: Cell, fc: CellForecast
) -> Estimate:
    """`repeats` runs of the cell, from its own earlier runs or its forecast (one
    worker's figure and E); at most: the slowest of them, or the forecast with its slow
    ends (see the module)."""
    repeats, workload = part.sweep.repeats, part.workload
    runs = _runs(campaign, tb)
    same = [
        float(r.get("duration_s") or 0.0)
        for r in runs
        if (r.get("batch"), r.get("nodes"), r.get("workers"), r.get("gpus_per_node"))
        == (*cell.config.key, cell.gpus_per_node)
    ]
    if same:
        took = statistics.fmean(same)
        return Estimate(
            repeats * took,
            f"{repeats} x {took:.0f} s measured earlier",
            repeats * max(same) * MARGIN,
        )
    # Launch to first step spans two clocks (this host's, the node's): a node's skewed
    # clock can make it negative, and no launch takes less than nothing.
    overheads = [
        max(0.0, float(r["overhead_s"]))
        for r in runs
        if isinstance(r.get("overhead_s"), int | float)
    ]
    overhead = statistics.fmean(overheads) if overheads else DEFAULT_OVERHEAD_S
    overhead_most = max(overheads) * MARGIN if overheads else DEFAULT_OVERHEAD_MOST_S
    single = fc.single
    if single is None:
        return Estimate(None, "unknown")
    slowest = single.slowest / MARGIN if single.slowest else single.per_s / GIVEN_MARGIN
    # A transformer's figure is tokens/s: its step is the batch's sequences of tokens.
    step, step_most = single.step_s(cell.batch), single.step_s(cell.batch, slowest)
    source = single.source
    if cell.workers > 1 and fc.efficiency is not None:
        # The band's low end, never above the point (a bound below the estimate would
        # size a lease shorter than the plan): no floor, however slow the link.
        low = min(fc.efficiency, fc.efficiency_low or fc.efficiency)
        step, step_most = step / fc.efficiency, step_most / low
        source += f", E {fc.efficiency:.2f} forecast"
    elif cell.workers > 1:
        step_most *= 2  # no link to forecast from: at most half the speed, assumed
        source += f", no E forecast ({fc.link_source}): no slowdown assumed"
    run_s = run_seconds(workload, step, overhead)
    run_most = run_seconds(workload, step_most, overhead_most)
    return Estimate(repeats * run_s, f"{repeats} x {run_s:.0f} s from {source}", repeats * run_most)


def run_seconds(workload: WorkloadSpec, step: float, overhead: float) -> float:
    """One run: its launch, warm-up and extra steps, and windows of --steps steps or
    --min-window-s (whichever is longer) plus the step that crosses it."""
    window = workload.steps * step
    if workload.min_window_s:
        window = max(window, workload.min_window_s) + step
    return overhead + (workload.warmup + EXTRA_STEPS) * step + workload.windows * window


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
    probe: Estimate | None = None  # the sweep's all-reduce probe (probe_seconds)
    memory: TestbedMemory | None = None  # its transformer cells' memory (testbed_memory)

    @property
    def skipped(self) -> dict[str, str]:
        """The cells that do not fit, each with its memory line: none of them runs."""
        return self.memory.skipped() if self.memory is not None else {}

    @property
    def known(self) -> bool:
        return all(e.seconds is not None for _, e in self.cells)

    def _runs_s(self, cells: list[Cell] | None, most: bool = False) -> float:
        """The cells' runs at --repeats (every cell where cells is None)."""
        wanted = None if cells is None else {c.id for c in cells}
        return sum(
            (e.upper if most else e.seconds) or 0.0
            for c, e in self.cells
            if wanted is None or c.id in wanted
        )

    def _phases_s(self, most: bool = False) -> float:
        pieces = [*self.phases.values(), *([self.probe] if self.probe else [])]
        return sum((e.upper if most else e.seconds) or 0.0 for e in pieces)

    def wall_s(self, cells: list[Cell] | None = None) -> float:
        return self._runs_s(cells) + self._phases_s()

    def wall_max_s(self, cells: list[Cell] | None = None) -> float:
        """At most: every cell at --max-repeats with its upper bound, but no longer than
        --budget allows beyond the --repeats every cell runs anyway (a repeat started
        just before the budget ends runs to its end), and every phase at its bound."""
        run_s = self._runs_s(cells, most=True)
        sweep_s = run_s * self.most_repeats / max(1, self.repeats)
        if self.budget_s is not None:
            longest = max((e.upper or 0.0) / max(1, self.repeats) for _, e in self.cells)
            sweep_s = min(sweep_s, max(run_s, self.budget_s + longest))
        return sweep_s + self._phases_s(most=True)

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
        """What it books, as its kind books: a deployed testbed its nodes for its whole
        wall time; a partition each job's nodes while it runs (the check job one node);
        your own hosts nothing."""
        jobs = sum((e.seconds or 0.0) * c.nodes for c, e in self.cells) + self._check_s()
        return self.tb.kind.node_hours(self.nodes, self.wall_s(), jobs)

    def gpu_hours(self, device: str) -> float | None:
        """GPU-hours booked (None: the settings do not say how many GPUs a node has)."""
        if device == "cpu":
            return 0.0
        # A job asks for one GPU per worker (--gres=gpu:workers per node).
        jobs = sum((e.seconds or 0.0) * c.workers for c, e in self.cells) + self._check_s()
        return self.tb.kind.gpu_hours(self.gpus(device), self.wall_s(), jobs)

    def _check_s(self) -> float:
        """Its phases' seconds, without the probe: a partition's check job (one node)."""
        return sum(e.seconds or 0.0 for e in self.phases.values())


def testbed(
    campaign: Campaign,
    tb: TestbedPlan,
    phase_records: list[dict[str, Any]],
    forecasts: list[CellForecast] | None = None,
) -> TestbedEstimate:
    """The testbed's plan, from its cells' forecasts (made here from what is known now
    where none are given)."""
    if forecasts is None:
        forecasts = forecast.testbed_forecast(campaign, tb)
    by_cell = {f.cell.id: f for f in forecasts}
    fit = testbed_memory(tb)
    skipped = fit.skipped()
    cells = []
    for part in tb.parts:
        for c in part.cells:
            if c.id in skipped:
                cells.append((c, Estimate(0.0, NOT_RUN)))
            else:
                cells.append((c, cell_seconds(campaign, tb, part, c, by_cell[c.id])))
    runs = [c for c in tb.cells if c.id not in skipped]
    first = tb.parts[0].sweep  # the parts differ in gpus_per_node only
    return TestbedEstimate(
        tb,
        phases(tb, phase_records) if runs else {},  # nothing to run: nothing booked
        cells,
        first.max_repeats,
        first.repeats,
        first.budget_s,
        queue_wait(campaign, tb) if runs else None,
        probe_seconds(campaign, tb, runs),
        fit,
    )


def remaining(
    campaign: Campaign,
    records: list[dict[str, Any]],
    measured: set[str],
    todo: list[TestbedPlan],
) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """What the testbeds left will take, for the Clock: per testbed, each phase
    ('deploy', 'verify', 'destroy') and each unmeasured cell that fits (by its id) in
    seconds, and how much longer the testbed may take at most (cells at --max-repeats
    within --budget)."""
    phase_records = [r for r in records if r["kind"] == "phase"]
    pieces: dict[str, dict[str, float]] = {}
    extra: dict[str, float] = {}
    for tb in todo:
        est = testbed(campaign, tb, phase_records)
        left = [c for c in tb.cells if c.id not in measured and c.id not in est.skipped]
        ids = {c.id for c in left}
        own = {name: e.seconds or 0.0 for name, e in est.phases.items()}
        if est.probe is not None and left:
            own["probe"] = est.probe.seconds or 0.0
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
        """Seconds left, about and at most; None before a plan and once no piece is
        left (a testbed with none left cannot take longer either)."""
        busy = [tb for tb, own in self.left.items() if own]
        if not busy:
            return None
        pace = 1.0
        if self.expected_done_s > 0:
            pace = min(4.0, max(0.25, self.actual_done_s / self.expected_done_s))
        about = sum(sum(self.left[tb].values()) for tb in busy) * pace
        return about, about + sum(self.extra.get(tb, 0.0) for tb in busy) * pace


def lease(est: TestbedEstimate) -> Lease | None:
    """The lease a deployed testbed is booked with, sized from its plan: the bound
    (wall_max_s) x MARGIN + LEASE_SLACK_S, rounded up to minutes, within what the
    testbed allows. None: its environment books nothing that ends by itself. A lease the
    campaign's settings give is kept; a plan of unknown length keeps the environment's
    default (said so); a plan longer than the testbed allows is one UsageError line."""
    tb = est.tb
    rule = tb.kind.lease
    if rule is None:
        return None
    variable, low, high, form = rule.variable, rule.shortest_min, rule.longest_min, rule.form
    given = dict(tb.settings).get(variable)
    if given is not None:
        return Lease(variable, given, 0, "given in settings:")
    if not est.known:
        return Lease(variable, "", 0, "the environment's default: the plan's length is unknown")
    bound = est.wall_max_s()
    minutes = max(low, math.ceil((bound * MARGIN + LEASE_SLACK_S) / 60))
    if high is not None and minutes > high:
        raise UsageError(
            f"testbeds[{tb.index - 1}] ({tb.name}): the plan may take up to "
            f"{math.ceil(bound / 60)} min, and its lease ({variable}) can be {high} min at "
            "most: split the testbed's cells over two campaigns, or lower --max-repeats "
            "or --budget"
        )
    return Lease(
        variable,
        form.format(minutes),
        minutes,
        f"the plan's most ({math.ceil(bound / 60)} min) x {MARGIN} + {LEASE_SLACK_S / 60:.0f} min",
    )
