"""`hpcbench predict` in a transformer's layout (--tp, --grad-accum,
--activation-checkpoint) against the published runs of evaluation/layouts.json, each
scored with the constants fitted without its source.

    python evaluation/layouts_score.py [--markdown] [--data FILE]

A scored row (TP or accumulation above 1 with neither pipeline nor context parallelism,
or the base of its source's comparison) is forecast as `hpcbench predict` calls it, its
source's set-up in predict's terms (SETUPS), with the link efficiency and interference
fitted on published.json's rows of every source group but the row's own
(published.fit_without, the folds of published.py's transformer rows). Those are all
the forecast fits: it has no constant of its own for TP, accumulation or checkpointing,
and nothing more is fitted here (no source but MLPerf's isolates TP at one replica
count, and a fit without that source would have nothing to fit on).

- E: where the source ran the same layout on fewer GPUs (the fewest: its base), the
  published E(N) is tokens/s per GPU at N over the base's; the point and band are
  predict's at N over its point at the base (scaling_model.rescaled_to_node), as
  published.py scores its transformer rows.
- tokens/s per GPU: one worker's rate is the one at which predict gives a base run its
  published tokens/s per GPU (a fixed point, one_worker). The base is the row's layout on
  fewer GPUs; else the source's smallest run of the same model and precision in another
  layout; else the source's marked base of another model, whose one worker's MFU is
  taken for this model (its tokens/s x the base model's FLOPs per token / this one's).
  Each row says which.
- peak memory: predict's bytes per GPU against each figure of a run in a layout the
  forecast takes, like with like: allocated bytes (torch.cuda.max_memory_allocated)
  against the forecast, reserved bytes (max_memory_reserved) against the forecast over
  1 - memory.FRAGMENTATION, the share of reserved memory tensors cannot use (the
  allowance memory.fit keeps).

Each summary gives the median error and the bias with their 95% intervals (source
groups and their rows resampled: published.interval) and the target it is held to;
stderr has every row and each fold's constants. Nothing here is measured on this machine.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import shlex
import statistics
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import published  # evaluation/published.py: the folds, the intervals and the summaries

from hpcbench import cli
from hpcbench.core import files
from hpcbench.core.bench import transformer_configs
from hpcbench.core.errors import UsageError, one_line
from hpcbench.performance import memory, scaling_model, sharded_model

DATA = Path(__file__).resolve().parent / "layouts.json"
DATA_FILE = files.Bound(4 * files.MIB, "layouts.json is a few hundred kB of rows")
GIB = 1024**3

# ------------------------------------------------------------------ the shapes
# The shapes table's activations in the forecast's two families
# (bench/transformer_configs.py): SwiGLU's three MLP matrices are llama's; GELU's and
# squared ReLU's two are gpt2's, which also counts biases and a learned position table
# (Nemotron4 has neither: 0.2% of its 15B).
FAMILY = {"swiglu": "llama", "gelu": "gpt2", "squared-relu": "gpt2"}
# The output projection is the token table for MPT (llm-foundry's NumParams, which
# sharded_model's MPT shapes reproduce tied); the others' parameter counts in their names
# (Megatron's 1.7B, 7.1B, 16B; Nemotron4's 15B; Llama's) hold an output of its own.
TIED = ("mpt-",)
SHAPE_FIELDS = ("family", "dim", "layers", "heads", "kv_heads", "ffn", "vocab", "tied")


def config_of(name: str, shape: dict, rows: list[dict]) -> Any:
    """A shape of the table as the forecast's configuration, its context (a gpt2-family
    position table's rows) the longest sequence its rows train (MPT's 2048, as
    sharded_model's MPT shapes take it)."""
    context = max([r["seq_len"] for r in rows if r["model"] == name], default=2048)
    return transformer_configs.TransformerConfig(
        name,
        FAMILY[shape["activation"]],
        dim=shape["dim"],
        layers=shape["layers"],
        heads=shape["heads"],
        kv_heads=shape["kv_heads"],
        ffn=shape["ffn"],
        vocab=shape["vocab"],
        context=context,
        seq_len=context,
        tied=name.startswith(TIED),
        source=shape["from"],
    )


@contextlib.contextmanager
def shapes_known(data: dict) -> Iterator[None]:
    """The shapes table's models known to predict while the rows are scored (added to
    sharded_model.PUBLISHED_SHAPES, removed after); one predict knows already must be the
    table's, else a UsageError names it."""
    added = []
    try:
        for name, shape in data["shapes"].items():
            mine = config_of(name, shape, data["rows"])
            known = sharded_model.shape(name)
            if known is None:
                sharded_model.PUBLISHED_SHAPES[name] = mine
                added.append(name)
                continue
            differ = [f for f in SHAPE_FIELDS if getattr(known, f) != getattr(mine, f)]
            if differ:
                raise UsageError(
                    f"shapes.{name}: {', '.join(differ)} differ from predict's {name} "
                    "(hpcbench/performance/sharded_model.py): fix the one that is wrong"
                )
        yield
    finally:
        for name in added:
            del sharded_model.PUBLISHED_SHAPES[name]


# ------------------------------------------------------------------ the set-ups
@dataclass(frozen=True)
class Setup:
    """How a source trains, in predict's options, and why. reduce_dtype: by a marker of
    the row's precision ("" for any other). fp8_gather: its FP8 rows gather fp8
    parameters. step_is_micro_batch: the micro-batch is not stated, and the step's
    sequences per replica are taken as one."""

    parallel: str
    reshard_after_forward: str
    reduce_dtype: dict[str, str]
    fp8_gather: bool
    why: str
    step_is_micro_batch: bool = False


# Megatron-core reduces gradients in bf16 unless told otherwise (NVIDIA/Megatron-LM@
# f2e5db402c44, the README's commit, megatron/core/distributed/
# distributed_data_parallel_config.py:11, 'grad_reduce_in_fp32: bool = False'), which no
# source here says it changed; '--overlap-param-gather' runs only with the distributed
# optimizer (megatron/training/arguments.py:279-281 at that commit).
DIST_OPT = (
    "Megatron's distributed optimizer reduce-scatters the gradients and gathers the "
    "parameters once a step: forecast as FSDP2 without reshard after forward, as "
    "published.json's MLPerf row is (the forecast gathers again every micro-batch); "
    "gradients reduced in bf16 (Megatron-core's grad_reduce_in_fp32 default)"
)
TORCHTITAN = (
    "torchtitan: FSDP2 over the data-parallel ranks, resharded after forward, "
    "parameters gathered in bf16 and gradients reduced in fp32 (config_manager.py's "
    "mixed_precision_param and mixed_precision_reduce defaults, as published.json's "
    "torchtitan source quotes them), TP inside a node"
)
SETUPS = {
    "dgxc-25.01-nemotron4-15b": Setup(
        "fsdp2",
        "off",
        {"": "bf16"},
        True,
        DIST_OPT + "; the FP8 rows gather fp8 parameters (configure.sh '+model.fp8_params')",
    ),
    "dgxc-25.04-nemotron4": Setup(
        "fsdp2",
        "off",
        {"": "bf16"},
        False,
        DIST_OPT + "; fp8 parameters not stated: gathered in bf16; checkpointing not stated: none",
    ),
    "megatron-lm-weak-scaling-h100": Setup(
        "fsdp2",
        "off",
        {"": "bf16"},
        False,
        "the distributed optimizer ('--overlap-param-gather' runs only with it): "
        + DIST_OPT
        + "; the micro-batch is not "
        "stated: each replica's 4 sequences a step taken as one micro-batch (TP's "
        "collectives move b x K micro-batches alike; one gather a step, as Megatron's); "
        "precision not stated: bf16; checkpointing not stated: none",
        step_is_micro_batch=True,
    ),
    "torchtitan-llama3-h100": Setup("fsdp2", "on", {"": "fp32"}, False, TORCHTITAN),
    "torchtitan-async-tp-h100": Setup("fsdp2", "on", {"": "fp32"}, False, TORCHTITAN),
    "torchtitan-405b-h100-2024-08": Setup("fsdp2", "on", {"": "fp32"}, False, TORCHTITAN),
    "mlperf-v5.1-cisco-h100": Setup(
        "fsdp2",
        "off",
        {"": "bf16"},
        False,
        DIST_OPT + "; FP8 parameter gathers not stated: bf16",
    ),
    # Composer's FSDP MixedPrecision (mosaicml/composer@fb1dd382733f
    # composer/trainer/mosaic_fsdp_utils.py:103-110, get_mixed_precision): DEFAULT
    # reduces in fp32, PURE in the precision (bf16). Before composer's d745fcb
    # ('patch default', 2023-10-10) DEFAULT set no reduce_dtype, which torch then takes
    # from param_dtype (torch 2.15 torch/distributed/fsdp/api.py:123-129); the tables do
    # not say which composer ran them.
    "llm-foundry-grad-accum": Setup(
        "fsdp2",
        "on",
        {"PURE": "bf16", "": "fp32"},
        False,
        "Composer's FSDP, FULL_SHARD: FSDP2 resharded after forward over every GPU; MP "
        "Mode DEFAULT reduces in fp32 (composer from 2023-10), PURE in bf16",
    ),
}
# What a row takes where its source states no network, by the GPU's name: an H100 node
# as dgxc-benchmarking's README gives its DGX H100 reference node ('Compute links: 8x
# 400 Gbit/s', 'NVLink 4th Generation'); inside an A100 node of 8, NVLink 3 (A100 SXM4,
# as published.json's llm-foundry rows take it). Assumed, not the sources'.
ASSUMED_NETWORK = {
    "H100": {"link": "3200gbit", "transport": "rdma", "intra_node": "nvlink4"},
    "A100": {"intra_node": "nvlink3"},
}
NETWORK = ("link", "transport", "intra_node")


def assumed(row: dict) -> list[str]:
    """The network figures the row takes from ASSUMED_NETWORK (its own are null)."""
    return [k for k in NETWORK if row.get(k) is None]


def network(row: dict) -> dict[str, str]:
    """The row's link, transport and interconnect inside a node, ASSUMED_NETWORK's
    where it states none."""
    kind = next((k for k in ASSUMED_NETWORK if k in row["gpu"]), "")
    out = {**ASSUMED_NETWORK.get(kind, {}), **{k: row[k] for k in NETWORK if row.get(k)}}
    missing = [k for k in NETWORK if k not in out]
    if missing:
        raise UsageError(
            f"{where(row)}: no {', '.join(missing)} stated, nor assumed for its GPU "
            f"{row['gpu'][:40]!r}: give the row's {', '.join(missing)}"
        )
    return out


def micro_batches(row: dict) -> tuple[int, int]:
    """(micro-batch, micro-batches a step): the row's own, or its step as one."""
    if SETUPS[row["source"]].step_is_micro_batch and row["micro_batch"] is None:
        return row["global_batch"] // row["dp"], 1
    return row["micro_batch"], row["grad_accum"]


def checkpoint(row: dict) -> str:
    return row["activation_checkpointing"] or "none"  # not stated: SETUPS says so


def where(row: dict) -> str:
    return f"{row['source']}, {row['run']}"


# ------------------------------------------------------------------ the forecast
def predict_argv(row: dict, workers: list[int], tps: float, found: scaling_model.Fit) -> list[str]:
    """`hpcbench predict`'s command line for the row at these worker counts, one worker
    at `tps` tokens/s, the fold's constants on it."""
    setup = SETUPS[row["source"]]
    net = network(row)
    batch, k = micro_batches(row)
    precision = row["precision"] or ""
    reduce = next(d for m, d in setup.reduce_dtype.items() if m in precision)
    gather = "fp8" if setup.fp8_gather and precision == "fp8" else "bf16"
    return [
        "predict",
        "--model",
        row["model"],
        "--seq-len",
        str(row["seq_len"]),
        "--batch",
        str(batch),
        "--grad-accum",
        str(k),
        "--tp",
        str(row["tp"]),
        "--activation-checkpoint",
        checkpoint(row),
        "--parallel",
        setup.parallel,
        "--reshard-after-forward",
        setup.reshard_after_forward,
        "--param-dtype",
        gather,
        "--reduce-dtype",
        reduce,
        "--workers",
        ",".join(map(str, workers)),
        "--gpus-per-node",
        str(row["gpus_per_node"]),
        "--single-worker-tps",
        f"{tps:.6f}",
        "--link",
        net["link"],
        "--transport",
        net["transport"],
        "--intra-node",
        net["intra_node"],
        "--link-efficiency",
        f"{found.efficiency[net['transport']]:g}",
        "--interference",
        f"{found.interference:g}",
        "--json",
    ]


def forecast(row: dict, workers: list[int], tps: float, found: scaling_model.Fit) -> list[dict]:
    """What `hpcbench predict` prints for the row (one JSON object per worker count); a
    layout it refuses is a UsageError naming the row."""
    out = io.StringIO()
    try:
        args = cli.build_parser().parse_args(predict_argv(row, workers, tps, found))
        with contextlib.redirect_stdout(out):
            args.func(args)
    except UsageError as err:
        raise UsageError(f"{where(row)}: {err}") from None
    rows: list[dict] = json.loads(out.getvalue())
    return rows


# A fixed point's steps at most, and how close it must come: the forecast's tokens/s is
# one worker's rate over a step that also holds what does not scale with it, so each
# step shrinks the gap by that share of the step.
FIXED_POINT_STEPS = 200
FIXED_POINT_TOLERANCE = 1e-9


def one_worker(base: dict, found: scaling_model.Fit) -> float:
    """One worker's tokens/s (a plain figure: one micro-batch, no checkpointing) at
    which predict gives the base run, in its own layout, its published tokens/s per GPU."""
    want = base["tokens_per_s_per_gpu"]
    rate = want
    for _ in range(FIXED_POINT_STEPS):
        got = forecast(base, [base["gpus"]], rate, found)[0]["tokens_per_s"] / base["gpus"]
        step = rate * want / got
        if abs(step - rate) <= FIXED_POINT_TOLERANCE * rate:
            return step
        rate = step
    raise UsageError(f"{where(base)}: no one-worker rate gives its tokens/s per GPU")


def flops(row: dict) -> float:
    config = sharded_model.shape(row["model"])
    return float(transformer_configs.flops_per_token(config, row["seq_len"]))


# ------------------------------------------------------------------ the bases
def layout_key(row: dict) -> tuple:
    """What one layout is: a run of it on more GPUs does the same work per GPU."""
    fields = ("source", "model", "seq_len", "micro_batch", "grad_accum", "tp", "precision")
    return (*(row[f] for f in fields), row["activation_checkpointing"], row["gpus_per_node"])


@dataclass(frozen=True)
class Base:
    """The run one worker's rate is taken from, and how: "base" (the row's layout on
    fewer GPUs), "layout" (the same model and precision in another layout), "mfu" (the
    source's marked base of another model, its one worker's MFU)."""

    row: dict
    how: str

    def said(self) -> str:
        """Where one worker's rate comes from, for a table's row."""
        r = self.row
        return {
            "base": f"its layout on {r['gpus']} GPUs",
            "layout": f"{r['run']} (another layout)",
            "mfu": f"the MFU of {r['run']} (another model)",
        }[self.how]


BASE_KINDS = {
    "base": "the row's layout on fewer GPUs",
    "layout": "the model in another layout",
    "mfu": "another model's MFU",
}


def base_of(row: dict, rows: list[dict]) -> Base | None:
    """The run one worker's rate comes from (Base), or None where the source gives none:
    the row's layout on the fewest GPUs; else the source's smallest run of the model and
    precision; else its marked base of another model in the same precision."""
    scored = [r for r in rows if r["scored"] and r["source"] == row["source"] and r is not row]
    fewer = [r for r in scored if r["gpus"] < row["gpus"]]
    same = [r for r in fewer if layout_key(r) == layout_key(row)]
    if same:
        return Base(min(same, key=lambda r: r["gpus"]), "base")
    model = [r for r in fewer if r["model"] == row["model"] and r["precision"] == row["precision"]]
    if model:
        return Base(min(model, key=lambda r: r["gpus"]), "layout")
    marked = [
        r
        for r in scored
        if r.get("base") and r["model"] != row["model"] and r["precision"] == row["precision"]
    ]
    return Base(marked[0], "mfu") if marked else None


def why_no_base(row: dict, rows: list[dict]) -> str:
    """Why a scored row has no one-worker figure: it is the base of others, or its
    source gives none."""
    bases = [base_of(r, rows) for r in rows if r["scored"]]
    if any(b is not None and b.row is row for b in bases):
        return "the base of its source's other runs"
    return (
        "no one-worker figure: its source gives no single-GPU run, no run of the model "
        "on fewer GPUs and no base"
    )


# ------------------------------------------------------------------ the scores
@dataclass(frozen=True)
class Ratio:
    """A figure and its forecast: tokens/s per GPU, or bytes per GPU."""

    row: dict
    group: str
    published: float
    forecast: float
    kind: str  # tokens/s: its Base's how; memory: the statistic
    said: str  # where one worker's rate comes from; memory: the statistic
    command: list[str]  # the `hpcbench predict` call that gave the forecast

    @property
    def error(self) -> float:
        return self.forecast / self.published - 1.0


@dataclass(frozen=True)
class Scores:
    efficiency: list[published.Scored]
    tokens: list[Ratio]
    memory: list[Ratio]
    unscored_memory: list[tuple[dict, str]]
    fits: dict[str, scaling_model.Fit]


class Rates:
    """One worker's rate per base run and fold, each found once."""

    def __init__(self) -> None:
        self.found: dict[tuple[int, int], float] = {}

    def of(self, base: Base, row: dict, found: scaling_model.Fit) -> float:
        key = (id(base.row), id(found))
        if key not in self.found:
            self.found[key] = one_worker(base.row, found)
        rate = self.found[key]
        return rate * flops(base.row) / flops(row) if base.how == "mfu" else rate


def fold_fits(data: dict, pub: dict) -> dict[str, scaling_model.Fit]:
    """Each source group's constants, fitted on published.json's rows of every other
    group (CNN and transformer, as published.py fits its transformer rows)."""
    folds = published.PlainFolds(pub)
    groups = dict.fromkeys(published.group_of(data, r) for r in data["rows"] if r["scored"])
    return {g: published.fit_without(folds, {g}) for g in groups}


def score(data: dict, fits: dict[str, scaling_model.Fit]) -> Scores:
    """Every scored row's E (where it has a base of its layout), tokens/s per GPU (where
    a base gives one worker's rate) and peak memory (where its layout is one the forecast
    takes), each with its group's fold."""
    rows = data["rows"]
    rates = Rates()
    efficiency, tokens = [], []
    for row in (r for r in rows if r["scored"]):
        group = published.group_of(data, row)
        found = fits[group]
        base = base_of(row, rows)
        if base is None:
            continue
        rate = rates.of(base, row, found)
        workers = [base.row["gpus"], row["gpus"]] if base.how == "base" else [row["gpus"]]
        *at_base, at_n = forecast(row, workers, rate, found)
        if at_base:
            p = scaling_model.rescaled_to_node(at_n, at_base[0], 1.0)
            measured = row["tokens_per_s_per_gpu"] / base.row["tokens_per_s_per_gpu"]
            efficiency.append(
                published.Scored(
                    row,
                    group,
                    measured,
                    p["efficiency"],
                    p["efficiency_low"],
                    p["efficiency_high"],
                    found.efficiency[network(row)["transport"]],
                    found.interference,
                )
            )
        tokens.append(
            Ratio(
                row,
                group,
                row["tokens_per_s_per_gpu"],
                at_n["tokens_per_s"] / row["gpus"],
                base.how,
                base.said(),
                predict_argv(row, workers, rate, found),
            )
        )
    memory_scored, unscored = memory_scores(data, fits)
    return Scores(efficiency, tokens, memory_scored, unscored, fits)


# ------------------------------------------------------------------ peak memory
# Which statistic each source's memory figure is (its `peak_memory_what` in
# layouts.json quotes the code): torchtitan at 9dec370 prints torch.cuda's
# max_reserved (train.py:393); MLPerf's logging callback torch.cuda.max_memory_allocated()
# (mlperf_common/callbacks/logging.py:231 at 0993367).
STATISTIC = {"torchtitan-llama3-h100": "reserved", "mlperf-v5.1-cisco-h100": "allocated"}
# Memory figures of a layout the forecast does not take, and why.
MEMORY_NOT_TAKEN = {
    "mlperf-v5.1-cisco-h100": "Megatron's distributed optimizer keeps every bf16 weight "
    "and gradient whole on each GPU (its fp32 states sharded), which no layout of the "
    "forecast holds (FSDP2 shards them all)",
    "dgxc-25.04-nemotron4": "its run's GPUs, precision and checkpointing are not stated, "
    "nor which statistic NeMo's peak_memory_usage reads",
}
# The layouts of the peak_memory figures on published.json's rows, as their source's
# captions give them (layouts.json's quotes 8 and 12 of torchtitan-llama3-h100: "Llama
# 3.1 8B model. 8 GPUs. Local batch size 2 ... Selective activation checkpointing.", the
# same at 128 GPUs; quote 3: 'seq_len = 8192'), by (source, caption quote).
CAPTIONS = {
    ("torchtitan-llama3-h100", 8): {"gpus": 8},
    ("torchtitan-llama3-h100", 12): {"gpus": 128},
}
CAPTION_LAYOUT = {
    "model": "llama3.1-8b",
    "seq_len": 8192,
    "micro_batch": 2,
    "grad_accum": 1,
    "tp": 1,
    "activation_checkpointing": "selective",
}
# Memory does not depend on one worker's rate; predict needs one.
ANY_RATE = 1000.0


def memory_figures(data: dict) -> tuple[list[dict], list[tuple[dict, str]]]:
    """The memory figures as rows (those of peak_memory in their caption's layout, on
    the network of their source's rows), and those not scored with why."""
    rows = data["rows"]
    figures_, skipped = [], []
    for row in rows:
        if row["peak_memory_gib"] is None:
            continue
        if not row["scored"]:
            skipped.append((row, row["not_scored"]))
        elif row["source"] in MEMORY_NOT_TAKEN:
            skipped.append((row, MEMORY_NOT_TAKEN[row["source"]]))
        else:
            figures_.append(row)
    for entry in data["peak_memory"]:
        gib = entry["value"] / (GIB if entry["unit"] == "bytes" else 1)
        caption = CAPTIONS.get((entry["source"], entry["from_quotes"][0]))
        like = next((r for r in rows if r["source"] == entry["source"]), None)
        pseudo = {"source": entry["source"], "run": entry["run"], "peak_memory_gib": gib}
        if entry["source"] in MEMORY_NOT_TAKEN:
            skipped.append((pseudo, MEMORY_NOT_TAKEN[entry["source"]]))
        elif caption is None or like is None:
            skipped.append((pseudo, "no layout of its run is known here (CAPTIONS)"))
        else:
            machine = {k: like[k] for k in ("gpu", "gpus_per_node", *NETWORK)}
            figures_.append({**machine, **CAPTION_LAYOUT, **caption, **pseudo, "precision": None})
    return figures_, skipped


def memory_scores(
    data: dict, fits: dict[str, scaling_model.Fit]
) -> tuple[list[Ratio], list[tuple[dict, str]]]:
    """Each memory figure against predict's bytes per GPU as its statistic counts them."""
    taken, skipped = memory_figures(data)
    out = []
    for row in taken:
        group = published.group_of(data, row)
        statistic = STATISTIC.get(row["source"])
        if statistic is None:
            skipped.append((row, "which statistic the source reports is not known"))
            continue
        command = predict_argv(row, [row["gpus"]], ANY_RATE, fits[group])
        total = forecast(row, [row["gpus"]], ANY_RATE, fits[group])[0]["memory_bytes"]
        like = total / (1 - memory.FRAGMENTATION) if statistic == "reserved" else total
        published_bytes = row["peak_memory_gib"] * GIB
        out.append(Ratio(row, group, published_bytes, like, statistic, statistic, command))
    return out, skipped


# ------------------------------------------------------------------ the summaries
# The targets each score is held to: (what, the figure's name, its limit).
E_MEDIAN, E_BIAS, E_INSIDE = 0.03, 0.02, 0.80
TOKENS_MEDIAN = 0.05
MEMORY_MEDIAN, MEMORY_FIGURES = 0.10, 6


def _inside(items: list[published.Scored]) -> tuple[float, tuple[float, float]]:
    pairs = [(s.group, float(s.inside)) for s in items]
    return statistics.mean(v for _, v in pairs), published.interval(pairs, statistics.mean)


def _met(value: float, cut: tuple[float, float], ok: Callable[[float], bool]) -> str:
    if not ok(value):
        return "not met"
    return "met, its whole interval too" if all(map(ok, cut)) else "met, not its whole interval"


def efficiency_lines(items: list[published.Scored]) -> list[str]:
    """E's summary (published.figures) and its targets, each with its interval."""
    if not items:
        return ["E: no rows"]
    groups = len({s.group for s in items})
    pairs = [(s.group, s.error) for s in items]
    med = published._median_abs([e for _, e in pairs])
    bias = statistics.mean(e for _, e in pairs)
    share, share_cut = _inside(items)
    med_cut = published.interval(pairs, published._median_abs)
    bias_cut = published.interval(pairs, statistics.mean)
    return [
        published.figures(f"E, leave one source out, {groups} source groups", items),
        f"E targets: median |point - published| <= {E_MEDIAN}: "
        f"{_met(med, med_cut, lambda v: v <= E_MEDIAN)}; bias within +-{E_BIAS}: "
        f"{_met(bias, bias_cut, lambda v: abs(v) <= E_BIAS)}; inside the band >= "
        f"{E_INSIDE:.0%}: {share:.0%} ({share_cut[0]:.0%} to {share_cut[1]:.0%}), "
        f"{_met(share, share_cut, lambda v: v >= E_INSIDE)}",
    ]


def _groups(items: list[Ratio]) -> str:
    n = len({s.group for s in items})
    return f"{n} source group{'s' * (n != 1)}"


def ratio_line(name: str, items: list[Ratio], limit: float, fewest: int = 1) -> str:
    """The median |forecast / published - 1| and the bias with their intervals, and
    whether the median meets `limit` on `fewest` figures or more."""
    if not items:
        return f"{name}: no figures"
    pairs = [(s.group, s.error) for s in items]
    values = [e for _, e in pairs]
    med, bias = published._median_abs(values), statistics.mean(values)
    med_cut = published.interval(pairs, published._median_abs)
    bias_cut = published.interval(pairs, statistics.mean)
    enough = len(items) >= fewest
    verdict = _met(med, med_cut, lambda v: v <= limit) if enough else "not met (too few)"
    return (
        f"{name} ({len(items)} figures, {_groups(items)}): "
        f"median |forecast / published - 1| {med:.1%} ({med_cut[0]:.1%} to "
        f"{med_cut[1]:.1%}), bias (mean forecast / published - 1) {bias:+.1%} "
        f"({bias_cut[0]:+.1%} to {bias_cut[1]:+.1%}), forecast above published in "
        f"{sum(e > 0 for e in values)}; {published.INTERVALS}; target median <= "
        f"{limit:.0%}" + (f" on {fewest} figures or more" if fewest > 1 else "") + f": {verdict}"
    )


def summary(scores: Scores) -> list[str]:
    command = " (python evaluation/layouts_score.py)"
    return [
        *(line + command for line in efficiency_lines(scores.efficiency)),
        ratio_line("tokens/s per GPU", scores.tokens, TOKENS_MEDIAN) + command,
        *(
            ratio_line(f"  tokens/s per GPU, one worker from {name}", kind, TOKENS_MEDIAN) + command
            for name, kind in (
                (what, [s for s in scores.tokens if s.kind == how])
                for how, what in BASE_KINDS.items()
            )
        ),
        ratio_line("peak memory per GPU", scores.memory, MEMORY_MEDIAN, MEMORY_FIGURES) + command,
    ]


def _layout(row: dict) -> str:
    batch, k = micro_batches(row)
    parts = [f"TP {row['tp']}"] + [f"accumulation {k}"] * (k > 1)
    parts += [f"{checkpoint(row)} checkpointing"] * (checkpoint(row) != "none")
    return f"{', '.join(parts)}, micro-batch {batch} x {row['seq_len']}"


def _net(row: dict) -> str:
    net = network(row)
    said = f"{net['link']} {net['transport']}, {net['intra_node']}"
    return said + (" (assumed)" if assumed(row) else "")


def _header(*names: str) -> None:
    print("| " + " | ".join(names) + " |")
    print("|" + " --- |" * len(names))


def _grouped(rows: list[tuple[dict, str]]) -> None:
    """One line per source and reason: its runs."""
    runs: dict[tuple[str, str], list[str]] = {}
    for row, why in rows:
        runs.setdefault((row["source"], why), []).append(row["run"])
    for (source, why), names in runs.items():
        print(f"- {source} ({len(names)}: {'; '.join(names)}): {why}")


def markdown(data: dict, scores: Scores) -> None:
    """The tables of docs/benchmarks.md, "Published layouts: the score": E, with the
    tokens/s per GPU its base gives; tokens/s from another run; memory; what is not
    scored and why."""
    rows = data["rows"]
    tokens = {id(t.row): t for t in scores.tokens}
    _header(
        *("source", "run", "layout", "GPUs (base)", "network", "E published", "E point"),
        *("band", "point - published", "tokens/s per GPU, forecast / published - 1"),
    )
    for s in scores.efficiency:
        r, b = s.row, base_of(s.row, rows)
        assert b is not None
        print(
            f"| {r['source']} | {r['run']} | {_layout(r)} | {r['gpus']} ({b.row['gpus']}) | "
            f"{_net(r)} | {s.measured:.3f} | {s.point:.3f} | {s.low:.2f}-{s.high:.2f} | "
            f"{s.error:+.3f} | {tokens[id(r)].error:+.1%} |"
        )
    print()
    _header(
        *("source", "run", "layout", "GPUs", "network", "one worker from"),
        *("tokens/s per GPU published", "forecast", "forecast / published - 1"),
    )
    for t in (t for t in scores.tokens if t.kind != "base"):
        r = t.row
        print(
            f"| {r['source']} | {r['run']} | {_layout(r)} | {r['gpus']} | {_net(r)} | "
            f"{t.said} | {t.published:,.0f} | {t.forecast:,.0f} | {t.error:+.1%} |"
        )
    print()
    _header(
        *("source", "run", "layout", "GPUs", "statistic", "published GiB"),
        *("forecast GiB (allocated)", "compared as", "forecast / published - 1"),
    )
    for m in scores.memory:
        r = m.row
        allocated = m.forecast * (1 - memory.FRAGMENTATION) if m.kind == "reserved" else m.forecast
        print(
            f"| {r['source']} | {r['run']} | {_layout(r)} | {r['gpus']} | {m.kind} | "
            f"{m.published / GIB:.1f} | {allocated / GIB:.1f} | {m.forecast / GIB:.1f} | "
            f"{m.error:+.1%} |"
        )
    print()
    print("Memory figures not scored:")
    print()
    for row, why in scores.unscored_memory:
        print(f"- {row['source']}, {row['run']}: {row['peak_memory_gib']:.1f} GiB; {why}")
    print()
    print("Scored rows without a tokens/s score:")
    print()
    scored = [r for r in rows if r["scored"]]
    _grouped([(r, why_no_base(r, rows)) for r in scored if base_of(r, rows) is None])
    print()
    print("Rows not scored:")
    print()
    _grouped([(r, r["not_scored"]) for r in rows if not r["scored"]])


def details(scores: Scores) -> None:
    """Every row and fold, on stderr."""
    for s in scores.efficiency:
        print(
            f"E {where(s.row)}: published {s.measured:.3f} point {s.point:.3f} band "
            f"{s.low:.2f}-{s.high:.2f} diff {s.error:+.3f}",
            file=sys.stderr,
        )
    for t in scores.tokens:
        print(
            f"tokens/s per GPU {where(t.row)}: published {t.published:.0f} forecast "
            f"{t.forecast:.0f} ({t.error:+.1%}), one worker from {t.said}",
            file=sys.stderr,
        )
    for m in scores.memory:
        print(
            f"memory {where(m.row)}: published {m.published / GIB:.1f} GiB ({m.kind}) "
            f"forecast {m.forecast / GIB:.1f} GiB ({m.error:+.1%})",
            file=sys.stderr,
        )
    for g, found in scores.fits.items():
        print(f"fitted without {g}: {published.constants(found)}", file=sys.stderr)


# ------------------------------------------------------------------ the file
ROW_COUNTS = ("gpus", "gpus_per_node", "seq_len", "tp", "pp", "cp", "dp")


def check(data: Any) -> None:
    """One line (UsageError) naming the first part of the file the scoring cannot read."""
    if not isinstance(data, dict) or not all(
        isinstance(data.get(k), t)
        for k, t in (("shapes", dict), ("sources", dict), ("rows", list), ("peak_memory", list))
    ):
        raise UsageError("layouts.json: give an object of shapes, sources, rows and peak_memory")
    for name, source in data["sources"].items():
        if not isinstance(source, dict) or not isinstance(source.get("group", name), str):
            raise UsageError(f"sources.{name}: an object, its group (if any) a name")
    for name, shape in data["shapes"].items():
        if not isinstance(shape, dict) or not _one_of(shape.get("activation"), FAMILY):
            raise UsageError(f"shapes.{name}: activation must be one of {', '.join(FAMILY)}")
        for key in ("dim", "layers", "heads", "kv_heads", "ffn", "vocab"):
            _count(shape.get(key), f"shapes.{name}.{key}")
        if not isinstance(shape.get("from"), str):
            raise UsageError(f"shapes.{name}.from: give the shape's source")
    for i, row in enumerate(data["rows"]):
        _check_row(data, row, f"rows[{i}]")
    for i, entry in enumerate(data["peak_memory"]):
        at = f"peak_memory[{i}]"
        if not isinstance(entry, dict) or not _one_of(entry.get("source"), data["sources"]):
            raise UsageError(f"{at}.source: name one of the sources")
        quotes = entry.get("from_quotes")
        if not isinstance(quotes, list) or not quotes or not all(_is_count(q, 0) for q in quotes):
            raise UsageError(f"{at}.from_quotes: give the indices of its quotes")
        if not isinstance(entry.get("run"), str) or not _one_of(
            entry.get("unit"), ("GiB", "bytes")
        ):
            raise UsageError(f"{at}: give its run and a unit of GiB or bytes")
        _positive(entry.get("value"), f"{at}.value")


def _check_row(data: dict, row: Any, at: str) -> None:
    if not isinstance(row, dict):
        raise UsageError(f"{at}: a row is an object")
    if not _one_of(row.get("source"), data["sources"]):
        raise UsageError(f"{at}.source: name one of the sources")
    if not isinstance(row.get("run"), str):
        raise UsageError(f"{at}.run: give the run's label")
    at = f"{at} ({row['source']}, {row['run'][:60]})"
    if not _one_of(row.get("model"), data["shapes"]):
        raise UsageError(f"{at}.model: name one of the shapes")
    if not isinstance(row.get("scored"), bool):
        raise UsageError(f"{at}.scored: true or false")
    if not row["scored"]:
        if not isinstance(row.get("not_scored"), str):
            raise UsageError(f"{at}.not_scored: say why the row is not scored")
        if row.get("peak_memory_gib") is not None:
            _positive(row["peak_memory_gib"], f"{at}.peak_memory_gib")
        return
    if row["source"] not in SETUPS:
        raise UsageError(f"{at}.source: no set-up in evaluation/layouts_score.py SETUPS")
    for key in ROW_COUNTS:
        _count(row.get(key), f"{at}.{key}")
    if row["pp"] != 1 or row["cp"] != 1:
        raise UsageError(f"{at}: a scored row has pp 1 and cp 1 (the forecast has neither)")
    for key in ("micro_batch", "grad_accum"):
        if row.get(key) is not None or not SETUPS[row["source"]].step_is_micro_batch:
            _count(row.get(key), f"{at}.{key}")
    if row["micro_batch"] is None:
        _count(row.get("global_batch"), f"{at}.global_batch")
        if row["global_batch"] % row["dp"]:
            raise UsageError(f"{at}.global_batch: a whole number of sequences per replica")
    _positive(row.get("tokens_per_s_per_gpu"), f"{at}.tokens_per_s_per_gpu")
    if row.get("peak_memory_gib") is not None:
        _positive(row["peak_memory_gib"], f"{at}.peak_memory_gib")
    for key, allowed in (
        ("activation_checkpointing", memory.CHECKPOINT),
        ("transport", tuple(scaling_model.LINK_EFFICIENCY)),
        ("intra_node", tuple(scaling_model.INTRA_NODE)),
    ):
        if row.get(key) is not None and not _one_of(row[key], allowed):
            raise UsageError(f"{at}.{key}: one of {', '.join(allowed)} or null")
    for key in ("precision", "link", "gpu"):
        if row.get(key) is not None and not isinstance(row[key], str):
            raise UsageError(f"{at}.{key}: text or null")
    if not isinstance(row.get("gpu"), str):
        raise UsageError(f"{at}.gpu: name the GPU")


def _one_of(value: Any, allowed: Any) -> bool:
    """Whether value is one of the names `allowed` holds (a list or a mapping is none)."""
    return isinstance(value, str) and value in allowed


def _is_count(value: Any, low: int = 1) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _count(value: Any, at: str) -> None:
    if not _is_count(value) or value > 10**7:
        raise UsageError(f"{at}: a whole number from 1, not {str(value)[:40]!r}")


def _positive(value: Any, at: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise UsageError(f"{at}: a number above 0, not {str(value)[:40]!r}")


def load(path: Path = DATA) -> dict:
    """The file (its own folder's refusals: no link followed, no FIFO waited on,
    bounded), checked (check)."""
    try:
        text = files.read_bounded(path, DATA_FILE, root=path)
        data = json.loads(text)
    except (OSError, ValueError) as err:
        raise UsageError(f"{path}: {getattr(err, 'strerror', None) or err}") from None
    check(data)
    return data


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--markdown", action="store_true", help="print the tables of docs/benchmarks.md")
    p.add_argument("--data", type=Path, default=DATA, help="the rows (layouts.json's format)")
    args = p.parse_args(argv)
    try:
        data = load(args.data)
        with shapes_known(data):
            scores = score(data, fold_fits(data, published.load()))
            if args.markdown:
                markdown(data, scores)
            else:  # each forecast's command (the shapes predict lacks: layouts.json's)
                for s in (*scores.tokens, *scores.memory):
                    print("python -m hpcbench " + shlex.join(s.command))
    except UsageError as err:
        print(f"layouts_score.py: error: {one_line(str(err))}", file=sys.stderr)
        return 2
    details(scores)
    for line in summary(scores):
        print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
