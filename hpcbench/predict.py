"""`hpcbench predict`: what a network allows a model, before booking a testbed.

    python -m hpcbench predict --model resnet50 --batch 32 --workers 1-16 \\
        --gpus-per-node 4 --single-worker-ips 400 --link 10gbit
    python -m hpcbench predict --calibrate results/vw-1g   # fit to measured runs

The model's gradient sizes and per-layer forward FLOPs come from the model
itself, built on PyTorch's meta device (no weights, no memory, no GPU). Each
worker count gets a point prediction (the replay of one step in
hpcbench.allreduce_model: gradients ready layer by layer during backward, grouped
as the backend groups them, queued on a two-level link: the node's NIC
shared by its workers, PCIe or NVLink inside it) and the two-bound band.
The link achieves a share of its line rate (--link-efficiency, else the
default of its --transport), and communication during backward slows
backward by --interference of its time; docs/method.md has the model.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpcbench import allreduce_model, analysis
from hpcbench.errors import UsageError
from hpcbench.scaling_model import (
    DEFAULT_INTERFERENCE,
    DEFAULT_INTRA_NODE,
    INTRA_NODE,
    LATENCY_US,
    LINK_EFFICIENCY,
    RDMA_EFFICIENCY,
    TCP_EFFICIENCY,
    Case,
    Plan,
    case_point,
    fit,
    parse_link,
    predictions,
)
from hpcbench.specs import count_type, megabytes_type, parse_int_list, units
from hpcbench.store import Store

MAX_WORKERS = 4096


def store_cases(args: argparse.Namespace) -> list[Case]:
    """Every configuration across nodes that a results store measured, as a Case: the
    single worker's step, the series' settings and the link rate the runs recorded
    (else --link)."""
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
            nccl=args.collectives == "nccl",
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
    "step-time": (0.000001, 3600.0),  # seconds
    "busbw": (0.000001, 10_000.0),  # GB/s
    "latency-us": (0.0, 1_000_000.0),
    "cycle-time-ms": (0.001, 10_000.0),
    "link-efficiency": (0.01, 1.0),
    "interference": (0.0, 1.0),
    "intra-busbw": (0.001, 10_000.0),  # GB/s
}


def real_type(name: str) -> Callable[[str], float]:
    """An option's real number within its REALS bounds."""
    return units.argtype(lambda _n, text: units.parse_real(text, *REALS[name]), name)


def plan_from(args: argparse.Namespace) -> Plan:
    """The one place the command line becomes a checked Plan."""
    if (args.single_worker_ips is None) == (args.step_time is None):
        raise UsageError("give one of --single-worker-ips or --step-time")
    if (args.link is None) == (args.busbw is None):
        raise UsageError("give one of --link (a line rate) or --busbw (measured, GB/s)")
    if not 16 <= args.image_size <= 1024:
        raise UsageError(f"--image-size: {args.image_size} is out of range; use 16 to 1024")
    if args.bucket_cap_mb is not None and args.backend != "ddp":
        raise UsageError("--bucket-cap-mb is DDP's setting: give --fusion-threshold-mb for horovod")
    if args.fusion_threshold_mb is not None and args.backend != "horovod":
        raise UsageError("--fusion-threshold-mb is Horovod's setting: give --bucket-cap-mb for ddp")
    if args.cycle_time_ms is not None and args.backend != "horovod":
        raise UsageError("--cycle-time-ms is Horovod's setting; DDP has no cycle")
    message_mb = args.bucket_cap_mb if args.backend == "ddp" else args.fusion_threshold_mb
    grouping = allreduce_model.Grouping(
        args.backend,
        None if message_mb is None else message_mb * 1024**2,
        None if args.cycle_time_ms is None else args.cycle_time_ms / 1e3,
    )
    if args.link_efficiency is not None and args.busbw is not None:
        raise UsageError(
            "--link-efficiency scales --link; --busbw is already what the link achieves"
        )
    step = args.step_time if args.step_time is not None else args.batch / args.single_worker_ips
    if args.busbw is not None:
        busbw, note = args.busbw * 1e9, f"bus bandwidth {args.busbw:g} GB/s (measured, --busbw)"
    else:
        rate = parse_link(args.link)
        share = (
            args.link_efficiency
            if args.link_efficiency is not None
            else (LINK_EFFICIENCY[args.transport])
        )
        source = (
            "--link-efficiency"
            if args.link_efficiency is not None
            else (f"{args.transport} default")
        )
        busbw = rate / 8 * share
        note = (
            f"link {rate / 1e9:g} Gbit/s x {share:.2f} ({source}) = "
            f"{busbw * 8 / 1e9:.2f} Gbit/s achieved"
        )
    latency_us = args.latency_us if args.latency_us is not None else LATENCY_US[args.transport]
    intra = args.intra_busbw * 1e9 if args.intra_busbw is not None else INTRA_NODE[args.intra_node]
    interference = DEFAULT_INTERFERENCE if args.interference is None else args.interference
    return Plan(
        model=args.model,
        image_size=args.image_size,
        batch=args.batch,
        workers=parse_int_list(args.workers, "--workers", MAX_WORKERS),
        gpus_per_node=args.gpus_per_node,
        step_time_s=step,
        busbw=busbw,
        latency_s=latency_us * 1e-6,
        backend=args.backend,
        grouping=grouping,
        intra_busbw=intra,
        interference=interference,
        nccl=args.collectives == "nccl",
        link_note=note,
    )


def main(args: argparse.Namespace) -> int:
    if args.calibrate is not None:
        return calibrate_main(args)
    plan = plan_from(args)
    # The rows are numbers; each also gets the link figures it stands on, some of them text.
    rows: list[dict[str, Any]] = predictions(plan)
    for r in rows:  # each row says which link figures it stands on
        r.update(
            busbw=plan.busbw,
            link=plan.link_note,
            latency_s=plan.latency_s,
            intra_busbw=plan.intra_busbw,
            interference=plan.interference,
        )
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(
        f"{plan.model} at {plan.image_size} px, batch {plan.batch}/worker, "
        f"{plan.grouping.describe()}, "
        f"single-worker step {plan.step_time_s * 1e3:.1f} ms; {plan.link_note}, "
        f"latency {plan.latency_s * 1e6:.0f} us across nodes; inside a node "
        f"{plan.intra_busbw / 1e9:g} GB/s; interference {plan.interference:.2f}"
        f"{'; NCCL ring or tree' if plan.nccl else '; ring'}"
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
        "the interference share of it); band: no overlap to full overlap"
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
    p.add_argument("--model", default="resnet50", help="a torchvision model name")
    p.add_argument("--image-size", type=count_type("image-size"), default=224)
    p.add_argument("--batch", type=count_type("batch"), default=32, help="per-worker batch")
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
        default="tcp",
        choices=sorted(LINK_EFFICIENCY),
        help="between nodes: its default link efficiency (tcp "
        f"{TCP_EFFICIENCY:.2f}, rdma {RDMA_EFFICIENCY:.2f}) and "
        "latency",
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
        default=DEFAULT_INTRA_NODE,
        choices=list(INTRA_NODE),
        help="interconnect inside a node: pcie3-5, nvlink2 (V100), nvlink3 (A100), nvlink4 (H100)",
    )
    p.add_argument(
        "--intra-busbw",
        type=real_type("intra-busbw"),
        default=None,
        help="bus bandwidth inside a node in GB/s (overrides --intra-node)",
    )
    p.add_argument(
        "--collectives",
        default="nccl",
        choices=["nccl", "gloo"],
        help="nccl: ring or tree, whichever is faster per message; gloo: ring",
    )
    p.add_argument(
        "--interference",
        type=real_type("interference"),
        default=None,
        help="share of overlapped communication time backward loses (default "
        f"{DEFAULT_INTERFERENCE:.2f})",
    )
    p.add_argument("--backend", default="ddp", choices=["ddp", "horovod"])
    p.add_argument(
        "--bucket-cap-mb",
        type=megabytes_type("bucket-cap-mb"),
        default=None,
        help="ddp: DistributedDataParallel's bucket_cap_mb (default 25)",
    )
    p.add_argument(
        "--fusion-threshold-mb",
        type=megabytes_type("fusion-threshold-mb"),
        default=None,
        help="horovod: HOROVOD_FUSION_THRESHOLD in MiB (default 128; 0 = no fusion)",
    )
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
