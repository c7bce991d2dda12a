"""Each cell of a campaign forecast before its testbed is booked: one worker's images/s,
E(N) with its band, and the images/s of N workers, each number with where it came from.

One worker's images/s at the cell's batch, best first (single_worker):
- measured on this testbed (its baseline in its own store);
- measured on an earlier testbed of this campaign with the same hardware
  (same_hardware: the same `hardware: accelerator`, or local testbeds of as many
  cores per node);
- measured on this machine before booking, under the testbed's first node's image and
  CPU limits, where its nodes are this machine's cores (campaign/before_booking.py);
- the testbed's `expect: images_per_s`;
- runs in a results folder the campaign names (`calibrate_from:`, `--calibrate-from`),
  matched by model, image size, batch and device, and by the accelerator's name in
  the runs' own fingerprints;
- the shipped table of published figures (hpcbench.performance.published_figures), by the
  accelerator, the model and the precision the runs will use.
A measured figure at another batch only stands in for a same-batch one as time per
image (said so).
A transformer's figure is one worker's tokens/s at the cell's sequences per worker,
from the same chain (`expect: tokens_per_s`; runs matched on the sequence length too),
and where the shipped table has no row, the accelerator's peak x a stated MFU
(published_figures.assumed_tokens_per_s), labelled as such.

E(N) is the scaling model's point and band (scaling_model.predictions, as `hpcbench
predict`) over the testbed's link (link_basis), best first:
- probed on this testbed: the all-reduce probe's latency and bandwidth, and on CPU
  nodes the backend's CPU work it measured;
- probed on an earlier testbed of the same environment: the bandwidth's share of that
  testbed's line rate times this one's, its latency, background share and overlap
  stretch, and the CPU work per byte of the latest such testbed whose link did not
  hide it (carried_cpu_work); where every one hid it, E at the probe's own figure
  (within none and the most its noise allows), the band over both;
- `hardware: link_efficiency` times the line rate;
- the transport's default share (scaling_model.LINK_EFFICIENCY) times the line rate.
The line rate is the testbed's settings' (link_rate, link_capacity_mbps), else
`hardware: link`. Interference is DEFAULT_INTERFERENCE, except where a probe measured
the CPU work, which is what it stands for on CPU nodes (the report's point takes it so).
Cells inside one node need no line rate: their link is `hardware: intra_node`.
A transformer's E is hpcbench.performance.sharded_model's under the sweep's parallel (DDP, FSDP2,
HSDP): a probe's all-gather and reduce-scatter are fitted as its all-reduce is (and
carried to a later testbed of the same environment the same way), else they take the
all-reduce's link; on CPU nodes (Gloo) the collectives block and a reduce-scatter
costs an all-reduce unless a probe timed it. The record names its unit (images or
tokens); its throughput fields carry that unit.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hpcbench.campaign.datatypes import Campaign, Cell, SweepPart, TestbedPlan
from hpcbench.core.bench import cpu_share, peak_flops
from hpcbench.core.errors import UsageError
from hpcbench.measure import analysis
from hpcbench.measure.store import Store
from hpcbench.performance import allreduce_model, plans, published_figures
from hpcbench.performance.scaling_model import LATENCY_US, Plan, parse_link, predictions
from hpcbench.testbeds import here


@dataclass(frozen=True)
class Figure:
    """One worker's images/s and where it came from; slowest: the slowest measured run's
    (None where it was given or published, not measured). A transformer's: tokens/s
    (unit "tokens"), per_sample the tokens of a sequence."""

    per_s: float  # one worker's throughput, in `unit` per second
    source: str
    slowest: float | None = None
    unit: str = "images"
    per_sample: int = 1
    # A CNN's gradients as the measured baseline's backward made them (bench/train.py):
    # the replay takes them instead of the model's layers; empty where none was measured.
    timeline: tuple[tuple[float, float], ...] = ()
    # Measured in the sweep's own layout (its micro-batches and checkpointing), so that a
    # step is the rate's already; else a plain figure (plans.step_in_layout).
    in_layout: bool = False
    # A measured CPU baseline's node: the least CPUs it could use, and the threads the
    # lone worker ran (0: not recorded), for cells whose workers share a node.
    node_cpus: float | None = None
    threads: int = 0
    # A measured figure's 95% interval as a share of its step (over its runs, else over
    # its one run's windows); 0 where it was not measured.
    spread: float = 0.0

    def step_s(self, batch: int, rate: float | None = None) -> float:
        """One worker's step at `batch` samples (sequences), at `rate` (default: its own)."""
        return batch * self.per_sample / (rate or self.per_s)


@dataclass(frozen=True)
class CellForecast:
    cell: Cell
    single: Figure | None
    efficiency: float | None  # the point; None: unknown (no figure, or no link)
    efficiency_low: float | None
    efficiency_high: float | None
    link_source: str
    unknown: str = ""  # why `single` is None, and what would give it
    unit: str = "images"  # of the throughput: a transformer's are tokens

    @property
    def per_s(self) -> float | None:
        """N workers' throughput, in the unit of one worker's figure."""
        if self.single is None or self.efficiency is None:
            return None
        return self.cell.workers * self.single.per_s * self.efficiency

    def record(self) -> dict[str, Any]:
        """As the journal keeps it (journal.Journal.forecast): the throughput fields in
        `unit` (images or tokens) per second."""
        c = self.cell
        return {
            "unit": self.unit,
            "cell": c.id,
            "batch": c.batch,
            "nodes": c.nodes,
            "workers": c.workers,
            "gpus_per_node": c.gpus_per_node,
            f"single_{self.unit}_per_s": None if self.single is None else self.single.per_s,
            "single_source": "unknown" if self.single is None else self.single.source,
            "efficiency": self.efficiency,
            "efficiency_low": self.efficiency_low,
            "efficiency_high": self.efficiency_high,
            f"{self.unit}_per_s": self.per_s,
            "link_source": self.link_source,
        }


# ------------------------------------------------------------------ the link
def given_settings(tb: TestbedPlan) -> dict[str, Any]:
    """The variables a testbed is known to get before it is made, as its kind says (a
    deployed one's variant file, then its settings; none for a partition or a host
    list), as read when the campaign file was."""
    return tb.given


def given_link(tb: TestbedPlan) -> tuple[str, float] | None:
    """The testbed's nominal link between nodes as the campaign gives it, as written and
    in bits/s: its settings' (or its variant's file's) link_rate or link_capacity_mbps,
    else `hardware: link`; None where none is given or it is no line rate."""
    values = given_settings(tb)
    if "link_capacity_mbps" in values:
        try:
            mbps = float(values["link_capacity_mbps"])
        except (TypeError, ValueError):
            return None
        return f"{mbps:g}mbit", mbps * 1e6
    rate = values.get("link_rate") or tb.hardware.link
    if isinstance(rate, str) and rate:
        try:
            return rate, parse_link(rate)
        except UsageError:
            return None
    return None


def link_rate_bits(tb: TestbedPlan) -> float | None:
    """The testbed's nominal link between nodes in bits/s (given_link)."""
    given = given_link(tb)
    return None if given is None else given[1]


@dataclass(frozen=True)
class Known:
    """What a forecast reads, gathered before any arithmetic (gather): each testbed's
    runs and its ok probes whose link model fits (the most workers last), by name, and
    the runs of each `calibrate_from:` folder, in the file's order. The functions below
    compute from it alone and open no file."""

    runs: dict[str, list[dict[str, Any]]]
    probes: dict[str, list[dict[str, Any]]]
    defaults: dict[str, str | None]  # what each one's defaults are read from (Kind.defaults_of)
    calibrate_from: tuple[tuple[Path, list[dict[str, Any]]], ...] = ()
    # One-worker runs on this machine before booking, each naming the testbeds whose
    # first node's limits it ran under (campaign/before_booking.py).
    before_booking: tuple[dict[str, Any], ...] = ()

    def same_env(self, a: TestbedPlan, b: TestbedPlan) -> bool:
        """Two testbeds of the same defaults (one environment folder): each other's
        figures."""
        return self.defaults[a.name] is not None and self.defaults[a.name] == self.defaults[b.name]


def gather(campaign: Campaign, testbeds: Sequence[TestbedPlan]) -> Known:
    """Known of these testbeds, each store read once."""
    runs, probes = {}, {}
    for tb in testbeds:
        store = campaign.testbed_store(tb)
        runs[tb.name], probes[tb.name] = _read(store)
    calibrate = tuple((folder, _read(Store(folder))[0]) for folder in campaign.calibrate_from)
    defaults = {tb.name: tb.kind.defaults_of(tb.env) for tb in testbeds}
    before = tuple(_read(campaign.before_booking_store())[0])
    return Known(runs, probes, defaults, calibrate, before)


def _read(store: Store) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    if not store.exists():
        return [], []
    ok = [
        p
        for p in store.probes()
        if p.get("status") == "ok" and allreduce_model.link_model(p) is not None
    ]
    return store.runs(), sorted(ok, key=lambda p: int(p.get("workers") or 0))


def link_basis(known: Known, tb: TestbedPlan, earlier: Sequence[TestbedPlan]) -> plans.Network:
    """What the testbed's link achieves across nodes (the module's order), and its
    interconnect inside a node (`hardware: intra_node`, else assumed)."""
    return _across(known, tb, earlier).inside(tb.hardware.intra_node)


def _across(known: Known, tb: TestbedPlan, earlier: Sequence[TestbedPlan]) -> plans.Network:
    transport = tb.hardware.transport
    rate = link_rate_bits(tb)
    own = known.probes[tb.name]
    if own:
        network = plans.probed(own[-1], where="probed on this testbed")
        assert network is not None  # _probes keeps those that fit
        return network
    if rate is None:
        return plans.Network(
            None,
            LATENCY_US[transport or plans.DEFAULTS["transport"][0]] * 1e-6,
            "no line rate across nodes: give hardware: {link: ...}",
        )
    for other in reversed(earlier):
        probes = known.probes[other.name]
        other_rate = link_rate_bits(other)
        if not probes or other_rate is None or not known.same_env(tb, other):
            continue
        model = allreduce_model.link_model(probes[-1])
        assert model is not None
        probed = min(1.0, model.busbw * 8 / other_rate)
        share = allreduce_model.throttled_share(probes[-1], probed, other_rate / 8, rate / 8)
        work = carried_cpu_work(known, tb, earlier)
        network = plans.probed(probes[-1], rate * share / 8 / model.busbw)
        assert network is not None
        return replace(
            network,
            cpu=replace(network.cpu, s_per_byte=work.s_per_byte or 0.0),
            source=f"{_rate(rate)} x {share:.2f}, the share probed on {other.name}"
            + _throttled_said(probes[-1], probed, other_rate, share)
            + plans.collectives_said(probes[-1])
            + _background_said(probes[-1], other)
            + (f"; {work.said}" if work.said else ""),
            cpu_up_to=work.up_to,
        )
    if tb.hardware.link_efficiency is not None:
        return plans.nominal(rate, transport, tb.hardware.link_efficiency, "given in hardware:")
    return plans.nominal(rate, transport)


def _throttled_said(probe: dict[str, Any], probed: float, rate: float, share: float) -> str:
    """Where the share was carried to another rate through the nodes' CFS stops."""
    if share == probed:
        return ""
    stopped, period = allreduce_model.throttled_s(probe), allreduce_model.cfs_period_s(probe)
    return (
        f" ({probed:.2f} of {_rate(rate)}, the nodes' quota stopping them"
        f" {stopped * 1e3:.0f} of each {period * 1e3:.0f} ms)"
    )


@dataclass(frozen=True)
class CarriedCpuWork:
    """The CPU work per byte a testbed's forecast takes from the earlier testbeds of its
    environment: s_per_byte, where a probe resolved it, or where its noise hid it, the
    probe's figure within 0-up_to (up_to: the most it allows; None: resolved, or no
    bound); said: which testbed it comes from ('' where none measured it: GPU nodes)."""

    s_per_byte: float | None = None
    up_to: float | None = None
    said: str = ""


def carried_cpu_work(
    known: Known, tb: TestbedPlan, earlier: Sequence[TestbedPlan]
) -> CarriedCpuWork:
    """The latest probe of an earlier testbed of the same environment whose CPU work per
    byte stands clear of its noise (allreduce_model.cpu_work_seen): a slow link hides
    it, and a figure measured there (0, below 0, or noise) is not carried. Where none
    resolved it, it is unknown, and at most the smallest largest value any allows."""
    hidden: list[tuple[TestbedPlan, allreduce_model.CpuWorkSeen]] = []
    for other in reversed(earlier):
        probes = known.probes[other.name] if known.same_env(tb, other) else []
        seen = allreduce_model.cpu_work_seen(probes[-1]) if probes else None
        if seen is None:
            continue
        if seen.resolved:
            return CarriedCpuWork(
                seen.s_per_byte,
                said=f"CPU work {_ns(seen.s_per_byte)} ns per byte probed on {other.name}",
            )
        hidden.append((other, seen))
    bounded = [(o, s) for o, s in hidden if s.largest is not None]
    if bounded:
        other, seen = min(bounded, key=lambda pair: pair[1].largest or 0.0)
        up_to = seen.largest or 0.0
        # The probe's own figure, where the noise allows it, is the likeliest value:
        # a point midway between none and up_to ignored it (on half-core nodes 17 ns
        # where the probe measured 3).
        at = min(max(seen.s_per_byte, 0.0), up_to)
        return CarriedCpuWork(
            at,
            up_to,
            f"CPU work per byte hidden behind {other.name}'s link "
            f"({_ns(seen.s_per_byte)} ± {_ns(seen.noise or 0.0)} ns): E at {_ns(at)} ns, "
            f"the band over 0-{_ns(up_to)} ns",
        )
    if hidden:
        names = ", ".join(o.name for o, _ in hidden)
        return CarriedCpuWork(
            said=f"CPU work per byte unknown: not told from noise on {names}; none charged"
        )
    return CarriedCpuWork()


def _ns(s_per_byte: float) -> str:
    return f"{s_per_byte * 1e9:.2f}"


def _background_said(probe: dict[str, Any], where: TestbedPlan) -> str:
    """The backend's background share and overlap stretch the probe measured on CPU
    nodes, and where, for the forecast's source line ('' where it measured none)."""
    if allreduce_model.cpu_work_seen(probe) is None:
        return ""
    work = allreduce_model.cpu_work(probe)
    return (
        f"; background share {work.background_share:.2f} and overlap stretch "
        f"{work.overlap_stretch:.2f} probed on {where.name}"
    )


def _rate(bits: float) -> str:
    return f"{bits / 1e9:g} Gbit/s" if bits >= 1e9 else f"{bits / 1e6:g} Mbit/s"


# ------------------------------------------------------- one worker's figure
def same_hardware(a: TestbedPlan, b: TestbedPlan) -> bool:
    """Testbeds whose one worker runs as fast: the same accelerator named, or local
    testbeds (this machine's cores) of as many cores per node."""
    if a.hardware.accelerator and b.hardware.accelerator:
        return a.hardware.accelerator.lower() == b.hardware.accelerator.lower()
    local = [t for t in (a, b) if t.kind.same_cores_same_speed]
    return len(local) == 2 and (
        dict(a.settings).get("cpus_per_node") == dict(b.settings).get("cpus_per_node")
    )


def baseline_key(part: SweepPart) -> tuple[object, ...]:
    """What a part's one-worker runs must share with it to stand for its baseline: the
    model, its input size, and the layout (K micro-batches a step, the same recompute)."""
    w = part.workload
    return (w.model, w.image_size, w.seq_len, w.grad_accum, w.activation_checkpoint)


def _record_key(run: dict[str, Any]) -> tuple[object, ...]:
    """baseline_key of a run record, its fields' defaults where a record has none."""
    return (
        run.get("model"),
        run.get("image_size"),
        run.get("seq_len") or 0,
        run.get("grad_accum") or 1,
        run.get("activation_checkpoint") or "none",
    )


def _ok_baselines(runs: list[dict[str, Any]], part: SweepPart) -> list[dict[str, Any]]:
    key = baseline_key(part)
    return [
        r
        for r in runs
        if r.get("status") == "ok"
        and r.get("workers") == 1
        and not r.get("alongside")  # a worker beside others (host_share): not alone
        and _record_key(r) == key
    ]


def _nearest_batch(runs: list[dict[str, Any]], batch: int) -> int | None:
    """The batch of these runs nearest `batch` by ratio; None where none records one."""
    batches = {int(r["batch"]) for r in runs if isinstance(r.get("batch"), int)}
    return min(batches, key=lambda b: abs(math.log(b / batch))) if batches else None


def _places(
    known: Known, tb: TestbedPlan, earlier: Sequence[TestbedPlan]
) -> Iterator[tuple[list[dict[str, Any]], str]]:
    """Where a testbed's measured figures come from, best first (the module's order):
    its own runs, an earlier testbed's of the same hardware, the runs before booking
    that stand for it; each with its words."""
    yield known.runs[tb.name], "on this testbed"
    for other in reversed(earlier):
        if same_hardware(tb, other):
            yield known.runs[other.name], f"on {other.name}, the same hardware,"
    here = _before_booking(known, tb)
    yield here, f"on this machine before booking ({_limits(here)})"


def _before_booking(known: Known, tb: TestbedPlan) -> list[dict[str, Any]]:
    """The runs made on this machine before booking that stand for the testbed."""
    return [r for r in known.before_booking if tb.name in (r.get("testbeds") or ())]


def _measured(
    runs: list[dict[str, Any]], batch: int, where: str, seq_len: int = 0, accum: int = 1
) -> Figure | None:
    """One worker's figure at `batch` from baselines (ok, of the part's model and
    layout: `accum` micro-batches a step), else from the nearest batch's time per image,
    said so; a transformer's (seq_len) in tokens/s."""
    nearest = _nearest_batch(runs, batch)
    if nearest is None:
        return None
    per = seq_len or 1  # a window's samples are sequences: tokens are seq_len each
    at_nearest = [r for r in runs if r.get("batch") == nearest]
    # The runs' mean step and the rate that follows, as the report's baseline has them
    # (analysis.run_stats: in the run's unit already, a transformer's in tokens).
    stats = [analysis.run_stats(r) for r in at_nearest]
    stats = [x for x in stats if math.isfinite(x["step_time_s"]) and x["step_time_s"] > 0]
    if not stats:
        return None
    steps = [x["step_time_s"] for x in stats]
    rate = nearest * per * accum / statistics.fmean(steps)
    if len(steps) > 1:
        mean, ci = analysis.mean_ci95(steps)
        spread = ci / mean
    else:  # one run: its windows' interval, a share of its step as of its rate
        one = stats[0]
        spread = one["ci95"] / one["throughput"] if one["throughput"] > 0 else 0.0
    at = "" if nearest == batch else f" at batch {nearest}"
    unit = "tokens" if seq_len else "images"
    # The latest baseline's gradients as its backward made them (a CNN's), at its batch.
    timelines = [
        r["grad_timeline"] for r in at_nearest if analysis.timeline_ok(r.get("grad_timeline"))
    ]
    return Figure(
        rate,
        f"{rate:.1f} {unit}/s measured {where}{at} ({len(steps)} run(s))",
        nearest * per * accum / max(steps),
        unit,
        per,
        tuple((t, b) for t, b in timelines[-1]) if timelines and nearest == batch else (),
        in_layout=True,
        node_cpus=analysis.least_node_cpus(at_nearest),
        threads=analysis.recorded_threads(at_nearest),
        spread=spread if math.isfinite(spread) else 0.0,
    )


@dataclass(frozen=True)
class GroupStep:
    """A tensor-parallel group's step measured on one node, its tp workers training one
    micro-batch stream together (the sweep's K micro-batches a step): the mean of the
    windows' steps, the least and most it may be (its 95% interval over the windows,
    or the fastest and slowest window where they reach further), and where it was
    measured. It stands for the model's split compute and TP collectives, which on CPU
    nodes run through Gloo on the cores the compute shares (docs/method.md,
    "Layouts")."""

    step_s: float
    fastest_s: float
    slowest_s: float
    source: str

    def at(self, batch: int, measured_at: int) -> GroupStep:
        """The same at another batch, as time per sequence."""
        k = batch / measured_at
        return replace(
            self, step_s=self.step_s * k, fastest_s=self.fastest_s * k, slowest_s=self.slowest_s * k
        )


def _ok_groups(runs: list[dict[str, Any]], part: SweepPart) -> list[dict[str, Any]]:
    """A TP part's groups measured on one node: ok runs of its tp workers on one node,
    of its model, layout and parallel."""
    w = part.workload
    key = baseline_key(part)
    return [
        r
        for r in runs
        if r.get("status") == "ok"
        and r.get("nodes") == 1
        and r.get("workers") == w.tp
        and (r.get("tp") or 1) == w.tp
        and r.get("parallel") == w.parallel
        and _record_key(r) == key
    ]


def _step_windows(runs: list[dict[str, Any]], batch: int) -> list[float]:
    """Every window's time a step of these runs at `batch`."""
    return [
        t / r["steps"]
        for r in runs
        if r.get("batch") == batch and r.get("steps")
        for t in r.get("window_times") or ()
        if isinstance(t, int | float) and t > 0
    ]


def _group_step(runs: list[dict[str, Any]], batch: int, where: str) -> GroupStep | None:
    """The groups' step at `batch` (else at the nearest batch's time per sequence, said
    so) over all their windows."""
    nearest = _nearest_batch(runs, batch)
    if nearest is None:
        return None
    windows = _step_windows(runs, nearest)
    if not windows:
        return None
    at = "" if nearest == batch else f" at batch {nearest}"
    mean, ci = analysis.mean_ci95(windows)
    step = GroupStep(
        mean,
        # An interval that reaches 0 (two windows far apart) ends at the fastest window.
        min(min(windows), mean - ci) if mean > ci else min(windows),
        max(max(windows), mean + ci),
        f"the TP group's step {mean:.3f} ± {ci:.3f} s measured {where}{at} "
        f"({len(windows)} window(s))",
    )
    return step.at(batch, nearest)


def tp_group(
    known: Known, tb: TestbedPlan, part: SweepPart, batch: int, earlier: Sequence[TestbedPlan]
) -> GroupStep | None:
    """A TP part's group step on one node at `batch`, measured on this testbed, on an
    earlier one of the same hardware, or on this machine before booking; None: not
    measured (the model's TP collectives then stand for it, sharded_model.tp_seconds)."""
    if part.workload.tp <= 1:
        return None
    for runs, where in _places(known, tb, earlier):
        found = _group_step(_ok_groups(runs, part), batch, where)
        if found is not None:
            return found
    return None


@dataclass(frozen=True)
class HostShare:
    """What the testbed's nodes computing at once on this machine cost a worker: its
    step then over its step alone (the slowest of the nodes' lone workers, run at once
    before booking, against the lone worker), the least and most the two measured
    intervals allow, and the words for it. The nodes of a local testbed share this
    machine's cores, memory and whatever else runs on it; a sharing that one worker
    alone does not see slows every step of a synchronous run to its slowest worker's."""

    stretch: float
    least: float
    most: float
    source: str


def host_share(
    known: Known, tb: TestbedPlan, part: SweepPart, batch: int, nodes: int
) -> HostShare | None:
    """The HostShare of `nodes` of the testbed at `batch` (else at the nearest batch both
    runs share), from the runs made on this machine before booking; None: not measured
    (a testbed on nodes of its own, or not yet)."""
    mine = _before_booking(known, tb)
    key = baseline_key(part)
    together = [
        r
        for r in mine
        if r.get("status") == "ok" and r.get("alongside") == nodes and _record_key(r) == key
    ]
    alone = _ok_baselines(mine, part)
    nearest = _nearest_batch(
        [r for r in together if any(a.get("batch") == r.get("batch") for a in alone)], batch
    )
    if nearest is None:
        return None
    shared_windows, lone_windows = _step_windows(together, nearest), _step_windows(alone, nearest)
    if not shared_windows or not lone_windows:
        return None
    shared, shared_ci = analysis.mean_ci95(shared_windows)
    lone, lone_ci = analysis.mean_ci95(lone_windows)
    # Sharing the machine makes no worker faster than it is alone: below 1 is the two
    # runs' noise.
    stretch = max(1.0, shared / lone)
    least = max(1.0, (shared - shared_ci) / (lone + lone_ci))
    most = max(stretch, (shared + shared_ci) / max(lone - lone_ci, 1e-9 * lone))
    return HostShare(
        stretch,
        least,
        most,
        f"{nodes} nodes' workers at once on this machine: step x {stretch:.2f} "
        f"({least:.2f}-{most:.2f}), measured before booking",
    )


def _cuda(part: SweepPart, tb: TestbedPlan) -> bool:
    """Whether the runs are taken to use a GPU: asked for, or `auto` with one named."""
    w = part.workload
    return w.device == "cuda" or (w.device == "auto" and tb.hardware.accelerator is not None)


def _amp(part: SweepPart, tb: TestbedPlan) -> bool:
    """Whether the runs train in mixed precision (bench/train.py: auto is on with CUDA; a
    transformer's bf16 only on CUDA, bench/lm.py training_precision)."""
    w = part.workload
    if w.seq_len:
        return _cuda(part, tb) and w.amp != "off"
    return w.amp == "on" or (w.amp == "auto" and _cuda(part, tb))


def _precisions(part: SweepPart, tb: TestbedPlan) -> tuple[str, ...]:
    """The published rows' precisions that stand for the runs, the first preferred."""
    return ("amp",) if _amp(part, tb) else ("tf32", "fp32")


def _fingerprint_names(record: dict[str, Any]) -> str:
    fp = record.get("fingerprint") or {}
    return f"{fp.get('gpu') or ''} {fp.get('cpu') or ''}".lower()


def single_worker(
    known: Known, tb: TestbedPlan, part: SweepPart, batch: int, earlier: Sequence[TestbedPlan]
) -> Figure | None:
    """One worker's images/s at `batch` (the module's order); None: nothing to go on."""
    seq_len = part.workload.seq_len
    accum = part.workload.grad_accum
    for runs, where in _places(known, tb, earlier):
        found = _measured(_ok_baselines(runs, part), batch, where, seq_len, accum)
        if found is not None:
            return found
    if seq_len and tb.expect.tokens_per_s is not None:
        given = tb.expect.tokens_per_s
        return Figure(given, f"{given:g} tokens/s given in expect:", None, "tokens", seq_len)
    if not seq_len and tb.expect.images_per_s is not None:
        given = tb.expect.images_per_s
        return Figure(given, f"{given:g} images/s given in expect:")
    accelerator = tb.hardware.accelerator
    if accelerator is None:
        return None
    amp = _amp(part, tb)
    for folder, runs in known.calibrate_from:
        matching = [
            r
            for r in _ok_baselines(runs, part)
            if accelerator.lower() in _fingerprint_names(r)
            and (part.workload.device == "auto" or _device(r) == part.workload.device)
            and r.get("amp", amp) is amp
        ]
        found = _measured(matching, batch, f"in {folder} on {accelerator}", seq_len, accum)
        if found is not None:
            return found
    if not _cuda(part, tb):
        return None  # every published figure is a GPU's: none stands for a CPU run
    if seq_len:
        assumed = published_figures.assumed_tokens_per_s(
            accelerator,
            part.workload.model,
            seq_len,
            "bf16" if job_of(tb, part, batch).bf16 else "fp32",
        )
        if assumed is None:
            return None
        return Figure(assumed[0], assumed[1], None, "tokens", seq_len)
    row = published_figures.lookup(
        accelerator, part.workload.model, part.workload.image_size, batch, _precisions(part, tb)
    )
    return None if row is None else Figure(row.images_per_s, row.source)


def _limits(runs: list[dict[str, Any]]) -> str:
    """The node limits the latest of these runs had, said (testbeds/here.py)."""
    limits = runs[-1].get("node_limits") if runs else None
    if not isinstance(limits, dict):
        return "a node's limits"
    try:
        return f"a node's limits: {here.NodeLimits(**limits).said()}"
    except (TypeError, ZeroDivisionError):
        return "a node's limits"


def unknown_single(campaign: Campaign, tb: TestbedPlan, part: SweepPart) -> str:
    """Why single_worker found nothing, and the key that would give it: what is given
    is not asked for again."""
    w = part.workload
    expect = f"`expect: {{{'tokens_per_s' if w.seq_len else 'images_per_s'}: N}}`"
    size = f"{w.seq_len} tokens" if w.seq_len else f"{w.image_size} px"
    runs = f"one-worker runs of {w.model} at {size}"
    accelerator = tb.hardware.accelerator
    if accelerator is None:
        return (
            f"unknown: nothing measured yet and no accelerator named; give {expect}, or "
            "`hardware: {accelerator: ...}` for a published figure or for "
            f"`calibrate_from:` {runs} on it"
        )
    searched = ", nor runs in the `calibrate_from:` folders" if campaign.calibrate_from else ""
    if not _cuda(part, tb):
        missing = f"the runs use the CPU, no published figure (all are GPUs'){searched}"
        on = f"on a CPU whose name holds '{accelerator}' (`hardware: accelerator`)"
    elif w.seq_len:  # single_worker assumes an MFU of the GPU's peak, where it has one
        missing = f"no peak FLOPS known for '{accelerator}' to assume an MFU of{searched}"
        on = f"on a GPU whose name holds '{accelerator}' (`hardware: accelerator`)"
    else:
        precision = " or ".join(_precisions(part, tb))
        missing = (
            f"no published {precision} figure of {w.model} at {w.image_size} px on "
            f"{accelerator}{searched}"
        )
        on = f"on a GPU whose name holds '{accelerator}' (`hardware: accelerator`)"
    return (
        f"unknown: {missing}; give {expect}, or `calibrate_from:` a results folder of {runs} {on}"
    )


def _device(record: dict[str, Any]) -> str | None:
    value = (record.get("fingerprint") or {}).get("device")
    return value if isinstance(value, str) else None


# ------------------------------------------------------------------ the cells
def job_of(tb: TestbedPlan, part: SweepPart, batch: int) -> plans.Job:
    """What a sweep part's runs train and how, as a forecast takes it (plans.Job)."""
    w = part.workload
    return plans.Job(
        model=w.model,
        batch=batch,
        backend=part.target.backend,
        image_size=w.image_size,
        seq_len=w.seq_len,
        parallel=w.parallel,
        shard_group=w.shard_group,
        bucket_cap_mb=w.bucket_cap_mb,
        fusion_threshold_mb=w.fusion_threshold_mb,
        fp16_allreduce=w.fp16_allreduce,
        cuda=_cuda(part, tb),
        amp=w.amp,
        tp=w.tp,
        grad_accum=w.grad_accum,
        activation_checkpoint=w.activation_checkpoint,
        bf16_gpu=peak_flops.native_bf16(tb.hardware.accelerator or ""),
    )


def cell_forecast(
    tb: TestbedPlan,
    part: SweepPart,
    cell: Cell,
    single: Figure | None,
    link: plans.Network,
    unknown: str = "",
    group: GroupStep | None = None,
    host: HostShare | None = None,
) -> CellForecast:
    """The cell's point and band from one worker's figure over the link (plans.plan, as
    `predict` and the report forecast it); unknown: why there is no figure
    (unknown_single); group: a TP part's group step measured on one node (tp_group),
    which then stands for its compute and TP collectives, the band reaching the
    least and most its measurement and the lone worker's allow (GroupStep,
    Figure.spread); host: what the cell's nodes computing at once on this machine
    cost each step (host_share), the band at its least and most."""
    unit = "tokens" if part.workload.seq_len else "images"
    if single is None:
        return CellForecast(
            cell, None, None, None, None, "no single-worker figure", unknown=unknown, unit=unit
        )
    if cell.workers == 1:
        return CellForecast(cell, single, 1.0, 1.0, 1.0, "one worker", unit=unit)
    across = cell.nodes > 1
    if across and link.busbw is None:
        return CellForecast(cell, single, None, None, None, link.source, unit=unit)
    job = job_of(tb, part, cell.batch)
    stretch, least, shared = _shared_cpus(tb, part, cell, single)
    host = host if across else None
    beside = host or HostShare(1.0, 1.0, 1.0, "")
    # One micro-batch at the figure's rate, as slow as sharing the node and the host make it.
    micro = single.step_s(cell.batch) * stretch * beside.stretch
    plan = plans.plan(
        job,
        link,
        [cell.workers],
        cell.gpus_per_node,
        micro * job.grad_accum if single.in_layout else plans.step_in_layout(micro, job),
        single.timeline,
    )
    if group is not None:
        plan = replace(plan, tp_step_s=group.step_s * beside.stretch)
    row = predictions(plan)[0]
    point, low, high = (float(row[k]) for k in ("efficiency", "efficiency_low", "efficiency_high"))
    if group is not None:
        # E is the lone worker's step over the group's: the band takes both measured
        # intervals, each at its end.
        low *= group.step_s / group.slowest_s * max(0.0, 1 - single.spread)
        high *= group.step_s / group.fastest_s * (1 + single.spread)
    if link.cpu_up_to is not None:
        # CPU work per byte not told from the probe's noise: the point at the probe's
        # figure (link.cpu), the band over none to the most the probe allows.
        for bound in (0.0, link.cpu_up_to):
            other = predictions(replace(plan, cpu=replace(plan.cpu, s_per_byte=bound)))[0]
            low = min(low, float(other["efficiency"]), float(other["efficiency_low"]))
            high = max(high, float(other["efficiency"]), float(other["efficiency_high"]))
    # E is against the lone worker, whose step was the unshared one; where its threads
    # beyond one may have bought less than their CPUs, the band reaches the least stretch,
    # and the host's sharing at the ends its measurements allow.
    point = point / (stretch * beside.stretch)
    low = low / (stretch * beside.most)
    high = high / (least * beside.least)
    if group is not None:
        # The group's measured step holds its node's sharing and its TP collectives.
        inside = group.source
        where = f"{link.source}; {inside}"
    else:
        intra_name = tb.hardware.intra_node or plans.DEFAULTS["intra_node"][0]
        inside = f"{intra_name} inside a node" + ("" if tb.hardware.intra_node else " (assumed)")
        where = f"{link.source}; {inside}" if across and cell.gpus_per_node > 1 else link.source
        if single.timeline and not job.transformer:  # a transformer's come from its shape
            where += "; the baseline's measured gradients replayed"
        where += shared
        inside += shared
    if host is not None:
        where += f"; {host.source}"
    # A set-up detail the file does not give, where its other common choice moves E.
    where += "".join(
        f"; assumed {a['assumed']} (E {a['efficiency']:.2f} under {a['other']})"
        for a in row.get("assumptions", [])
    )
    return CellForecast(
        cell,
        single,
        point,
        low,
        high,
        (where if across else inside) + _how_sharded(job, plan),
        unit=unit,
    )


def _shared_cpus(
    tb: TestbedPlan, part: SweepPart, cell: Cell, single: Figure
) -> tuple[float, float, str]:
    """How much longer each worker of a CPU node computes than the lone worker of the
    figure, where several share the node (bench/cpu_share.py): in proportion to its
    CPUs, and the least (threads beyond one buying nothing), and the words for it; the
    node's CPUs as the baseline's monitor found them, else its `cpus_per_node`."""
    if _cuda(part, tb) or cell.gpus_per_node <= 1:
        return 1.0, 1.0, ""
    k = cell.gpus_per_node
    q = single.node_cpus or _number(given_settings(tb).get("cpus_per_node"))
    if q is None or q <= 0:
        return 1.0, 1.0, f"; the node's CPUs unknown: its {k} workers taken not to share them"
    threads = part.workload.threads
    alone = single.threads or threads
    each = cpu_share.cpus_each(q, k, threads)
    stretch, least = cpu_share.stretches(q, k, threads, alone)
    band = f", the band to x {least:.2f}" if least < stretch else ""
    return (
        stretch,
        least,
        (
            f"; {k} workers share a node's {q:g} CPU{'s' * (q != 1)}: {each:.2g} each, the lone "
            f"worker {cpu_share.cpus_each(q, 1, alone):.2g} (step x {stretch:.2f}{band}, "
            "bench/cpu_share.py)"
        ),
    )


def _number(value: Any) -> float | None:
    """A setting's number (Terraform variables arrive as text); None where it is none."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _how_sharded(job: plans.Job, plan: Plan) -> str:
    """How a transformer cell's step runs, said (hpcbench.performance.sharded_model): bf16
    parameters gathered on CUDA (bench/lm.py's MixedPrecisionPolicy), fp32 on CPU nodes,
    where Gloo's collectives block and its reduce-scatter is an all-reduce unless the
    probe timed it (bench/runtime.py collective_paths). A CNN's: nothing."""
    if not job.transformer:
        return ""
    if job.parallel == "ddp":
        return "; DDP: gradients all-reduced in fp32 buckets"
    timed = any(name == "reduce_scatter" for name, _, _ in plan.collective_links)
    rs = (
        "the probe's reduce-scatter"
        if timed
        else ("reduce-scatter as an all-reduce (Gloo)" if plan.gloo else "reduce-scatter")
    )
    return (
        f"; {job.parallel.upper()}: parameters gathered in "
        f"{'bf16' if plan.param_bytes == 2 else 'fp32'} per block, {rs}, "
        f"{'blocking (Gloo)' if plan.gloo else 'one layer of prefetch'}"
    )


def testbed_forecast(campaign: Campaign, tb: TestbedPlan) -> list[CellForecast]:
    """Every cell of the testbed, forecast from what is known now: its own results and
    those of the testbeds before it in the campaign, which recalibrate its forecast."""
    earlier = [t for t in campaign.testbeds if t.index < tb.index]
    return forecast_from(gather(campaign, [*earlier, tb]), campaign, tb, earlier)


def forecast_from(
    known: Known, campaign: Campaign, tb: TestbedPlan, earlier: Sequence[TestbedPlan]
) -> list[CellForecast]:
    """testbed_forecast's arithmetic, from what was gathered alone (no file is read)."""
    link = link_basis(known, tb, earlier)
    out = []
    for part in tb.parts:
        singles = {
            b: single_worker(known, tb, part, b, earlier)
            for b in sorted({c.batch for c in part.cells})
        }
        unknown = "" if all(singles.values()) else unknown_single(campaign, tb, part)
        groups = {b: tp_group(known, tb, part, b, earlier) for b in singles}
        for cell in part.cells:
            out.append(
                cell_forecast(
                    tb,
                    part,
                    cell,
                    singles[cell.batch],
                    link,
                    unknown,
                    groups[cell.batch],
                    host_share(known, tb, part, cell.batch, cell.nodes),
                )
            )
    return out


def sources(forecasts: list[CellForecast]) -> list[str]:
    """Where a testbed's forecast comes from: one worker's figure per batch, and E
    across workers (each said once)."""
    lines = []
    singles = {f.cell.batch: f for f in forecasts}
    for batch, f in sorted(singles.items()):
        lines.append(f"one worker at batch {batch}: {f.single.source if f.single else f.unknown}")
    links = sorted({f.link_source for f in forecasts if f.cell.workers > 1 and f.single})
    return lines + [f"E across workers: {link}" for link in links]


def cell_lines(forecasts: list[CellForecast]) -> list[str]:
    """Each configuration of several workers: images/s and E with its band."""
    lines = []
    for f in forecasts:
        if f.cell.workers == 1:
            continue
        if f.efficiency is None or f.per_s is None:
            lines.append(f"{f.cell.label}: unknown ({f.link_source})")
            continue
        lines.append(
            f"{f.cell.label}: {f.per_s:.1f} {f.unit}/s, E {f.efficiency:.2f} "
            f"({f.efficiency_low or 0:.2f}-{f.efficiency_high or 0:.2f})"
        )
    return lines
