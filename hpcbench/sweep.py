"""`hpcbench scale`: the weak-scaling sweep over node counts and batch sizes.

Every (batch, nodes) configuration runs --repeats times in random order; the
single-worker baseline of each batch runs first once, so that every record
can carry its efficiency and predicted band when it is written. A failed run
is stored with the tail of its output and the sweep goes on; --resume skips
the runs the store already holds (failed ones are retried).
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcbench import analysis, fingerprint, paths, runner
from hpcbench.errors import UsageError
from hpcbench.probe import run_probe
from hpcbench.progress import Progress
from hpcbench.specs import parse_batch, parse_size
from hpcbench.store import Store, run_key
from hpcbench.target import Target, add_arguments

# Workload fields the store keeps from the workload's record; the rest of a
# run record is the configuration, the harness's timing and the analysis.
WORKLOAD_FIELDS = (
    "window_times",
    "rank_window_times",
    "rank_data_times",
    "data_time_fraction",
    "weights_in_sync",
    "weight_sum_spread",
    "weights_digest",
    "params",
    "grad_bytes",
    "allreduce_bytes",
    "device",
    "amp",
    "channels_last",
    "threads",
    "fp16_allreduce",
    "wrapped",
    "fusion_threshold_mb",
    "bucket_cap_mb",
    "local_workers",
    "loss",
    "gpu",
)


def known_models() -> dict[str, dict[str, Any]]:
    data = json.loads((paths.BENCH_DIR / "models.json").read_text())
    return {k: v for k, v in data.items() if not k.startswith("_")}


@dataclass(frozen=True)
class Config:
    batch: int
    nodes: int
    workers: int

    @property
    def label(self) -> str:
        return f"batch {self.batch}, {self.nodes} node(s), {self.workers} worker(s)"


def plan(target: Target, batches: list[int], repeats: int, seed: int) -> list[tuple[Config, int]]:
    """(configuration, repeat) pairs: baselines' first repeat first, then all else shuffled."""
    rng = random.Random(seed)
    configs: list[Config] = []
    for batch in batches:
        for nodes, workers in [(1, 1)] + [(n, target.workers(n)) for n in target.nodes]:
            config = Config(batch, nodes, workers)
            if config not in configs:
                configs.append(config)
    first = [(c, 0) for c in configs if c.workers == 1]
    rest = [(c, r) for c in configs for r in range(repeats) if (c, r) not in first]
    rng.shuffle(first)
    rng.shuffle(rest)
    return first + rest


def workload_args(args: argparse.Namespace, batch: int) -> list[str]:
    options = {
        "--model": args.model, "--image-size": args.image_size, "--batch": batch,
        "--backend": args.backend, "--data": args.data, "--warmup": args.warmup,
        "--windows": args.windows, "--steps": args.steps, "--device": args.device,
        "--threads": args.threads, "--data-workers": args.data_workers, "--amp": args.amp,
        "--fusion-threshold-mb": args.fusion_threshold_mb,
        "--bucket-cap-mb": args.bucket_cap_mb,
    }  # fmt: skip
    out = [str(x) for option, value in options.items() if value is not None
           for x in (option, value)]  # fmt: skip
    return out + (["--fp16-allreduce"] if args.fp16_allreduce else [])


def base_record(target: Target, args: argparse.Namespace, config: Config, repeat: int) -> dict:
    tb = target.testbed
    return {
        "kind": "run",
        "env": tb.env,
        "model": args.model,
        "backend": args.backend,
        "batch": config.batch,
        "image_size": args.image_size,
        "data": args.data,
        "nodes": config.nodes,
        "workers": config.workers,
        "gpus_per_node": target.gpus_per_node or tb.slots(tb.nodes[0]),
        "repeat": repeat,
        "warmup": args.warmup,
        "windows": args.windows,
        "steps": args.steps,
        "link_rate": tb.link_rate,
        "launcher": target.launcher.name,
        "seed": args.seed,
    }


def complete(record: dict, outcome: runner.Outcome, store: Store) -> dict:
    """Fill a run record from the workload's output and the analysis so far."""
    record["launched_at"] = outcome.launched_at
    record["duration_s"] = outcome.duration_s
    record["command"] = outcome.argv
    if not outcome.ok:
        record["status"] = "failed"
        record["error"] = outcome.error()
        return record
    result = outcome.records[-1]
    record["status"] = "ok"
    record.update({k: result.get(k) for k in WORKLOAD_FIELDS})
    record["fingerprint"] = {**result.get("fingerprint", {}), **record["fingerprint"]}
    timeline = result.get("timeline", {})
    record["timeline"] = {k: v - outcome.launched_at for k, v in timeline.items()}
    # Launch to first timed step: what the harness and the launcher cost per configuration.
    if "first_timed_step" in timeline:
        record["overhead_s"] = timeline["first_timed_step"] - outcome.launched_at
    if result.get("workers") != record["workers"]:
        record["status"] = "failed"
        record["error"] = f"ran {result.get('workers')} workers, expected {record['workers']}"
        return record
    stats = analysis.run_stats(record)
    record.update(stats)
    # Efficiency and band as known now (baselines run first); `report` recomputes with all runs.
    summaries = analysis.summarise(store.runs() + [record], store.probes())
    mine = next(
        s
        for s in summaries
        if s.series == analysis.series_key(record)
        and s.workers == record["workers"]
        and s.nodes == record["nodes"]
    )
    base = base_ips(summaries, mine)
    record["efficiency"] = stats["images_per_sec"] / record["workers"] / base if base else None
    record["predicted_efficiency"] = (
        [mine.predicted_efficiency_low, mine.predicted_efficiency_high]
        if mine.predicted_efficiency_low is not None
        else None
    )
    record["busbw"] = mine.busbw
    return record


def base_ips(summaries: list[analysis.ConfigSummary], mine: analysis.ConfigSummary) -> float | None:
    base = next((s for s in summaries if s.series == mine.series and s.workers == 1), None)
    return base.images_per_sec if base else None


def validate(args: argparse.Namespace) -> None:
    models = known_models()
    if args.model not in models:
        raise UsageError(f"unknown model {args.model!r}: choose one of {', '.join(sorted(models))}")
    args.image_size = args.image_size or models[args.model]["image_size"]
    for name in ("repeats", "windows", "steps", "image_size"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup < 0:
        raise UsageError("--warmup must be 0 or more")
    parse_size(args.probe_max_bytes, "--probe-max-bytes")


def _terminate(signum: int, frame: object) -> None:
    # SIGTERM unwinds like Ctrl-C, so the runner stops the ranks of the run in flight.
    raise KeyboardInterrupt


def main(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, _terminate)
    validate(args)
    batches = parse_batch(args.batch)
    target = Target.from_args(args)
    if args.data != "synthetic" and target.testbed.local and not Path(args.data).is_dir():
        raise UsageError(f"--data {args.data}: no such directory (or say 'synthetic')")
    store = Store(args.out)
    held = store.runs()
    if held and not args.resume:
        raise UsageError(
            f"{store.path} already holds {len(held)} runs: add --resume to skip "
            "them and run the rest, or choose another --out"
        )
    todo = plan(target, batches, args.repeats, args.seed)
    done = store.done_keys()
    tb = target.testbed
    todo = [(c, r) for c, r in todo if run_key(base_record(target, args, c, r)) not in done]
    if not todo:
        print(f"nothing to do: {store.path} holds every run", file=sys.stderr)
        return 0
    if args.dry_run:
        for config, repeat in todo:
            spec = target.spec(
                "train.py", workload_args(args, config.batch), config.nodes, config.workers,
                args.timeout,
            )  # fmt: skip
            print(f"# {config.label}, repeat {repeat + 1}\n{target.launcher.describe(spec)}\n")
        return 0
    target.prepare()
    if not args.no_probe:
        probed = {
            (p["env"], p["workers"], p["backend"])
            for p in store.probes()
            if p.get("status") == "ok"
        }
        for nodes in sorted({c.nodes for c, _ in todo if c.workers > 1}):
            if (tb.env, target.workers(nodes), args.backend) in probed:
                continue
            print(f"probing all-reduce on {nodes} node(s) ...", file=sys.stderr)
            store.append(run_probe(target, nodes, args))
    controller = fingerprint.controller(tb.env, tb.link_rate, tb.iface, target.launcher.name)
    progress = Progress(len(todo))
    for config, repeat in todo:
        label = f"{config.label}, repeat {repeat + 1}"
        progress.start(label)
        record = base_record(target, args, config, repeat)
        record["fingerprint"] = dict(controller)
        spec = target.spec(
            "train.py",
            workload_args(args, config.batch),
            config.nodes,
            config.workers,
            args.timeout,
        )
        started = time.monotonic()
        outcome = target.launcher.run(spec, timeout_s=args.timeout, echo=args.verbose)
        record = complete(record, outcome, store)
        store.append(record)
        ok = record["status"] == "ok"
        detail = (
            f"{record['images_per_sec']:.1f} images/s" if ok else record["error"].splitlines()[0]
        )
        progress.finish(label, ok, time.monotonic() - started, detail)
    progress.close()
    print(
        f"results in {store.path}; `python -m hpcbench report --out {args.out}` makes the report",
        file=sys.stderr,
    )
    return 1 if progress.failed else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "scale",
        help="measure how data-parallel training scales",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(p, nodes_default="1-10")
    p.add_argument("--batch", default="32,64,96", help="per-worker batch sizes: 32,64,96")
    p.add_argument("--model", default="resnet50", help="resnet50, resnet101, inception_v3, ...")
    p.add_argument("--image-size", type=int, default=0, help="default: the model's own")
    p.add_argument("--data", default="synthetic", help="'synthetic' or an ImageNet-layout folder")
    p.add_argument("--data-workers", type=int, default=4, help="DataLoader processes per worker")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--warmup", type=int, default=10, help="discarded steps per run")
    p.add_argument("--windows", type=int, default=5, help="timed windows per run")
    p.add_argument("--steps", type=int, default=20, help="steps per window")
    p.add_argument("--amp", default="auto", choices=["auto", "on", "off"])
    p.add_argument("--fp16-allreduce", action="store_true", help="fp16 gradient compression")
    p.add_argument("--fusion-threshold-mb", type=float, default=None, help="Horovod only")
    p.add_argument("--bucket-cap-mb", type=float, default=None, help="DDP only")
    p.add_argument("--seed", type=int, default=0, help="seed of the run order")
    p.add_argument("--resume", action="store_true", help="skip runs the store already holds")
    p.add_argument("--no-probe", action="store_true", help="skip the all-reduce probe")
    p.add_argument("--probe-max-bytes", default="64M")
    p.add_argument("--verbose", action="store_true", help="echo the workers' output")
    p.add_argument(
        "--dry-run", action="store_true", help="print what each run would launch; run nothing"
    )
    p.set_defaults(func=main)
