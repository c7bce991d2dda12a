"""Measured scaling efficiency vs the predicted band, at several link rates.

    python evaluation/testbed_links.py --env local --rates 1gbit,100mbit \
        --reshape "make deploy ENV=local NODES=4 LINK_RATE={rate}"

Needs a deployed testbed (4 nodes by default). For each rate it reshapes the
links (the --reshape command, {rate} filled in; --reshape "" keeps the
testbed as it is and only labels the run), checks that the inventory now
says that rate, runs the all-reduce probe and the sweep into OUT/<rate>, and
prints measured E(N) with its CI beside the ring all-reduce band, whether
each point falls inside it, and the probe's bus bandwidth against the nominal
rate. It ends with the report of each rate and a comparison of the first two.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from pathlib import Path

from cli import REPO, hpcbench

sys.path.insert(0, str(REPO))
from hpcbench.launchers.specs import TargetSpec  # noqa: E402
from hpcbench.measure import analysis  # noqa: E402  (run as a script from evaluation/)
from hpcbench.measure.store import Store  # noqa: E402
from hpcbench.performance import allreduce_model  # noqa: E402  (run as a script from evaluation/)
from hpcbench.testbeds import kinds  # noqa: E402  (run as a script from evaluation/)

CLOSE = analysis.POINT_CLOSE


def table(rate: str, out: Path) -> list[str]:
    store = Store(out)
    summaries = analysis.summarise(store.runs(), store.probes())
    nominal = allreduce_model.nominal_bytes_per_s(rate)
    lines = []
    for s in summaries:
        if s.workers == 1:
            continue
        share = f"{s.busbw / nominal:.0%}" if s.busbw and nominal else "-"
        band = (
            f"{s.predicted_efficiency_low:.3f}-{s.predicted_efficiency_high:.3f}"
            if s.predicted_efficiency_low is not None
            else "-"
        )
        e = f"{s.efficiency:.3f} ± {s.efficiency_ci95 or 0:.3f}" if s.efficiency else "-"
        busbw = f"{s.busbw / 1e6:.1f}" if s.busbw else "-"
        inside = {True: "yes", False: "NO", None: "-"}[analysis.inside_band(s)]
        point, close = "-", "-"
        if s.predicted_efficiency is not None and s.efficiency is not None:
            point = f"{s.predicted_efficiency:.3f}"
            close = "yes" if abs(s.efficiency - s.predicted_efficiency) <= CLOSE else "NO"
        lines.append(
            f"| {rate} | {s.model} | {s.batch} | {s.nodes} | {s.workers} | {e} | "
            f"{band} | {inside} | {point} | {close} | {busbw} | {share} |"
        )
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env", default="local")
    p.add_argument("--rates", default="1gbit,100mbit")
    p.add_argument(
        "--reshape",
        default="make deploy ENV={env} NODES=4 LINK_RATE={rate}",
        help="shell command that sets the rate; '' to leave the testbed as it is",
    )
    p.add_argument("--nodes", default="1-4")
    p.add_argument("--batch", default="16,32")
    p.add_argument("--model", default="resnet18")
    p.add_argument("--image-size", default="64")
    p.add_argument("--backend", default="horovod")
    p.add_argument("--repeats", default="3")
    p.add_argument("--warmup", default="5")
    p.add_argument("--windows", default="5")
    p.add_argument("--steps", default="10")
    p.add_argument("--min-window-s", default="0", help="passed to scale (0: steps only)")
    p.add_argument("--out", default=str(REPO / "results" / "bench-links"))
    args = p.parse_args()
    out = Path(args.out)
    rates = args.rates.split(",")
    # Rates and env reach a command line: refuse anything but a rate and an env name first,
    # and run the reshape without a shell.
    bad = [r for r in rates if allreduce_model.nominal_bytes_per_s(r) is None]
    if bad or not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,62}", args.env):
        p.error(
            f"--rates {bad[0]!r}: write rates like 1gbit,100mbit"
            if bad
            else f"--env {args.env!r}: not an environment name"
        )
    rows = []
    for rate in rates:
        if args.reshape:
            command = [t.format(env=args.env, rate=rate) for t in shlex.split(args.reshape)]
            print(f"$ {shlex.join(command)}", flush=True)
            subprocess.run(command, cwd=REPO, check=True, timeout=3600)
            spec = TargetSpec(args.env, (1,))
            shaped = kinds.for_env(args.env).testbed(spec).link_rate
            if shaped != rate:
                raise SystemExit(
                    f"the inventory says link_rate {shaped!r} after reshaping, not {rate!r}"
                )
        directory = out / rate
        proc = hpcbench(
            "scale",
            "--env",
            args.env,
            "--nodes",
            args.nodes,
            "--batch",
            args.batch,
            "--model",
            args.model,
            "--image-size",
            args.image_size,
            "--backend",
            args.backend,
            "--repeats",
            args.repeats,
            "--warmup",
            args.warmup,
            "--windows",
            args.windows,
            "--steps",
            args.steps,
            "--out",
            str(directory),
            "--resume",
            *(["--min-window-s", args.min_window_s] if args.min_window_s != "0" else []),
            check=False,
        )
        print(proc.stderr[-2000:], file=sys.stderr)
        hpcbench("report", "--out", str(directory))
        rows += table(rate, directory)
    print(
        "| link | model | batch | nodes | workers | measured E ± CI95 | predicted band | "
        f"inside | point | within {CLOSE} | busbw MB/s | of nominal |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    for column, what in (
        (8, "inside the predicted band (band widened by E's CI95)"),
        (10, f"within {CLOSE} of the point prediction"),
    ):
        cells = [r.split("|")[column].strip() for r in rows]
        print(f"{cells.count('yes')} of {sum(c in ('yes', 'NO') for c in cells)} points {what}")
    if len(rates) >= 2:
        compared = hpcbench("compare", str(out / rates[0]), str(out / rates[1]))
        (out / "compare.md").write_text(compared.stdout)
        print(f"comparison in {out / 'compare.md'}; reports in {out}/<rate>/report.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
