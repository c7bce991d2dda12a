"""The workload's options that the harness passes through, declared once.

bench/train.py builds its parser from them; the harness (hpcbench/measure/scale_options.py)
offers the same options to `scale` and a campaign's sweep, and turns its
values back into train.py's command line (hpcbench/measure/sweep.py, workload_args).
Each side parses the values with its own bench/units.py checks (the harness's
refuse with one line and exit 2 before anything launches), so `kind` names the
parser instead of holding one. Runs on the nodes: no torch, no hpcbench; the
harness loads this file from bench/ (hpcbench/core/bench.py).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

STEP_MODES = ("eager", "graph", "compile")  # bench/steps.py
DECODERS = ("auto", "workers", "device")  # bench/inputs.py
PARALLEL = ("ddp", "fsdp2", "hsdp")  # bench/lm.py (the transformers)
BACKENDS = ("horovod", "ddp")  # bench/runtime.py connect: Horovod, or torch.distributed


@dataclass(frozen=True)
class Option:
    flag: str
    kind: str  # count, megabytes, seconds (bench/units.py), choice, text, switch
    default: Any
    help: str
    choices: tuple[str, ...] = ()

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")


OPTIONS = (
    Option(
        "--model",
        "text",
        "resnet50",
        "a CNN of bench/models.json, a transformer of bench/transformer_configs.py, or "
        "a Hugging Face config.json's path (predict: also any torchvision model, and the "
        "published shapes of hpcbench/performance/sharded_model.py)",
    ),
    Option("--image-size", "count", 0, "CNNs; default: the model's own"),
    Option(
        "--seq-len",
        "count",
        0,
        "transformers: tokens per sequence (default: the configuration's own; at most its context)",
    ),
    Option(
        "--parallel",
        "choice",
        "ddp",
        "transformers: ddp, fsdp2 (FSDP2 over all workers) or hsdp (shard inside a group, "
        "replicate across groups)",
        PARALLEL,
    ),
    Option(
        "--shard-group",
        "count",
        0,
        "hsdp: workers that shard one replica (default: a node's workers); must divide the workers",
    ),
    Option(
        "--data",
        "text",
        "synthetic",
        "'synthetic', an ImageNet-layout folder (CNNs) or a token file (transformers, "
        "bench/tokens.py)",
    ),
    Option(
        "--decode",
        "choice",
        "auto",
        "real images (--data): decoded by the DataLoader's "
        "workers, or on the device (nvJPEG on CUDA); auto: device on CUDA where it works "
        "(docs/gpu.md)",
        DECODERS,
    ),
    Option("--data-workers", "count", 4, "DataLoader processes per worker"),
    Option("--warmup", "count", 10, "discarded steps per run"),
    Option("--windows", "count", 5, "timed windows per run"),
    Option("--steps", "count", 20, "steps per window"),
    Option(
        "--min-window-s",
        "seconds",
        0.0,
        "each window lasts at least this long: steps "
        "grow to fit, measured after warm-up (0: --steps exactly)",
    ),
    Option("--device", "choice", "auto", "auto: CUDA where torch sees it", ("auto", "cpu", "cuda")),
    Option(
        "--threads",
        "count",
        0,
        "torch threads per worker (0: the node's cores shared among its workers)",
    ),
    Option("--amp", "choice", "auto", "fp16 autocast; auto: on with CUDA", ("auto", "on", "off")),
    Option(
        "--step",
        "choice",
        "eager",
        "how a training step runs: eager; graph: CUDA graphs "
        "(CUDA only); compile: torch.compile (docs/gpu.md)",
        STEP_MODES,
    ),
    Option(
        "--compile-backend",
        "choice",
        "inductor",
        "--step compile: torch.compile's backend; aot_eager traces forward and backward as "
        "inductor does but generates no kernels (seconds, not minutes, on a small CPU)",
        ("inductor", "aot_eager"),
    ),
    Option("--fp16-allreduce", "switch", False, "compress gradients to fp16"),
    Option(
        "--fusion-threshold-mb",
        "megabytes",
        None,
        "Horovod's tensor fusion buffer (default: Horovod's 128)",
    ),
    Option("--bucket-cap-mb", "megabytes", None, "DDP's gradient buckets (default: DDP's 25)"),
    # The transformers' layout (bench/layout.py).
    Option(
        "--tp",
        "count",
        1,
        "transformers: tensor-parallel workers inside a node, under fsdp2 or hsdp (must "
        "divide the heads, the KV heads, --seq-len and a node's workers)",
    ),
    Option(
        "--grad-accum",
        "count",
        1,
        "transformers: micro-batches of --batch per optimizer step, gradients reduced on the last",
    ),
    Option(
        "--activation-checkpoint",
        "choice",
        "none",
        "transformers: each block's forward run again in backward, whole (full) or all "
        "but its matrix products and attention (selective)",
        ("none", "full", "selective"),
    ),
)


def grouping_problem(
    backend: str, bucket_cap_mb: float | None, fusion_threshold_mb: float | None
) -> str | None:
    """A backend's message size given to the other backend (one line), or None: DDP takes
    no fusion buffer, Horovod no buckets, and the option would change nothing."""
    if bucket_cap_mb is not None and backend != "ddp":
        return "--bucket-cap-mb is DDP's setting: give --fusion-threshold-mb for horovod"
    if fusion_threshold_mb is not None and backend != "horovod":
        return "--fusion-threshold-mb is Horovod's setting: give --bucket-cap-mb for ddp"
    return None


def add_to(
    parser: argparse.ArgumentParser,
    parsers: Mapping[str, Callable[[str], Callable[[str], Any]]],
    only: tuple[str, ...] = (),
) -> None:
    """Every option (or those `only` names), their values read by parsers[kind](name)
    for the three number kinds."""
    for o in OPTIONS:
        if only and o.flag not in only:
            continue
        if o.kind == "switch":
            parser.add_argument(o.flag, action="store_true", help=o.help)
        elif o.kind in ("choice", "text"):
            parser.add_argument(o.flag, default=o.default, choices=o.choices or None, help=o.help)
        else:
            parser.add_argument(
                o.flag,
                type=parsers[o.kind](o.flag.removeprefix("--")),
                default=o.default,
                help=o.help,
            )


def argv(values: Mapping[str, Any]) -> list[str]:
    """train.py's command line for these values (by dest): an option at its default (or
    None) is left out, as train.py's default is the same; a switch is its flag alone."""
    out: list[str] = []
    for o in OPTIONS:
        value = values.get(o.dest)
        if value is None or value == o.default:
            continue
        out += [o.flag] if o.kind == "switch" else [o.flag, str(value)]
    return out
