"""The scaling model: what a network allows a training job at N workers, before or
without a testbed.

A Plan holds one prediction's inputs: the model (its layers' gradient sizes and
forward FLOPs, built on PyTorch's meta device: no weights, no memory, no GPU), the
single worker's step time, the workers packed onto nodes, and the two-level link
(the node's NIC shared by its workers, PCIe or NVLink inside it). predictions()
replays one step per worker count (hpcbench.performance.allreduce_model) into a point and its
two-bound band; fit() finds the link efficiency and interference that make the
points closest to measured efficiencies, and fit_plain() the defaults a plan takes for
the set-up details it is not told (one node's loss, NCCL's algorithm, the wider band),
which predictions() names as assumptions with the answer under the other choice. The
defaults below are stated with their sources; docs/method.md has the model. `hpcbench
predict` (predict.py) and the campaign's plan (campaign/estimate.py) both predict
through this module.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from hpcbench.core.bench import cnns
from hpcbench.core.errors import UsageError
from hpcbench.performance import allreduce_model, sharded_model

# The share of line rate a ring all-reduce achieves by transport, where no probe
# measured it, and the share of the link's busy time during backward that backward loses
# (GPU cycles and memory bandwidth to NCCL kernels, CPU to TCP copies). Fitted together,
# least absolute error, to the 41 published rows of evaluation/published.json (`python
# evaluation/published.py --fit`: link efficiency on a 0.02 grid up to 1, interference on
# a 0.05 grid; a row whose source measured one full node is rescaled to it,
# rescaled_to_node). `make bench-published` scores the same fit on each source left out
# of it. TCP comes out well below its payload share at MTU 1500 (1448 of the 1538 bytes a
# frame takes on the wire, 0.94): NCCL's socket transport stages every byte through host
# memory with a few CPU threads. A TCP link slower still (one stream bound by one core)
# is what `hpcbench probe` (--busbw) or --calibrate finds on a testbed.
TCP_EFFICIENCY = 0.64
RDMA_EFFICIENCY = 0.92
LINK_EFFICIENCY = {"tcp": TCP_EFFICIENCY, "rdma": RDMA_EFFICIENCY}
DEFAULT_INTERFERENCE = 0.20
# Per-step latency across nodes when none is given: an assumption typical of TCP over
# a switched LAN (RDMA: an order less), not a measurement; `hpcbench probe` measures
# the real one.
DEFAULT_LATENCY_US = 50.0
LATENCY_US = {"tcp": DEFAULT_LATENCY_US, "rdma": 5.0}
# Per-step latency inside a node (NCCL over PCIe/NVLink): assumed, like the above.
INTRA_LATENCY_US = 5.0
# Bus bandwidth between two workers of one node, bytes/s per direction, by
# interconnect: the specification's figure, an upper bound.
INTRA_NODE = {
    # PCI-SIG: 8 GT/s x 16 lanes, 128b/130b encoding: 15.75 GB/s (P100/V100 PCIe cards).
    "pcie3": 15.75e9,
    # PCI-SIG: 16 GT/s x 16: 31.5 GB/s (A100 PCIe, RTX 30xx).
    "pcie4": 31.5e9,
    # PCI-SIG: 32 GT/s x 16: 63 GB/s (H100 PCIe).
    "pcie5": 63.0e9,
    # NVIDIA Tesla P100 SXM2 datasheet: NVLink 160 GB/s in both directions (DGX-1 P100).
    "nvlink1": 80e9,
    # NVIDIA V100 SXM2 datasheet: NVLink 300 GB/s in both directions (p3.16xlarge, DGX-1).
    "nvlink2": 150e9,
    # NVIDIA A100 SXM datasheet: NVLink 600 GB/s in both directions.
    "nvlink3": 300e9,
    # NVIDIA H100 SXM datasheet: NVLink 900 GB/s in both directions.
    "nvlink4": 450e9,
    # DGX B200: "18x 5th Gen NVLink, 14.4 TB/s aggregated bandwidth" for 8 GPUs, 1.8 TB/s
    # per GPU in both directions (mlcommons/training_results_v5.1@441d65f4445cd5968746653
    # 3fd9f55399136e7a4, University-of-Florida/systems/hpg.dgxb200x8.n2.json).
    "nvlink5": 900e9,
}
DEFAULT_INTRA_NODE = "pcie3"
# What a plan takes where it is told nothing of: the other common choice for each
# (assumptions()) and the constants below, fitted after the link efficiency and the
# interference, to every published CNN row called with plain inputs only (model, batch,
# workers, GPUs per node, one worker's images/s, link rate, transport, backend; `python
# evaluation/published.py --fit`), least absolute error:
# - NODE_LOSS: how the GPUs of one node share its NIC and PCIe switch: one node of g busy
#   GPUs runs at E = 1 / (1 + NODE_LOSS (g - 1)) of g lone GPUs (the published nodes
#   measured 0.80-1.00, evaluation/published.json), on a 0.0025 grid; a cost per
#   gradient byte each step instead scored no better held out and more optimistic on
#   rows no fit saw (evaluation/node_sharing.py);
# - DEFAULT_TREE: whether NCCL may take its tree (2.4 and later) or only rings (before
#   2.4, or where its tuning keeps rings): the published rows fit rings better;
# - PLAIN_BAND: the 5th and 95th percentiles of measured - point over those rows, each
#   source group predicted by defaults fitted without it (as a cluster no fit saw is),
#   which widen the band of a plan that assumed any set-up detail that matters.
NODE_LOSS = 0.0075
DEFAULT_TREE = False
PLAIN_BAND = (-0.158, 0.061)
# A set-up detail is named as an assumption where its other common choice moves E by
# this much or more.
ASSUMPTION_MIN = 0.01
# The other common choice inside a node where none was given: NVLink 2 (V100 SXM2).
OTHER_INTRA_NODE = "nvlink2"


def parse_link(text: str) -> float:
    """'10gbit' -> line rate in bits/s."""
    value = allreduce_model.line_rate_bits(text)
    if value is None:
        raise UsageError(f"--link {text!r}: write a line rate like 1gbit, 25gbit or 100mbit")
    if not 1e3 <= value <= 1e13:
        raise UsageError(f"--link {text!r}: out of range; use 1kbit to 10000gbit")
    return value


# Images in the forward pass on the meta device: the head runs in training only
# (torchvision 0.29 models/inception.py:136-138), where BatchNorm refuses one value per
# channel (torch 2.15 nn/functional.py:2895, _verify_batch_size), which the head has
# for one image. Its FLOPs are per image.
_META_BATCH = 2


def _builder(name: str) -> Callable[..., Any]:
    """torchvision's constructor of `name`; one line where it has none."""
    if not name.isascii() or not name.isidentifier():  # before torch is even imported
        raise UsageError(f"--model {name[:60]!r}: not a torchvision model")
    import torchvision

    try:
        return torchvision.models.get_model_builder(name)
    except ValueError:
        raise UsageError(f"--model {name!r}: not a torchvision model") from None


def default_image_size(name: str) -> int:
    """The image size a CNN trains at where none is given: the workload's
    (bench/models.json); for another torchvision model, the crop its default weights
    are evaluated at (torchvision 0.29 transforms/_presets.py:39, ImageClassification's
    crop_size, as models/efficientnet.py:541 gives efficientnet_b3 300)."""
    known = cnns.MODELS.get(name)
    if known:
        return int(known["image_size"])
    _builder(name)
    import torchvision

    try:
        crop = torchvision.models.get_model_weights(name).DEFAULT.transforms.keywords["crop_size"]
    except (ValueError, AttributeError, KeyError):
        raise UsageError(f"--model {name}: no default image size; give --image-size") from None
    return int(crop)


@functools.cache
def model_layers(name: str, image_size: int) -> tuple[tuple[float, float], ...]:
    """(gradient bytes, forward FLOPs per image) of each layer, in forward order, of the
    model as the workload trains it; built once per model and image size (every
    prediction of a plan or a fit reads them).

    Conv and linear layers carry the FLOPs (2 per multiply-add); other layers
    count one operation per output element, which is small beside them.
    """
    build = _builder(name)
    import torch

    with torch.device("meta"):
        # As the workload builds it (bench/cnns.py): Inception v3 with its auxiliary head.
        model = build(**cnns.constructor_kwargs(name))
    model.train()  # the modules a training step runs: Inception's auxiliary head too
    layers: list[tuple[float, float]] = []
    seen: set[int] = set()

    def hook(module: torch.nn.Module, inputs: tuple, output: torch.Tensor) -> None:
        if not isinstance(output, torch.Tensor):
            return
        out_elems = output.numel() / _META_BATCH
        if isinstance(module, torch.nn.Conv2d):
            k = module.kernel_size[0] * module.kernel_size[1]
            flops = 2.0 * out_elems * k * module.in_channels / module.groups
        elif isinstance(module, torch.nn.Linear):
            flops = 2.0 * out_elems * module.in_features
        else:
            flops = float(out_elems)
        grad = 0.0
        if id(module) not in seen:  # a module called twice owns its weights once
            seen.add(id(module))
            grad = 4.0 * sum(p.numel() for p in module.parameters(recurse=False))
        layers.append((grad, flops))

    leaves = [m for m in model.modules() if not list(m.children())]
    handles = [m.register_forward_hook(hook) for m in leaves]
    try:
        with torch.no_grad():
            model(torch.empty(_META_BATCH, 3, image_size, image_size, device="meta"))
    finally:
        for h in handles:
            h.remove()
    return tuple(layers)


@dataclass(frozen=True)
class Plan:
    model: str
    image_size: int
    batch: int
    workers: list[int]
    gpus_per_node: int
    step_time_s: float
    busbw: float  # bytes/s one node's NIC achieves
    latency_s: float  # per ring step across nodes
    backend: str
    grouping: allreduce_model.Grouping  # the backend with its bucket / fusion settings
    intra_busbw: float = INTRA_NODE[DEFAULT_INTRA_NODE]  # bytes/s inside a node
    intra_latency_s: float = INTRA_LATENCY_US * 1e-6
    interference: float = DEFAULT_INTERFERENCE
    # NCCL's tree for small messages (2.4 and later); None: not known, DEFAULT_TREE.
    nccl: bool | None = None
    # One node's loss per further busy GPU (node_factor); None: not known, NODE_LOSS.
    node_loss: float | None = None
    # Whether intra_busbw is DEFAULT_INTRA_NODE's because none was given.
    intra_assumed: bool = False
    link_note: str = ""  # where busbw came from, for every output
    # CPU nodes: the backend's own work as a probe on the same nodes measured it.
    cpu: allreduce_model.CpuWork = allreduce_model.CpuWork()
    # The transformers (hpcbench.performance.sharded_model): batch counts sequences of
    # seq_len tokens; parallel ddp, fsdp2 or hsdp; HSDP's shard group (0: a node's
    # workers); the bytes per parameter gathered and per gradient reduced; blocks
    # resharded after forward;
    # a probe's all-gather and reduce-scatter across nodes, (name, latency_s, busbw)
    # each (where none: the all-reduce's link); Gloo's collectives (blocking, and a
    # reduce-scatter that is an all-reduce unless the probe timed it).
    seq_len: int = 0
    parallel: str = "ddp"
    shard_group: int = 0
    param_bytes: int = 4
    reduce_bytes: int = 4
    reshard_after_forward: bool = True
    collective_links: tuple[tuple[str, float, float], ...] = ()
    gloo: bool = False
    # A CNN's measured single-worker gradients, (seconds after the step began, bytes)
    # each, replayed instead of the model's layers (empty: the layers); and the bytes on
    # the wire per gradient byte (0.5: compressed to fp16).
    timeline: tuple[tuple[float, float], ...] = ()
    compression: float = 1.0
    # A transformer's layout (bench/layout.py): tensor-parallel workers inside a node,
    # micro-batches per step (batch is one's), activation checkpointing, and the bytes
    # of an activation its TP collectives move.
    tp: int = 1
    grad_accum: int = 1
    checkpoint: str = "none"
    act_bytes: int = 4
    # A TP group's step measured on one node (its K micro-batches), which stands for a
    # rank's compute and its TP collectives; None: both from the model.
    tp_step_s: float | None = None

    @property
    def transformer(self) -> bool:
        return sharded_model.shape(self.model) is not None

    @property
    def tree(self) -> bool:
        return DEFAULT_TREE if self.nccl is None else self.nccl

    @property
    def loss(self) -> float:
        return NODE_LOSS if self.node_loss is None else self.node_loss


def node_factor(loss: float, workers: int, gpus_per_node: int) -> float:
    """What one node's sharing leaves of E: 1 / (1 + loss (m - 1)) for its m busy GPUs.
    The two-level link sees no loss inside a node but its link's; the published nodes
    lose up to 20% on PCIe switches and NICs their GPUs share (docs/method.md)."""
    m = min(workers, gpus_per_node)
    return 1.0 / (1.0 + loss * (m - 1)) if m > 1 else 1.0


def link_for(plan: Plan, workers: int) -> allreduce_model.TwoLevelLink:
    """The two-level link of `workers` workers packed gpus_per_node to a node."""
    return allreduce_model.TwoLevelLink(
        workers=workers,
        nodes=math.ceil(workers / plan.gpus_per_node),
        latency_s=plan.latency_s,
        busbw=plan.busbw,
        intra_latency_s=plan.intra_latency_s,
        intra_busbw=plan.intra_busbw,
        tree=plan.tree,
    )


def predictions(plan: Plan, assumptions: bool = True) -> list[dict[str, Any]]:
    """One row per worker count of the plan: the point, its band, the communication's
    time and what of it is exposed, and the images/s (tokens/s for a transformer) that
    follow. A CNN's row also lists, under "assumptions", each set-up detail the plan
    was not told whose other common choice moves E by ASSUMPTION_MIN or more (that
    choice's E with it); where there is one across nodes, the band takes in the other
    choices' bands and PLAIN_BAND around the point (assumptions=False: neither, as
    fit() replays)."""
    if plan.transformer:
        return [_transformer_row(plan, n) for n in plan.workers]
    rows = []
    for n in plan.workers:
        row = _cnn_row(plan, n)
        if assumptions:
            named = [
                a
                for a in _assumed(plan, n)
                if abs(a["efficiency"] - row["efficiency"]) >= ASSUMPTION_MIN
            ]
            bands = [a.pop("band") for a in named]
            row["assumptions"] = named
            if named and row["nodes"] > 1:
                row["efficiency_low"], row["efficiency_high"] = plain_band(
                    row["efficiency"],
                    min([row["efficiency_low"], *(low for low, _ in bands)]),
                    max([row["efficiency_high"], *(high for _, high in bands)]),
                )
        rows.append(row)
    return rows


def plain_band(
    point: float, low: float, high: float, spread: tuple[float, float] | None = None
) -> tuple[float, float]:
    """The band of a plan that assumed a set-up detail: the model's own, widened to
    `spread` (default PLAIN_BAND: the 5th and 95th percentiles of measured - point)
    around the point."""
    lo, hi = PLAIN_BAND if spread is None else spread
    return max(0.0, min(low, point + lo)), min(1.0, max(high, point + hi))


def _cnn_row(plan: Plan, n: int) -> dict[str, Any]:
    """One worker count of a CNN's plan: the replay, scaled by one node's sharing."""
    link = link_for(plan, n)
    if plan.timeline:
        p = allreduce_model.predict_measured(
            plan.step_time_s,
            list(plan.timeline),
            link,
            plan.grouping,
            plan.compression * sum(b for _, b in plan.timeline),
            plan.cpu,
            plan.interference,
        )
    else:
        layers = [(b * plan.compression, f) for b, f in model_layers(plan.model, plan.image_size)]
        p = allreduce_model.predict_point(
            plan.step_time_s, layers, link, plan.grouping, plan.interference, plan.cpu
        )
    f = node_factor(plan.loss, n, plan.gpus_per_node)
    row: dict[str, Any] = {
        "workers": n,
        "nodes": link.nodes,
        **{k: v for k, v in asdict(p).items() if k != "workers"},
    }
    row.update(
        step_s=p.step_s / f,
        efficiency=p.efficiency * f,
        efficiency_low=p.efficiency_low * f,
        efficiency_high=p.efficiency_high * f,
        node_factor=f,
        images_per_s=n * plan.batch * f / p.step_s,
    )
    return row


def _assumed(plan: Plan, n: int) -> list[dict[str, Any]]:
    """Each set-up detail the plan was not told, at n workers: what was assumed, the
    other common choice, E under that choice, and the option that states it."""
    out: list[dict[str, Any]] = []

    def other(detail: str, assumed: str, choice: str, option: str, alt: Plan) -> None:
        r = _cnn_row(alt, n)
        out.append(
            {
                "detail": detail,
                "assumed": assumed,
                "other": choice,
                "option": option,
                "efficiency": r["efficiency"],
                "band": (r["efficiency_low"], r["efficiency_high"]),
            }
        )

    nodes = math.ceil(n / plan.gpus_per_node)
    if plan.gpus_per_node > 1 and n > 1 and plan.node_loss is None:
        other(
            "node",
            f"a node's GPUs share its NIC and PCIe switch, {NODE_LOSS:.2%} of E lost per "
            "further GPU (fitted to published nodes)",
            "a node that loses nothing inside",
            "--node-loss 0",
            replace(plan, node_loss=0.0),
        )
    if nodes > 1 and plan.nccl is None:
        name = {True: "NCCL ring or tree (2.4 and later)", False: "NCCL rings only"}
        other(
            "collectives",
            name[DEFAULT_TREE],
            name[not DEFAULT_TREE],
            "--collectives " + ("gloo" if DEFAULT_TREE else "nccl"),
            replace(plan, nccl=not DEFAULT_TREE),
        )
    g = plan.grouping
    if nodes > 1 and g.backend == "horovod" and g.message_bytes is None and g.cycle_s is None:
        (now, *_), (before, size, cycle) = allreduce_model.HOROVOD_RELEASES
        other(
            "fusion",
            f"{now}: {g.describe()}",
            f"{before}: fused up to {size / 1024**2:g} MiB every {cycle * 1e3:g} ms",
            f"--fusion-threshold-mb {size / 1024**2:g} --cycle-time-ms {cycle * 1e3:g}",
            replace(plan, grouping=allreduce_model.Grouping("horovod", size, cycle)),
        )
    if plan.intra_assumed and plan.gpus_per_node > 1 and n > 1:
        other(
            "intra_node",
            f"{DEFAULT_INTRA_NODE} inside a node",
            f"{OTHER_INTRA_NODE} inside a node",
            f"--intra-node {OTHER_INTRA_NODE}",
            replace(plan, intra_busbw=INTRA_NODE[OTHER_INTRA_NODE]),
        )
    return out


def _transformer_row(plan: Plan, n: int) -> dict[str, Any]:
    """One worker count of a transformer's plan: DDP's step replayed as the CNNs' is
    (the blocks as layers), FSDP2's and HSDP's by hpcbench.performance.sharded_model; in its
    layout (docs/method.md, "Layouts"): a step of K micro-batches, the gradients reduced
    on the last (the others only gather, under FSDP2), each micro-batch's compute a
    tp-th of one worker's on the tp workers of a TP group, its tensor-parallel
    collectives on the node's link beside it. plan.step_time_s is one worker's whole
    step (K micro-batches, in the plan's checkpointing), which E is against."""
    config = sharded_model.shape(plan.model)
    assert config is not None
    link = link_for(plan, n)
    tp, k = plan.tp, plan.grad_accum
    measured = plan.tp_step_s if tp > 1 else None
    # One rank's compute for one micro-batch, its TP collectives in where measured.
    micro = measured / k if measured else plan.step_time_s / (k * tp)
    inside = sharded_model.Hop(plan.intra_latency_s, plan.intra_busbw)
    if plan.parallel == "ddp":
        layers = sharded_model.ddp_layers(config, plan.seq_len, plan.reduce_bytes)
        last = allreduce_model.predict_point(
            micro, layers, link, plan.grouping, plan.interference, plan.cpu
        )
        quiet = replace(link, workers=1)  # no_sync: nothing reduced before the last
        rest = allreduce_model.predict_point(
            micro, layers, quiet, plan.grouping, plan.interference, plan.cpu
        )
        group = 1
    else:
        group = sharded_model.check_group(plan.parallel, plan.shard_group, n, plan.gpus_per_node)
        blocks, root = sharded_model.tp_units(*sharded_model.units(config, plan.seq_len), tp)
        across = {"all_reduce": sharded_model.Hop(plan.latency_s, plan.busbw)}
        across |= {
            name: sharded_model.Hop(latency, busbw)
            for name, latency, busbw in plan.collective_links
        }
        links = sharded_model.Links(across, inside)
        sharding = sharded_model.Sharding(
            group // tp,
            plan.param_bytes,
            plan.reduce_bytes,
            plan.reshard_after_forward,
            plan.gloo,
            any(name == "reduce_scatter" for name, _, _ in plan.collective_links),
        )
        # The data-parallel ranks: one of each TP group, per_node / tp on a node.
        ring = sharded_model.rings(n // tp, plan.gpus_per_node // tp, group // tp, links, tp)
        last = sharded_model.sharded_point(
            micro, blocks, root, ring, sharding, plan.interference, plan.cpu
        )
        rest = sharded_model.sharded_point(
            micro,
            blocks,
            root,
            ring,
            replace(sharding, reduce=False),
            plan.interference,
            plan.cpu,
        )
    tp_s = (
        0.0
        if measured
        else sharded_model.tp_seconds(
            config, plan.seq_len, plan.batch, tp, plan.act_bytes, inside, plan.checkpoint
        )
    )

    def step(of: Callable[[allreduce_model.Point], float]) -> float:
        return (k - 1) * of(rest) + of(last) + k * tp_s

    total = step(lambda p: p.step_s)
    slowdown = (k - 1) * rest.slowdown_s + last.slowdown_s
    slowest = step(lambda p: micro / p.efficiency_low)
    fastest = step(lambda p: micro / p.efficiency_high)
    row: dict[str, Any] = {
        "workers": n,
        "nodes": link.nodes,
        **{f: v for f, v in asdict(last).items() if f != "workers"},
    }
    row.update(
        step_s=total,
        efficiency=plan.step_time_s / (tp * total),
        efficiency_low=plan.step_time_s / (tp * slowest),
        efficiency_high=plan.step_time_s / (tp * fastest),
        allreduce_s=(k - 1) * rest.allreduce_s + last.allreduce_s + k * tp_s,
        # Beyond one rank's compute, less what overlap cost it (slowdown_s): _Parts
        # takes a step as compute + exposed + interference x the hidden time.
        exposed_s=total - slowdown - plan.step_time_s / tp,
        slowdown_s=slowdown,
        tp_s=k * tp_s,
        shard_group=group,
        tokens_per_s=sharded_model.tokens_per_s(n // tp, plan.batch * k, plan.seq_len, total),
    )
    return row


def rescaled_to_node(
    row: dict[str, float], node_row: dict[str, float], measured_node: float
) -> dict[str, float]:
    """A prediction across nodes rescaled to a measured node: the point and the band at
    N workers times measured E(g) / predicted E(g), g the workers measured on one node
    (all of its own, or as many as its source measured; the top of the band at most
    1). The model's two-level link sees no loss inside a node but its link's (no PCIe
    switch shared with the NIC, no framework of its own: PyTorch's DDP benchmark loses
    3% on one GPU by wrapping it, 7% on one DGX-1's eight); a measured node brings that
    loss in, and the model predicts what going across nodes adds."""
    k = measured_node / node_row["efficiency"]
    return {
        **row,
        "efficiency": row["efficiency"] * k,
        "efficiency_low": row["efficiency_low"] * k,
        "efficiency_high": min(1.0, row["efficiency_high"] * k),
        "node_factor": k,
    }


@dataclass(frozen=True)
class Case:
    """One measured efficiency and the plan that predicts it (one worker count); its
    busbw is replaced by line_rate x the efficiency being tried. node_efficiency: the
    measured E of one node of the same run, where there is one: the point is then
    rescaled to it (rescaled_to_node); node_workers: that node's workers, where they
    are fewer than the node's own (a source that measured 4 GPUs of a node of 8)."""

    plan: Plan
    line_rate: float  # bits/s
    measured: float
    transport: str = "tcp"
    node_efficiency: float | None = None
    node_workers: int | None = None  # None: gpus_per_node, the whole node


# The grids calibration searches: link efficiency 0.02-1.00, interference 0-1.
EFFICIENCY_GRID = tuple(round(0.02 * i, 2) for i in range(1, 51))
INTERFERENCE_GRID = tuple(round(0.05 * i, 2) for i in range(21))


@dataclass(frozen=True)
class _Parts:
    """One case's replay at one link efficiency, taken apart so that interferences can
    be tried without replaying: step = t1 + exposed + interference x hidden; the band's
    ends as steps (they do not depend on the interference); `node`, the same for one full
    node where the case has a measured one; `sharing`, node_factor where it has none."""

    t1: float
    exposed: float
    hidden: float
    low_step: float = math.inf
    high_step: float = math.inf
    node: _Parts | None = None
    sharing: float = 1.0

    def _own(self, interference: float) -> float:
        return self.t1 / (self.t1 + self.exposed + interference * self.hidden) * self.sharing

    def factor(self, measured_node: float | None, interference: float) -> float:
        """What rescales the point to the measured node (1 without one)."""
        if self.node is None or measured_node is None:
            return 1.0
        return measured_node / self.node._own(interference)

    def point(self, interference: float, measured_node: float | None = None) -> float:
        return self._own(interference) * self.factor(measured_node, interference)

    def band(self, interference: float, measured_node: float | None = None) -> tuple[float, float]:
        """(low, high) of E, rescaled as the point."""
        k = self.factor(measured_node, interference) * self.sharing
        return self.t1 / self.low_step * k, min(1.0, self.t1 / self.high_step * k)


def _replay_parts(plan: Plan, workers: int) -> _Parts:
    """The replay alone: no node sharing (the case's measured node, or node_factor where
    the scorer applies it) and no assumptions."""
    row = predictions(
        replace(plan, workers=[workers], interference=1.0, node_loss=0.0), assumptions=False
    )[0]
    t1 = plan.step_time_s / plan.tp  # one rank's compute: E = t1 / step
    return _Parts(
        t1,
        row["exposed_s"],
        row["slowdown_s"],
        t1 / row["efficiency_low"],
        t1 / row["efficiency_high"],
    )


def case_parts(case: Case, efficiency: float) -> _Parts:
    plan = replace(case.plan, busbw=case.line_rate / 8 * efficiency)
    n = plan.workers[0]
    parts = _replay_parts(plan, n)
    node = case.node_workers or plan.gpus_per_node
    g = plan.gpus_per_node
    parts = replace(parts, sharing=node_factor(plan.loss, n, g))
    if case.node_efficiency is not None and 1 < node < n:
        mine = replace(_replay_parts(plan, node), sharing=node_factor(plan.loss, node, g))
        parts = replace(parts, node=mine)
    return parts


def cached_parts(case: Case, efficiency: float, cache: dict) -> _Parts:
    """case_parts, kept in `cache` by the case's id and the efficiency: the caller keeps
    the cases alive as long as the cache, so that no id is reused for another case."""
    key = (id(case), efficiency)
    if key not in cache:
        cache[key] = case_parts(case, efficiency)
    return cache[key]


def case_point(case: Case, efficiency: float, interference: float) -> float:
    return case_parts(case, efficiency).point(interference, case.node_efficiency)


def case_band(case: Case, efficiency: float, interference: float) -> tuple[float, float]:
    return case_parts(case, efficiency).band(interference, case.node_efficiency)


@dataclass(frozen=True)
class Fit:
    efficiency: dict[str, float]  # per transport
    interference: float
    mean_abs: float  # mean |point - measured| over the cases


def fit(
    cases: list[Case],
    efficiencies: tuple[float, ...] = EFFICIENCY_GRID,
    interferences: tuple[float, ...] = INTERFERENCE_GRID,
    cache: dict | None = None,
) -> Fit:
    """The link efficiency per transport and the one interference that make the points
    closest to the measured efficiencies (least absolute error: a few odd rows should not
    decide). Given the interference, each transport's efficiency is fitted on its own.
    Each case is replayed once per efficiency (the interference only scales what the
    replay hid); `cache`, keyed by the case's id, keeps the replays between fits over
    the same cases."""
    cache = {} if cache is None else cache
    for k in cases:
        for e in efficiencies:
            cached_parts(k, e, cache)
    best: Fit | None = None
    for c in interferences:
        shares, total = {}, 0.0
        for transport in sorted({k.transport for k in cases}):
            mine = [k for k in cases if k.transport == transport]
            err, share = min(
                (
                    sum(
                        abs(cache[id(k), e].point(c, k.node_efficiency) - k.measured) for k in mine
                    ),
                    e,
                )
                for e in efficiencies
            )
            shares[transport] = share
            total += err
        if best is None or total / len(cases) < best.mean_abs - 1e-12:
            best = Fit(shares, c, total / len(cases))
    assert best is not None
    return best


@dataclass(frozen=True)
class PlainFit:
    """The constants of what a plan is not told (NODE_LOSS, DEFAULT_TREE, PLAIN_BAND)."""

    node_loss: float
    tree: bool
    band: tuple[float, float]  # 5th and 95th percentiles of measured - point
    mean_abs: float


# One node's loss per further GPU: 0-5% on a 0.25% grid.
NODE_LOSS_GRID = tuple(round(0.0025 * i, 4) for i in range(21))


def plain_point(case: Case, parts: _Parts, interference: float, loss: float) -> float:
    """A case's point (its plan's node_loss 0) as a plan with one node's loss `loss`
    gets it."""
    n = case.plan.workers[0]
    return parts.point(interference) * node_factor(loss, n, case.plan.gpus_per_node)


def fit_plain(
    cases: dict[bool, list[Case]],
    found: Fit,
    grid: tuple[float, ...] = NODE_LOSS_GRID,
    cache: dict | None = None,
    point: Callable[[Case, _Parts, float, float], float] = plain_point,
) -> PlainFit:
    """The node loss and NCCL's algorithm that make plain-input points closest to the
    measured efficiencies (least absolute error), given the link efficiency and the
    interference already fitted; cases[tree]: the same cases with NCCL's tree allowed
    (True) or rings only (False). The band: the percentiles of what is left. `point`
    and `grid`: another form of one node's sharing and its grid, to compare forms
    (evaluation/node_sharing.py); the node loss returned is then its constant."""
    cache = {} if cache is None else cache
    best: tuple[float, float, bool, list[float]] | None = None
    for tree, ks in sorted(cases.items()):
        parts = [cached_parts(k, found.efficiency[k.transport], cache) for k in ks]
        for loss in grid:
            left = [
                k.measured - point(k, p, found.interference, loss)
                for k, p in zip(ks, parts, strict=True)
            ]
            err = sum(abs(x) for x in left) / len(left)
            if best is None or err < best[0] - 1e-12:
                best = (err, loss, tree, left)
    assert best is not None
    err, loss, tree, left = best
    return PlainFit(loss, tree, spread(left), err)


def spread(left: list[float]) -> tuple[float, float]:
    """The 5th and 95th percentiles of measured - point, as PLAIN_BAND holds them."""
    cuts = statistics.quantiles(left, n=20, method="inclusive")
    return round(cuts[0], 3), round(cuts[-1], 3)
