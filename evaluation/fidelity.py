"""Fidelity: the harness's per-worker images/s with one worker vs a plain loop.

    python evaluation/fidelity.py [--rounds 3] [--max-rounds 20] \
        [--model resnet18 --image-size 64]
    python evaluation/fidelity.py --device cuda --amp on --model resnet50 \
        --image-size 224 --batch 96 --threads 8       (on one GPU)

Same model, batch, input size, thread count and step count on this machine;
rounds interleave the variants in random order so that drift in the
machine's load hits all of them. A ratio within 0.97-1.03 means the harness
(launcher, process group, DDP/Horovod wrapper with one worker, barriers,
synchronisation) neither costs nor flatters throughput. With --max-rounds, rounds
go on until the 95% interval of every backend's paired ratio lies wholly inside or
wholly outside those limits, and the table says how many rounds that took.
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import subprocess
import sys
from pathlib import Path

from cli import REPO, add_loop_arguments, hpcbench, median, records

sys.path.insert(0, str(REPO))
from hpcbench.measure import analysis  # noqa: E402  (run as a script from evaluation/)

HERE = Path(__file__).resolve().parent


def workload(args: argparse.Namespace) -> list[str]:
    """The same model, input, batch, steps and threads for both variants."""
    return [
        "--model",
        args.model,
        "--image-size",
        str(args.image_size),
        "--batch",
        str(args.batch),
        "--warmup",
        str(args.warmup),
        "--windows",
        str(args.windows),
        "--steps",
        str(args.steps),
        "--threads",
        str(args.threads),
        "--step",
        args.step,
    ]


def plain(args: argparse.Namespace) -> float:
    proc = subprocess.run(
        [
            sys.executable,
            str(HERE / "plain_loop.py"),
            *workload(args),
            "--device",
            args.device,
            "--amp",
            args.amp,
            # The workload's own rule (bench/train.py --channels-last auto): NHWC with AMP on CUDA.
            "--channels-last",
            "on" if args.device == "cuda" and args.amp == "on" else "off",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
        # The harness starts ranks in their own session; with sched_autogroup a new session
        # is its own scheduling group, so the reference must get the same treatment.
        start_new_session=True,
    )
    return json.loads(proc.stdout.splitlines()[-1])["images_per_sec"]


def harness(args: argparse.Namespace, backend: str, out: Path) -> float:
    hpcbench(
        "scale",
        "--env",
        "localhost",
        "--nodes",
        "1",
        "--backend",
        backend,
        *workload(args),
        "--device",
        args.device,
        "--amp",
        args.amp,
        "--repeats",
        "1",
        "--no-probe",
        "--out",
        str(out),
    )
    [run] = records(out)
    return analysis.run_stats(run)["throughput_per_worker"]  # the store keeps raw windows


# The harness neither costs nor flatters throughput when its ratio to the plain loop lies
# within these limits.
FIDELITY = (0.97, 1.03)


def paired(rates: dict[str, list[float]], variant: str) -> list[float]:
    """Each round's images/s of the variant over the plain loop's in the same round."""
    return [h / q for h, q in zip(rates[variant], rates["plain"], strict=True)]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="rounds at least")
    p.add_argument(
        "--max-rounds",
        type=int,
        default=0,
        help="more rounds, up to this many, until every backend's 95%% interval of the "
        "paired ratio lies wholly inside or wholly outside 0.97-1.03 (0: --rounds only)",
    )
    p.add_argument("--backends", default="ddp,horovod")
    add_loop_arguments(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(REPO / "results" / "bench-fidelity"))
    args = p.parse_args()
    if args.rounds < 1 or args.max_rounds < 0:
        p.error("--rounds must be at least 1 and --max-rounds at least 0")
    out = Path(args.out)
    variants = ["plain", *args.backends.split(",")]
    backends = variants[1:]
    rates: dict[str, list[float]] = {v: [] for v in variants}
    rng = random.Random(args.seed)
    last = max(args.rounds, args.max_rounds)
    verdicts: dict[str, str | None] = {}
    for round_ in range(last):
        order = variants[:]
        rng.shuffle(order)
        for v in order:
            directory = out / f"round{round_}-{v}"
            if (directory / "results.jsonl").exists():
                (directory / "results.jsonl").unlink()
            rate = plain(args) if v == "plain" else harness(args, v, directory)
            rates[v].append(rate)
            print(
                f"round {round_ + 1} (of {args.rounds}-{last}) {v}: {rate:.2f} images/s", flush=True
            )
        # Paired: each round's variants ran back to back, so a per-round ratio cancels
        # load drift between rounds that the ratio of medians would absorb.
        verdicts = {v: analysis.settled(paired(rates, v), *FIDELITY) for v in backends}
        if round_ + 1 >= args.rounds and all(verdicts.values()):
            break
    rounds = len(rates["plain"])
    stopped = (
        "every backend's interval settled"
        if all(verdicts.values())
        else "an interval still straddles a limit: more rounds (--max-rounds) would say"
    )
    base = median(rates["plain"])
    summary = {
        "config": vars(args),
        "images_per_sec": rates,
        "rounds": rounds,
        "median": {},
        "ratio": {},
        "paired_ratio": {v: median(paired(rates, v)) for v in variants},
        "paired_ratio_mean_ci95": {v: analysis.mean_ci95(paired(rates, v)) for v in variants},
        "verdict": verdicts,
    }
    print(
        f"\n{args.model} {args.image_size} px batch {args.batch}, {args.threads} threads, "
        f"{rounds} rounds ({stopped})"
    )
    print(f"command: {shlex.join(['python', 'evaluation/fidelity.py', *sys.argv[1:]])}")
    print(
        "| variant | images/s (median) | rounds | ratio of medians | paired ratio: median "
        "| paired ratio: mean +- 95% CI | within 0.97-1.03 |"
    )
    print("|---|---|---|---|---|---|---|")
    for v in variants:
        m = median(rates[v])
        ratio = m / base
        summary["median"][v], summary["ratio"][v] = m, ratio
        mean, half = summary["paired_ratio_mean_ci95"][v]
        within = {"inside": "yes", "outside": "NO"}.get(verdicts.get(v) or "", "undecided")
        print(
            f"| {v} | {m:.2f} | {', '.join(f'{x:.1f}' for x in rates[v])} | {ratio:.3f} "
            f"| {summary['paired_ratio'][v]:.3f} | {mean:.3f} +- {half:.3f} "
            f"| {within if v != 'plain' else '-'} |"
        )
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
