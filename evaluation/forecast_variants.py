"""The forecast before booking, scored on machines it was not tuned on.

    python evaluation/forecast_variants.py [--variants NAME,...] [--workloads cnn,lm]
    make bench-forecast [VARIANTS=...] [WORKLOADS=...]

Each variant is the local testbed made into another machine: a CPU quota per node
below or at a whole core, the nodes' cores pinned or shared, a bounded background load
on the host. For each variant and workload (the CNN of campaigns/local.yaml, the
transformer of campaigns/local-lm.yaml under DDP and FSDP2) a small campaign of two
testbeds, 200 Mbit/s then 1 Gbit/s, runs through `hpcbench campaign run`, so that
every cell is forecast before anything is booked (the plan), again just before its
testbed is (the re-forecast: the second testbed's takes the first one's measurements)
and then measured. Each cell of two or more workers is scored: the plan's and the
re-forecast's E against the measured E, and whether the measured E lies inside the
band printed before booking.

Printed: a row per cell, then per variant and over all of them the share of plans
within PLAN_WITHIN and of re-forecasts within REFORECAST_WITHIN of the measured E,
the share of errors on the optimistic side, and the share inside the band, each with
its 95% interval (Wilson's, over the cells). Each cell's score is appended to
OUT/scores.jsonl, one JSON line written whole, with the variant and the commit.

The campaigns' files are written to OUT/<variant>-<workload>.yaml and their results
go beside them; `--resume` carries on a campaign stopped half way, `--plan` prints the
plans alone (nothing is deployed), `--score-only` scores the campaigns run so far,
`--replay` scores them with every plan and re-forecast made again by this checkout from
the records each had when it was made (the runs before booking, the earlier testbeds'
stores): a change to the forecast measured against runs already made. A
campaign took 12-18 minutes on a 2-core machine (docs/benchmarks.md); all eight take
about two and a half hours.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import yaml
from cli import REPO

sys.path.insert(0, str(REPO))
from hpcbench.campaign import campaign_file, comparison, forecast, scoring  # noqa: E402
from hpcbench.campaign.datatypes import Campaign  # noqa: E402
from hpcbench.campaign.journal import Journal  # noqa: E402
from hpcbench.core import files  # noqa: E402
from hpcbench.measure import fingerprint  # noqa: E402

PLAN_WITHIN = 0.05  # the targets the forecast is held to: the plan within 0.05,
REFORECAST_WITHIN = 0.03  # the re-forecast within 0.03
RATES = ("200mbit", "1gbit")


@dataclass(frozen=True)
class Variant:
    """A machine the local testbed stands in for: each node's CPU quota, whether nodes
    get cores of their own (modules/docker_testbed pins whole-core quotas where every
    node fits; host_cpus 0 turns that off), and the share of one core a host process
    keeps busy all through the campaign (its probe and baseline included)."""

    cpus: float
    pinned: bool
    load: float
    said: str


VARIANTS = {
    "pinned": Variant(1.0, True, 0.0, "a core a node, each its own (the campaigns' machine)"),
    "shared": Variant(1.0, False, 0.0, "a core's quota a node, on any core"),
    "half": Variant(0.5, False, 0.0, "half a core's quota a node"),
    "loaded": Variant(1.0, True, 0.5, "a core a node, the host busy half a core beside"),
}

# The workloads: the embedded campaigns' sweeps and first testbed's planning figures
# (expect:, hardware:), the sweep shortened to a benchmark's length.
WORKLOADS = {"cnn": REPO / "campaigns" / "local.yaml", "lm": REPO / "campaigns" / "local-lm.yaml"}
SHORTER = {
    "repeats": 2,
    "max_repeats": 4,
    "budget": "5m",
    "windows": 3,
    "min_window_s": 10,
}
PER_S = ("images_per_s", "tokens_per_s")  # expect:'s one-worker figures, per core here


def campaign_text(variant: str, workload: str, out: Path, index: int) -> str:
    """The campaign file of one variant and workload: two testbeds, one per rate, each
    with a name, subnet and ports of its own (index keeps the files apart)."""
    v = VARIANTS[variant]
    shipped = yaml.safe_load(WORKLOADS[workload].read_text())
    first = shipped["testbeds"][0]
    expect = {k: round(val * v.cpus) if k in PER_S else val for k, val in first["expect"].items()}
    testbeds = []
    for r, rate in enumerate(RATES):
        n = 2 * index + r
        settings: dict[str, object] = {
            "name": f"hpcbench-fv{n}",
            "subnet": f"172.30.{100 + n}.0/24",
            "ssh_port_base": 24000 + 100 * n,
            "jupyter_port": 29100 + n,
            "node_count": 2,
            "cpus_per_node": v.cpus,
            "link_rate": rate,
        }
        if not v.pinned:
            settings["host_cpus"] = 0
        testbeds.append(
            {
                "name": f"{variant}-{rate}",
                "env": "local",
                "title": f"{v.said}, {rate}",
                "settings": settings,
                "expect": expect,
                "hardware": first["hardware"],
            }
        )
    body = {
        "name": f"fv-{variant}-{workload}",
        "description": f"evaluation/forecast_variants.py: {v.said}; {workload}",
        "out": str(out / f"{variant}-{workload}"),
        "sweep": shipped["sweep"] | SHORTER,
        "testbeds": testbeds,
    }
    return json.dumps(body, indent=1) + "\n"  # JSON is YAML


# ------------------------------------------------------------------ the background load
LOAD_PERIOD_S = 0.1


def busy(share: float, until: float) -> None:
    """Keep one core busy `share` of every LOAD_PERIOD_S until the monotonic time
    `until` (the load's bound), then return."""
    while time.monotonic() < until:
        start = time.monotonic()
        while time.monotonic() - start < share * LOAD_PERIOD_S:
            pass
        time.sleep(max(0.0, (1 - share) * LOAD_PERIOD_S))


@contextlib.contextmanager
def background_load(share: float, most_s: float) -> Iterator[None]:
    """A host process busy `share` of a core while the block runs, for at most most_s."""
    if share <= 0:
        yield
        return
    code = (
        "import sys, time; sys.path.insert(0, sys.argv[1]); import forecast_variants as f; "
        "f.busy(float(sys.argv[2]), time.monotonic() + float(sys.argv[3]))"
    )
    here = str(Path(__file__).resolve().parent)
    proc = subprocess.Popen([sys.executable, "-c", code, here, str(share), str(most_s)])
    try:
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ------------------------------------------------------------------ scoring
@dataclass(frozen=True)
class Score:
    """One cell of two or more workers: its measured E (with its 95% half-width), the
    plan's E and band, and the re-forecast's E (None where a forecast was not made)."""

    variant: str
    workload: str
    testbed: str
    parallel: str
    workers: int
    measured: float
    measured_ci95: float
    plan: float | None
    plan_low: float | None
    plan_high: float | None
    reforecast: float | None

    @property
    def plan_error(self) -> float | None:
        return None if self.plan is None else self.plan - self.measured

    @property
    def reforecast_error(self) -> float | None:
        return None if self.reforecast is None else self.reforecast - self.measured

    @property
    def inside(self) -> bool | None:
        """Whether the measured E lies inside the band printed before booking."""
        if self.plan_low is None or self.plan_high is None:
            return None
        return self.plan_low <= self.measured <= self.plan_high


def scores(variant: str, workload: str, path: Path, replay: bool = False) -> list[Score]:
    """The scored cells of one variant's finished campaign, from its stores and journal
    (as `campaign report` reads them); replay: each forecast made again by this
    checkout from the records it had (replayed)."""
    campaign = campaign_file.load(path)
    parallel_of = {
        c.id: part.workload.parallel
        for tb in campaign.testbeds
        for part in tb.parts
        for c in part.cells
    }
    forecasts = scoring.load(Journal(campaign.out, campaign.name), parallel_of)
    again = replayed(campaign) if replay else {}
    out = []
    for r in comparison.load(campaign):
        for s in r.summaries:
            if s.workers < 2 or s.efficiency is None:
                continue
            key = (r.tb.name, s.parallel or "ddp", s.batch, s.workers, s.gpus_per_node)
            if replay:
                plan = again.get((*key, "plan")) or {}
                booking = _number((again.get((*key, "booking")) or {}).get("efficiency"))
            else:
                plan = forecasts.of(r.tb.name, s, "plan") or {}
                booking = forecasts.efficiency(r.tb.name, s, "booking")
            out.append(
                Score(
                    variant,
                    workload,
                    r.tb.name,
                    s.parallel or "ddp",
                    s.workers,
                    s.efficiency,
                    s.efficiency_ci95 or 0.0,
                    _number(plan.get("efficiency")),
                    _number(plan.get("efficiency_low")),
                    _number(plan.get("efficiency_high")),
                    booking,
                )
            )
    return out


def replayed(campaign: Campaign) -> dict[tuple[object, ...], dict[str, Any]]:
    """Every cell's plan and re-forecast as this checkout makes them from what each had:
    the plan the runs before booking alone, the re-forecast also the earlier testbeds'
    stores (a testbed's own none: it was not booked yet). Keyed as scoring.Forecasts,
    with the forecast's name last."""
    out: dict[tuple[object, ...], dict[str, Any]] = {}
    for tb in campaign.testbeds:
        earlier = [t for t in campaign.testbeds if t.index < tb.index]
        known = forecast.gather(campaign, [*earlier, tb])
        none: dict[str, list[dict[str, Any]]] = {name: [] for name in known.runs}
        made = {
            "plan": (replace(known, runs=dict(none), probes=dict(none)), []),
            "booking": (
                replace(
                    known, runs={**known.runs, tb.name: []}, probes={**known.probes, tb.name: []}
                ),
                earlier,
            ),
        }
        parallel = {c.id: part.workload.parallel or "ddp" for part in tb.parts for c in part.cells}
        for name, (had, before) in made.items():
            for f in forecast.forecast_from(had, campaign, tb, before):
                c = f.cell
                key = (tb.name, parallel[c.id], c.batch, c.workers, c.gpus_per_node, name)
                out[key] = f.record()
    return out


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% interval of a share of hits in n (Wilson's score interval)."""
    if n == 0:
        return 0.0, 1.0
    p = hits / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, mid - half), min(1.0, mid + half)


@dataclass(frozen=True)
class Share:
    """hits of n, with its 95% interval."""

    hits: int
    n: int

    def __str__(self) -> str:
        if not self.n:
            return "-"
        low, high = wilson(self.hits, self.n)
        return f"{self.hits}/{self.n} = {self.hits / self.n:.0%} ({low:.0%}-{high:.0%})"


def summary(cells: Sequence[Score]) -> dict[str, Share]:
    """The shares the variants are judged by: plans within PLAN_WITHIN, re-forecasts
    within REFORECAST_WITHIN, errors above 0 (optimistic; of those not 0), measured E
    inside the band printed before booking."""
    plans = [e for e in (c.plan_error for c in cells) if e is not None]
    again = [e for e in (c.reforecast_error for c in cells) if e is not None]
    signed = [e for e in plans + again if e != 0]
    inside = [c.inside for c in cells if c.inside is not None]
    return {
        f"plan within {PLAN_WITHIN}": Share(sum(abs(e) <= PLAN_WITHIN for e in plans), len(plans)),
        f"re-forecast within {REFORECAST_WITHIN}": Share(
            sum(abs(e) <= REFORECAST_WITHIN for e in again), len(again)
        ),
        "optimistic (forecast above)": Share(sum(e > 0 for e in signed), len(signed)),
        "inside the plan's band": Share(sum(inside), len(inside)),
    }


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.3f}"


def table(cells: Sequence[Score]) -> list[str]:
    lines = [
        "| variant | workload | testbed | parallel | workers | measured E | plan (band) "
        "| plan - E | re-forecast - E | inside |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        band = "-" if c.plan_low is None else f"{c.plan_low:.2f}-{c.plan_high or 1:.2f}"
        plan = "-" if c.plan is None else f"{c.plan:.3f}"
        inside = {True: "yes", False: "NO", None: "-"}[c.inside]
        lines.append(
            f"| {c.variant} | {c.workload} | {c.testbed} | {c.parallel} | {c.workers} "
            f"| {c.measured:.3f} ± {c.measured_ci95:.3f} | {plan} ({band}) "
            f"| {_signed(c.plan_error)} | {_signed(c.reforecast_error)} | {inside} |"
        )
    return lines


def summary_lines(cells: Sequence[Score]) -> list[str]:
    lines = []
    groups = {"all": list(cells)} | {v: [c for c in cells if c.variant == v] for v in VARIANTS}
    for name, group in groups.items():
        if group:
            said = "; ".join(f"{k} {v}" for k, v in summary(group).items())
            lines.append(f"{name} ({len(group)} cells): {said}")
    return lines


def append_scores(path: Path, cells: Sequence[Score]) -> None:
    """Each cell's score as one JSON line, the file rewritten whole (atomic)."""
    old = path.read_text() if path.exists() else ""
    commit = fingerprint.git_commit() or "unknown"
    new = "".join(
        json.dumps({**asdict(c), "commit": commit, "at": time.strftime("%Y-%m-%dT%H:%M:%S")}) + "\n"
        for c in cells
    )
    files.write_atomic(path, old + new)


class Refused(Exception):
    """Bad input: one line naming what to fix (exit status 2)."""


def _names(text: str, known: Sequence[str], what: str) -> list[str]:
    names = [n for n in text.split(",") if n]
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise Refused(f"--{what}: {', '.join(bad) or '(none)'}: give some of {', '.join(known)}")
    return names


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--out", type=Path, default=REPO / "results" / "forecast-variants")
    p.add_argument("--resume", action="store_true", help="carry on stopped campaigns")
    p.add_argument("--plan", action="store_true", help="print the plans; deploy nothing")
    p.add_argument("--score-only", action="store_true", help="score finished campaigns")
    p.add_argument(
        "--replay",
        action="store_true",
        help="score finished campaigns, each forecast made again by this checkout",
    )
    args = p.parse_args(argv)
    args.score_only = args.score_only or args.replay
    try:
        variants = _names(args.variants, list(VARIANTS), "variants")
        workloads = _names(args.workloads, list(WORKLOADS), "workloads")
    except Refused as e:
        print(f"forecast_variants: {e}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    every = [(v, w) for v in VARIANTS for w in WORKLOADS]
    cells: list[Score] = []
    for variant in variants:
        for workload in workloads:
            path = args.out / f"{variant}-{workload}.yaml"
            files.write_atomic(
                path, campaign_text(variant, workload, args.out, every.index((variant, workload)))
            )
            if args.plan:
                plan = [sys.executable, "-m", "hpcbench", "campaign", "plan", str(path)]
                if rc := subprocess.run(plan, cwd=REPO).returncode:
                    return rc
                continue
            if not args.score_only:
                print(f"== {variant} x {workload}: {VARIANTS[variant].said}", flush=True)
                run = [sys.executable, "-m", "hpcbench", "campaign", "run", str(path)]
                with background_load(VARIANTS[variant].load, most_s=3 * 3600):
                    rc = subprocess.run(
                        run + (["--resume"] if args.resume else []), cwd=REPO
                    ).returncode
                if rc:
                    print(
                        f"{path}: campaign run stopped ({rc}); --resume carries it on",
                        file=sys.stderr,
                    )
                    return rc
            if args.score_only and not (args.out / f"{variant}-{workload}").is_dir():
                print(f"{variant} x {workload}: not run", file=sys.stderr)
                continue
            found = scores(variant, workload, path, args.replay)
            if not args.score_only:
                append_scores(args.out / "scores.jsonl", found)
            cells += found
    if cells:
        print("\n".join(table(cells) + [""] + summary_lines(cells)))
        picked = f"--variants {','.join(variants)} --workloads {','.join(workloads)}"
        if args.replay:
            at = fingerprint.git_commit() or "this checkout"
            print(f"\nforecasts replayed at {at} from the records")
            picked += " --replay"
        print(f"\nreproduce: python evaluation/forecast_variants.py {picked}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
