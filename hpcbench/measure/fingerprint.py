"""The controller's half of a run's environment fingerprint.

The workload reports what the nodes run (torch, Horovod, NCCL/Gloo, GPU,
driver, hosts); this adds what only the controller knows: the testbed, its
link rate, the launcher, and exactly which bench/ code the nodes were given.
"""

from __future__ import annotations

import hashlib
import platform
import socket
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

from hpcbench import __version__
from hpcbench.core import paths


@cache
def bench_digest(bench_dir: Path = paths.BENCH_DIR) -> str:
    """SHA-256 over the workload's files: proves which version ran on the nodes."""
    h = hashlib.sha256()
    for path in sorted(bench_dir.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".json"):
            h.update(str(path.relative_to(bench_dir)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


@cache
def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(paths.REPO), "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def controller(env: str, link_rate: str, iface: str, launcher: str) -> dict[str, Any]:
    return {
        "env": env,
        "link_rate": link_rate or "unshaped",
        "iface": iface or None,
        "launcher": launcher,
        "controller": socket.gethostname(),
        "controller_python": platform.python_version(),
        "hpcbench": __version__,
        "hpcbench_commit": git_commit(),
        "bench_digest": bench_digest(),
    }
