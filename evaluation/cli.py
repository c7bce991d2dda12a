"""Helpers the benchmark scripts share: run the real CLI, read its results store."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def hpcbench(
    *argv: str, timeout: int = 3600, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "hpcbench", *argv],
        cwd=REPO,
        env=env,
        text=True,
        capture_output=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise SystemExit(
            f"hpcbench {' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
        )
    return proc


def records(out: Path, kind: str = "run") -> list[dict]:
    path = Path(out) / "results.jsonl"
    return [r for r in map(json.loads, path.read_text().splitlines()) if r.get("kind") == kind]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def add_loop_arguments(p: argparse.ArgumentParser) -> None:
    """What a training loop is asked to run: the fidelity benchmark's options, which
    it hands to the plain loop and to the harness alike."""
    p.add_argument("--model", default="resnet18")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--windows", type=int, default=5)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--amp", default="off", choices=["on", "off"])
    p.add_argument("--step", default="eager", choices=["eager", "graph", "compile"])
