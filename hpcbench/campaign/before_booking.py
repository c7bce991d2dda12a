"""One worker, and one node's tensor-parallel group, measured on this machine before a
testbed of its cores is booked.

A local testbed's nodes are containers on this machine, so its one worker's speed can
be measured before it is deployed: the bench in the nodes' image under the first node's
CPU limits, as the booking check's plan gives them (hpcbench.testbeds.here). The
forecast before booking then starts from this machine's speed (forecast.single_worker
takes it before `expect:`), not from a figure of the machine a campaign file was
written on. A part with tensor parallelism also gets its TP group measured, its tp
workers under torchrun in one container of the node's limits, as the testbed's
one-node cell runs them: on CPU nodes its collectives run through Gloo on the cores
the compute shares, which no figure of another machine tells (forecast.tp_group).
And where a testbed's cells span several of its nodes, the lone worker runs in every
one of those nodes' containers at once (each under its own planned limits): the nodes
share this machine's cores, its memory and whatever else runs on it, which one worker
alone does not see (forecast.host_share). Their containers start a second or two
apart, so only the windows each timed while every other one was timing too are kept
(two windows more than the sweep's are asked for that), and of those the slowest
worker's, as it holds up a synchronous step.
One run per distinct limits, baseline, workers and batch, with the sweep's own method
(warm-up, windows, steps); its record goes to the campaign's before_booking store,
naming the testbeds it stands for, so that a resumed campaign measures nothing twice.
A run that fails is said and recorded; the forecast then goes on without it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace

from hpcbench.campaign import forecast
from hpcbench.campaign.datatypes import Campaign, SweepPart
from hpcbench.core import paths
from hpcbench.launchers.base import Placement, RunSpec
from hpcbench.launchers.local import LocalLauncher
from hpcbench.launchers.torchrun import TorchrunLauncher
from hpcbench.measure import analysis, sweep
from hpcbench.schedulers import process
from hpcbench.testbeds.here import BENCH_IN_CONTAINER, PYTHON, NodeLimits, in_container

# The windows a run of the nodes at once times beyond the sweep's: those its workers
# time before the last one has started, or after the first one has ended, are dropped.
AT_ONCE_EXTRA_WINDOWS = 2


@dataclass(frozen=True)
class Wanted:
    """One run to make: a part's baseline (workers 1) or its TP group (workers tp, on
    one node) at `batch` under `node`'s limits, standing for these testbeds; beside:
    the other nodes' limits, each of which runs a lone worker at the same time."""

    part: SweepPart
    batch: int
    node: NodeLimits
    testbeds: tuple[str, ...]
    workers: int = 1
    beside: tuple[NodeLimits, ...] = ()

    @property
    def nodes(self) -> tuple[NodeLimits, ...]:
        return (self.node, *self.beside)

    @property
    def launcher(self) -> type[LocalLauncher] | type[TorchrunLauncher]:
        """A group under torchrun, as a testbed's node starts its ranks (its static
        rendezvous on the container's loopback); one worker needs no launcher."""
        return TorchrunLauncher if self.workers > 1 else LocalLauncher

    def label(self) -> str:
        w = self.part.workload
        size = f"{w.seq_len} tokens" if w.seq_len else f"{w.image_size} px"
        group = f", TP {w.tp} ({w.parallel})" if self.workers > 1 else ""
        return f"{w.model} at {size}, batch {self.batch}{group}"

    def who(self) -> str:
        if self.beside:
            return f"one worker on each of {len(self.nodes)} nodes at once"
        return f"a TP group of {self.workers} workers" if self.workers > 1 else "one worker"

    def limits_said(self) -> str:
        if self.beside and len(set(self.nodes)) > 1:
            return "; ".join(n.said() for n in self.nodes)
        return self.node.said() + (" each" if self.beside else "")


def wanted(campaign: Campaign, limits: Mapping[str, tuple[NodeLimits, ...]]) -> list[Wanted]:
    """The runs the plan lacks: for each testbed with limits (its kind planned its nodes
    on this machine) and each batch of a sweep part on synthetic data (a data folder is
    on the testbed's shared file system, which is not there yet), one worker where its
    figure would not be measured (none of its own, of an earlier testbed of the same
    hardware, of an earlier run before booking, of `calibrate_from:`), and a TP part's
    group where its step would not be (forecast.tp_group), and for each count of nodes
    its cells span, a lone worker on each of them at once where that would not be
    (forecast.host_share); testbeds of the same limits share a run."""
    known = forecast.gather(campaign, campaign.testbeds)
    runs: dict[tuple[object, ...], Wanted] = {}

    def want(run: Wanted, *key: object) -> None:
        have = runs.get(key)
        # A testbed's parts share its runs too: each testbed named once.
        more = tuple(t for t in run.testbeds if have is None or t not in have.testbeds)
        runs[key] = replace(run, testbeds=(*(have.testbeds if have else ()), *more))

    for tb in campaign.testbeds:
        nodes = limits.get(tb.name, ())
        if not nodes:
            continue
        node = nodes[0]
        earlier = [t for t in campaign.testbeds if t.index < tb.index]
        for part in tb.parts:
            w = part.workload
            if w.data != "synthetic":
                continue
            # The lone worker of a TP part trains without TP, as its sweep's baseline.
            lone = replace(part, workload=replace(w, tp=1)) if w.tp > 1 else part
            for batch in sorted({c.batch for c in part.cells}):
                figure = forecast.single_worker(known, tb, part, batch, earlier)
                if figure is None or figure.slowest is None:  # not measured already
                    want(
                        Wanted(lone, batch, node, (tb.name,)),
                        node,
                        forecast.baseline_key(part),
                        batch,
                    )
                if w.tp > 1 and forecast.tp_group(known, tb, part, batch, earlier) is None:
                    want(
                        Wanted(part, batch, node, (tb.name,), w.tp),
                        node,
                        forecast.baseline_key(part),
                        batch,
                        w.tp,
                        w.parallel,
                    )
                longer = replace(
                    lone, workload=replace(lone.workload, windows=w.windows + AT_ONCE_EXTRA_WINDOWS)
                )
                for n in sorted({c.nodes for c in part.cells if 1 < c.nodes <= len(nodes)}):
                    if forecast.host_share(known, tb, part, batch, n) is None:
                        want(
                            Wanted(longer, batch, node, (tb.name,), beside=nodes[1:n]),
                            nodes[:n],
                            forecast.baseline_key(part),
                            batch,
                        )
    return list(runs.values())


def measure(campaign: Campaign, run: Wanted, say: Callable[[str], None]) -> dict:
    """Make the run, append its record to the campaign's before_booking store, say its
    figure (or why there is none); the record."""
    part = run.part
    spec = RunSpec(
        script="train.py",
        args=tuple(sweep.workload_args(part.workload, part.target.backend, run.batch)),
        python=PYTHON,
        workdir=BENCH_IN_CONTAINER,
        placements=(Placement("localhost", run.workers),),
        iface="lo",  # the container's only interface (--network none)
        time_limit_s=part.sweep.timeout_s,
    )
    (command,) = run.launcher().commands(spec)
    name = f"hpcbench-before-booking-{uuid.uuid4().hex[:12]}"  # one a run, however started
    say(
        f"{run.who()} on this machine before booking {', '.join(run.testbeds)}: "
        f"{run.label()}, {run.limits_said()}"
    )
    outcome = process.run_commands(
        [
            in_container(node, command, f"{name}-{i}", paths.BENCH_DIR)
            for i, node in enumerate(run.nodes)
        ],
        part.sweep.timeout_s,
    )
    apart = False  # every node's worker ran, but not at once
    if outcome.ok and run.beside:
        every = len(outcome.records) == len(run.nodes)
        together = at_once(outcome.records) if every else None
        apart = every and together is None
        outcome = replace(outcome, records=[] if together is None else [together])
    record = sweep.complete(_base(campaign, run), outcome)
    if apart:
        record["error"] = AT_ONCE_FAILED
    campaign.before_booking_store().append(record)
    if record["status"] == "ok":
        stats = analysis.run_stats(record)
        say(f"  {stats['throughput']:.1f} ± {stats['ci95']:.1f} {record.get('unit', 'images')}/s")
    else:
        first = record["error"].splitlines()[0]
        say(f"  no figure: {first}; the forecast goes on without it")
    return record


AT_ONCE_FAILED = "no worker of each node timed a window while every other one was timing"


def at_once(results: Sequence[dict]) -> dict | None:
    """Of the workers' records (one a node, run at once), the slowest one's with only the
    windows that every worker timed at once: those inside the span from the last
    first timed step to the first end of timing (each window's wall clock from its
    first timed step and the windows before it; one process, no barrier to wait at).
    None where a worker kept no window (its record is then no figure)."""
    spans = [_windows(r) for r in results]
    if not all(spans):
        return None
    begin = max(w[0][0] for w in spans)
    end = min(w[-1][1] for w in spans)
    kept = [[t for a, b, t in w if a >= begin and b <= end] for w in spans]
    if not all(kept):
        return None
    slowest = max(range(len(kept)), key=lambda i: sum(kept[i]) / len(kept[i]))
    return {**results[slowest], "window_times": kept[slowest]}


def _windows(result: dict) -> list[tuple[float, float, float]]:
    """A record's windows as (start, end, seconds) on the wall clock; [] where its first
    timed step or a window time is missing."""
    first = (result.get("timeline") or {}).get("first_timed_step")
    times = result.get("window_times") or []
    if not isinstance(first, int | float) or not all(isinstance(t, int | float) for t in times):
        return []
    out, at = [], float(first)
    for t in times:
        out.append((at, at + t, t))
        at += t
    return out


def _base(campaign: Campaign, run: Wanted) -> dict:
    """The record's configuration, as a sweep's baseline run has it (sweep.base_record),
    with the testbeds it stands for and the limits it ran under."""
    w = run.part.workload
    first = campaign.testbed(run.testbeds[0])
    return {
        "kind": "run",
        "env": first.env,
        "model": w.model,
        "backend": run.part.target.backend,
        "batch": run.batch,
        "image_size": w.image_size,
        "data": w.data,
        "nodes": 1,
        "workers": run.workers,
        # A CPU node's one slot, as a sweep's; a group's ranks are its node's.
        "gpus_per_node": run.workers if run.workers > 1 else run.part.gpus_per_node or 1,
        "repeat": 0,
        "warmup": w.warmup,
        "windows": w.windows,
        "steps": w.steps,
        "launcher": run.launcher.name,
        "fingerprint": {},
        "testbeds": list(run.testbeds),
        "node_limits": asdict(run.node),
        **(
            {"alongside": len(run.nodes), "beside_limits": [asdict(n) for n in run.beside]}
            if run.beside
            else {}
        ),
    }


def measure_all(
    campaign: Campaign, limits: Mapping[str, tuple[NodeLimits, ...]], say: Callable[[str], None]
) -> Sequence[dict]:
    """Every wanted run, one after another; their records."""
    return [measure(campaign, run, say) for run in wanted(campaign, limits)]
