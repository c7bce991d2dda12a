"""The shipped table of published single-worker training throughputs
(hpcbench/data/single_worker.json): one accelerator's images/s for a model at a
batch and precision, each row quoted from its source. A forecast falls back on it
where nothing was measured or given (hpcbench.campaign.forecast).

A row answers for an accelerator when one of its `matches` tokens is in the
accelerator's name (case-insensitive: 'V100' in 'Tesla V100-SXM2-16GB'), or that
name is in the row's own. Precision must match: mixed precision is two to three
times FP32 on tensor-core GPUs, so no row of another precision stands in. Of the
rows left, the nearest batch (by ratio) wins: a small batch leaves a large GPU idle
between kernels, which memory size or form factor changes less; then the row that
names the accelerator most closely, then a PyTorch figure.

The table has no transformer rows: no source publishes one GPU's training rate for the
workload's configurations. A transformer's one worker is assumed instead
(assumed_tokens_per_s): the accelerator's peak FLOPS at the training precision
(bench/peak_flops.py, each with its data sheet) x DEFAULT_MFU / the configuration's
FLOPs per token, labelled an assumption wherever it is used.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcbench.core.bench import peak_flops, transformer_configs
from hpcbench.performance import sharded_model

TABLE = Path(__file__).resolve().parents[1] / "data" / "single_worker.json"
PRECISIONS = ("fp32", "tf32", "amp")
# The MFU assumed for one worker of a transformer where nothing was measured: torchtitan's
# Llama 3.1 8B under FSDP2 on 8 and 128 H100 "achieves 33% to 39% MFU"
# (pytorch/torchtitan@b5bcd76c66d0acb1a08b176d9639425bc55e0b2a
# benchmarks/llama3_h100_202412_torchtitan.md), taken near its low end. An assumption:
# a small model at a small batch, eager, runs well below it.
DEFAULT_MFU = 0.35


@dataclass(frozen=True)
class Published:
    images_per_s: float
    batch: int
    precision: str
    accelerator: str  # as the source names it
    title: str
    url: str

    @property
    def source(self) -> str:
        return (
            f"published: {self.images_per_s:g} images/s on {self.accelerator} at batch "
            f"{self.batch}, {self.precision} ({self.url})"
        )


@functools.cache
def table() -> dict[str, Any]:
    return json.loads(TABLE.read_text())


def _answers(row: dict[str, Any], accelerator: str) -> int:
    """How specifically a row names the accelerator: the longest token that matches
    (0: it does not)."""
    name = accelerator.lower()
    tokens = [t.lower() for t in row.get("matches", [])]
    best = max((len(t) for t in tokens if t and t in name), default=0)
    if name in str(row.get("accelerator", "")).lower():
        best = max(best, len(name))
    return best


def lookup(
    accelerator: str, model: str, image_size: int, batch: int, precisions: tuple[str, ...]
) -> Published | None:
    """The row that best answers (module docstring); None where none does. precisions:
    those acceptable, the first preferred."""
    data = table()
    candidates = [
        r
        for r in data["rows"]
        if r["model"] == model
        and r["image_size"] == image_size
        and r["precision"] in precisions
        and _answers(r, accelerator)
    ]
    if not candidates:
        return None

    def rank(r: dict[str, Any]) -> tuple[float, ...]:
        return (
            precisions.index(r["precision"]),
            abs(math.log(r["batch"] / batch)),
            -_answers(r, accelerator),
            0 if r["framework"] == "pytorch" else 1,
        )

    row = min(candidates, key=rank)
    source = data["sources"][row["source"]]
    return Published(
        float(row["images_per_s"]),
        int(row["batch"]),
        row["precision"],
        row["accelerator"],
        source["title"],
        source["url"],
    )


def assumed_tokens_per_s(
    accelerator: str, model: str, seq_len: int, precision: str
) -> tuple[float, str] | None:
    """One worker's tokens/s assumed from the accelerator's peak at `precision` (bf16,
    fp32) x DEFAULT_MFU over the model's FLOPs per token, and how it was made; None where
    the peak table has no row for the accelerator at that precision, or the model is not
    a transformer."""
    config = sharded_model.shape(model)  # the workload's own, or one read from a config.json
    if config is None:
        return None
    peak, why = peak_flops.lookup(accelerator, precision)
    if peak is None:
        return None
    flops = transformer_configs.flops_per_token(config, seq_len)
    rate = peak * DEFAULT_MFU / flops
    return rate, (
        f"assumed: {rate:.0f} tokens/s = {DEFAULT_MFU:.0%} MFU x {peak / 1e12:g} TFLOPS "
        f"{precision} ({why}) / {flops / 1e9:.3g} GFLOP per token "
        "(bench/transformer_configs.py)"
    )
