"""The scaling model of a transformer's step under FSDP2 and HSDP (docs/method.md,
"Prediction: transformers under FSDP2 and HSDP"); DDP's step goes through
hpcbench.performance.allreduce_model as the CNNs' does, from the layers given here.

The model is the FSDP units the workload wraps (bench/lm.py): every block, then the
root (the token table, which is the output projection where tied, the position
table, the final norm). Each unit's parameters and training FLOPs per token come from
the configuration (bench/transformer_configs.py): a block's FLOPs are 6 x its
parameters + 12 d T (its share of the attention term), the root's are 6 x the final
norm and the output projection, so that the units add up to flops_per_token.

One step at N workers: a single worker's step T1 is split by FLOPs, forward 1/3 and
backward 2/3, unit by unit. The collectives, each over a ring of p ranks:

    all-gather, reduce-scatter:  (p-1) a + (p-1)/p x M / B
    all-reduce:                2 (p-1) a + 2 (p-1)/p x M / B

with M the whole tensor (a unit's parameters in the parameter dtype; its gradients
in the reduction dtype) and a, B of the link the ring crosses (Ring, rings()).
Per unit, FSDP2 all-gathers the parameters in forward and, resharded after forward,
again in backward, and reduce-scatters the gradients after its backward; the root is
gathered once (FSDP2 does not reshard the root after forward). HSDP does the same
inside a shard group and all-reduces each unit's shard across the replicas after its
reduce-scatter.

Overlap (NCCL): one layer of prefetch. A unit's all-gather is issued when the unit
before it (in that pass's order) starts computing, and a unit computes once its
parameters are there; the reduce-scatter is issued when its backward ends. All of a
shard group's collectives queue on one link in the order they are issued, so in
backward the all-gathers and reduce-scatters share it; the replicas' all-reduces
queue on the link between nodes, which is the same link when the shard group spans
nodes. What of the link's time falls outside the computation is exposed; what falls
inside costs the computation `interference` of it (as for the CNNs).

Gloo (CPU nodes): FSDP2 calls its collectives without async_op (torch
2.15.0, torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py: foreach_reduce
calls reduce_scatter_comm(...) and dist.all_reduce(...) with async_op left False;
_fsdp_param_group.py unshard(async_op=False) in forward and in the backward
prefetch), and Gloo's wait() holds the training thread until the collective is done:
nothing overlaps, and the step is T1 plus every collective. Gloo carries out a
reduce-scatter as an all-reduce of the whole input (bench/runtime.py,
collective_paths), so where no probe timed it, it costs an all-reduce.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcbench.core import files
from hpcbench.core.bench import transformer_configs
from hpcbench.core.errors import UsageError
from hpcbench.performance import allreduce_model

# Bytes per element of the dtypes parameters are gathered and gradients reduced in.
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp8": 1}

_T = transformer_configs.TransformerConfig
# A configuration (bench/transformer_configs.py, loaded from its file: no static type).
Config = Any
# Published models, for predicting published runs: shapes only, not a workload `scale`
# builds. Each from its source; the MPT shapes are GPT-2's layout (LayerNorm and
# linear layers with biases, GELU MLP of 4 d, learned positions, the token table as the
# output projection): llm-foundry's table gives their parameter counts, which these
# reproduce exactly (tests/unit/test_sharded_model.py).
_LLM_FOUNDRY = (
    "mosaicml/llm-foundry@5e85bd62d4ec9e13353ca95877477602ab538e5b "
    "scripts/train/yamls/pretrain/mpt-{}.yaml (d_model {}, n_heads {}, n_layers {}, "
    "expansion_ratio 4, vocab_size 50368); biases, LayerNorm biases and learned "
    "positions as the NumParams column of scripts/train/benchmarking/README.md counts them"
)


def _mpt(size: str, dim: int, heads: int, layers: int) -> Config:
    return _T(
        f"mpt-{size}",
        "gpt2",
        dim=dim,
        layers=layers,
        heads=heads,
        kv_heads=heads,
        ffn=4 * dim,
        vocab=50368,
        context=2048,
        seq_len=2048,
        tied=True,
        source=_LLM_FOUNDRY.format(size, dim, heads, layers),
    )


PUBLISHED_SHAPES = {
    c.name: c
    for c in (
        _T(
            "llama3.1-8b",
            "llama",
            dim=4096,
            layers=32,
            heads=32,
            kv_heads=8,
            ffn=14336,
            vocab=128256,
            context=131072,
            seq_len=8192,
            tied=False,
            rope_theta=500000.0,
            source="pytorch/torchtitan@9dec370ad26b5f8e9a7333a0e36165018262644b "
            "torchtitan/models/llama/__init__.py '8B': dim 4096, n_layers 32, n_heads 32, "
            "n_kv_heads 8, ffn_dim_multiplier 1.3, multiple_of 1024 (hidden 14336); "
            "vocab 128256 (Llama 3's tokenizer), output projection not tied",
        ),
        _mpt("350m", 1024, 16, 24),
        _mpt("760m", 1536, 12, 24),
        _mpt("3b", 2560, 20, 32),
        _mpt("7b", 4096, 32, 32),
        _mpt("13b", 5120, 40, 40),
    )
}


# A Hugging Face config.json, as the harness reads one (the workload's bound).
CONFIG_FILE = files.Bound(transformer_configs.MAX_CONFIG_BYTES, "a config.json is a few kB")


def shape(model: str) -> Config | None:
    """A transformer's configuration: the workload's own, one read from a config.json or
    kept by a run record (known by its name: transformer_configs.resolve), a published
    model's shape, or the model of the config.json at the path `model`, read here and
    known by its name from then on; None for anything else (a CNN). A config.json that
    cannot be read or built is a UsageError naming what to fix."""
    if not transformer_configs.is_config_path(model):
        return transformer_configs.resolve(model) or PUBLISHED_SHAPES.get(model)
    path = Path(model)
    try:  # the file the user named: a link at its name is theirs, a FIFO is not waited on
        data = files.read_bounded(path, CONFIG_FILE, root=path)
    except (OSError, ValueError) as err:
        raise UsageError(f"--model {model[:80]}: {getattr(err, 'strerror', None) or err}") from None
    try:
        return transformer_configs.remember(transformer_configs.from_json(data, model))
    except ValueError as err:
        raise UsageError(str(err)) from None


def resolve_seq_len(model: str, asked: int) -> int:
    """--seq-len, or the configuration's own; one line (UsageError) beyond its context."""
    config = shape(model)
    assert config is not None
    try:
        return int(transformer_configs.resolve_seq_len(config, asked))
    except ValueError as err:
        raise UsageError(str(err)) from None


# ------------------------------------------------------------------ units
@dataclass(frozen=True)
class Unit:
    """One FSDP unit: its parameters and the training FLOPs per token it computes."""

    params: int
    flops_per_token: float


def units(config: Config, seq_len: int) -> tuple[list[Unit], Unit]:
    """(the blocks in forward order, the root). Their FLOPs add up to
    transformer_configs.flops_per_token; their parameters to the model's."""
    counts = transformer_configs.param_counts(config)
    per_block = transformer_configs.block_params(config)
    # Its share of the attention term, 6 H (d_qk + d_v) T (flops_per_token): 12 d T where
    # the heads' width is the model's, as a config.json's head_dim need not be.
    attention = 6.0 * config.heads * 2 * config.head_dim * seq_len
    block = Unit(per_block, 6.0 * per_block + attention)
    root_matmul = counts["matmul"] - config.layers * per_block  # final norm, output
    root = Unit(counts["total"] - config.layers * per_block, 6.0 * root_matmul)
    return [block] * config.layers, root


def ddp_layers(config: Config, seq_len: int, grad_bytes: int) -> list[tuple[float, float]]:
    """(gradient bytes, FLOPs) per layer in forward order, as allreduce_model's timeline
    takes them: the embedding tables first (no FLOPs; a tied token table's gradient is
    complete only when backward reaches it, at the very end), the blocks, then the final
    norm and output projection (the output's FLOPs; its gradient bytes where untied)."""
    blocks, root = units(config, seq_len)
    counts = transformer_configs.param_counts(config)
    tail = root.params - counts["embedding"]  # final norm, and an untied output
    layers = [(float(counts["embedding"] * grad_bytes), 0.0)]
    layers += [(float(b.params * grad_bytes), b.flops_per_token) for b in blocks]
    return layers + [(float(tail * grad_bytes), root.flops_per_token)]


# ------------------------------------------------------------------ links
@dataclass(frozen=True)
class Hop:
    """A link's alpha and beta: per ring step latency, and the bus bandwidth one rank's
    ring edge gets (nccl-tests' busbw)."""

    latency_s: float
    busbw: float


@dataclass(frozen=True)
class Ring:
    """A collective's ring over `ranks` ranks, on the link it crosses (`across`: the
    link between nodes)."""

    ranks: int
    hop: Hop
    across: bool = False

    def gather(self, nbytes: float) -> float:
        """An all-gather or a reduce-scatter of a whole tensor of nbytes."""
        p = self.ranks
        if p <= 1:
            return 0.0
        return (p - 1) * self.hop.latency_s + (p - 1) / p * nbytes / self.hop.busbw

    def allreduce(self, nbytes: float) -> float:
        p = self.ranks
        if p <= 1:
            return 0.0
        return 2 * (p - 1) * self.hop.latency_s + allreduce_model.ring_factor(p) * nbytes / (
            self.hop.busbw
        )


@dataclass(frozen=True)
class Links:
    """What the step's collectives cross: the link between nodes per collective (the
    node's NIC; all-reduce always, all-gather and reduce-scatter where a probe timed
    them) and the link inside a node."""

    across: dict[str, Hop]
    inside: Hop

    def hop(self, name: str) -> Hop:
        return self.across.get(name) or self.across["all_reduce"]


def _ring(ranks: int, spans: bool, sharing: int, links: Links, name: str) -> Ring:
    """A ring of `ranks` ranks and the hop it waits on: inside a node, the node's link;
    across nodes (`spans`), the NIC, which `sharing` rings of its kind share (each puts
    one edge each way on it), at most the link inside the node."""
    if not spans:
        return Ring(ranks, links.inside)
    net = links.hop(name)
    return Ring(ranks, Hop(net.latency_s, min(net.busbw / sharing, links.inside.busbw)), True)


def rings(workers: int, per_node: int, group: int, links: Links, tp: int = 1) -> dict[str, Ring]:
    """The rings of one step: 'all_gather' and 'reduce_scatter' over rank 0's shard group
    (`group` consecutive ranks, as bench/lm.py's mesh makes them), 'all_reduce' over its
    replicas (every group-th rank from 0). Ranks fill nodes per_node at a time. The hop's
    sharing is the most rings of a kind that cross one node of rank 0's ring, in closed
    form (tests/unit/test_sharded_rings.py checks it against a rank-by-rank count),
    times tp: the data-parallel ranks here are one TP rank's, and each of the other tp -
    1 runs the same rings at the same time over the same nodes' NICs (its own shard of
    every unit)."""
    # A shard group wider than a node spans nodes, as does every other then; a node holds
    # ranks of at most two of them, and rank 0's last node holds two where the group ends
    # inside it and another group follows.
    sharing = (2 if group % per_node and group < workers else 1) * tp
    out = {
        name: _ring(group, group > per_node, sharing, links, name)
        for name in ("all_gather", "reduce_scatter")
    }
    # Rank 0's replica ring spans nodes where its last rank lies past node 0; then so does
    # every replica ring, and node 0's per_node ranks belong to min(per_node, group) of them.
    replicas = workers // group
    out["all_reduce"] = _ring(
        replicas, (replicas - 1) * group >= per_node, min(per_node, group) * tp, links, "all_reduce"
    )
    return out


# ------------------------------------------------------------------ the step
@dataclass(frozen=True)
class Sharding:
    """How a sharded step runs: FSDP2 (group = all workers) or HSDP (group = the shard
    group), the bytes per parameter gathered and per gradient reduced, whether blocks
    are resharded after forward (FSDP2's default; off: ZeRO-2, gathered once), and
    whether the collectives are Gloo's (blocking; reduce-scatter as an all-reduce unless
    a probe timed it: `reduce_scatter_timed`)."""

    group: int
    param_bytes: int = 4
    reduce_bytes: int = 4
    reshard_after_forward: bool = True
    gloo: bool = False
    reduce_scatter_timed: bool = False
    # Whether this micro-batch reduces the gradients: gradient accumulation defers the
    # reduce-scatter (and HSDP's all-reduce) to the last of K (bench/layout.py, FSDP2's
    # set_requires_gradient_sync); the all-gathers run for every one.
    reduce: bool = True


# FSDP2's own CPU work beside its collectives on a CPU node (its hooks, the copies into
# and out of the flat gather and scatter buffers): gpt-tiny wrapped at world size 1,
# where no byte leaves the process, took 5-14% longer a step than unwrapped
# (docs/benchmarks.md, the first check of FSDP2 over Gloo). Nothing measured before
# booking holds it (the baseline runs unwrapped), so on Gloo the band's low end takes
# the most of it, the point none.
GLOO_OWN_WORK_UP_TO = 0.14


class _Link:
    """One link's queue: collectives in the order issued, each when the link is free."""

    def __init__(self) -> None:
        self.free = 0.0
        self.busy: list[tuple[float, float]] = []

    def put(self, issued: float, seconds: float) -> float:
        start = max(self.free, issued)
        self.free = start + seconds
        if seconds > 0:
            self.busy.append((start, self.free))
        return self.free


def _overlap(spans: list[tuple[float, float]], compute: list[tuple[float, float]]) -> float:
    """Seconds of `spans` that fall inside the compute intervals (both sorted, disjoint)."""
    total, j = 0.0, 0
    for start, end in sorted(spans):
        while j < len(compute) and compute[j][1] <= start:
            j += 1
        k = j
        while k < len(compute) and compute[k][0] < end:
            total += max(0.0, min(end, compute[k][1]) - max(start, compute[k][0]))
            k += 1
    return total


def _apart(ring: dict[str, Ring]) -> bool:
    """Whether the replicas' all-reduces queue apart from the shard group's gathers and
    scatters: one crosses nodes, the other stays on a node's own link."""
    return ring["all_reduce"].across != ring["all_gather"].across


def sharded_point(
    step_time_1: float,
    blocks: list[Unit],
    root: Unit,
    ring: dict[str, Ring],
    sharding: Sharding,
    interference: float = 0.0,
    cpu: allreduce_model.CpuWork | None = None,
) -> allreduce_model.Point:
    """One FSDP2/HSDP step replayed (the module's model). The Point's allreduce_s is the
    busy time of every collective of the step; exposed_s everything the step takes
    beyond T1 but the interference's share (slowdown_s)."""
    workers = ring["all_gather"].ranks * ring["all_reduce"].ranks
    gloo_rs = sharding.gloo and not sharding.reduce_scatter_timed

    def ag(u: Unit) -> float:
        return ring["all_gather"].gather(u.params * sharding.param_bytes)

    def rs(u: Unit) -> float:
        if not sharding.reduce:
            return 0.0
        nbytes = u.params * sharding.reduce_bytes
        r = ring["reduce_scatter"]
        return r.allreduce(nbytes) if gloo_rs else r.gather(nbytes)

    def ar(u: Unit) -> float:  # the unit's shard across the replicas
        if not sharding.reduce:
            return 0.0
        return ring["all_reduce"].allreduce(u.params * sharding.reduce_bytes / sharding.group)

    resharded = sharding.reshard_after_forward
    gathers = [ag(root)] + [ag(b) for b in blocks] + [ag(b) for b in blocks if resharded]
    scatters = [rs(u) for u in (*blocks, root)]
    shards = [ar(u) for u in (*blocks, root)]
    busy = sum(gathers + [r + a for r, a in zip(scatters, shards, strict=True)])
    cpu = cpu or allreduce_model.CpuWork()
    share = 0.0
    if workers > 1:
        share = min(max(0.0, cpu.background_share), allreduce_model.MAX_BACKGROUND_SHARE)
    compute = step_time_1 / (1.0 - share)
    flops = sum(u.flops_per_token for u in (*blocks, root)) or 1.0
    forward = [
        compute * (1 - allreduce_model.BACKWARD_SHARE) * b.flops_per_token / flops for b in blocks
    ]
    backward = [
        compute * allreduce_model.BACKWARD_SHARE * b.flops_per_token / flops for b in blocks
    ]
    root_fwd = compute * (1 - allreduce_model.BACKWARD_SHARE) * root.flops_per_token / flops
    root_bwd = compute * allreduce_model.BACKWARD_SHARE * root.flops_per_token / flops
    if workers <= 1:
        end, hidden = compute, 0.0
    elif sharding.gloo:
        end, hidden = compute + busy, 0.0
    else:
        end, hidden = _overlapped(
            blocks, root, ag, rs, ar, (forward, backward, root_fwd, root_bwd), ring, resharded
        )
    slowdown = interference * hidden
    # No overlap: T1 plus both queues' busy time; full overlap: the busier queue, where
    # the two run apart (one link's queue otherwise).
    busiest = max(sum(gathers) + sum(scatters), sum(shards)) if _apart(ring) else busy
    step = end + slowdown
    # Around the computation as the backend's background work stretches it (CPU nodes),
    # on Gloo FSDP2's own work at the most measured below the point.
    own = GLOO_OWN_WORK_UP_TO * step_time_1 if sharding.gloo and workers > 1 else 0.0
    low = step_time_1 / max(step, compute + own + busy)
    high = step_time_1 / max(compute, busiest)
    return allreduce_model.Point(
        workers,
        step,
        step_time_1 / step,
        low,
        high,
        busy,
        end - step_time_1,
        slowdown,
        0.0,
        compute - step_time_1,
    )


def _overlapped(
    blocks: list[Unit],
    root: Unit,
    ag: Callable[[Unit], float],
    rs: Callable[[Unit], float],
    ar: Callable[[Unit], float],
    times: tuple[list[float], list[float], float, float],
    ring: dict[str, Ring],
    resharded: bool,
) -> tuple[float, float]:
    """The step's end and the link time inside the computation, with one layer of
    prefetch (the module's text)."""
    forward, backward, root_fwd, root_bwd = times
    net = _Link()
    apart = _apart(ring)
    replicas = _Link() if apart else net
    compute: list[tuple[float, float]] = []

    def run(start: float, seconds: float) -> float:
        if seconds > 0:
            compute.append((start, start + seconds))
        return start + seconds

    # Forward: the root's parameters first (the embedding needs them), then each block's,
    # issued when the unit before it starts computing.
    ready = net.put(0.0, ag(root))
    started, clock = ready, ready
    for b, seconds in zip(blocks, forward, strict=True):
        ready = net.put(started, ag(b))
        started = max(clock, ready)
        clock = run(started, seconds)
    clock = run(clock, root_fwd)  # the output projection
    # Backward: the root (output projection) first, its parameters still gathered; the
    # last block's all-gather is issued as backward starts, each next one as a block
    # starts its backward; a block's gradients are reduce-scattered when its backward
    # ends, and under HSDP its shard all-reduced across the replicas after that.
    pending = net.put(clock, ag(blocks[-1])) if resharded and blocks else 0.0
    clock = run(clock, root_bwd)
    order = list(zip(blocks, backward, strict=True))[::-1]
    for i, (b, seconds) in enumerate(order):
        started = max(clock, pending)
        if resharded and i + 1 < len(order):
            pending = net.put(started, ag(order[i + 1][0]))
        clock = run(started, seconds)
        replicas.put(net.put(clock, rs(b)), ar(b))
    # The root's gradients are whole once backward reaches the embedding, at its end.
    last = replicas.put(net.put(clock, rs(root)), ar(root))
    end = max(clock, net.free, replicas.free, last)
    return end, _overlap(net.busy, compute) + (_overlap(replicas.busy, compute) if apart else 0.0)


# ------------------------------------------------------------------ tensor parallelism
# Tensor parallelism inside a node (Megatron-LM, Shoeybi et al. 2019, arXiv:1909.08053,
# section 3): each block's attention and MLP split by columns then rows, two all-reduces
# of the block's b s h activations in forward and two in backward; with sequence
# parallelism (Korthikanti et al. 2022, arXiv:2205.05198, section 4.2.2), as
# bench/layout.py applies it, each becomes an all-gather and a reduce-scatter of the same
# volume, which a ring moves as it does the all-reduce. The token embedding (row-wise)
# and the output (column-wise) add a reduce-scatter and an all-gather each over the
# step: two all-reduces' worth (GPT-2's position table one more of seq x dim, a
# micro-batch's share of the volume: not counted). Nothing overlaps them (each waits on
# the matmul before it): they lie on the step's path. Checkpointing runs a block's
# forward again in backward up to the last output backward needs (torch.utils.checkpoint
# stops early): its two all-gathers and, under full, the attention's reduce-scatter but
# not the MLP's last; selective keeps every reduce-scatter's output (bench/layout.py
# saved_ops). Counted per block in all-reduces, half an all-reduce each, by
# tests/unit/test_layout.py over the workload's TP plan.
TP_PER_BLOCK = {"none": 4, "selective": 5, "full": 5.5}
TP_OUTSIDE_BLOCKS = 2


def tp_seconds(
    config: Config,
    seq_len: int,
    micro_batch: int,
    tp: int,
    act_bytes: int,
    inside: Hop,
    checkpoint: str,
) -> float:
    """One micro-batch's tensor-parallel collectives over the node's link: each moves the
    micro-batch's activations, micro_batch x seq_len x dim elements of act_bytes."""
    if tp <= 1:
        return 0.0
    volume = micro_batch * seq_len * config.dim * act_bytes
    count = config.layers * TP_PER_BLOCK[checkpoint] + TP_OUTSIDE_BLOCKS
    return count * Ring(tp, inside).allreduce(volume)


def tp_units(blocks: list[Unit], root: Unit, tp: int) -> tuple[list[Unit], Unit]:
    """What one rank of a TP group holds and computes of each unit: a tp-th of its
    parameters (the norms, a small share, are replicated: counted split too) and of its
    FLOPs."""
    if tp <= 1:
        return blocks, root

    def part(u: Unit) -> Unit:
        return Unit(math.ceil(u.params / tp), u.flops_per_token / tp)

    return [part(b) for b in blocks], part(root)


def describe(sharding: Sharding, parallel: str) -> str:
    """The sharded step in words, for predict's header."""
    names = {v: k for k, v in DTYPE_BYTES.items()}
    how = "resharded after forward" if sharding.reshard_after_forward else "gathered once"
    what = (
        "FSDP2 over all workers"
        if parallel == "fsdp2"
        else (f"HSDP, shard groups of {sharding.group}")
    )
    rs = "reduce-scatter as Gloo's all-reduce" if sharding.gloo else "reduce-scatter"
    return (
        f"{what} ({how}), parameters gathered in {names[sharding.param_bytes]}, gradients "
        f"reduced in {names[sharding.reduce_bytes]} ({rs}"
        f"{', blocking' if sharding.gloo else ', one layer of prefetch'})"
    )


def tokens_per_s(workers: int, batch: int, seq_len: int, step_s: float) -> float:
    return workers * batch * seq_len / step_s


def reduce_scatter_emulated(probe: dict[str, Any] | None) -> bool | None:
    """Whether the probe's backend ran a reduce-scatter as something else (Gloo: an
    all-reduce), as its `collectives` record says; None where it does not say."""
    paths = (probe or {}).get("collectives")
    if not isinstance(paths, dict):
        return None
    value = (paths.get("reduce_scatter") or {}).get("emulated")
    return value if isinstance(value, bool) else None


def check_group(parallel: str, shard_group: int, workers: int, per_node: int) -> int:
    """The shard group at `workers` (transformer_configs.shard_group), one line where it
    does not divide them."""
    try:
        return int(transformer_configs.shard_group(parallel, shard_group, workers, per_node))
    except ValueError as err:
        raise UsageError(str(err)) from None


def nodes_of(workers: int, per_node: int) -> int:
    return math.ceil(workers / per_node)
