"""`hpcbench predict`: what a network allows a model, before booking a testbed.

    python -m hpcbench predict --model resnet50 --batch 32 --workers 1-16 \\
        --gpus-per-node 4 --single-worker-ips 400 --link 10gbit
    python -m hpcbench predict --model gpt2-small --parallel fsdp2 --seq-len 1024 \\
        --batch 8 --workers 1-16 --gpus-per-node 4 --single-worker-tps 20000 --link 100gbit
    python -m hpcbench predict --calibrate results/vw-1g   # fit to measured runs

The model's gradient sizes and per-layer forward FLOPs come from the model
itself, built on PyTorch's meta device (no weights, no memory, no GPU). Each
worker count gets a point prediction (the replay of one step in
hpcbench.performance.allreduce_model: gradients ready layer by layer during backward, grouped
as the backend groups them, queued on a two-level link: the node's NIC
shared by its workers, PCIe or NVLink inside it) and the two-bound band.
The link achieves a share of its line rate (--link-efficiency, else the
default of its --transport), and communication during backward slows
backward by --interference of its time; one node's GPUs lose --node-loss each.
Each set-up detail not given (the node's loss, NCCL's algorithm, Horovod's
release, the interconnect inside a node, the transport) takes a default fitted
to published rows; where its other common choice moves E, an "assumed:" line
gives E under it, and the band widens; docs/method.md has the model.
A transformer (the workload's configurations, or a published model's shape:
hpcbench.performance.sharded_model) is predicted per FSDP unit from its configuration's
FLOPs under --parallel ddp, fsdp2 or hsdp, in tokens/s.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from hpcbench.core.bench import peak_flops, transformer_configs, units, workload_options
from hpcbench.core.errors import UsageError
from hpcbench.launchers.parse import count_type, parse_int_list
from hpcbench.measure import analysis, scale_options
from hpcbench.measure.store import Store
from hpcbench.performance import allreduce_model, memory, plans, sharded_model
from hpcbench.performance.scaling_model import (
    ASSUMPTION_MIN,
    DEFAULT_INTERFERENCE,
    DEFAULT_INTRA_NODE,
    DEFAULT_TREE,
    INTRA_NODE,
    LATENCY_US,
    LINK_EFFICIENCY,
    NODE_LOSS,
    PLAIN_BAND,
    RDMA_EFFICIENCY,
    TCP_EFFICIENCY,
    Case,
    Plan,
    case_point,
    default_image_size,
    fit,
    parse_link,
    plain_band,
    predictions,
)

MAX_WORKERS = 4096
# How far past the asked workers the search for a layout that fits goes, in nodes: a
# model whose fp32 master weights and AdamW moments (16 bytes a parameter, ZeRO) need
# more than this many nodes' memory is one no node count of an ordinary booking runs
# (Llama 3.1 405B: 6.5 TB, 11 nodes of 8 x 80 GB).
MEMORY_SEARCH_NODES = 32
# The workload's options a forecast takes, declared once for scale and predict.
WORKLOAD_OPTIONS = (
    "--model",
    "--image-size",
    "--seq-len",
    "--parallel",
    "--shard-group",
    "--bucket-cap-mb",
    "--fusion-threshold-mb",
    "--tp",
    "--grad-accum",
    "--activation-checkpoint",
)
# The transport across nodes where none is given (plans.DEFAULTS), said to be assumed.
DEFAULT_TRANSPORT = plans.DEFAULTS["transport"][0]


def store_cases(args: argparse.Namespace) -> list[Case]:
    """Every configuration across nodes that a results store measured, as a Case: the
    single worker's step, the series' settings and the link rate the runs recorded
    (else --link). The CNNs' only: the fit replays a measured gradient timeline."""
    store = Store(Path(args.calibrate))
    if not store.exists():
        raise UsageError(
            f"--calibrate {args.calibrate!r:.80}: no results store there (no results.jsonl)"
        )
    default_rate = parse_link(args.link) if args.link is not None else None
    cases = []
    for s in analysis.summarise(store.runs(), store.probes()):
        if s.nodes <= 1 or s.efficiency is None or s.compute_s is None:
            continue
        if sharded_model.shape(s.model) is not None:  # its gradient timeline is the CNNs'
            continue
        nominal = allreduce_model.nominal_bytes_per_s(s.link_rate)
        rate = nominal * 8 if nominal else default_rate
        if rate is None:
            raise UsageError(
                f"--calibrate: the runs at {s.nodes} nodes recorded no link rate: give --link"
            )
        plan = Plan(
            model=s.model,
            image_size=s.image_size,
            batch=s.batch,
            workers=[s.workers],
            gpus_per_node=s.gpus_per_node,
            step_time_s=s.compute_s + (s.data_s or 0.0),
            busbw=rate / 8,
            backend=s.backend,
            grouping=allreduce_model.Grouping(s.backend),
            latency_s=(
                args.latency_us if args.latency_us is not None else LATENCY_US[args.transport]
            )
            * 1e-6,
            nccl=None if args.collectives is None else args.collectives == "nccl",
        )
        cases.append(Case(plan, rate, s.efficiency, args.transport))
    nodes = sorted({math.ceil(k.plan.workers[0] / k.plan.gpus_per_node) for k in cases})
    if len(nodes) < 2:
        raise UsageError(
            f"--calibrate: needs runs at two node counts or more beyond one node; "
            f"{args.calibrate!r:.80} has {nodes or 'none'}"
        )
    return cases


def calibrate_main(args: argparse.Namespace) -> int:
    cases = store_cases(args)
    found = fit(cases)
    share = found.efficiency[args.transport]
    rows: list[dict[str, Any]] = []
    for k in cases:
        n = k.plan.workers[0]
        rows.append(
            {
                "workers": n,
                "nodes": math.ceil(n / k.plan.gpus_per_node),
                "model": k.plan.model,
                "batch": k.plan.batch,
                "measured": k.measured,
                "point": case_point(k, share, found.interference),
                "default_point": case_point(
                    k, LINK_EFFICIENCY[args.transport], DEFAULT_INTERFERENCE
                ),
            }
        )
    usage = f"--link-efficiency {share:.2f} --interference {found.interference:.2f}"
    if args.json:
        print(
            json.dumps(
                {
                    "link_efficiency": share,
                    "interference": found.interference,
                    "mean_abs": found.mean_abs,
                    "pass": usage,
                    "rows": rows,
                },
                indent=1,
            )
        )
        return 0
    print(
        f"fitted to {len(cases)} measured configurations across nodes in {args.calibrate}: "
        f"link efficiency {share:.2f} ({args.transport}; default "
        f"{LINK_EFFICIENCY[args.transport]:.2f}), interference {found.interference:.2f} "
        f"(default {DEFAULT_INTERFERENCE:.2f}); mean |point - measured| "
        f"{found.mean_abs:.3f}"
    )
    print(
        f"{'model':>12} {'batch':>5} {'workers':>7} {'nodes':>5} {'E measured':>10} "
        f"{'E fitted':>8} {'E default':>9}"
    )
    spread = statistics.median(abs(r["point"] - r["measured"]) for r in rows)
    for r in rows:
        print(
            f"{r['model']:>12} {r['batch']:>5} {r['workers']:>7} {r['nodes']:>5} "
            f"{r['measured']:>10.3f} {r['point']:>8.3f} {r['default_point']:>9.3f}"
        )
    print(
        f"median |fitted point - measured| {spread:.3f}. To predict another testbed from "
        f"this one: hpcbench predict ... {usage}"
    )
    return 0


# Bounds of predict's real-valued inputs (the shared parser: digits and one point only).
REALS: dict[str, tuple[float, float]] = {
    "single-worker-ips": (0.001, 10_000_000.0),
    "single-worker-tps": (0.001, 1_000_000_000.0),
    "step-time": (0.000001, 3600.0),  # seconds
    "busbw": (0.000001, 10_000.0),  # GB/s
    "latency-us": (0.0, 1_000_000.0),
    "cycle-time-ms": (0.001, 10_000.0),
    "link-efficiency": (0.01, 1.0),
    "interference": (0.0, 1.0),
    "intra-busbw": (0.001, 10_000.0),  # GB/s
    "node-loss": (0.0, 1.0),
}


def real_type(name: str) -> Callable[[str], float]:
    """An option's real number within its REALS bounds."""
    return units.argtype(lambda _n, text: units.parse_real(text, *REALS[name]), name)


def _transformer_options(args: argparse.Namespace, transformer: bool) -> None:
    """The options that belong to one kind of model, and that kind's rules, one line each."""
    model = args.model[:60]
    sharded = args.parallel in ("fsdp2", "hsdp")
    if not transformer:
        for given, option in (
            (args.single_worker_tps is not None, "--single-worker-tps"),
            (args.seq_len, "--seq-len"),
            (args.parallel != "ddp", f"--parallel {args.parallel}"),
            (args.reduce_dtype is not None, "--reduce-dtype"),
            (args.tp > 1, "--tp"),
            (args.grad_accum > 1, "--grad-accum"),
            (args.activation_checkpoint != "none", "--activation-checkpoint"),
            (args.master_dtype != "fp32" or args.optimizer_dtype != "fp32", "--master-dtype"),
            (args.accelerator is not None, "--accelerator"),
        ):
            if given:
                names = ", ".join([*transformer_configs.CONFIGS, *sharded_model.PUBLISHED_SHAPES])
                raise UsageError(
                    f"{option} is for the transformers ({names}); {model!r} is not one"
                )
    else:
        if args.single_worker_ips is not None:
            raise UsageError(f"{model}: give --single-worker-tps (tokens/s), not images/s")
        if args.image_size:
            raise UsageError(f"--image-size is for the CNNs; {model} takes --seq-len")
        if args.backend == "horovod":
            raise UsageError(f"{model} trains under torch.distributed: use --backend ddp")
        if args.node_loss is not None:
            raise UsageError(
                f"--node-loss is for the CNNs: {model}'s step replays its collectives on "
                "the node's own links, with no node factor"
            )
    if args.shard_group and args.parallel != "hsdp":
        raise UsageError("--shard-group is HSDP's: give it with --parallel hsdp")
    if not sharded:
        for given, option in (
            (args.param_dtype is not None, "--param-dtype"),
            (args.reshard_after_forward is not None, "--reshard-after-forward"),
        ):
            if given:
                raise UsageError(f"{option} is FSDP's: give it with --parallel fsdp2 or hsdp")
    why = transformer_configs.unbucketed(args.parallel, args.bucket_cap_mb)
    if why:
        raise UsageError(why)
    # Gloo's collectives take fp32, fp64, fp16, bf16 and integers, no 8-bit float:
    # pytorch/pytorch@005a6a0b9ec2, torch/csrc/distributed/c10d/ProcessGroupGlooDetail.hpp
    # :53-82 (GENERATE_ALL_TYPES; any other dtype fails "Invalid scalar type", as torch
    # 2.15.0's all_gather_into_tensor of a float8_e4m3fn tensor over Gloo does).
    if args.param_dtype == "fp8" and args.collectives == "gloo":
        raise UsageError(
            "--param-dtype fp8 with --collectives gloo: Gloo has no 8-bit float; "
            "gather in bf16 or fp32"
        )


def plan_from(args: argparse.Namespace) -> Plan:
    """The one place the command line becomes a checked Plan."""
    config = sharded_model.shape(args.model)
    if config is not None and transformer_configs.is_config_path(args.model):
        args.model = config.name  # a config.json's model, by its name from here on
    transformer = config is not None
    _transformer_options(args, transformer)
    rate_given = args.single_worker_tps if transformer else args.single_worker_ips
    if (rate_given is None) == (args.step_time is None):
        what = "--single-worker-tps" if transformer else "--single-worker-ips"
        raise UsageError(f"give one of {what} or --step-time")
    if (args.link is None) == (args.busbw is None):
        raise UsageError("give one of --link (a line rate) or --busbw (measured, GB/s)")
    image_size = (
        default_image_size(args.model)
        if not args.image_size and not transformer
        else args.image_size
    )
    if not transformer and not 16 <= image_size <= 1024:
        raise UsageError(f"--image-size: {image_size} is out of range; use 16 to 1024")
    why = workload_options.grouping_problem(
        args.backend, args.bucket_cap_mb, args.fusion_threshold_mb
    )
    if why:
        raise UsageError(why)
    if args.cycle_time_ms is not None and args.backend != "horovod":
        raise UsageError("--cycle-time-ms is Horovod's setting; DDP has no cycle")
    if args.link_efficiency is not None and args.busbw is not None:
        raise UsageError(
            "--link-efficiency scales --link; --busbw is already what the link achieves"
        )
    seq_len = sharded_model.resolve_seq_len(args.model, args.seq_len) if transformer else 0
    if args.step_time is not None:
        micro_step = args.step_time
    elif transformer:
        micro_step = args.batch * seq_len / args.single_worker_tps
    else:
        micro_step = args.batch / args.single_worker_ips
    transport = args.transport or DEFAULT_TRANSPORT
    if args.busbw is not None:
        busbw, note = args.busbw * 1e9, f"bus bandwidth {args.busbw:g} GB/s (measured, --busbw)"
    else:
        rate = parse_link(args.link)
        given = args.link_efficiency is not None
        share = args.link_efficiency if given else LINK_EFFICIENCY[transport]
        source = "--link-efficiency" if given else f"{transport} default"
        busbw = rate / 8 * share
        note = (
            f"link {rate / 1e9:g} Gbit/s x {share:.2f} ({source}) = "
            f"{busbw * 8 / 1e9:.2f} Gbit/s achieved"
        )
    latency_us = args.latency_us if args.latency_us is not None else LATENCY_US[transport]
    network = plans.Network(
        busbw,
        latency_us * 1e-6,
        note,
        interference=DEFAULT_INTERFERENCE if args.interference is None else args.interference,
        nccl=None if args.collectives is None else args.collectives == "nccl",
        node_loss=args.node_loss,
    ).inside(args.intra_node)
    if args.intra_busbw is not None:
        network = replace(network, intra_busbw=args.intra_busbw * 1e9, intra_assumed=False)
    workers = parse_int_list(args.workers, "--workers", MAX_WORKERS)
    job = job_from(args, transformer, image_size, seq_len)
    if transformer:
        _check_layout(args, job, seq_len, workers)
    step = plans.step_in_layout(micro_step, job)
    return plans.plan(job, network, workers, args.gpus_per_node, step)


def job_from(
    args: argparse.Namespace, transformer: bool, image_size: int, seq_len: int
) -> plans.Job:
    """What the runs train and how, as the command line gives it."""
    return plans.Job(
        model=args.model,
        batch=args.batch,
        backend=args.backend,
        image_size=0 if transformer else image_size,
        seq_len=seq_len,
        parallel=args.parallel,
        shard_group=args.shard_group,
        bucket_cap_mb=args.bucket_cap_mb,
        fusion_threshold_mb=args.fusion_threshold_mb,
        cycle_time_ms=args.cycle_time_ms,
        # A transformer over Gloo runs on CPU nodes; a CNN's gloo is NCCL's rings only.
        cuda=not (transformer and args.collectives == "gloo"),
        param_dtype=args.param_dtype,
        reduce_dtype=args.reduce_dtype,
        reshard_after_forward=args.reshard_after_forward != "off",
        tp=args.tp,
        grad_accum=args.grad_accum,
        activation_checkpoint=args.activation_checkpoint,
        bf16_gpu=peak_flops.native_bf16(args.accelerator or ""),
    )


# An accelerator's name as a device reports it ("NVIDIA H100 80GB HBM3").
ACCELERATOR = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]{0,79}", re.ASCII)


def _check_layout(
    args: argparse.Namespace, job: plans.Job, seq_len: int, workers: list[int]
) -> None:
    """A transformer's layout at every worker count, one line where it does not fit: the
    shard group, and a TP group of whole heads inside a node (memory.check's rules)."""
    config = sharded_model.shape(args.model)
    assert config is not None
    if args.accelerator is not None and not ACCELERATOR.fullmatch(args.accelerator):
        raise UsageError(
            f"--accelerator {args.accelerator[:60]!r}: give a GPU's name as it reads, "
            "such as 'A100-SXM4-80GB'"
        )
    if args.tp > 1 and args.parallel == "ddp":
        raise UsageError(
            f"--tp {args.tp} with --parallel ddp: torch's DDP does not train tensor-parallel "
            "modules; use --parallel fsdp2 or hsdp"
        )
    for n in workers:
        group = sharded_model.check_group(args.parallel, args.shard_group, n, args.gpus_per_node)
        try:
            transformer_configs.check_tp_workers(
                args.tp if n > 1 else 1, n, args.gpus_per_node, args.parallel, group
            )
            memory.check(config, seq_len, args.batch, _memory_layout(args, job, n))
        except ValueError as err:
            raise UsageError(f"{err} (--workers {n})") from None


def _memory_layout(args: argparse.Namespace, job: plans.Job, workers: int) -> memory.Layout:
    """The layout memory.py forecasts a worker's bytes in, at `workers` workers, as a
    campaign's cell gets it (plans.memory_layout), with the states' dtypes asked."""
    return plans.memory_layout(
        job, workers, args.gpus_per_node, args.master_dtype, args.optimizer_dtype
    )


def memory_rows(args: argparse.Namespace, plan: Plan, rows: list[dict[str, Any]]) -> None:
    """Each row's bytes per GPU (memory.py), and beside the accelerator's memory
    (--accelerator) whether it fits, else the smallest layout that would; the MFU the
    row's tokens/s make of the accelerator's peak."""
    config = sharded_model.shape(plan.model)
    assert config is not None
    gpu = args.accelerator
    size, size_source = peak_flops.memory(gpu) if gpu else (None, "no --accelerator")
    job = job_from(args, True, 0, plan.seq_len)
    precision = "bf16" if job.bf16 else "fp32"
    peak, peak_source = peak_flops.lookup(gpu, precision) if gpu else (None, "no --accelerator")
    flops = transformer_configs.flops_per_token(config, plan.seq_len)
    for r in rows:
        layout = _memory_layout(args, job, r["workers"])
        total = memory.breakdown(config, plan.seq_len, plan.batch, layout).total
        r["memory_bytes"] = total
        r["memory_of"] = size
        r["memory_source"] = size_source
        if size is not None:
            # Past the rows' own worker counts: where none of them fits, the answer is
            # how many GPUs would.
            most = max(r["workers"], *plan.workers, MEMORY_SEARCH_NODES * plan.gpus_per_node)
            fits = memory.fit(total, size).fits
            found = None
            if not fits:
                found = memory.smallest_layout(
                    config, plan.seq_len, plan.batch, layout, size, most, plan.gpus_per_node
                )
            r["memory_fits"] = fits
            r["memory_verdict"] = memory.verdict(total, size, layout, found, most)
        per_gpu = r["tokens_per_s"] / r["workers"]
        r["mfu"], r["mfu_unknown"] = peak_flops.mfu(per_gpu * flops, peak, peak_source)


def main(args: argparse.Namespace) -> int:
    guessed = args.transport is None  # whether the link's transport is an assumption
    args = argparse.Namespace(**{**vars(args), "transport": args.transport or DEFAULT_TRANSPORT})
    if args.calibrate is not None:
        return calibrate_main(args)
    plan = plan_from(args)
    # The rows are numbers; each also gets the link figures it stands on, some of them text.
    rows: list[dict[str, Any]] = predictions(plan)
    if guessed and args.link is not None and args.link_efficiency is None and not plan.transformer:
        _other_transport(args, plan, rows)
    for r in rows:  # each row says which link figures it stands on
        r.update(
            busbw=plan.busbw,
            link=plan.link_note,
            latency_s=plan.latency_s,
            intra_busbw=plan.intra_busbw,
            interference=plan.interference,
        )
    if plan.transformer:
        return _transformer_main(args, plan, rows)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(
        f"{plan.model} at {plan.image_size} px, batch {plan.batch}/worker, "
        f"{plan.grouping.describe()}, "
        f"single-worker step {plan.step_time_s * 1e3:.1f} ms; {plan.link_note}, "
        f"latency {plan.latency_s * 1e6:.0f} us across nodes; inside a node "
        f"{plan.intra_busbw / 1e9:g} GB/s; interference {plan.interference:.2f}"
        f"{'; NCCL ring or tree' if plan.tree else '; ring'}"
        f"{' (assumed)' if plan.nccl is None else ''}; {_node_note(plan)}"
    )
    print(
        f"{'workers':>7} {'nodes':>5} {'E (point)':>9} {'E band':>11} {'all-reduce':>10} "
        f"{'exposed':>8} {'images/s':>9}"
    )
    for r in rows:
        print(
            f"{r['workers']:>7} {r['nodes']:>5} {r['efficiency']:>9.2f} "
            f"{r['efficiency_low']:>5.2f}-{r['efficiency_high']:<5.2f} "
            f"{r['allreduce_s'] * 1e3:>8.1f}ms {r['exposed_s'] * 1e3:>6.1f}ms "
            f"{r['images_per_s']:>9.0f}"
        )
    print(
        "point: one step replayed (gradients ready layer by layer in backward, grouped as the "
        "backend groups them, queued on the link; overlapped communication slows backward by "
        "the interference share of it), times one node's sharing; band: no overlap to full "
        "overlap"
        + (
            f", widened to {PLAIN_BAND[0]:+.2f}/{PLAIN_BAND[1]:+.2f} around the point where "
            "a set-up detail was assumed (what published rows called so missed by)"
            if any(r["assumptions"] and r["nodes"] > 1 for r in rows)
            else ""
        )
    )
    for line in assumption_lines(rows):
        print(line)
    return 0


def _other_transport(args: argparse.Namespace, plan: Plan, rows: list[dict[str, Any]]) -> None:
    """The transport, where none was given, as the set-up details predictions() names:
    the rows' E over the other transport, and the band widened where it moves E."""
    other = "rdma" if args.transport == "tcp" else "tcp"
    alt = predictions(plan_from(argparse.Namespace(**{**vars(args), "transport": other})), False)
    for r, a in zip(rows, alt, strict=True):
        if abs(a["efficiency"] - r["efficiency"]) < ASSUMPTION_MIN:
            continue
        if r["nodes"] > 1:
            r["efficiency_low"], r["efficiency_high"] = plain_band(
                r["efficiency"],
                min(r["efficiency_low"], a["efficiency_low"]),
                max(r["efficiency_high"], a["efficiency_high"]),
            )
        r["assumptions"].append(
            {
                "detail": "transport",
                "assumed": f"{args.transport} between nodes",
                "other": other,
                "option": f"--transport {other}",
                "efficiency": a["efficiency"],
            }
        )


def _node_note(plan: Plan) -> str:
    if plan.gpus_per_node <= 1:
        return "one worker per node"
    how = "--node-loss" if plan.node_loss is not None else "assumed"
    return f"a node loses {plan.loss:.2%} of E per further GPU ({how})"


def assumption_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per set-up detail assumed that moves E, at the largest worker count where
    it does: what was assumed, and E under the other common choice."""
    last: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    for r in rows:
        for a in r.get("assumptions", []):
            last[a["detail"]] = (r, a)
    return [
        f"assumed: {a['assumed']}; E at {r['workers']} workers {r['efficiency']:.2f}, "
        f"{a['efficiency']:.2f} under {a['other']} ({a['option']})"
        for r, a in last.values()
    ]


def _transformer_sources(args: argparse.Namespace, plan: Plan) -> dict[str, str]:
    """Where each figure of a transformer's prediction comes from."""
    config = sharded_model.shape(plan.model)
    assert config is not None
    flops = transformer_configs.flops_per_token(config, plan.seq_len)
    tokens = plan.batch * plan.seq_len
    single = (
        f"{args.single_worker_tps:g} tokens/s (--single-worker-tps)"
        if args.step_time is None
        else f"a {args.step_time:g} s step (--step-time)"
    )
    if plan.model in transformer_configs.CONFIGS:
        where = "bench/transformer_configs.py"
    elif plan.model in sharded_model.PUBLISHED_SHAPES:
        where = "hpcbench/performance/sharded_model.py, a published shape"
    else:
        where = "a config.json read by bench/transformer_configs.py"
    if args.parallel == "ddp":
        how = (
            f"DDP: gradients all-reduced in {plan.reduce_bytes * 8}-bit, {plan.grouping.describe()}"
        )
    else:
        group = plan.shard_group or plan.gpus_per_node
        how = sharded_model.describe(
            sharded_model.Sharding(
                group, plan.param_bytes, plan.reduce_bytes, plan.reshard_after_forward, plan.gloo
            ),
            plan.parallel,
        )
    named = "--intra-node" if args.intra_node is not None else "the default"
    intra = (
        f"--intra-busbw {args.intra_busbw:g} GB/s"
        if args.intra_busbw is not None
        else f"{args.intra_node or DEFAULT_INTRA_NODE}, {named}"
    )
    fitted = (
        "--interference"
        if args.interference is not None
        else "the default, fitted to published rows"
    )
    return {
        "single": f"one worker: {single} = a step of {plan.step_time_s * 1e3:.1f} ms for "
        f"{tokens * plan.grad_accum} tokens ({plan.grad_accum} x {plan.batch} x "
        f"{plan.seq_len}, its checkpointing's recompute included)",
        "flops": f"compute per layer: {flops / 1e9:.3g} GFLOP per token split by each FSDP "
        f"unit's FLOPs ({where}: 6N + 12 L d T), backward 2/3 of the step",
        "parallel": how,
        "link": f"between nodes: {plan.link_note}, latency {plan.latency_s * 1e6:g} us "
        f"({'--latency-us' if args.latency_us is not None else args.transport + ' default'})",
        "inside": f"inside a node: {plan.intra_busbw / 1e9:g} GB/s ({intra}), latency "
        f"{plan.intra_latency_s * 1e6:g} us (assumed)",
        "interference": f"interference {plan.interference:.2f} ({fitted})",
        "layout": f"layout: {plan.grad_accum} micro-batch(es) a step, the gradients reduced "
        f"on the last; {plan.tp} tensor-parallel worker(s) inside a node, "
        f"{sharded_model.TP_PER_BLOCK[plan.checkpoint]} activation collectives a block and "
        f"{sharded_model.TP_OUTSIDE_BLOCKS} beside the blocks on the node's link, on the "
        "step's path (Megatron-LM's split, sequence parallel); each worker computes a "
        "tp-th of the step at one worker's rate (assumed: narrower matmuls may run slower); "
        f"checkpointing {plan.checkpoint}: "
        f"+{plans.recompute_share(plan.model, plan.seq_len, plan.checkpoint):.0%} of the "
        "step recomputed "
        '(docs/method.md, "Layouts: tensor parallelism, accumulation, checkpointing")',
        "memory": "memory per GPU: parameters, gradients and AdamW's moments by their shards "
        f"and dtypes ({args.master_dtype} master, {args.optimizer_dtype} moments), "
        "activations per block (Korthikanti et al. 2022) under the checkpointing, the logits "
        "and the collectives' buffers, at the fullest phase of the step (docs/method.md, "
        '"Memory per GPU")',
    }


def _transformer_main(args: argparse.Namespace, plan: Plan, rows: list[dict[str, Any]]) -> int:
    said = _transformer_sources(args, plan)
    memory_rows(args, plan, rows)
    for r in rows:
        r.update(unit="tokens", sources=said)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    layout = (
        f", --tp {plan.tp}"
        * (plan.tp > 1)
        + f", --grad-accum {plan.grad_accum} (global batch {plan.batch * plan.grad_accum} "
        "x data-parallel workers)"
        * (plan.grad_accum > 1)
        + f", --activation-checkpoint {plan.checkpoint}" * (plan.checkpoint != "none")
    )
    print(
        f"{plan.model}, sequences of {plan.seq_len} tokens, batch {plan.batch}/worker, "
        f"--parallel {plan.parallel}{layout}"
    )
    for line in said.values():
        print(f"  {line}")
    print(
        f"{'workers':>7} {'nodes':>5} {'E (point)':>9} {'E band':>11} {'comm':>10} "
        f"{'exposed':>9} {'tokens/s':>11} {'per GPU':>9} {'MFU':>6} {'GB/GPU':>7}"
    )
    for r in rows:
        mfu = "-" if r["mfu"] is None else f"{r['mfu']:.1%}"
        print(
            f"{r['workers']:>7} {r['nodes']:>5} {r['efficiency']:>9.2f} "
            f"{r['efficiency_low']:>5.2f}-{r['efficiency_high']:<5.2f} "
            f"{r['allreduce_s'] * 1e3:>8.1f}ms {r['exposed_s'] * 1e3:>7.1f}ms "
            f"{r['tokens_per_s']:>11.0f} {r['tokens_per_s'] / r['workers']:>9.0f} {mfu:>6} "
            f"{r['memory_bytes'] / 1e9:>7.1f}"
        )
    verdicts = {r["memory_verdict"]: r["workers"] for r in rows if r.get("memory_verdict")}
    for verdict, workers in verdicts.items():
        print(f"memory at {workers} workers: {verdict} ({rows[0]['memory_source']})")
    if rows and rows[0]["memory_of"] is None and args.accelerator:
        print(f"whether it fits: unknown, {rows[0]['memory_source']}")
    if rows and rows[0]["mfu"] is None:
        print(f"MFU unknown: {rows[0]['mfu_unknown']}")
    print(
        "point: one step replayed (docs/method.md, transformers under FSDP2 and HSDP): "
        "comm is every collective's time, exposed what of the step it and the waits for "
        "parameters add to one worker's; tokens/s = workers x batch x seq_len / step; "
        "band: no overlap to full overlap"
    )
    return 0


def add_command(sub: argparse._SubParsersAction) -> None:
    """The `predict` command's options."""
    p = sub.add_parser(
        "predict",
        help="predict scaling efficiency from a model, a step time and a network",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # What the runs train, as the workload declares it (bench/workload_options.py).
    workload_options.add_to(p, scale_options.WORKLOAD_PARSERS, only=WORKLOAD_OPTIONS)
    p.add_argument(
        "--batch",
        type=count_type("batch"),
        default=32,
        help="per-worker batch (a transformer's: sequences)",
    )
    p.add_argument(
        "--param-dtype",
        default=None,
        choices=list(sharded_model.DTYPE_BYTES),
        help="fsdp2/hsdp: parameters all-gathered in (default bf16 with nccl, fp32 with gloo)",
    )
    for flag, held in (
        ("--master-dtype", "parameters and their gradients"),
        ("--optimizer-dtype", "AdamW's two moments"),
    ):
        p.add_argument(
            flag,
            default="fp32",
            choices=list(memory.STATE_DTYPES),
            help=f"a transformer's {held} held in (default fp32, as torchtitan keeps them; "
            "bf16 where a trainer does): memory per GPU",
        )
    p.add_argument(
        "--accelerator",
        default=None,
        metavar="NAME",
        help="a transformer's GPU as its name reads (H100, 'A100-SXM4-80GB', V100-SXM2-32GB): "
        "its memory, whether each worker count fits, and its peak for the MFU "
        "(bench/peak_flops.py)",
    )
    p.add_argument(
        "--reduce-dtype",
        default=None,
        choices=["fp32", "bf16"],
        help="a transformer's gradients reduced in (default fp32)",
    )
    p.add_argument(
        "--reshard-after-forward",
        default=None,
        choices=["on", "off"],
        help="fsdp2/hsdp: blocks gathered again in backward (default on; off: ZeRO-2)",
    )
    p.add_argument("--workers", default="1-10", help="worker counts: 1-16 or 1,2,4,8")
    p.add_argument(
        "--gpus-per-node", type=count_type("gpus-per-node"), default=1, help="workers per node"
    )
    p.add_argument(
        "--single-worker-ips",
        type=real_type("single-worker-ips"),
        default=None,
        help="one worker's images/s (or give --step-time)",
    )
    p.add_argument(
        "--single-worker-tps",
        type=real_type("single-worker-tps"),
        default=None,
        help="a transformer: one worker's tokens/s (or give --step-time)",
    )
    p.add_argument(
        "--step-time",
        type=real_type("step-time"),
        default=None,
        help="one worker's step, seconds",
    )
    p.add_argument(
        "--link",
        default=None,
        help="line rate between nodes, e.g. 10gbit; bus bandwidth = link efficiency x rate",
    )
    p.add_argument(
        "--transport",
        default=None,
        choices=sorted(LINK_EFFICIENCY),
        help="between nodes: its default link efficiency (tcp "
        f"{TCP_EFFICIENCY:.2f}, rdma {RDMA_EFFICIENCY:.2f}) and "
        f"latency (default {DEFAULT_TRANSPORT}, assumed)",
    )
    p.add_argument(
        "--link-efficiency",
        type=real_type("link-efficiency"),
        default=None,
        help="share of --link a ring achieves (a probe's busbw / rate; "
        "predict --calibrate fits it)",
    )
    p.add_argument(
        "--busbw",
        type=real_type("busbw"),
        default=None,
        help="measured bus bandwidth in GB/s (hpcbench probe, nccl-tests)",
    )
    p.add_argument(
        "--latency-us",
        type=real_type("latency-us"),
        default=None,
        help="per-step latency across nodes (default tcp "
        f"{LATENCY_US['tcp']:g}, rdma {LATENCY_US['rdma']:g}: "
        "assumed)",
    )
    p.add_argument(
        "--intra-node",
        default=None,
        choices=list(INTRA_NODE),
        help="interconnect inside a node: pcie3-5, nvlink2 (V100), nvlink3 (A100), "
        f"nvlink4 (H100), nvlink5 (B200) (default {DEFAULT_INTRA_NODE}, assumed)",
    )
    p.add_argument(
        "--node-loss",
        type=real_type("node-loss"),
        default=None,
        help="share of E one node loses per further busy GPU, its GPUs sharing the NIC and "
        f"PCIe switch: E(g) = 1 / (1 + loss (g-1)) (default {NODE_LOSS:g}, fitted to "
        "published nodes; 0: none)",
    )
    p.add_argument(
        "--intra-busbw",
        type=real_type("intra-busbw"),
        default=None,
        help="bus bandwidth inside a node in GB/s (overrides --intra-node)",
    )
    p.add_argument(
        "--collectives",
        default=None,
        choices=["nccl", "gloo"],
        help="nccl: ring or tree, whichever is faster per message (NCCL 2.4 and later); "
        "gloo: rings only (NCCL before 2.4; a transformer's: Gloo on CPU nodes, blocking, "
        "its reduce-scatter an all-reduce). Default: a transformer's nccl; a CNN's "
        f"{'ring or tree' if DEFAULT_TREE else 'rings only'}, assumed (fitted to published "
        "rows)",
    )
    p.add_argument(
        "--interference",
        type=real_type("interference"),
        default=None,
        help="share of overlapped communication time backward loses (default "
        f"{DEFAULT_INTERFERENCE:.2f})",
    )
    p.add_argument("--backend", default="ddp", choices=workload_options.BACKENDS)
    p.add_argument(
        "--cycle-time-ms",
        type=real_type("cycle-time-ms"),
        default=None,
        help="horovod: HOROVOD_CYCLE_TIME, ms between fusions (default 1)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per worker count")
    p.add_argument(
        "--calibrate",
        default=None,
        metavar="RESULTS",
        help="fit link efficiency and interference to the measured runs of a "
        "results store (two node counts or more) and print them",
    )
    p.set_defaults(func=main)
