"""Helpers the benchmark scripts share: run the real CLI, read its results store."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def hpcbench(*argv: str, timeout: int = 3600, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "hpcbench", *argv],
        cwd=REPO,
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
