"""What a sweep or a probe is asked to do, as typed, frozen specs.

The CLI (hpcbench.measure.scale_options) builds the specs once from the command line,
with the parsers of hpcbench.launchers.parse; nothing below it sees the argparse
Namespace.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcbench.launchers.parse import HostSlots
from hpcbench.launchers.slurm import SlurmOptions


@dataclass(frozen=True)
class WorkloadSpec:
    """What each run trains (bench/train.py's options), batch sizes aside."""

    model: str
    image_size: int
    data: str = "synthetic"
    data_workers: int = 4
    warmup: int = 10
    windows: int = 5
    steps: int = 20
    min_window_s: float = 0.0  # 0: windows of `steps`; else steps grow to fill this long
    device: str = "auto"
    threads: int = 0
    amp: str = "auto"
    step: str = "eager"  # bench/steps.py: eager, graph (CUDA graphs), compile
    compile_backend: str = "inductor"  # torch.compile's, under --step compile
    decode: str = "auto"  # bench/inputs.py: where real images are decoded
    fp16_allreduce: bool = False
    fusion_threshold_mb: float | None = None
    bucket_cap_mb: float | None = None
    # The transformers (bench/transformer_configs.py): the sequence (resolved: the
    # configuration's own unless asked; 0 for the CNNs), the parallelism, and HSDP's shard
    # group as asked (0: a node's workers, resolved per configuration by the sweep).
    seq_len: int = 0
    parallel: str = "ddp"
    shard_group: int = 0
    # A transformer's layout (bench/layout.py): tensor-parallel workers inside a node,
    # micro-batches per optimizer step, and which of a block's forward runs again.
    tp: int = 1
    grad_accum: int = 1
    activation_checkpoint: str = "none"


@dataclass(frozen=True)
class TargetSpec:
    """Where runs go and how they are launched."""

    env: str  # a deployed environment, or a kind that is not deployed (localhost, slurm)
    node_counts: tuple[int, ...]
    hosts: tuple[HostSlots, ...] = ()  # --hosts; empty: --env decides
    gpus_per_node: int | None = None  # workers per node; None: the node's GPUs, else 1
    backend: str = "horovod"
    launcher: str = "auto"
    horovod_controller: str = "gloo"
    slurm: SlurmOptions = SlurmOptions()
    # The target's options that decide how its runs measure, where given other than
    # their default, by option name (hpcbench.measure.identity.target_given): each run's
    # method label names them.
    given: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class ProbeSpec:
    """The all-reduce probe: a size sweep up to max_bytes on every worker."""

    max_bytes: str = "64M"
    device: str = "auto"
    threads: int = 0
    timeout_s: int = 1800
    # Seconds after which no new size starts (--probe-budget); None: the default rule
    # (hpcbench.measure.probe.default_budget_s in a sweep, timeout_s for `probe` alone).
    budget_s: int | None = None
    # bench/allreduce.py --collectives: all-reduce first; a sweep under FSDP2 or HSDP
    # adds all-gather and reduce-scatter, the collectives it issues.
    collectives: tuple[str, ...] = ("all_reduce",)


@dataclass(frozen=True)
class SweepSpec:
    """How the sweep runs: repeats, order, where results go, what it may skip."""

    batches: tuple[int, ...]
    out: Path = Path("results")
    repeats: int = 3
    seed: int = 0
    resume: bool = False
    probe: ProbeSpec | None = ProbeSpec()  # None: --no-probe
    timeout_s: int = 1800
    dry_run: bool = False
    verbose: bool = False
    # Adaptive repeats (docs/method.md): after --repeats, a configuration whose throughput
    # interval is wider than target_ci runs again, up to max_repeats runs, while the sweep
    # has budget_s left (None: no limit).
    target_ci: float = 0.05
    max_repeats: int = 0  # 0: --repeats, i.e. no extra repeats
    budget_s: int | None = None
    # The (batch, nodes, workers) configurations this sweep may run; None: all of the
    # plan. A campaign leaves out the cells it has finished or excluded.
    only: frozenset[tuple[int, int, int]] | None = None
