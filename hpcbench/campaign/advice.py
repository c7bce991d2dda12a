"""The advice `hpcbench advise` prints: where to book, in which layout and on how many
nodes, to train a model on a budget of tokens (or images), before anything is booked.

Every testbed the campaign files name (a partition, a testbed hpcbench deploys, your
hosts) is searched: each node count up to its limit, and for a transformer every
layout the model allows there (DDP, FSDP2, HSDP across nodes, tensor parallelism inside
a node under FSDP2 or HSDP, checkpointing where memory needs it, and with
--global-batch the micro-batch and accumulation that keep it). Each option is a cell
the campaign machinery forecasts as `campaign plan` does (forecast.testbed_forecast,
estimate.testbed: one worker's figure, E with its band, memory per GPU), so an option
and the cell of the campaign file advise writes are one forecast. From its throughput:
the time to the budget with its band, GPU- and node-hours, energy at most (the GPUs'
board power, bench/peak_flops.py) and the cost where `price:` is given.

The front is the options no other beats on time, GPU-hours and cost at once (the
Pareto front); each other option says which one beats it, or that it does not fit.

The search and the front here; the campaign file the advice writes, advice_file.py; the
command, its text, JSON and chart, advise.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcbench.campaign import campaign_file, checks, estimate, forecast
from hpcbench.campaign.checks import NAME, Problem
from hpcbench.campaign.cost import booked
from hpcbench.campaign.datatypes import Campaign, SweepPart, TestbedPlan
from hpcbench.campaign.testbeds import testbed as read_testbed
from hpcbench.core.bench import peak_flops, transformer_configs, workload_options
from hpcbench.core.errors import UsageError
from hpcbench.core.progress import format_duration
from hpcbench.measure.store import Store
from hpcbench.performance import memory, plans, sharded_model

# A budget's size: 20B, 1.5e12, 300M (k, M, B or G, T: powers of 1000).
AMOUNT = re.compile(r"([0-9]+(?:\.[0-9]*)?(?:e[0-9]+)?)([kMBGT]?)", re.ASCII)
MAX_AMOUNT = checks.MAX_BUDGET
SCALE = {"": 1.0, "k": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
# The sweep keys that say what is trained and in which layout: the advice sets them per
# option; the file's other keys (device, repeats, backend, ...) say how it runs, and stay.
CHOSEN = (
    "model",
    "batch",
    "nodes",
    "gpus_per_node",
    "parallel",
    "shard_group",
    "tp",
    "grad_accum",
    "activation_checkpoint",
)
# A CNN's input keys, dropped where a transformer is advised from a CNN's file; a
# transformer's (and its token file), where a CNN is advised from a transformer's.
CNN_ONLY = ("image_size", "data", "decode", "step", "data_workers")
TRANSFORMER_ONLY = ("seq_len",)
DEFAULT_MAX_NODES = 4
MICRO_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# Where the file's sweep trains another model than the one advised: the largest
# micro-batch per GPU searched, in sequences (a CNN keeps the file's images per GPU).
MICRO_MAX = 8


def amount(text: str, flag: str) -> float:
    """A budget as written (20B, 1.5e12): above 0 and at most MAX_AMOUNT, else one
    UsageError line."""
    match = AMOUNT.fullmatch(text.strip())
    value = float(match[1]) * SCALE[match[2]] if match else math.nan
    if not 0 < value <= MAX_AMOUNT:
        raise UsageError(
            f"{flag} {text[:40]!r}: give a count above 0 and at most {MAX_AMOUNT:.0e}, "
            "such as 20B or 1.5e12"
        )
    return value


@dataclass(frozen=True)
class Layout:
    """How an option trains: parallelism, TP group, micro-batch per GPU, micro-batches
    per step, and checkpointing (a CNN's: ddp with its batch)."""

    parallel: str
    micro_batch: int
    tp: int = 1
    grad_accum: int = 1
    checkpoint: str = "none"

    def label(self, transformer: bool) -> str:
        if not transformer:
            return f"batch {self.micro_batch} per GPU" + (
                f" x {self.grad_accum} accumulated" if self.grad_accum > 1 else ""
            )
        words = [self.parallel]
        if self.tp > 1:
            words.append(f"TP {self.tp}")
        batch = f"micro-batch {self.micro_batch}"
        words.append(batch + (f" x {self.grad_accum}" if self.grad_accum > 1 else ""))
        if self.checkpoint != "none":
            words.append(f"checkpoint {self.checkpoint}")
        return ", ".join(words)

    def sweep(self, transformer: bool) -> dict[str, Any]:
        """The campaign sweep keys that give it."""
        keys: dict[str, Any] = {"batch": [self.micro_batch]}
        if transformer:
            keys["parallel"] = self.parallel
            if self.tp > 1:
                keys["tp"] = self.tp
            if self.grad_accum > 1:
                keys["grad_accum"] = self.grad_accum
            if self.checkpoint != "none":
                keys["activation_checkpoint"] = self.checkpoint
        return keys


@dataclass
class Option:
    """One testbed x layout x node count, forecast; verdict: why it is on the front or
    why it fell out."""

    number: int
    file: str
    testbed: str
    title: str
    nodes: int
    gpus_per_node: int
    layout: Layout
    name: str  # the testbed's name in the campaign file advise writes
    raw: dict[str, Any]  # that testbed's keys, as written
    sweep: dict[str, Any]  # its sweep but the layout and node count (Place.sweep)
    transformer: bool
    per_s: float | None = None  # tokens (images) per second, all workers
    per_s_low: float | None = None
    per_s_high: float | None = None
    efficiency: float | None = None
    efficiency_low: float | None = None
    efficiency_high: float | None = None
    sources: list[str] = field(default_factory=list)
    fits: bool = True
    memory_need: int | None = None
    memory_line: str = ""
    hours: float | None = None  # the run to the budget, at the point
    hours_low: float | None = None
    hours_high: float | None = None
    gpu_hours: float | None = None
    node_hours: float | None = None
    energy_kwh: float | None = None
    energy_source: str = ""
    cost: float | None = None
    currency: str = ""
    queue: str = ""
    verdict: str = ""
    front: bool = False
    cpu: bool | None = None  # its runs on CPU nodes (None: not forecast)

    @property
    def workers(self) -> int:
        return self.nodes * self.gpus_per_node

    def shape(self) -> str:
        # A node without GPUs runs worker processes (gpus_per_node counts workers).
        unit = "GPU" if self.cpu is False else "worker"
        return (
            f"{self.nodes} node{'s' * (self.nodes > 1)} x {self.gpus_per_node} {unit}"
            f"{'s' * (self.gpus_per_node > 1)}, {self.layout.label(self.transformer)}"
        )

    def record(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out.pop("raw")
        out.pop("sweep")
        out["layout"] = dataclasses.asdict(self.layout)
        out["workers"] = self.workers
        return out


@dataclass(frozen=True)
class Request:
    model: str
    budget: float
    unit: str  # tokens | images
    files: tuple[Path, ...]
    global_batch: int | None = None
    seq_len: int = 0
    testbeds: tuple[str, ...] = ()
    max_nodes: int = DEFAULT_MAX_NODES


@dataclass
class Advice:
    request: Request
    options: list[Option]
    said: list[str]  # where the search's limits come from, once each
    params: int | None = None
    flops_per_token: int | None = None
    name: str = ""  # a transformer's name as its config reads (transformer_configs)

    @property
    def front(self) -> list[Option]:
        return [o for o in self.options if o.front]

    def best(self, key: str) -> Option | None:
        scored = [o for o in self.front if getattr(o, key) is not None]
        return min(scored, key=lambda o: getattr(o, key)) if scored else None


# ------------------------------------------------------------------ the search
def model_kind(model: str) -> bool:
    """True for a transformer (a name of the table or a config.json, read here), False
    for a CNN; a config hpcbench cannot honour is one UsageError line naming its field."""
    return sharded_model.shape(model) is not None


def _sweep_of(
    campaign: Campaign,
    tb: TestbedPlan,
    raw_tb: dict[str, Any],
    request: Request,
    transformer: bool,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The sweep an option runs with: the file's (the campaign's under the testbed's) less
    what the advice chooses, and where the file trains the other kind of model, its
    input keys (a CNN's images are no transformer's tokens); and the file's, merged."""
    merged = {**campaign.sweep, **(raw_tb.get("sweep") or {})}
    drop = set(CHOSEN)
    if transformer != model_kind(tb.parts[0].workload.model):
        drop |= set(CNN_ONLY if transformer else (*TRANSFORMER_ONLY, "data"))
    kept = {k: v for k, v in merged.items() if k.replace("-", "_") not in drop}
    kept["model"] = request.model
    if transformer and request.seq_len:
        kept["seq_len"] = request.seq_len
    return kept, merged


def _raw_keys(raw_tb: dict[str, Any], same_model: bool) -> dict[str, Any]:
    """A testbed's keys for an option: less its sweep and exclusions (the option gives
    its own), and less `expect:`'s one-worker figure where that was another model's."""
    raw = {k: v for k, v in raw_tb.items() if k not in ("sweep", "exclude")}
    expect = raw.get("expect")
    if isinstance(expect, dict) and not same_model:
        kept = {k: v for k, v in expect.items() if k not in ("images_per_s", "tokens_per_s")}
        raw = {k: v for k, v in raw.items() if k != "expect"} | ({"expect": kept} if kept else {})
    return raw


def _file_batches(merged: dict[str, Any]) -> list[int]:
    batch = merged.get("batch", [32])
    values = batch if isinstance(batch, list) else [batch]
    return [int(v) for v in values if isinstance(v, int) and not isinstance(v, bool)] or [32]


def _node_counts(limit: int) -> list[int]:
    """Every count up to 8, then powers of two, and the limit itself."""
    counts = {n for n in range(1, min(limit, 8) + 1)}
    n = 16
    while n < limit:
        counts.add(n)
        n *= 2
    counts.add(limit)
    return sorted(counts)


def _layouts(
    transformer: bool, config: Any, per_node: int, seq_len: int, nodes: int
) -> Iterator[tuple[str, int]]:
    """(parallelism, TP) pairs the model allows on `nodes` nodes of `per_node` GPUs."""
    if not transformer:
        yield "ddp", 1
        return
    for parallel in workload_options.PARALLEL:
        if parallel != "ddp" and nodes * per_node == 1:
            continue  # one worker trains unwrapped whatever the parallelism (bench/lm.py)
        if parallel == "hsdp" and (nodes < 2 or per_node < 2):
            continue  # HSDP inside one node is FSDP2's run again
        for tp in (t for t in (1, 2, 4, 8, 16) if t <= per_node and per_node % t == 0):
            if tp > 1 and parallel == "ddp":
                continue  # torch's DDP trains no tensor-parallel module
            if tp > 1 and transformer_configs.tp_split_problem(config, tp, seq_len):
                continue
            yield parallel, tp


def _micro(
    global_batch: int | None, dp: int, batches: list[int], transformer: bool
) -> list[tuple[int, int]] | None:
    """(micro-batch, accumulation) choices, largest micro-batch first, none above the
    largest of `batches`: with a global batch, those that keep it over dp ranks (None
    where it does not divide; a CNN's workload accumulates nothing, so its one choice is
    the whole share per GPU); without, that largest and each power of two below it."""
    most = max(batches)
    if global_batch is None:
        return [
            (m, 1) for m in sorted({most, *(b for b in MICRO_BATCHES if b < most)}, reverse=True)
        ]
    if global_batch % dp:
        return None
    per_rank = global_batch // dp
    if not transformer:
        return [(per_rank, 1)]
    micro = sorted(
        {m for m in (*MICRO_BATCHES, per_rank) if per_rank % m == 0 and m <= most} or {1},
        reverse=True,
    )
    return [(m, per_rank // m) for m in micro]


@dataclass(frozen=True)
class Fitted:
    """The layout chosen for a node count, its memory per GPU (None: not forecast) and
    whether that fits; where nothing fits, the layout that needs the least."""

    layout: Layout
    need: int | None
    fits: bool = True


def _fitting(
    tb: TestbedPlan,
    part: SweepPart,
    config: Any,
    workers: int,
    per_node: int,
    choices: list[tuple[int, int]],
    size: int | None,
) -> Fitted:
    """The first of `choices` x checkpointing (least recompute first) whose memory per
    GPU fits `size` (the first where size is unknown, or memory is not forecast: a CNN,
    CPU nodes); else the one that needs the least, marked so."""
    w = part.workload
    least: Fitted | None = None
    for checkpoint in memory.CHECKPOINT:
        for micro, accum in choices:
            layout = Layout(w.parallel, micro, w.tp, accum, checkpoint)
            job = dataclasses.replace(
                forecast.job_of(tb, part, micro), grad_accum=accum, activation_checkpoint=checkpoint
            )
            if config is None or not job.cuda:
                return Fitted(layout, None)
            plan = plans.memory_layout(job, workers, per_node)
            need = memory.breakdown(config, job.seq_len, micro, plan).total
            if size is None or memory.fit(need, size).fits:
                return Fitted(layout, need)
            if least is None or need < (least.need or 0):
                least = Fitted(layout, need, fits=False)
    assert least is not None  # choices is never empty
    return least


def _plan(
    campaign: Campaign, index: int, raw: dict[str, Any], sweep: dict[str, Any], where: str
) -> TestbedPlan:
    """A testbed of raw keys under `sweep`, read as the campaign file reads it."""
    try:
        return read_testbed(index, raw, where, sweep, False, campaign.out, campaign.path.parent)
    except Problem as problem:
        raise UsageError(f"{campaign.path}: {problem.path}: {problem.message}") from None


def layout_name(tb: str, layout: Layout, transformer: bool, *more: str) -> str:
    """A testbed name of the written file: its place's, then `more`, then its layout
    but the parallelism (its sweep lists those); hashed where too long for a name."""
    words = [tb, *more]
    if transformer and layout.tp > 1:
        words.append(f"tp{layout.tp}")
    if transformer and layout.checkpoint != "none":
        words.append(f"ac{layout.checkpoint[0]}")
    words.append(f"b{layout.micro_batch}")
    if layout.grad_accum > 1:
        words.append(f"x{layout.grad_accum}")
    name = "-".join(words)
    if NAME.fullmatch(name):
        return name
    return f"{tb[:30].rstrip('-')}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def _testbed_name(tb: str, layout: Layout, nodes: int, transformer: bool) -> str:
    """The name of the testbed an option is forecast on: its place's, node count and
    layout."""
    return layout_name(tb, layout, transformer, f"{nodes}n", *[layout.parallel] * transformer)


@dataclass(frozen=True)
class Place:
    """What the search knows of one testbed of a file before any option: the campaign
    it is read with, its keys, the sweep its options share, its GPUs per node, the most
    nodes searched, its memory per GPU (None: not known or not forecast) and the
    micro-batches per GPU to try (the largest first)."""

    campaign: Campaign
    tb: TestbedPlan
    raw: dict[str, Any]
    sweep: dict[str, Any]
    per_node: int
    limit: int
    size: int | None
    batches: list[int]
    transformer: bool
    config: Any

    @property
    def where(self) -> str:
        return f"testbeds[{self.tb.index - 1}]"

    def plan(self, name: str, layout: Layout, nodes: int) -> TestbedPlan:
        """The testbed of an option (its layout on `nodes` nodes), read as the campaign
        file advise writes is read."""
        own = {
            **self.sweep,
            **layout.sweep(self.transformer),
            "nodes": [nodes],
            "gpus_per_node": self.per_node,
        }
        return _plan(self.campaign, self.tb.index, {**self.raw, "name": name}, own, self.where)

    def option(self, layout: Layout, nodes: int, number: int) -> Option:
        return Option(
            number=number,
            file=str(self.campaign.path),
            testbed=self.tb.name,
            title=self.tb.title,
            nodes=nodes,
            gpus_per_node=self.per_node,
            layout=layout,
            name=_testbed_name(self.tb.name, layout, nodes, self.transformer),
            raw=self.raw,
            sweep=self.sweep,
            transformer=self.transformer,
        )


def search(request: Request) -> Advice:
    config = sharded_model.shape(request.model)  # None: a CNN
    options: list[Option] = []
    said: list[str] = []
    seen: set[str] = set()
    places: dict[tuple[Any, ...], str] = {}
    for path in request.files:
        campaign = campaign_file.load(path)
        data = campaign_file.read_yaml(path)
        earlier = tuple(
            campaign.testbed_out(t)
            for t in campaign.testbeds
            if Store(campaign.testbed_out(t)).exists()
        )
        campaign = dataclasses.replace(campaign, calibrate_from=campaign.calibrate_from + earlier)
        for i, tb in enumerate(campaign.testbeds):
            if request.testbeds and tb.name not in request.testbeds:
                continue
            seen.add(tb.name)
            # Testbeds of one place and one set of assumptions (a file's sweeps of several
            # models on one partition) are one place to book: searched once.
            key = (tb.fingerprint, tb.hardware, tb.price)
            if key in places:
                said.append(f"{tb.name} ({path}): the place of {places[key]}, searched once")
                continue
            places[key] = tb.name
            place = _place(campaign, tb, dict(data["testbeds"][i]), request, config, said)
            options += _options_of(place, request, len(options))
    missing = [t for t in request.testbeds if t not in seen]
    if missing:
        named = ", ".join(str(p) for p in request.files)
        raise UsageError(f"--testbed {missing[0]}: no testbed of that name in {named}")
    advice = Advice(request, options, said)
    if config is not None:
        seq = request.seq_len or config.seq_len
        advice.name = config.name
        advice.params = transformer_configs.param_counts(config)["total"]
        advice.flops_per_token = transformer_configs.flops_per_token(config, seq)
    _rank(advice)
    return advice


def _place(
    campaign: Campaign,
    tb: TestbedPlan,
    raw_tb: dict[str, Any],
    request: Request,
    config: Any,
    said: list[str],
) -> Place:
    """The testbed as the search takes it; what it assumes, said once."""
    transformer = config is not None
    sweep, merged = _sweep_of(campaign, tb, raw_tb, request, transformer)
    trained = tb.parts[0].workload.model
    limit = tb.nodes_available or request.max_nodes
    if not tb.nodes_available:
        said.append(
            f"{tb.name} ({campaign.path}): {campaign.path.name} gives no node count: up to "
            f"{limit} nodes searched (--max-nodes)"
        )
    batches = _file_batches(merged)
    if transformer and trained != request.model:
        # Sequences per GPU are the model's own: another transformer's (a 70B's 1) or a
        # CNN's images say nothing of this one's.
        batches = [MICRO_MAX]
        said.append(
            f"{tb.name}: its sweep trains another model: micro-batches up to {MICRO_MAX} "
            "sequences per GPU searched (--global-batch fixes a step's)"
        )
    cuda = merged.get("device", "auto") != "cpu"
    return Place(
        campaign=campaign,
        tb=tb,
        raw=_raw_keys(raw_tb, trained == request.model),
        sweep=sweep,
        per_node=tb.gpus_per_node or max(p.gpus_per_node for p in tb.parts),
        limit=limit,
        size=_memory_size(tb, said) if transformer and cuda else None,
        batches=batches,
        transformer=transformer,
        config=config,
    )


def _memory_size(tb: TestbedPlan, said: list[str]) -> int | None:
    """The testbed's memory per GPU: its accelerator's, else where the name gives no size
    the smallest its part comes in (said: an option that fits it fits the larger too);
    None where no name or row gives one (said too: whether an option fits is unknown)."""
    name = tb.hardware.accelerator
    if not name:
        said.append(f"{tb.name}: no `hardware: accelerator`: whether an option fits is unknown")
        return None
    size, why = peak_flops.memory(name)
    if size is not None:
        return size
    known = peak_flops.sizes(name)
    if not known:
        said.append(f"{tb.name}: whether an option fits is unknown: {why}")
        return None
    said.append(
        f"{tb.name}: {name} names no size of {', '.join(f'{k / 1e9:.0f} GB' for k in known)}: "
        f"the smallest assumed (`hardware: {{accelerator: NAME}}` with the size gives it)"
    )
    return known[0]


def _options_of(place: Place, request: Request, numbered: int) -> list[Option]:
    """The testbed's options: each node count x each layout the model allows there,
    numbered on from `numbered`."""
    seq_len = request.seq_len or (place.config.seq_len if place.config is not None else 0)
    # One testbed per parallelism x TP, whose workload the memory forecast reads.
    probes: dict[tuple[str, int], TestbedPlan] = {}
    chosen: list[tuple[Layout, int]] = []  # (layout, nodes) that fit
    unfit: list[tuple[Layout, int, int | None]] = []
    per_node = place.per_node
    for nodes in _node_counts(place.limit):
        for parallel, tp in _layouts(place.transformer, place.config, per_node, seq_len, nodes):
            if (parallel, tp) not in probes:
                probes[parallel, tp] = place.plan(
                    place.tb.name, Layout(parallel, place.batches[0], tp), 1
                )
            probe = probes[parallel, tp]
            workers = nodes * per_node
            choices = _micro(request.global_batch, workers // tp, place.batches, place.transformer)
            if choices is None:
                continue
            found = _fitting(
                probe, probe.parts[0], place.config, workers, per_node, choices, place.size
            )
            if found.fits:
                chosen.append((found.layout, nodes))
            else:
                unfit.append((found.layout, nodes, found.need))
    out: list[Option] = []
    for layout, nodes in chosen:
        out.append(_forecast(place, layout, nodes, request, numbered + len(out) + 1))
    for layout, nodes, need in unfit:
        o = place.option(layout, nodes, numbered + len(out) + 1)
        o.fits, o.memory_need = False, need
        o.memory_line = (
            f"memory {(need or 0) / 1e9:.1f} GB per GPU in its least layout "
            f"({layout.label(True)}), beside {(place.size or 0) / 1e9:.0f} GB "
            f"({memory.usable_bytes(place.size or 0) / 1e9:.1f} GB usable)"
        )
        o.verdict = f"does not fit: {o.memory_line}"
        out.append(o)
    return out


def _forecast(place: Place, layout: Layout, nodes: int, request: Request, number: int) -> Option:
    """One option forecast as `campaign plan` forecasts the cell advise writes for it."""
    o = place.option(layout, nodes, number)
    tb = place.tb
    plan = place.plan(o.name, layout, nodes)
    alone = dataclasses.replace(place.campaign, testbeds=(plan,))
    forecasts = forecast.testbed_forecast(alone, plan)
    est = estimate.testbed(alone, plan, [], forecasts)
    [fc] = [f for f in forecasts if f.cell.workers == o.workers]
    o.sources = forecast.sources([fc])
    if est.memory is not None and fc.cell.id in est.memory.cells:
        cell_memory = est.memory.cells[fc.cell.id]
        o.fits, o.memory_need = cell_memory.fits, cell_memory.need
        o.memory_line = cell_memory.line()
    if est.queue is not None:
        o.queue = (
            "unknown until a job has run"
            if est.queue.seconds is None
            else f"{format_duration(est.queue.seconds)} ({est.queue.source})"
        )
    if not o.fits:
        o.verdict = f"does not fit: {o.memory_line}"
        return o
    if fc.per_s is None or fc.single is None:
        o.verdict = f"no forecast: {fc.unknown or fc.link_source}"
        return o
    scale = fc.cell.workers * fc.single.per_s
    o.per_s, o.efficiency = fc.per_s, fc.efficiency
    o.efficiency_low, o.efficiency_high = fc.efficiency_low, fc.efficiency_high
    o.per_s_low = scale * (fc.efficiency_low or fc.efficiency or 0) or None
    o.per_s_high = scale * (fc.efficiency_high or fc.efficiency or 0) or None
    # A budget in samples of a transformer is its sequences; else the budget's unit is
    # the throughput's (tokens, or a CNN's images).
    per_unit = fc.single.per_sample if request.unit == "samples" else 1

    def hours(rate: float | None) -> float | None:
        return None if not rate else request.budget * per_unit / rate / 3600

    o.hours, o.hours_low, o.hours_high = hours(o.per_s), hours(o.per_s_high), hours(o.per_s_low)
    assert o.hours is not None
    o.cpu = plan.parts[0].workload.device == "cpu"
    gpus = 0 if o.cpu else o.workers
    # CPU nodes book no GPU: their node-hours are what the booked-hours objective weighs.
    o.gpu_hours, o.node_hours = (gpus * o.hours if gpus else None), nodes * o.hours
    o.energy_kwh, o.energy_source = _energy(tb, gpus, o.hours)
    if tb.price is not None:
        o.cost, o.currency = booked(tb.price, o.node_hours, o.gpu_hours), tb.price.currency
    return o


def _energy(tb: TestbedPlan, gpus: int, hours: float) -> tuple[float | None, str]:
    """kWh at most (the GPUs at their board's maximum power) and its source, or None and
    why there is no figure."""
    if not gpus:
        return None, "CPU nodes: no board power in bench/peak_flops.py"
    if not tb.hardware.accelerator:
        return None, "no `hardware: accelerator` to read the board power of"
    watts, source = peak_flops.power(tb.hardware.accelerator)
    if watts is None:
        return None, source
    return gpus * watts * hours / 1000, f"at most: {gpus} GPUs x {watts} W ({source})"


# ------------------------------------------------------------------ the front
OBJECTIVES = (("hours", "slower"), ("gpu_hours", "more GPU-hours"), ("cost", "dearer"))


def _beats(a: Option, b: Option) -> list[str] | None:
    """How a beats b (b's words: slower, more GPU-hours, dearer): a is no worse on any
    objective both have and better on one; None where it does not."""
    worse = []
    for key, word in OBJECTIVES:
        x, y = getattr(a, key), getattr(b, key)
        if key == "gpu_hours" and x is None and y is None:  # CPU nodes: what they book
            key, word = "node_hours", "more node-hours"
            x, y = a.node_hours, b.node_hours
        if x is None or y is None:
            continue
        if x > y:
            return None
        if x < y:
            worse.append(word)
    return worse or None


def _rank(advice: Advice) -> None:
    scored = [o for o in advice.options if o.fits and o.hours is not None]
    for o in scored:
        beaten = [(a, w) for a in scored if a is not o and (w := _beats(a, o))]
        if not beaten:
            o.front = True
            continue
        a, words = min(beaten, key=lambda aw: aw[0].hours or 0)
        o.verdict = f"{' and '.join(words)} than #{a.number} ({a.testbed}, {a.shape()})"
    front = [o for o in scored if o.front]
    for key, word in (
        ("hours", "fastest"),
        ("gpu_hours", "fewest GPU-hours"),
        ("cost", "cheapest"),
    ):
        ranked = [o for o in front if getattr(o, key) is not None]
        if ranked:
            best = min(ranked, key=lambda o: getattr(o, key))
            best.verdict = ", ".join(filter(None, [best.verdict, word]))
    for o in front:
        if not o.verdict:
            o.verdict = (
                "a trade-off: faster than those with fewer GPU-hours, cheaper than the faster"
            )
    fastest = advice.best("hours")
    if fastest is not None and fastest.hours_high is not None:
        tied = [
            o
            for o in front
            if o is not fastest and o.hours_low is not None and o.hours_low <= fastest.hours_high
        ]
        if tied:
            fastest.verdict += (
                "; within its band: "
                + ", ".join(f"#{o.number}" for o in tied)
                + " (a difference inside the forecast's band is not a result)"
            )


def check_fits_somewhere(advice: Advice) -> None:
    """UsageError where no option can run: nothing fits (the least memory per GPU any
    layout needs named), or no layout keeps the global batch."""
    request = advice.request
    if not advice.options:
        if request.global_batch is not None:
            raise UsageError(
                f"--global-batch {request.global_batch}: no layout keeps it: it must divide "
                "over the data-parallel ranks (GPUs / TP) of some node count, such as a "
                "power of two"
            )
        raise UsageError("no option to forecast: the campaign files give no testbed to search")
    if any(o.fits and o.hours is not None for o in advice.options):
        return
    unfit = [o for o in advice.options if not o.fits]
    if len(unfit) == len(advice.options):
        least = min(unfit, key=lambda o: o.memory_need or math.inf)
        raise UsageError(
            f"{request.model} fits nowhere searched: the least memory per GPU is "
            f"{(least.memory_need or 0) / 1e9:.1f} GB ({least.testbed}, {least.shape()}), "
            f"{least.memory_line.split(', beside')[-1].strip() or 'beside its GPUs'}: "
            "a GPU with more memory, or more nodes (--max-nodes)"
        )
    # Some fit but have no forecast, the rest do not fit: each testbed's reason once.
    reasons: dict[str, str] = {}
    for o in advice.options:
        if o.fits:
            reasons.setdefault(o.testbed, o.verdict)
    for o in sorted(unfit, key=lambda o: o.memory_need or math.inf):
        reasons.setdefault(o.testbed, f"does not fit, the least memory {o.memory_line}")
    said = "; ".join(f"{t}: {why}" for t, why in reasons.items())
    raise UsageError(f"no option both fits and has a forecast: {said}")
