"""Harness overhead per configuration: from launch to the first timed step.

    python evaluation/overhead.py [--repeats 3] [--backends horovod,ddp]

Runs real localhost sweeps (1 and 2 workers) and splits each run's launch
cost with the workload's timeline: launcher (launch -> process start),
interpreter + imports + rendezvous (-> initialised), model and data
(-> ready), warm-up (-> first timed step). For scale, the bare cost of
`python -c "import torch, torchvision"` is measured too.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from cli import REPO, hpcbench, median, records

PHASES = [
    ("launcher", None, "process_start"),
    ("imports+init", "process_start", "initialised"),
    ("model+data", "initialised", "ready"),
    ("warm-up", "ready", "first_timed_step"),
]


def import_cost(repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch, torchvision"], check=True)
        times.append(time.perf_counter() - start)
    return median(times)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--backends", default="horovod,ddp")
    p.add_argument("--model", default="mobilenet_v3_small")
    p.add_argument("--image-size", default="32")
    p.add_argument("--batch", default="8")
    p.add_argument("--warmup", default="2")
    p.add_argument("--out", default=str(REPO / "results" / "bench-overhead"))
    args = p.parse_args()
    out = Path(args.out)
    summary = {"import_torch_torchvision_s": import_cost(args.repeats), "runs": {}}
    print(f"bare `import torch, torchvision`: {summary['import_torch_torchvision_s']:.2f} s")
    print(
        f"| backend | workers | runs | launch -> first timed step | "
        f"{' | '.join(name for name, _, _ in PHASES)} | whole run |"
    )
    print("|---|---|---|---|" + "---|" * len(PHASES) + "---|")
    for backend in args.backends.split(","):
        directory = out / backend
        if (directory / "results.jsonl").exists():
            (directory / "results.jsonl").unlink()
        hpcbench(
            "scale",
            "--env",
            "localhost",
            "--nodes",
            "1-2",
            "--backend",
            backend,
            "--model",
            args.model,
            "--image-size",
            args.image_size,
            "--batch",
            args.batch,
            "--warmup",
            args.warmup,
            "--windows",
            "2",
            "--steps",
            "2",
            "--repeats",
            str(args.repeats),
            "--no-probe",
            "--out",
            str(directory),
        )
        for workers in (1, 2):
            runs = [r for r in records(directory) if r["workers"] == workers]
            phases = []
            for _, start, end in PHASES:
                phases.append(
                    median(
                        [r["timeline"][end] - (r["timeline"][start] if start else 0) for r in runs]
                    )
                )
            overhead = median([r["overhead_s"] for r in runs])
            whole = median([r["duration_s"] for r in runs])
            summary["runs"][f"{backend}/{workers}"] = {
                "overhead_s": overhead,
                "phases_s": dict(zip([n for n, _, _ in PHASES], phases, strict=True)),
                "duration_s": whole,
                "runs": len(runs),
            }
            print(
                f"| {backend} | {workers} | {len(runs)} | {overhead:.2f} s | "
                + " | ".join(f"{x:.2f} s" for x in phases)
                + f" | {whole:.2f} s |"
            )
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(f"medians over repeats; details in {out}/summary.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
