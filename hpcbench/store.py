"""The results store: one JSON record per line in DIR/results.jsonl, append-only.

Each record goes to disk as one write() of a whole line on an O_APPEND
descriptor followed by fsync, so a killed sweep loses at most the run in
flight; a torn last line (power loss mid-write) is skipped on reading.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

RESULTS_FILE = "results.jsonl"
SCHEMA = 1

# Fields that name a run configuration; a repeat index completes a run's key.
CONFIG_FIELDS = (
    "env",
    "model",
    "backend",
    "batch",
    "image_size",
    "data",
    "nodes",
    "workers",
    "gpus_per_node",
)


def config_key(record: dict[str, Any]) -> tuple:
    return tuple(record.get(f) for f in CONFIG_FIELDS)


def run_key(record: dict[str, Any]) -> tuple:
    return (*config_key(record), record.get("repeat"))


class Store:
    def __init__(self, directory: Path | str):
        self.dir = Path(directory)
        self.path = self.dir / RESULTS_FILE

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps({"schema": SCHEMA, **record}, sort_keys=True) + "\n"
        data = line.encode()
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            # After a torn last line, start on a fresh line so only the torn record is lost.
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data
            written = os.write(fd, data)
            if written != len(data):  # a short write would leave a torn line
                raise OSError(f"short write to {self.path}: {written} of {len(data)} bytes")
            os.fsync(fd)
        finally:
            os.close(fd)

    def records(self, kind: str | None = None) -> Iterator[dict[str, Any]]:
        if not self.path.is_file():
            return
        with self.path.open(encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.endswith("\n"):
                    print(
                        f"hpcbench: {self.path}:{number}: skipping a torn last line",
                        file=sys.stderr,
                    )
                    break
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    print(
                        f"hpcbench: {self.path}:{number}: skipping a line that is not JSON",
                        file=sys.stderr,
                    )
                    continue
                if kind is None or record.get("kind") == kind:
                    yield record

    def runs(self) -> list[dict[str, Any]]:
        return list(self.records("run"))

    def probes(self) -> list[dict[str, Any]]:
        return list(self.records("probe"))

    def done_keys(self) -> set[tuple]:
        """Run keys that completed; failed runs are not 'done' so --resume retries them."""
        return {run_key(r) for r in self.runs() if r.get("status") == "ok"}
