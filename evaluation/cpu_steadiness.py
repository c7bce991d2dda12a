"""How steady this machine's cores are: the noise floor under every CPU figure.

    python evaluation/cpu_steadiness.py [--seconds 240] [--cpus 0,1]

A fixed amount of pure-Python work, one process pinned to each CPU at once (as
a campaign's one-core nodes are), timed chunk by chunk. The chunks are then
grouped into blocks of 5, 15, 30 and 60 s of wall time and the coefficient of
variation of the blocks' speeds is printed per block length: a run whose
measured windows add up to T seconds cannot be steadier than the block of T
seconds here. On a quiet dedicated machine every line is near 0; on a shared
VM, cores change speed in spells of seconds to minutes. Run it with nothing
else on the machine; the speed is relative to the fastest chunk seen.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time

BLOCKS_S = (5, 15, 30, 60)
CHUNK = 500_000  # iterations of the loop below: about 0.06 s on the development machine


def chunk_times(cpu: int, seconds: float, out: mp.Queue) -> None:
    os.sched_setaffinity(0, {cpu})
    times = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        start, acc = time.perf_counter(), 0
        for i in range(CHUNK):
            acc += i * i
        times.append(time.perf_counter() - start)
    out.put((cpu, times))


def block_speeds(times: list[float], block_s: float) -> list[float]:
    """Chunks per second in consecutive blocks of at least block_s seconds."""
    speeds, count, spent = [], 0, 0.0
    for t in times:
        count, spent = count + 1, spent + t
        if spent >= block_s:
            speeds.append(count / spent)
            count, spent = 0, 0.0
    return speeds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=240.0, help="per CPU (default 240)")
    parser.add_argument(
        "--cpus",
        default=",".join(map(str, sorted(os.sched_getaffinity(0)))),
        help="CPUs to load at once (default: every CPU this process may use)",
    )
    args = parser.parse_args()
    cpus = [int(c) for c in args.cpus.split(",") if c.strip()]
    queue: mp.Queue = mp.Queue()
    procs = [mp.Process(target=chunk_times, args=(c, args.seconds, queue)) for c in cpus]
    for p in procs:
        p.start()
    results = dict(queue.get() for _ in procs)
    for p in procs:
        p.join()
    print(
        f"fixed work on CPUs {args.cpus} at once for {args.seconds:.0f} s; "
        "spread of the speed between blocks of wall time"
    )
    header = " ".join(f"{f'cv {b}s (n)':>13}" for b in BLOCKS_S)
    print(f"{'cpu':>4} {'slowest/fastest':>16} {header}")
    for cpu in cpus:
        times = results[cpu]
        cells = []
        for b in BLOCKS_S:
            speeds = block_speeds(times, b)
            cv = statistics.stdev(speeds) / statistics.fmean(speeds) if len(speeds) > 1 else None
            cells.append(f"{'-' if cv is None else f'{cv:.3f}'} ({len(speeds)})".rjust(13))
        print(f"{cpu:>4} {min(times) / max(times):>16.2f} " + " ".join(cells))
    print(
        f"reproduce: python evaluation/cpu_steadiness.py --seconds {args.seconds:.0f} "
        f"--cpus {args.cpus}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
