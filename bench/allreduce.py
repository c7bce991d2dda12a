"""All-reduce, all-gather and reduce-scatter bus bandwidth over a size sweep, as
nccl-tests defines it.

    torchrun --nproc-per-node 2 bench/allreduce.py --backend ddp --max-bytes 64M

For each size: warm-up, then a timed loop of all-reduces that starts at a
barrier and ends after the device has finished; the slowest rank's average
time counts. algbw = bytes / time, busbw = algbw * 2(N-1)/N (nccl-tests).
Then the same for all-gather and reduce-scatter (the collectives FSDP2 issues),
bytes being the whole gathered or scattered tensor and busbw = algbw * (N-1)/N,
each in a list of its own beside the all-reduce's `results`; the record names
what the backend ran for each (`collectives`: Gloo carries out a reduce-scatter
as an all-reduce, runtime.collective_paths). --collectives all_reduce probes
the all-reduce alone.
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
overlaps (docs/method.md, "CPU nodes"). The backend's own threads (Horovod's
cycle, Gloo's socket loop) run between all-reduces too, so the alone phases
already pay for them, and a one-worker run does not: the CPU time the threads
started with the backend take during the alone phases, against the cores the
computation has, is the backend's background share of the computation.

--budget-s bounds the size sweeps: counted from rank 0's process start, no size
starts once the budget is spent or once the next size, at the last size's
time per byte, would overrun it; the all-reduce's sweep runs first, the other
collectives get what it leaves. Rank 0's clock decides and every rank learns
it from the gather that ends each size, so all stop after the same size and
none waits in a collective its peers never start. The record says so
(stopped_early) and holds the sizes completed; the CPU-work phase (a few
seconds, --cpu-work-s) still runs, on the largest of them.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nodemon  # noqa: E402  (sibling modules; bench/ is not a package on the nodes)
import runtime  # noqa: E402
import units  # noqa: E402
import workload_options  # noqa: E402

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


# The collectives after the all-reduce, each in a list of its own in the record.
EXTRA = units.COLLECTIVES[1:]


def collectives_arg(text: str) -> list[str]:
    try:
        return list(units.parse_collectives(text))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def buffers(
    comm: runtime.Comm, device: torch.device, name: str, size: int
) -> tuple[Callable[[], None], int, float]:
    """One call of the collective at `size` bytes, the bytes it moves as nccl-tests counts
    them, and nccl-tests' bus bandwidth factor. All-reduce: a tensor of size bytes, busbw
    = algbw 2(n-1)/n. All-gather: each rank gives size/n bytes and gets size; reduce-
    scatter: each gives size and keeps size/n; both busbw = algbw (n-1)/n
    (nccl-tests doc/PERFORMANCE.md). Zeros stay zero under summing: no overflow."""
    n = comm.size
    if name == "all_reduce":
        tensor = torch.zeros(size // 4, dtype=torch.float32, device=device)
        return lambda: comm.allreduce_(tensor), size, 2 * (n - 1) / n
    count = max(1, size // (4 * n))  # float32s per rank
    part = torch.zeros(count, dtype=torch.float32, device=device)
    whole = torch.zeros(count * n, dtype=torch.float32, device=device)
    if name == "all_gather":
        return lambda: comm.allgather_(whole, part), 4 * count * n, (n - 1) / n
    return lambda: comm.reduce_scatter_(part, whole), 4 * count * n, (n - 1) / n


def sweep(
    comm: runtime.Comm,
    device: torch.device,
    name: str,
    planned: list[int],
    warmup: int,
    deadline: float | None,
    left_s: float,
) -> tuple[list[dict], float]:
    """One collective over the sizes while the budget allows (budget_allows; the first
    size while any is left): its results and rank 0's budget left after the last."""
    results: list[dict] = []
    for size in planned:
        if results and not budget_allows(results[-1], size, warmup, left_s):
            break
        if not results and left_s <= 0:
            break
        call, moved, bus = buffers(comm, device, name, size)
        iters = iterations(size)
        for _ in range(warmup):
            call()
        runtime.synchronize(device)
        comm.barrier()
        start, cpu_start = time.perf_counter(), time.process_time()
        for _ in range(iters):
            call()
        runtime.synchronize(device)
        # process_time counts every thread of this process: the Gloo and Horovod
        # threads that reduce and copy, whose CPU a training step loses on CPU nodes.
        mine = ((time.perf_counter() - start) / iters, (time.process_time() - cpu_start) / iters)
        # Each rank's budget left rides along; rank 0's decides for all (budget_allows).
        left = math.inf if deadline is None else deadline - time.time()
        everyone = comm.gather((*mine, left))
        left_s = everyone[0][2]
        seconds = max(t for t, _, _ in everyone)
        algbw = moved / seconds
        results.append(
            {
                "bytes": moved,
                "iters": iters,
                "time_s": seconds,
                "cpu_s": max(c for _, c, _ in everyone),
                "algbw": algbw,
                "busbw": algbw * bus,
            }
        )
    return results, left_s


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", default="ddp", choices=workload_options.BACKENDS)
    p.add_argument("--min-bytes", type=size_arg, default=size_arg("4K"))
    p.add_argument("--max-bytes", type=size_arg, default=size_arg("64M"))
    p.add_argument("--factor", type=int, default=4)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--threads", type=units.argtype(units.count, "threads"), default=0)
    p.add_argument(
        "--cpu-work-s",
        type=float,
        default=3.0,
        help="seconds of each phase of the CPU-work measurement (CPU only; 0: skip)",
    )
    p.add_argument(
        "--budget-s",
        type=float,
        default=0.0,
        help="seconds from the process start after which no new size starts (0: none)",
    )
    p.add_argument(
        "--collectives",
        type=collectives_arg,
        default=list(units.COLLECTIVES),
        help=f"comma-separated, all_reduce first (default: {','.join(units.COLLECTIVES)})",
    )
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    if args.factor < 2 or not 4 <= args.min_bytes <= args.max_bytes:
        p.error("need 4 <= --min-bytes <= --max-bytes and --factor >= 2")
    if not 0 <= args.budget_s < float("inf"):
        p.error("--budget-s must be a number of seconds, 0 or more")
    if args.backend == "horovod" and args.collectives != ["all_reduce"]:
        p.error("--collectives: Horovod probes all_reduce alone (FSDP runs under --backend ddp)")
    timeline = {"process_start": runtime.process_start_time()}
    device = runtime.pick_device(args.device)
    compute = None
    if device.type == "cpu" and args.cpu_work_s > 0:
        # The computation's threads (this one, torch's intra-op team) exist before the
        # backend starts; every thread born after is the backend's.
        runtime.set_threads(args.threads, runtime.local_size_hint())
        _pieces_per_s(_piece(), 0.2)
        compute = _threads()
    comm = runtime.connect(args.backend, device)
    threads = runtime.set_threads(args.threads, comm.local_size)
    timeline["initialised"] = time.time()
    n = comm.size
    deadline = timeline["process_start"] + args.budget_s if args.budget_s else None
    planned = sizes(args.min_bytes, args.max_bytes, args.factor)
    swept: dict[str, list[dict]] = {}
    left_s = math.inf  # rank 0's, after each size
    for name in args.collectives:
        swept[name], left_s = sweep(comm, device, name, planned, args.warmup, deadline, left_s)
    results = swept["all_reduce"]
    stopped_early = len(results) < len(planned)
    if comm.rank == 0:
        for name, done in swept.items():
            what = "" if name == "all_reduce" else f"{name} "
            if not done:
                print(
                    f"probe budget of {args.budget_s:g} s: {what}not probed, 0 of "
                    f"{len(planned)} sizes: the budget was spent",
                    file=sys.stderr,
                )
            elif len(done) < len(planned):
                print(
                    f"probe budget of {args.budget_s:g} s: {what}stopped after "
                    f"{done[-1]['bytes']} B, {len(done)} of {len(planned)} sizes (up to "
                    f"{planned[-1]} B asked); the next would not fit",
                    file=sys.stderr,
                )
    cpu_work = None
    if device.type == "cpu" and n > 1 and args.cpu_work_s > 0:
        cores = min(threads, runtime.usable_cores() / comm.local_size)
        cpu_work = measure_cpu_work(comm, results[-1], args.cpu_work_s, compute, cores)
    paths = runtime.collective_paths(comm, device)  # collectives: every rank takes part
    fingerprints = comm.gather(runtime.fingerprint(device, comm))
    timeline["end"] = time.time()
    if comm.rank == 0:
        source = nodemon.cpu_source()
        for name, done in swept.items():
            for r in done:
                print(
                    f"{name:>14} {r['bytes']:>12} B  {r['time_s'] * 1e6:>10.1f} us  "
                    f"busbw {r['busbw'] / 1e9:8.3f} GB/s",
                    file=sys.stderr,
                )
        runtime.emit(
            {
                "kind": "probe_workload",
                "backend": args.backend,
                "workers": n,
                "device": device.type,
                # The node's CPU quota (cores), against which cpu_s is charged, and the
                # CFS period it is counted over (None: no quota).
                "cpus": source["cpus"],
                "cpu_period_s": source["period_s"],
                "results": results,  # all-reduce, as before the other collectives
                **{name: swept[name] for name in EXTRA if name in swept},
                # What the backend ran for each collective (Gloo emulates reduce-scatter).
                "collectives": paths,
                "cpu_work": cpu_work,
                "budget_s": args.budget_s or None,
                "stopped_early": stopped_early,
                "timeline": timeline,
                "fingerprint": runtime.merge_fingerprints(fingerprints),
            },
            args.out,
        )
    # Every rank is past its last collective before any tears the group down.
    comm.barrier()
    comm.shutdown()
    return 0


def iterations(size: int) -> int:
    return max(3, min(MAX_ITERS, BYTES_PER_SIZE // size))


def budget_allows(last: dict, size: int, warmup: int, left_s: float) -> bool:
    """Whether `size` may start with left_s seconds of the budget left: none once it is
    spent, nor when the size, at the last size's time per byte (an all-reduce that is
    latency-bound takes less), would overrun it."""
    expected = last["time_s"] * size / last["bytes"] * (iterations(size) + warmup)
    return left_s > 0 and expected <= left_s


def _piece() -> Callable[[], object]:
    a = torch.rand(PIECE_DIM, PIECE_DIM)
    b = torch.rand(PIECE_DIM, PIECE_DIM)
    out = torch.empty(PIECE_DIM, PIECE_DIM)
    return lambda: torch.mm(a, b, out=out)


def _pieces_per_s(piece: Callable[[], object], seconds: float) -> float:
    done, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        piece()
        done += 1
    return done / elapsed


def _threads() -> set[int]:
    return {int(tid) for tid in os.listdir("/proc/self/task")}


def _cpu_ns(tids: set[int]) -> dict[int, int]:
    """Each thread's CPU time so far: the first field of its schedstat, nanoseconds on
    the CPU (the kernel's Documentation/scheduler/sched-stats.rst). A thread that has
    ended is left out."""
    out = {}
    for tid in tids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            out[tid] = int(Path(f"/proc/self/task/{tid}/schedstat").read_text().split()[0])
    return out


def _alone(
    piece: Callable[[], object], seconds: float, compute: set[int] | None
) -> tuple[float, float | None]:
    """The computation alone: pieces a second, and the cores the threads outside
    `compute` took meanwhile (None: not measured)."""
    if compute is None:
        return _pieces_per_s(piece, seconds), None
    start, wall = _cpu_ns(_threads() - compute), time.perf_counter()
    per_s = _pieces_per_s(piece, seconds)
    wall, end = time.perf_counter() - wall, _cpu_ns(_threads() - compute)
    # A thread born during the phase counts from 0; one that ended is lost (its last
    # milliseconds at most).
    return per_s, sum(ns - start.get(tid, 0) for tid, ns in end.items()) / 1e9 / wall


def measure_cpu_work(
    comm: runtime.Comm,
    largest: dict,
    seconds: float,
    compute: set[int] | None = None,
    cores: float = 1.0,
) -> dict:
    """Compute lost per byte all-reduced (see the module's docstring), every rank's.

    largest: the sweep's result at its largest size; enough of those all-reduces run
    to last about `seconds` (the same count on every rank: it comes from the slowest
    rank's time). Alone, beside, alone again; the faster alone phase is the
    computation's speed: whatever else the host does only slows it (on the local
    testbed's first probe after a deploy, the first alone phase ran at 0.35-0.76 of
    the second on all 4 ranks; on the next testbed's, within 4%).
    compute: the computation's threads, that existed before the backend started (None:
    the background share is not measured); the others' CPU time in the alone phases,
    over the `cores` this rank's computation has, is the backend's background share.
    Counted in CPU time, not as speed lost from before the backend started: on the
    shared local host a slow spell in either phase moved that comparison by up to
    -1.2, while CPU time is counted within the phase itself."""
    size, count = largest["bytes"], max(1, round(seconds / largest["time_s"]))
    tensor = torch.zeros(size // 4, dtype=torch.float32)
    piece = _piece()
    _pieces_per_s(piece, 0.5)  # warm-up: the first pieces ran at half speed when measured
    comm.barrier()
    alone = [_alone(piece, seconds / 2, compute)]
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
    alone.append(_alone(piece, seconds / 2, compute))
    fastest = max(per_s for per_s, _ in alone)
    lost = wall - done / fastest  # may come out below 0 by noise: kept as measured
    taken = [cpus for _, cpus in alone if cpus is not None]
    background = sum(taken) / len(taken) / cores if taken else None
    everyone = comm.gather(
        {
            "wall_s": wall,
            "pieces": done,
            "lost_s": lost,
            "alone_per_s": [per_s for per_s, _ in alone],
            "background_cpus": taken,
            "cores": cores,
            "background": background,
        }
    )
    shares = [r["background"] for r in everyone if r["background"] is not None]
    lost_per_byte = [r["lost_s"] / (count * size) for r in everyone]
    return {
        "bytes": size,
        "allreduces": count,
        "per_rank": everyone,
        # The ranks' mean: each rank's figure carries the core's noise; the mean is the
        # estimate of what a step loses per byte.
        "lost_s_per_byte": sum(lost_per_byte) / len(lost_per_byte),
        # The share of the computation's cores the running backend takes between
        # all-reduces, the ranks' mean (None where no rank measured it).
        "background_share": sum(shares) / len(shares) if shares else None,
    }


if __name__ == "__main__":
    runtime.leave(main())
