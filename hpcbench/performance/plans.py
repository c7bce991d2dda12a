"""A forecast's inputs, gathered into one Plan in one place: what the runs train and how
(a Job, as the workload's options say it), what the network allows (a Network: a probe,
or a line rate and its transport's share), one worker's step and the workers.

`hpcbench predict`, the campaign's forecasts and the report's prediction beside a
measurement each gather a Job and a Network their own way (the command line; a
campaign file, its stores and probes; a results store) and hand them to plan(), so
that one cell gets one number whichever asks. DEFAULTS is the one table of what a
forecast takes where it is not told.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from hpcbench.core.bench import transformer_configs
from hpcbench.performance import allreduce_model, memory, sharded_model
from hpcbench.performance.scaling_model import (
    DEFAULT_INTERFERENCE,
    DEFAULT_INTRA_NODE,
    INTRA_LATENCY_US,
    INTRA_NODE,
    LATENCY_US,
    LINK_EFFICIENCY,
    Plan,
)

# What a forecast takes where it is not told, and why.
DEFAULTS: dict[str, tuple[Any, str]] = {
    "transport": ("tcp", "the common case between nodes; its share of the line rate is fitted"),
    "intra_node": (DEFAULT_INTRA_NODE, "PCIe 3 inside a node: the slowest common interconnect"),
    # bench/lm.py training_precision and its MixedPrecisionPolicy: a transformer computes
    # and gathers its parameters in bf16 on CUDA unless --amp off, in fp32 on CPU nodes.
    "param_dtype": ("bf16 on CUDA unless --amp off, else fp32", "bench/lm.py, parallelize"),
    # The workload reduces gradients in fp32 (MixedPrecisionPolicy reduce_dtype; DDP's
    # buckets hold the fp32 gradients).
    "reduce_dtype": ("fp32", "bench/lm.py, parallelize"),
    "interference": (
        DEFAULT_INTERFERENCE,
        "fitted to published rows; 0 where a probe measured the backend's CPU work, which "
        "is what it stands for on CPU nodes",
    ),
}


@dataclass(frozen=True)
class Job:
    """What the runs train and how, in the workload's terms (bench/workload_options.py):
    the model and its input, the backend and its grouping, a transformer's parallelism
    and precision, and whether they run on CUDA."""

    model: str
    batch: int
    backend: str = "ddp"
    image_size: int = 0  # a CNN's; resolved by the caller
    seq_len: int = 0  # a transformer's; resolved by the caller
    parallel: str = "ddp"
    shard_group: int = 0
    bucket_cap_mb: float | None = None
    fusion_threshold_mb: float | None = None
    cycle_time_ms: float | None = None  # Horovod's HOROVOD_CYCLE_TIME
    fp16_allreduce: bool = False  # gradients compressed to fp16 on the wire
    cuda: bool = True  # else CPU nodes: Gloo's collectives
    amp: str = "auto"
    param_dtype: str | None = None  # None: DEFAULTS
    reduce_dtype: str | None = None  # None: DEFAULTS
    reshard_after_forward: bool = True
    # A transformer's layout: tensor-parallel workers inside a node, micro-batches of
    # `batch` per step, and which of a block's forward runs again in backward.
    tp: int = 1
    grad_accum: int = 1
    activation_checkpoint: str = "none"
    # The GPU computes bf16 natively (False: Volta, Pascal, where a transformer trains
    # in fp32 whatever --amp says: bench/lm.py training_precision).
    bf16_gpu: bool = True

    @property
    def transformer(self) -> bool:
        return sharded_model.shape(self.model) is not None

    @property
    def bf16(self) -> bool:
        """Whether a transformer computes in bf16 (bench/lm.py training_precision)."""
        return self.cuda and self.amp != "off" and self.bf16_gpu

    @property
    def param_bytes(self) -> int:
        if self.param_dtype is not None:
            return sharded_model.DTYPE_BYTES[self.param_dtype]
        return 2 if self.bf16 and self.parallel != "ddp" else 4

    @property
    def reduce_bytes(self) -> int:
        return sharded_model.DTYPE_BYTES[self.reduce_dtype or DEFAULTS["reduce_dtype"][0]]

    def grouping(self) -> allreduce_model.Grouping:
        """The backend's messages: DDP's buckets or Horovod's fusion, as set."""
        size_mb = self.bucket_cap_mb if self.backend == "ddp" else self.fusion_threshold_mb
        return allreduce_model.Grouping(
            self.backend,
            None if size_mb is None else size_mb * 1024**2,
            None if self.cycle_time_ms is None else self.cycle_time_ms / 1e3,
        )


@dataclass(frozen=True)
class Network:
    """What the network allows: across nodes, one NIC's bus bandwidth (None: no line rate
    known) and latency, and where they come from; inside a node, its link; the backend's
    CPU work a probe measured on CPU nodes, the interference, NCCL's algorithm and one
    node's sharing where known (None: assumed, named as such by the forecast); a
    probe's all-gather and reduce-scatter, (name, latency_s, busbw) each."""

    busbw: float | None
    latency_s: float
    source: str
    intra_busbw: float = INTRA_NODE[DEFAULT_INTRA_NODE]
    intra_assumed: bool = True
    interference: float = DEFAULT_INTERFERENCE
    cpu: allreduce_model.CpuWork = allreduce_model.CpuWork()
    collectives: tuple[tuple[str, float, float], ...] = ()
    nccl: bool | None = None
    node_loss: float | None = None
    # CPU nodes whose backend's CPU work per byte no probe told from its noise: at most
    # this (s/byte); a forecast's point takes cpu's figure, its band none to this.
    # None: known, or unbounded.
    cpu_up_to: float | None = None

    def inside(self, name: str | None) -> Network:
        """This network with the node's interconnect named (None: DEFAULTS', assumed)."""
        chosen = name or DEFAULTS["intra_node"][0]
        return replace(self, intra_busbw=INTRA_NODE[chosen], intra_assumed=name is None)


def nominal(
    rate_bits: float, transport: str | None, share: float | None = None, said: str = ""
) -> Network:
    """A line rate's network: its transport's default share of the rate (or `share`,
    said so), its default latency."""
    chosen = transport or DEFAULTS["transport"][0]
    efficiency = LINK_EFFICIENCY[chosen] if share is None else share
    source = said or f"{chosen}'s default"
    return Network(
        rate_bits / 8 * efficiency,
        LATENCY_US[chosen] * 1e-6,
        f"{_rate(rate_bits)} x {efficiency:.2f} ({source})",
    )


def probed(probe: dict[str, Any], scale: float = 1.0, where: str = "probed") -> Network | None:
    """A probe's network: the all-reduce's fitted latency and bus bandwidth (times
    `scale`, another link's rate over the probed one's), its all-gather and
    reduce-scatter where it timed them, and on CPU nodes the backend's CPU work it
    measured, which interference stands for there (0). None: no fit."""
    model = allreduce_model.link_model(probe)
    if model is None:
        return None
    cpu = allreduce_model.cpu_work(probe)
    collectives = []
    for name in ("all_gather", "reduce_scatter"):
        fitted = allreduce_model.collective_model(probe, name)
        if fitted is not None:
            collectives.append((name, fitted.latency_s, fitted.busbw * scale))
    return Network(
        model.busbw * scale,
        model.latency_s,
        f"{where}: {model.busbw * 8 / 1e6:.0f} Mbit/s bus bandwidth{collectives_said(probe)}",
        interference=0.0 if cpu != allreduce_model.CpuWork() else DEFAULT_INTERFERENCE,
        cpu=cpu,
        collectives=tuple(collectives),
    )


def collectives_said(probe: dict[str, Any]) -> str:
    """What a probe timed besides the all-reduce, for a forecast's source line."""
    timed = [
        name.replace("_", "-")
        for name in ("all_gather", "reduce_scatter")
        if allreduce_model.collective_model(probe, name) is not None
    ]
    return f" (and its {' and '.join(timed)})" if timed else ""


def plan(
    job: Job,
    network: Network,
    workers: list[int],
    gpus_per_node: int,
    step_time_s: float,
    timeline: tuple[tuple[float, float], ...] = (),
) -> Plan:
    """The forecast's inputs as the scaling model takes them. timeline: one worker's
    measured gradients, (seconds after the step began, bytes) each, which the replay
    takes instead of the model's layers (a CNN's baseline records it)."""
    transformer = job.transformer
    gloo = not job.cuda
    return Plan(
        model=job.model,
        image_size=0 if transformer else job.image_size,
        batch=job.batch,
        workers=workers,
        gpus_per_node=gpus_per_node,
        step_time_s=step_time_s,
        # One node: its own link only; the NIC's figure is never used.
        busbw=network.busbw if network.busbw is not None else network.intra_busbw,
        latency_s=network.latency_s,
        backend=job.backend,
        grouping=job.grouping(),
        intra_busbw=network.intra_busbw,
        intra_latency_s=INTRA_LATENCY_US * 1e-6,
        interference=network.interference,
        # CPU nodes run Gloo, whose collectives are rings; a transformer's NCCL is the
        # workload's own, ring or tree; a CNN's NCCL release is not known (assumed).
        nccl=False if gloo else (True if transformer else network.nccl),
        node_loss=network.node_loss,
        intra_assumed=network.intra_assumed,
        link_note=network.source,
        cpu=network.cpu,
        seq_len=job.seq_len if transformer else 0,
        parallel=job.parallel if transformer else "ddp",
        shard_group=job.shard_group,
        param_bytes=job.param_bytes,
        reduce_bytes=job.reduce_bytes,
        reshard_after_forward=job.reshard_after_forward,
        collective_links=network.collectives if job.parallel != "ddp" else (),
        gloo=transformer and gloo,
        timeline=timeline,
        compression=0.5 if job.fp16_allreduce else 1.0,
        tp=job.tp,
        grad_accum=job.grad_accum,
        checkpoint=job.activation_checkpoint,
        act_bytes=2 if job.bf16 else 4,
    )


def recompute_share(model: str, seq_len: int, checkpoint: str) -> float:
    """What activation checkpointing adds to one worker's step, as a share of it
    (bench/layout.py): the FLOPs each block's forward runs again in backward over the
    forward's (flops_per_token / 3), times the forward's share of a step (1 -
    allreduce_model.BACKWARD_SHARE; Korthikanti et al. 2022, arXiv:2205.05198, section
    5: "about 33%"). Recomputation stops at the last output backward needs
    (torch.utils.checkpoint stops early), so a block's last matrix product (w2) is never
    run again: full recomputes the others and the attention; selective (torchtitan's
    op policy) every second product (the 2nd, 4th, ...: transformer_configs.
    block_products) but the last, and the elementwise operations, taken as nothing
    beside them. Nothing outside the blocks (embedding, output) is recomputed.
    tests/unit/test_layout.py counts the workload's recomputed FLOPs against it."""
    if checkpoint == "none":
        return 0.0
    config = sharded_model.shape(model)
    if config is None:
        return 0.0  # a CNN has no blocks to checkpoint
    products = transformer_configs.block_products(config)
    if checkpoint == "full":
        again = sum(2 * i * o for i, o, _ in products[:-1])
        again += transformer_configs.attention_flops(config, seq_len)
    else:
        again = sum(2 * i * o for i, o, _ in products[1:-1:2])
    forward = 1.0 - allreduce_model.BACKWARD_SHARE
    return (
        forward * config.layers * again / (transformer_configs.flops_per_token(config, seq_len) / 3)
    )


def step_in_layout(micro_step_s: float, job: Job) -> float:
    """One worker's whole step in the job's layout, from its plain step of one
    micro-batch (a figure measured or given without checkpointing): K micro-batches,
    each with what checkpointing recomputes. A baseline the workload measured in the
    layout is that step already."""
    share = recompute_share(job.model, job.seq_len, job.activation_checkpoint)
    return micro_step_s * job.grad_accum * (1.0 + share)


def memory_layout(
    job: Job,
    workers: int,
    gpus_per_node: int,
    master_dtype: str = "fp32",
    optimizer_dtype: str = "fp32",
) -> memory.Layout:
    """The layout memory.py forecasts one worker's bytes in, at `workers` workers of
    `gpus_per_node` a node: the job's parallelism, its TP group (none on one worker),
    HSDP's shard group less TP, its micro-batches and checkpointing; computing in bf16
    where the job does (Job.bf16), the states in the dtypes given (fp32 by default, as
    torchtitan keeps them). `predict` and a campaign's cells take it from here."""
    tp = job.tp if workers > 1 else 1
    group = sharded_model.check_group(job.parallel, job.shard_group, workers, gpus_per_node)
    return memory.Layout(
        parallel=job.parallel,
        dp=max(1, workers // tp),
        shard_group=max(1, group // tp) if job.parallel == "hsdp" else 0,
        tp=tp,
        grad_accum=job.grad_accum,
        # The workload defers the reduction to the last micro-batch (bench/layout.py).
        defer_reduction=job.grad_accum > 1,
        checkpoint=job.activation_checkpoint,
        compute_dtype="bf16" if job.bf16 else "fp32",
        master_dtype=master_dtype,
        optimizer_dtype=optimizer_dtype,
        reduce_dtype=job.reduce_dtype or DEFAULTS["reduce_dtype"][0],
    )


def _rate(bits: float) -> str:
    return f"{bits / 1e9:g} Gbit/s" if bits >= 1e9 else f"{bits / 1e6:g} Mbit/s"
