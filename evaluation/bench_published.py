"""`hpcbench predict` against published scaling results.

    python evaluation/bench_published.py [--markdown]

Each row of evaluation/published.json is a published multi-node run (model,
per-GPU batch, GPUs per node, workers, network, single-GPU and N-GPU
images/s) with its source and the quoted lines its numbers come from. For
each row this runs `hpcbench predict` with the single-GPU throughput and the
network's line rate (--link: TCP's payload share of it, the stated
assumption of `predict`) and prints measured E = X(N) / (N X(1)) beside the
point prediction and the band, the difference, and the command that
reproduces the prediction. The summary counts the rows within 0.05 of the
point and inside the band. Nothing here is measured on this machine.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shlex
import sys
from pathlib import Path

from cli import REPO

sys.path.insert(0, str(REPO))
from hpcbench import analysis, cli  # noqa: E402  (run as a script from evaluation/)

DATA = Path(__file__).resolve().parent / "published.json"
CLOSE = analysis.POINT_CLOSE


def predict_argv(row: dict) -> list[str]:
    """The `hpcbench predict` command line for one published row."""
    argv = ["predict", "--model", row["model"], "--image-size", str(row["image_size"]),
            "--batch", str(row["batch"]), "--workers", str(row["workers"]),
            "--gpus-per-node", str(row["gpus_per_node"]),
            "--single-worker-ips", str(row["single_ips"]), "--link", row["link"],
            "--backend", "horovod"]  # fmt: skip
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--markdown", action="store_true", help="print README's table")
    p.add_argument("--data", type=Path, default=DATA)
    args = p.parse_args(argv)
    data = json.loads(args.data.read_text())
    rows = []
    for row in data["rows"]:
        measured = row["multi_ips"] / (row["workers"] * row["single_ips"])
        pred = predicted(row)
        rows.append((row, measured, pred))
        print(f"{row['model']:>12} {row['workers']:>3} GPUs {row['network']:<36} "
              f"E {measured:.3f}  point {pred['efficiency']:.3f}  band "
              f"{pred['efficiency_low']:.2f}-{pred['efficiency_high']:.2f}  "
              f"diff {pred['efficiency'] - measured:+.3f}", file=sys.stderr)  # fmt: skip
    if args.markdown:
        print("| source | model | GPUs (nodes x per node) | network | E published | "
              "E point | band | point - published |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for row, measured, pred in rows:
            nodes = row["workers"] // row["gpus_per_node"]
            print(f"| {row['source']} | {row['model']} | {row['workers']} ({nodes} x "
                  f"{row['gpus_per_node']}) | {row['network']} | {measured:.3f} | "
                  f"{pred['efficiency']:.3f} | {pred['efficiency_low']:.2f}-"
                  f"{pred['efficiency_high']:.2f} | {pred['efficiency'] - measured:+.3f} |")
    else:
        for row, _, _ in rows:
            print(f"python -m hpcbench {shlex.join(predict_argv(row))}")
    close = sum(abs(p["efficiency"] - m) <= CLOSE for _, m, p in rows)
    inside = sum(p["efficiency_low"] <= m <= p["efficiency_high"] for _, m, p in rows)
    mean_abs = sum(abs(p["efficiency"] - m) for _, m, p in rows) / len(rows)
    print(f"{len(rows)} published rows: point within {CLOSE} of the published E in {close}, "
          f"published E inside the band in {inside}; mean |point - published| "
          f"{mean_abs:.3f}", file=sys.stderr)  # fmt: skip
    for key, src in data["sources"].items():
        print(f"{key}: {src['url']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
