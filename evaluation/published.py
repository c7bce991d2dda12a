"""`hpcbench predict` against published scaling results.

    python evaluation/published.py [--markdown]
    python evaluation/published.py --fit     # refit predict's defaults

Each row of evaluation/published.json is a published multi-node run (model,
per-GPU batch, GPUs per node, workers, network, single-GPU and N-GPU
images/s) with its source and the quoted lines its numbers come from. For
each row this runs `hpcbench predict` with the single-GPU throughput, the
network's line rate and transport (predict's default link efficiency for
it) and the interconnect inside a node, and prints measured
E = X(N) / (N X(1)) beside the point prediction and the band, the
difference, and the command that reproduces the prediction. The summary
gives, for the fitted rows and the held-out rows apart, the share within
0.05 of the point, the median and worst |point - published| and the share
inside the band. --fit searches the link efficiency per transport and the
interference on the rows not held out (never on the others) and prints
them: predict's defaults are that fit. Nothing here is measured on this
machine.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shlex
import statistics
import sys
from pathlib import Path

from cli import REPO

sys.path.insert(0, str(REPO))
from hpcbench import analysis, cli, predict, scaling_model  # noqa: E402  (run as a script from evaluation/)

DATA = Path(__file__).resolve().parent / "published.json"
CLOSE = analysis.POINT_CLOSE


def predict_argv(row: dict) -> list[str]:
    """The `hpcbench predict` command line for one published row."""
    argv = [
        "predict",
        "--model",
        row["model"],
        "--image-size",
        str(row["image_size"]),
        "--batch",
        str(row["batch"]),
        "--workers",
        str(row["workers"]),
        "--gpus-per-node",
        str(row["gpus_per_node"]),
        "--single-worker-ips",
        str(row["single_ips"]),
        "--link",
        row["link"],
        "--transport",
        row["transport"],
        "--intra-node",
        row["intra_node"],
        "--backend",
        "horovod",
    ]
    if row.get("fusion_threshold_mb") is not None:
        argv += ["--fusion-threshold-mb", str(row["fusion_threshold_mb"])]
    if row.get("cycle_time_ms") is not None:
        argv += ["--cycle-time-ms", str(row["cycle_time_ms"])]
    return argv + ["--json"]


def predicted(row: dict) -> dict:
    """What `hpcbench predict` prints for the row (its one JSON object)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli.main(predict_argv(row))
    if rc != 0:
        raise SystemExit(f"hpcbench {shlex.join(predict_argv(row))} failed ({rc})")
    return json.loads(out.getvalue())[-1]


def case(row: dict) -> scaling_model.Case:
    """The row as predict's calibration sees it (the parser of `hpcbench predict`)."""
    args = cli.build_parser().parse_args(predict_argv(row))
    plan = predict.plan_from(args)
    rate = scaling_model.parse_link(row["link"])
    return scaling_model.Case(plan, rate, measured_e(row), row["transport"])


def measured_e(row: dict) -> float:
    return row["multi_ips"] / (row["workers"] * row["single_ips"])


def summary(name: str, rows: list[tuple[dict, float, dict]]) -> str:
    """Share within CLOSE of the point, median and worst |point - published|, share
    inside the band."""
    if not rows:
        return f"{name}: no rows"
    diffs = [abs(p["efficiency"] - m) for _, m, p in rows]
    close = sum(d <= CLOSE for d in diffs)
    inside = sum(p["efficiency_low"] <= m <= p["efficiency_high"] for _, m, p in rows)
    return (
        f"{name} ({len(rows)} rows): point within {CLOSE} of the published E in {close} "
        f"({close / len(rows):.0%}); median |point - published| "
        f"{statistics.median(diffs):.3f}, worst {max(diffs):.3f}; published E inside the "
        f"band in {inside} ({inside / len(rows):.0%})"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--markdown", action="store_true", help="print the table of docs/benchmarks.md")
    p.add_argument(
        "--fit",
        action="store_true",
        help="fit link efficiency per transport and interference to the rows not held out",
    )
    p.add_argument("--data", type=Path, default=DATA)
    args = p.parse_args(argv)
    data = json.loads(args.data.read_text())
    if args.fit:
        fitted = [case(r) for r in data["rows"] if not r["held_out"]]
        found = scaling_model.fit(fitted)
        print(
            f"fitted on {len(fitted)} rows (held-out rows not used): link efficiency "
            + ", ".join(f"{t} {e:.2f}" for t, e in found.efficiency.items())
            + f"; interference {found.interference:.2f}; mean |point - published| "
            f"{found.mean_abs:.3f}"
        )
        return 0
    rows = []
    for row in data["rows"]:
        measured = measured_e(row)
        pred = predicted(row)
        rows.append((row, measured, pred))
        print(
            f"{'held out' if row['held_out'] else 'fitted':>8} "
            f"{row['model']:>12} {row['workers']:>3} GPUs {row['network']:<36} "
            f"E {measured:.3f}  point {pred['efficiency']:.3f}  band "
            f"{pred['efficiency_low']:.2f}-{pred['efficiency_high']:.2f}  "
            f"diff {pred['efficiency'] - measured:+.3f}",
            file=sys.stderr,
        )
    if args.markdown:
        print(
            "| source | rows | model | GPUs (nodes x per node) | network | E published | "
            "E point | band | point - published |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for row, measured, pred in rows:
            nodes = row["workers"] // row["gpus_per_node"]
            kind = "held out" if row["held_out"] else "fitted"
            print(
                f"| {row['source']} | {kind} | {row['model']} | {row['workers']} ({nodes} x "
                f"{row['gpus_per_node']}) | {row['network']} | {measured:.3f} | "
                f"{pred['efficiency']:.3f} | {pred['efficiency_low']:.2f}-"
                f"{pred['efficiency_high']:.2f} | {pred['efficiency'] - measured:+.3f} |"
            )
    else:
        for row, _, _ in rows:
            print(f"python -m hpcbench {shlex.join(predict_argv(row))}")
    print(
        f"predict's defaults, used on every row: link efficiency tcp "
        f"{scaling_model.TCP_EFFICIENCY:.2f}, rdma {scaling_model.RDMA_EFFICIENCY:.2f}; "
        f"interference {scaling_model.DEFAULT_INTERFERENCE:.2f}",
        file=sys.stderr,
    )
    print(summary("fitted", [r for r in rows if not r[0]["held_out"]]), file=sys.stderr)
    print(summary("held out", [r for r in rows if r[0]["held_out"]]), file=sys.stderr)
    for key, src in data["sources"].items():
        print(f"{key}: {src['url']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
