"""`hpcbench predict`: what a network allows a model, before booking a testbed.

    python -m hpcbench predict --model resnet50 --batch 32 --workers 1-16 \\
        --gpus-per-node 4 --single-worker-ips 400 --link 10gbit

The model's gradient sizes and per-layer forward FLOPs come from the model
itself, built on PyTorch's meta device (no weights, no memory, no GPU). Each
worker count gets a point prediction (the replay of one step in
hpcbench.prediction: gradients ready layer by layer during backward, grouped
as the backend groups them, queued on the link) and the two-bound band.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass

from hpcbench import prediction
from hpcbench.errors import UsageError
from hpcbench.specs import count_type, megabytes_type, parse_int_list, units

# TCP payload per Ethernet frame at MTU 1500: 1448 bytes (1500 less IP and TCP
# headers with timestamps) of the 1538 each frame takes on the wire (with
# Ethernet header, FCS, preamble and inter-frame gap). A ring's bus bandwidth
# cannot exceed that share of the line rate.
TCP_EFFICIENCY = 1448 / 1538
# Per-message latency when none is given: an assumption typical of TCP over a
# switched LAN, not a measurement; `hpcbench probe` measures the real one.
DEFAULT_LATENCY_US = 50.0
MAX_WORKERS = 4096
_RATE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmg])bit", re.IGNORECASE | re.ASCII)


def parse_link(text: str) -> float:
    """'10gbit' -> line rate in bits/s."""
    match = _RATE.fullmatch(text.strip())
    if not match:
        raise UsageError(f"--link {text!r}: write a line rate like 1gbit, 25gbit or 100mbit")
    value = float(match[1]) * {"k": 1e3, "m": 1e6, "g": 1e9}[match[2].lower()]
    if not 1e3 <= value <= 1e13:
        raise UsageError(f"--link {text!r}: out of range; use 1kbit to 10000gbit")
    return value


def model_layers(name: str, image_size: int) -> list[tuple[float, float]]:
    """(gradient bytes, forward FLOPs per image) of each layer, in forward order.

    Conv and linear layers carry the FLOPs (2 per multiply-add); other layers
    count one operation per output element, which is small beside them.
    """
    import torch
    import torchvision

    try:
        build = torchvision.models.get_model_builder(name)
    except ValueError:
        raise UsageError(f"--model {name!r}: not a torchvision model") from None
    with torch.device("meta"):
        model = build(weights=None, **({"aux_logits": False, "init_weights": False}
                                       if name == "inception_v3" else {}))  # fmt: skip
    model.eval()
    layers: list[tuple[float, float]] = []
    seen: set[int] = set()

    def hook(module: torch.nn.Module, inputs: tuple, output: torch.Tensor) -> None:
        if not isinstance(output, torch.Tensor):
            return
        out_elems = output.numel()
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
            model(torch.empty(1, 3, image_size, image_size, device="meta"))
    finally:
        for h in handles:
            h.remove()
    return layers


@dataclass(frozen=True)
class Plan:
    model: str
    image_size: int
    batch: int
    workers: list[int]
    gpus_per_node: int
    step_time_s: float
    busbw: float  # bytes/s
    latency_s: float
    backend: str
    grouping: prediction.Grouping  # the backend with its bucket / fusion settings


def predictions(plan: Plan, layers: list[tuple[float, float]]) -> list[dict[str, float]]:
    rows = []
    for n in plan.workers:
        # Workers of one node reach each other without the network: only a run
        # that spans nodes is charged for it (intra-node links are faster).
        nodes = math.ceil(n / plan.gpus_per_node)
        link = prediction.LinkModel(n if nodes > 1 else 1, plan.latency_s, plan.busbw)
        p = prediction.predict_point(plan.step_time_s, layers, link, plan.grouping)
        rows.append({"workers": n, "nodes": nodes, **{k: v for k, v in asdict(p).items()
                                                      if k != "workers"}})  # fmt: skip
        rows[-1]["images_per_s"] = n * plan.batch / p.step_s
    return rows


# Bounds of predict's real-valued inputs (the shared parser: digits and one point only).
REALS: dict[str, tuple[float, float]] = {
    "single-worker-ips": (0.001, 10_000_000.0),
    "step-time": (0.000001, 3600.0),  # seconds
    "busbw": (0.000001, 10_000.0),  # GB/s
    "latency-us": (0.0, 1_000_000.0),
    "cycle-time-ms": (0.001, 10_000.0),
}


def _real(name: str) -> Callable[[str], float]:
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
    grouping = prediction.Grouping(
        args.backend,
        None if message_mb is None else message_mb * 1024**2,
        None if args.cycle_time_ms is None else args.cycle_time_ms / 1e3,
    )
    step = args.step_time if args.step_time is not None else args.batch / args.single_worker_ips
    if args.busbw is not None:
        busbw = args.busbw * 1e9
    else:
        busbw = parse_link(args.link) / 8 * TCP_EFFICIENCY
    return Plan(
        model=args.model, image_size=args.image_size, batch=args.batch,
        workers=parse_int_list(args.workers, "--workers", MAX_WORKERS),
        gpus_per_node=args.gpus_per_node, step_time_s=step, busbw=busbw,
        latency_s=args.latency_us * 1e-6, backend=args.backend, grouping=grouping,
    )  # fmt: skip


def main(args: argparse.Namespace) -> int:
    plan = plan_from(args)
    rows = predictions(plan, model_layers(plan.model, plan.image_size))
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{plan.model} at {plan.image_size} px, batch {plan.batch}/worker, "
          f"{plan.grouping.describe()}, "
          f"single-worker step {plan.step_time_s * 1e3:.1f} ms, bus bandwidth "
          f"{plan.busbw * 8 / 1e9:.2f} Gbit/s, latency {plan.latency_s * 1e6:.0f} us")  # fmt: skip
    print(f"{'workers':>7} {'nodes':>5} {'E (point)':>9} {'E band':>11} {'all-reduce':>10} "
          f"{'exposed':>8} {'images/s':>9}")
    for r in rows:
        print(f"{r['workers']:>7} {r['nodes']:>5} {r['efficiency']:>9.2f} "
              f"{r['efficiency_low']:>5.2f}-{r['efficiency_high']:<5.2f} "
              f"{r['allreduce_s'] * 1e3:>8.1f}ms {r['exposed_s'] * 1e3:>6.1f}ms "
              f"{r['images_per_s']:>9.0f}")  # fmt: skip
    print("point: one step replayed (gradients ready layer by layer in backward, grouped as the "
          "backend groups them, queued on the link); band: no overlap to full overlap")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "predict",
        help="predict scaling efficiency from a model, a step time and a network",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", default="resnet50", help="a torchvision model name")
    p.add_argument("--image-size", type=count_type("image-size"), default=224)
    p.add_argument("--batch", type=count_type("batch"), default=32, help="per-worker batch")
    p.add_argument("--workers", default="1-10", help="worker counts: 1-16 or 1,2,4,8")
    p.add_argument("--gpus-per-node", type=count_type("gpus-per-node"), default=1,
                   help="workers per node")  # fmt: skip
    p.add_argument("--single-worker-ips", type=_real("single-worker-ips"), default=None,
                   help="one worker's images/s (or give --step-time)")  # fmt: skip
    p.add_argument("--step-time", type=_real("step-time"), default=None,
                   help="one worker's step, seconds")  # fmt: skip
    p.add_argument("--link", default=None,
                   help="line rate between nodes, e.g. 10gbit; bus bandwidth = "
                   f"{TCP_EFFICIENCY:.3f} x rate (TCP payload share at MTU 1500)")  # fmt: skip
    p.add_argument("--busbw", type=_real("busbw"), default=None,
                   help="measured bus bandwidth in GB/s (hpcbench probe, nccl-tests)")  # fmt: skip
    p.add_argument("--latency-us", type=_real("latency-us"), default=DEFAULT_LATENCY_US,
                   help=f"per-message latency (default {DEFAULT_LATENCY_US:.0f}: assumed)")
    p.add_argument("--backend", default="ddp", choices=["ddp", "horovod"])
    p.add_argument("--bucket-cap-mb", type=megabytes_type("bucket-cap-mb"), default=None,
                   help="ddp: DistributedDataParallel's bucket_cap_mb (default 25)")  # fmt: skip
    p.add_argument("--fusion-threshold-mb", type=megabytes_type("fusion-threshold-mb"),
                   default=None,
                   help="horovod: HOROVOD_FUSION_THRESHOLD in MiB (default 128; 0 = no fusion)")
    p.add_argument("--cycle-time-ms", type=_real("cycle-time-ms"), default=None,
                   help="horovod: HOROVOD_CYCLE_TIME, ms between fusions (default 1)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="one JSON object per worker count")
    p.set_defaults(func=main)
