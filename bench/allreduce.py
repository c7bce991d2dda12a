"""All-reduce bus bandwidth over a size sweep, as nccl-tests defines it.

    torchrun --nproc-per-node 2 bench/allreduce.py --backend ddp --max-bytes 64M

For each size: warm-up, then a timed loop of all-reduces that starts at a
barrier and ends after the device has finished; the slowest rank's average
time counts. algbw = bytes / time, busbw = algbw * 2(N-1)/N (nccl-tests).
Beside the time, the CPU seconds the process spent per all-reduce (the busiest
rank's) and the node's CPU quota: an all-reduce that takes the whole quota at every
size is CPU-bound there (docs/method.md).
It uses the backend the training uses (Horovod or torch.distributed), so the
probe measures the path the gradients take.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nodemon  # noqa: E402  (sibling modules; bench/ is not a package on the nodes)
import runtime  # noqa: E402
import units  # noqa: E402

MAX_ITERS = 50
# Per size, run about this many bytes through the all-reduce (bounds the probe's time).
BYTES_PER_SIZE = 256 * 1024**2


def size_arg(text: str) -> int:
    try:
        return units.parse_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def sizes(lo: int, hi: int, factor: int) -> list[int]:
    out, size = [], lo
    while size <= hi:
        out.append(size)
        size *= factor
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", default="ddp", choices=["horovod", "ddp"])
    p.add_argument("--min-bytes", type=size_arg, default=size_arg("4K"))
    p.add_argument("--max-bytes", type=size_arg, default=size_arg("64M"))
    p.add_argument("--factor", type=int, default=4)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--threads", type=units.argtype(units.count, "threads"), default=0)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    if args.factor < 2 or not 4 <= args.min_bytes <= args.max_bytes:
        p.error("need 4 <= --min-bytes <= --max-bytes and --factor >= 2")
    timeline = {"process_start": runtime.process_start_time()}
    device = runtime.pick_device(args.device)
    comm = runtime.connect(args.backend, device)
    runtime.set_threads(args.threads, comm.local_size)
    timeline["initialised"] = time.time()
    n = comm.size
    results = []
    for size in sizes(args.min_bytes, args.max_bytes, args.factor):
        # Zeros stay zero under repeated summing: no overflow however many iterations.
        tensor = torch.zeros(size // 4, dtype=torch.float32, device=device)
        iters = max(3, min(MAX_ITERS, BYTES_PER_SIZE // size))
        for _ in range(args.warmup):
            comm.allreduce_(tensor)
        runtime.synchronize(device)
        comm.barrier()
        start, cpu_start = time.perf_counter(), time.process_time()
        for _ in range(iters):
            comm.allreduce_(tensor)
        runtime.synchronize(device)
        # process_time counts every thread of this process: the Gloo and Horovod
        # threads that reduce and copy, whose CPU a training step loses on CPU nodes.
        mine = ((time.perf_counter() - start) / iters, (time.process_time() - cpu_start) / iters)
        everyone = comm.gather(mine)
        seconds = max(t for t, _ in everyone)
        algbw = size / seconds
        results.append(
            {
                "bytes": size,
                "iters": iters,
                "time_s": seconds,
                "cpu_s": max(c for _, c in everyone),
                "algbw": algbw,
                "busbw": algbw * 2 * (n - 1) / n,
            }
        )
    fingerprints = comm.gather(runtime.fingerprint(device, comm))
    timeline["end"] = time.time()
    if comm.rank == 0:
        for r in results:
            print(
                f"{r['bytes']:>12} B  {r['time_s'] * 1e6:>10.1f} us  "
                f"busbw {r['busbw'] / 1e9:8.3f} GB/s",
                file=sys.stderr,
            )
        runtime.emit(
            {
                "kind": "probe_workload",
                "backend": args.backend,
                "workers": n,
                "device": device.type,
                # The node's CPU quota (cores), against which cpu_s is charged.
                "cpus": nodemon.cpu_source()["cpus"],
                "results": results,
                "timeline": timeline,
                "fingerprint": runtime.merge_fingerprints(fingerprints),
            },
            args.out,
        )
    comm.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
