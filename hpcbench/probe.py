"""`hpcbench probe`: all-reduce bus bandwidth over a size sweep on the sweep's nodes.

The records go to the same results store as the sweep; the analysis fits the
ring all-reduce model's latency and bandwidth from them to predict efficiency.
"""

from __future__ import annotations

import argparse
import sys

from hpcbench import fingerprint
from hpcbench.specs import parse_size
from hpcbench.store import Store
from hpcbench.target import Target, add_arguments


def run_probe(target: Target, nodes: int, args: argparse.Namespace) -> dict:
    """Probe all workers of `nodes` nodes; returns the record to store (ok or failed)."""
    workers = target.workers(nodes)
    script_args = [
        "--backend",
        target.backend,
        "--device",
        args.device,
        "--threads",
        str(args.threads),
        "--max-bytes",
        args.probe_max_bytes,
    ]
    spec = target.spec("allreduce.py", script_args, nodes, workers, args.timeout)
    outcome = target.launcher.run(spec, timeout_s=args.timeout)
    tb = target.testbed
    record = {
        "kind": "probe",
        "env": tb.env,
        "nodes": nodes,
        "workers": workers,
        "backend": target.backend,
        "launched_at": outcome.launched_at,
        "duration_s": outcome.duration_s,
        "status": "ok" if outcome.ok else "failed",
        "fingerprint": fingerprint.controller(tb.env, tb.link_rate, tb.iface, target.launcher.name),
    }
    if outcome.ok:
        result = outcome.records[-1]
        record["results"] = result["results"]
        record["device"] = result["device"]
        record["fingerprint"] = {**result["fingerprint"], **record["fingerprint"]}
    else:
        record["error"] = outcome.error()
    return record


def format_probe(record: dict) -> str:
    head = (
        f"all-reduce on {record['workers']} workers ({record['nodes']} nodes), {record['backend']}"
    )
    if record["status"] != "ok":
        return f"{head}: FAILED\n{record.get('error', '')}"
    lines = [head, f"{'bytes':>12} {'time us':>11} {'algbw GB/s':>11} {'busbw GB/s':>11}"]
    for r in record["results"]:
        lines.append(
            f"{r['bytes']:>12} {r['time_s'] * 1e6:>11.1f} "
            f"{r['algbw'] / 1e9:>11.3f} {r['busbw'] / 1e9:>11.3f}"
        )
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    parse_size(args.probe_max_bytes, "--probe-max-bytes")
    target = Target.from_args(args)
    target.prepare()
    store = Store(args.out)
    failed = 0
    for n in target.nodes:
        if target.workers(n) < 2:
            print(f"skipping {n} node(s): one worker has nothing to all-reduce", file=sys.stderr)
            continue
        record = run_probe(target, n, args)
        store.append(record)
        failed += record["status"] != "ok"
        print(format_probe(record))
    print(f"records appended to {store.path}", file=sys.stderr)
    return 1 if failed else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "probe", help="measure all-reduce bus bandwidth on the nodes", description=__doc__
    )
    add_arguments(p, nodes_default="2")
    p.add_argument("--probe-max-bytes", default="64M", help="largest message (default 64M)")
    p.set_defaults(func=main)
