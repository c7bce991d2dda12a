"""Is a node ready for the workload? The check a campaign runs on one node of a
cluster it did not deploy (a Slurm partition, your own hosts) as that testbed's verify.

    python bench/check_stack.py --backend ddp --device auto --gpus 4 --shared /scratch/me

Each check is recorded with what it found: the stack imports (torch,
torchvision, and Horovod for --backend horovod), the GPUs (at least --gpus CUDA
devices, and the driver nvidia-smi reports), the shared folder (a file written,
read back and removed there: the job's output and bench/ live on it), and the
collective backend (its process group starts from the launcher's variables and
an all-reduce of ones sums to the world size). Rank 0 prints one record
(HPCBENCH_RESULT, kind "check"); the exit status is 0 only when every check
passed. Runs on the nodes: never imports hpcbench.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workload_options  # noqa: E402  (a sibling module, without torch)

# bench/runtime.py's marker, written out: runtime imports torch, and a node without
# torch must still say so (a unit test checks that the two match).
RESULT_MARKER = "HPCBENCH_RESULT "


def attempt(name: str, probe: Callable[[], str]) -> dict[str, Any]:
    """One check: what it found, or the first line of why it failed."""
    try:
        return {"name": name, "ok": True, "detail": probe()}
    except Exception as err:  # a check that fails says why; the next one still runs
        why = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return {"name": name, "ok": False, "detail": why[:300]}


def imports(backend: str) -> str:
    import torch
    import torchvision

    found = f"torch {torch.__version__}, torchvision {torchvision.__version__}"
    if backend == "horovod":
        import horovod
        import horovod.torch  # noqa: F401  (its extension must load, not only the package)

        found += f", horovod {horovod.__version__}"
    return found


def gpus(wanted: int, device: str) -> str:
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if device == "cuda" and count == 0:
        raise RuntimeError("--device cuda, but torch sees no CUDA device")
    if count < wanted:
        raise RuntimeError(
            f"{count} CUDA device(s) visible, {wanted} wanted (--gres, CUDA_VISIBLE_DEVICES)"
        )
    if count == 0:
        return "no GPU (CPU run)"
    driver = subprocess.run(
        ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    names = {torch.cuda.get_device_name(i) for i in range(count)}
    return f"{count} x {', '.join(sorted(names))}, driver {driver.stdout.strip() or '?'}"


def shared(folder: str) -> str:
    path = Path(folder) / f".hpcbench-check-{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
    text = f"written by {socket.gethostname()} at {time.time()}"
    path.write_text(text)
    try:
        if path.read_text() != text:
            raise RuntimeError(f"{folder}: read back something else")
    finally:
        path.unlink()
    return f"{folder} writable"


def collective(backend: str, device: str) -> str:
    import runtime
    import torch

    dev = runtime.pick_device(device)
    comm = runtime.connect(backend, dev)
    try:
        ones = torch.ones(4, device=dev)
        comm.allreduce_(ones)
        runtime.synchronize(dev)
        if float(ones[0]) != comm.size:
            raise RuntimeError(f"an all-reduce of ones gave {float(ones[0])}, not {comm.size}")
        return f"{comm.dist_backend}, {comm.size} rank(s)"
    finally:
        comm.shutdown()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", default="ddp", choices=workload_options.BACKENDS)
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--gpus", type=int, default=0, help="CUDA devices the node must show")
    p.add_argument("--shared", default="", help="a folder of the shared file system")
    args = p.parse_args(argv)
    checks = [
        attempt("stack imports", lambda: imports(args.backend)),
        attempt("GPUs and driver", lambda: gpus(args.gpus, args.device)),
    ]
    if args.shared:
        checks.append(attempt("shared folder", lambda: shared(args.shared)))
    if checks[0]["ok"]:  # the backend needs the stack
        checks.append(attempt("collective backend", lambda: collective(args.backend, args.device)))
    rank = int(os.environ.get("RANK", os.environ.get("HOROVOD_RANK", "0")))
    ok = all(c["ok"] for c in checks)
    if rank == 0:
        record = {"kind": "check", "ok": ok, "checks": checks, "host": socket.gethostname()}
        sys.stdout.write(RESULT_MARKER + json.dumps(record) + "\n")
        sys.stdout.flush()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
