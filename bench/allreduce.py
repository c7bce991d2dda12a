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

On CPU nodes it then tells the all-reduce's work from its waiting: a fixed piece
of computation (the stand-in for backward) runs alone, then while all-reduces of
the largest size run one after another in the backend's own thread (as
gradients do during backward), then alone again. The computation the
all-reduces cost (wall time less what the pieces done would take alone) per byte
all-reduced is what a training step on that node loses to communication that it
overlaps (docs/method.md, "CPU nodes"). The same piece also runs before the
backend starts: the backend's own threads (Horovod's cycle, Gloo's socket loop)
run between all-reduces too, so the alone phases already pay for them, and a
one-worker run does not. The speed lost from before the start to the faster
alone phase is the backend's background share of the computation.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nodemon  # noqa: E402  (sibling modules; bench/ is not a package on the nodes)
import runtime  # noqa: E402
import units  # noqa: E402

MAX_ITERS = 50
# The compute stand-in: a 128x128 matrix product, about 50 us on one core of the
# development machine (20,000 a second alone; short enough to poll the all-reduce
# between pieces) on operands that stay in cache.
PIECE_DIM = 128
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
    p.add_argument("--cpu-work-s", type=float, default=3.0,
                   help="seconds of each phase of the CPU-work measurement (CPU only; 0: skip)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    if args.factor < 2 or not 4 <= args.min_bytes <= args.max_bytes:
        p.error("need 4 <= --min-bytes <= --max-bytes and --factor >= 2")
    timeline = {"process_start": runtime.process_start_time()}
    device = runtime.pick_device(args.device)
    before = None
    if device.type == "cpu" and args.cpu_work_s > 0:
        # The computation's speed with no backend running, on the threads it will have.
        runtime.set_threads(args.threads, runtime.local_size_hint())
        before = _pieces_per_s(_piece(), args.cpu_work_s / 2, warmup_s=1.0)
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
    cpu_work = None
    if device.type == "cpu" and n > 1 and args.cpu_work_s > 0:
        cpu_work = measure_cpu_work(comm, results[-1], args.cpu_work_s, before)
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
                "cpu_work": cpu_work,
                "timeline": timeline,
                "fingerprint": runtime.merge_fingerprints(fingerprints),
            },
            args.out,
        )
    comm.shutdown()
    return 0


def _piece() -> Callable[[], object]:
    a = torch.rand(PIECE_DIM, PIECE_DIM)
    b = torch.rand(PIECE_DIM, PIECE_DIM)
    out = torch.empty(PIECE_DIM, PIECE_DIM)
    return lambda: torch.mm(a, b, out=out)


def _pieces_per_s(piece: Callable[[], object], seconds: float, warmup_s: float = 0.0) -> float:
    if warmup_s:
        _pieces_per_s(piece, warmup_s)
    done, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        piece()
        done += 1
    return done / elapsed


def measure_cpu_work(
    comm: runtime.Comm, largest: dict, seconds: float, before_per_s: float | None = None
) -> dict:
    """Compute lost per byte all-reduced (see the module's docstring), every rank's.

    largest: the sweep's result at its largest size; enough of those all-reduces run
    to last about `seconds` (the same count on every rank: it comes from the slowest
    rank's time). Alone, beside, alone again; the faster alone phase is the
    computation's speed: whatever else the host does only slows it (on the local
    testbed's first probe after a deploy, the first alone phase ran at 0.35-0.76 of
    the second on all 4 ranks; on the next testbed's, within 4%).
    before_per_s: the computation's speed before the backend started (None: not
    measured); the share of it the faster alone phase lost is the background's."""
    size, count = largest["bytes"], max(1, round(seconds / largest["time_s"]))
    tensor = torch.zeros(size // 4, dtype=torch.float32)
    piece = _piece()
    _pieces_per_s(piece, 0.5)  # warm-up: the first pieces ran at half speed when measured
    comm.barrier()
    alone = [_pieces_per_s(piece, seconds / 2)]
    comm.barrier()
    done, start = 0, time.perf_counter()
    for _ in range(count):
        pending = comm.allreduce_start(tensor)
        while not pending.done():
            piece()
            done += 1
        pending.finish()
    wall = time.perf_counter() - start
    comm.barrier()
    alone.append(_pieces_per_s(piece, seconds / 2))
    lost = wall - done / max(alone)  # may come out below 0 by noise: kept as measured
    # Below 0 by noise too (a slow spell before the start): kept as measured.
    background = None if not before_per_s else 1.0 - max(alone) / before_per_s
    everyone = comm.gather({"wall_s": wall, "pieces": done, "lost_s": lost, "alone_per_s": alone,
                            "before_per_s": before_per_s, "background": background})  # fmt: skip
    shares = [r["background"] for r in everyone if r["background"] is not None]
    lost_per_byte = [r["lost_s"] / (count * size) for r in everyone]
    return {
        "bytes": size,
        "allreduces": count,
        "per_rank": everyone,
        # The ranks' mean: each rank's figure carries the core's noise; the mean is the
        # estimate of what a step loses per byte.
        "lost_s_per_byte": sum(lost_per_byte) / len(lost_per_byte),
        # The share of the computation's speed the running backend takes between
        # all-reduces: the least any rank lost (None where no rank measured it). The
        # backend runs on every rank, while the host's noise moves each rank's figure
        # either way: on 4 half-core nodes sharing 2 cores they ranged from -1.24 to
        # 0.34 in one probe; on the campaign's one-core nodes, 0.107 and 0.159.
        "background_share": min(shares) if shares else None,
    }


if __name__ == "__main__":
    sys.exit(main())
