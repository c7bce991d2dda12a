"""`hpcbench predict` against published scaling results, scored on sources it never saw.

    python evaluation/published.py [--markdown]
    python evaluation/published.py --fit     # refit predict's defaults on every row
    python evaluation/published.py --unseen evaluation/unseen.json   # rows no fit saw
    python evaluation/published.py --ceiling [--unseen FILE]   # what no default beats

Each row of evaluation/published.json is a published multi-node run (model,
per-GPU batch, GPUs per node, workers, network, framework, single-GPU and
N-GPU images/s) with its source and the quoted lines its numbers come from.
A transformer's row (one with a seq_len) gives tokens/s per GPU at N GPUs and
at the source's own base run (one node, or the fewest GPUs the source ran it
on), and is predicted under FSDP (hpcbench.performance.sharded_model) and rescaled to
that base. The CNN and the transformer rows are scored apart, each summary
over its own rows.

Leave one source out: for each source (a source's `group` joins sources of
one team and cluster), the constants predict fits (link efficiency per
transport, interference) are fitted on the other sources only, and the
held-out source's rows are predicted with them. Where a source gives one full
node's throughput, the row's point and band are rescaled to it
(scaling_model.rescaled_to_node): that measurement is an input, like the
single-GPU rate. The summary gives, over every row so predicted, the median
|point - published| and the bias (mean of point - published, > 0 where the model
is optimistic), each with its 95% interval (source groups and their rows
resampled), and the share of rows whose published E lies inside the band,
with the same per source, and the same figures for predict's defaults (fitted
on every row: in sample). --fit fits those defaults. stdout lists, per row,
the `hpcbench predict` command that gives its point with the defaults (one
node's workers too where the row is rescaled to its node).
Nothing here is measured on this machine.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import random
import shlex
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from cli import REPO

sys.path.insert(0, str(REPO))
from hpcbench import cli  # noqa: E402  (run as a script from evaluation/)
from hpcbench.performance import scaling_model  # noqa: E402  (run as a script from evaluation/)
from hpcbench.reports import predict  # noqa: E402  (run as a script from evaluation/)

DATA = Path(__file__).resolve().parent / "published.json"


def load(path: Path = DATA) -> dict:
    return json.loads(path.read_text())


def group_of(data: dict, row: dict) -> str:
    """The source group a row is held out with."""
    return data["sources"][row["source"]].get("group", row["source"])


def transformer(row: dict) -> bool:
    """A transformer's row: tokens/s, predicted under FSDP."""
    return row.get("seq_len") is not None


def measured_e(row: dict) -> float:
    """The published E(N) = X(N) / (N X(1)), or the efficiency the source states; a
    transformer's relative to its source's base run (X(1) its per-GPU rate)."""
    if row.get("efficiency") is not None:
        return row["efficiency"]
    if transformer(row):
        return row["multi_tps_per_worker"] / row["single_tps"]
    if row.get("multi_ips_per_worker") is not None:
        return row["multi_ips_per_worker"] / row["single_ips"]
    return row["multi_ips"] / (row["workers"] * row["single_ips"])


def node_workers(row: dict) -> int:
    """The workers of the row's one-node figure: the whole node unless the source
    measured fewer of its GPUs (node_workers); a transformer's base run."""
    return int(row.get("node_workers") or row["gpus_per_node"])


def node_efficiency(row: dict) -> float | None:
    """One node's measured E(g) = X(g) / (g X(1)), where the source gives it."""
    if row.get("node_tps_per_worker") is not None:
        return row["node_tps_per_worker"] / row["single_tps"]
    if row.get("node_ips_per_worker") is not None:
        return row["node_ips_per_worker"] / row["single_ips"]
    if row.get("node_ips") is not None and node_workers(row) > 1:
        return row["node_ips"] / (node_workers(row) * row["single_ips"])
    return None


def node_based(row: dict) -> bool:
    """Whether the row's prediction is rescaled to a measured node."""
    return node_efficiency(row) is not None and 1 < node_workers(row) < row["workers"]


def plain_argv(row: dict) -> list[str]:
    """The `hpcbench predict` command line a user would give for a CNN row: the model,
    the batch, the workers, the GPUs per node, one worker's images/s, the link's rate and
    transport and the framework; nothing of its set-up (the framework's settings and
    NCCL's version, the interconnect inside a node, a measured node)."""
    return [
        "predict",
        "--model",
        row["model"],
        "--image-size",
        str(row["image_size"]),
        "--batch",
        str(row["batch"]),
        "--workers",
        str(row["workers"]),
        "--gpus-per-node",
        str(row["gpus_per_node"]),
        "--single-worker-ips",
        str(row["single_ips"]),
        "--link",
        row["link"],
        "--transport",
        row["transport"],
        "--backend",
        row.get("backend", "horovod"),
        "--json",
    ]


def predict_argv(row: dict, interference: float | None = None) -> list[str]:
    """The `hpcbench predict` command line for one published row with its source's
    set-up (one node's workers too where the row is rescaled to a measured node, whose
    loss the rescale brings in: --node-loss 0)."""
    workers = str(row["workers"])
    if node_based(row):
        workers = f"{node_workers(row)},{workers}"
    if transformer(row):  # its sequence, and one worker's tokens/s
        what = ["--seq-len", str(row["seq_len"])]
        rate = ["--single-worker-tps", f"{row['single_tps']:g}"]
    else:
        what = ["--image-size", str(row["image_size"])]
        rate = ["--single-worker-ips", str(row["single_ips"])]
    argv = [
        "predict",
        "--model",
        row["model"],
        *what,
        "--batch",
        str(row["batch"]),
        "--workers",
        workers,
        "--gpus-per-node",
        str(row["gpus_per_node"]),
        *rate,
        "--link",
        row["link"],
        "--transport",
        row["transport"],
        "--intra-node",
        row["intra_node"],
    ]
    if transformer(row):
        argv += ["--parallel", row["parallel"], "--param-dtype", row["param_dtype"]]
        argv += ["--reduce-dtype", row["reduce_dtype"]]
        argv += ["--reshard-after-forward", row["reshard_after_forward"]]
        if row.get("shard_group"):
            argv += ["--shard-group", str(row["shard_group"])]
    else:
        argv += ["--backend", row.get("backend", "horovod")]
    if row.get("fusion_threshold_mb") is not None:
        argv += ["--fusion-threshold-mb", str(row["fusion_threshold_mb"])]
    if row.get("cycle_time_ms") is not None:
        argv += ["--cycle-time-ms", str(row["cycle_time_ms"])]
    if row.get("collectives") == "ring":  # NCCL before trees: predict's ring-only choice
        argv += ["--collectives", "gloo"]
    elif not transformer(row):  # NCCL with trees, as the rows were scored before
        argv += ["--collectives", "nccl"]
    if node_based(row) and not transformer(row):
        argv += ["--node-loss", "0"]
    if interference is not None:
        argv += ["--interference", f"{interference:g}"]
    return argv + ["--json"]


def default_argv(row: dict) -> list[str]:
    """predict's command for the row with its defaults."""
    return predict_argv(row)


def _run(argv: list[str]) -> list[dict]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli.main(argv)
    if rc != 0:
        raise SystemExit(f"hpcbench {shlex.join(argv)} failed ({rc})")
    return json.loads(out.getvalue())


def predicted(row: dict) -> dict:
    """What `hpcbench predict` prints for the row with its defaults, rescaled to the
    measured node where the row has one."""
    rows = _run(default_argv(row))
    if node_based(row):
        return scaling_model.rescaled_to_node(rows[-1], rows[0], node_efficiency(row))
    return rows[-1]


def case(row: dict) -> scaling_model.Case:
    """The row as predict's calibration sees it (the parser of `hpcbench predict`)."""
    argv = predict_argv(row)
    argv[argv.index("--workers") + 1] = str(row["workers"])
    plan = predict.plan_from(cli.build_parser().parse_args(argv))
    rate = scaling_model.parse_link(row["link"])
    node = node_efficiency(row) if node_based(row) else None
    return scaling_model.Case(
        plan, rate, measured_e(row), row["transport"], node, node_workers(row)
    )


def plain_cases(row: dict) -> dict[bool, scaling_model.Case]:
    """A CNN row as a plain-input call plans it, with NCCL's tree allowed and not."""
    plan = predict.plan_from(cli.build_parser().parse_args(plain_argv(row)))
    rate = scaling_model.parse_link(row["link"])
    return {
        tree: scaling_model.Case(
            dataclasses.replace(plan, nccl=tree, node_loss=0.0),
            rate,
            measured_e(row),
            row["transport"],
        )
        for tree in (False, True)
    }


@contextlib.contextmanager
def plain_defaults(found: scaling_model.Fit, plain: scaling_model.PlainFit):
    """predict's defaults as a fit made them: the link efficiencies, the node loss,
    NCCL's algorithm and the plain band (the interference goes on the command line)."""
    saved = (
        dict(scaling_model.LINK_EFFICIENCY),
        scaling_model.NODE_LOSS,
        scaling_model.DEFAULT_TREE,
        scaling_model.PLAIN_BAND,
    )
    scaling_model.LINK_EFFICIENCY.update(found.efficiency)
    scaling_model.NODE_LOSS = plain.node_loss
    scaling_model.DEFAULT_TREE = plain.tree
    scaling_model.PLAIN_BAND = plain.band
    try:
        yield
    finally:
        scaling_model.LINK_EFFICIENCY.clear()
        scaling_model.LINK_EFFICIENCY.update(saved[0])
        scaling_model.NODE_LOSS, scaling_model.DEFAULT_TREE, scaling_model.PLAIN_BAND = saved[1:]


def bare(k: scaling_model.Case) -> scaling_model.Case:
    """The case without one node's sharing: the link efficiency and the interference are
    fitted so (before the node loss, which is fitted given them)."""
    return dataclasses.replace(k, plan=dataclasses.replace(k.plan, node_loss=0.0))


def plain_scored(data: dict, row: dict, interference: float | None = None) -> Scored:
    """A CNN row as `hpcbench predict` answers its plain inputs, with the defaults in
    force (plain_defaults)."""
    argv = plain_argv(row)
    if interference is not None:
        argv[-1:-1] = ["--interference", f"{interference:g}"]
    p = _run(argv)[-1]
    return Scored(
        row,
        group_of(data, row),
        measured_e(row),
        p["efficiency"],
        p["efficiency_low"],
        p["efficiency_high"],
        scaling_model.LINK_EFFICIENCY[row["transport"]],
        p["interference"],
    )


@dataclass(frozen=True)
class Scored:
    row: dict
    group: str
    measured: float
    point: float
    low: float
    high: float
    efficiency: float  # the link efficiency of its fold
    interference: float

    @property
    def error(self) -> float:
        return self.point - self.measured

    @property
    def inside(self) -> bool:
        return self.low <= self.measured <= self.high


def scored(
    k: scaling_model.Case,
    found: scaling_model.Fit,
    row: dict,
    group: str,
    plain: scaling_model.PlainFit | None = None,
) -> Scored:
    """The row with its source's set-up; where it measured no node, one node's sharing
    is the fitted default (plain's), as predict assumes it, band and all."""
    share, inter = found.efficiency[k.transport], found.interference
    parts = scaling_model.case_parts(k, share)
    point = parts.point(inter, k.node_efficiency)
    low, high = parts.band(inter, k.node_efficiency)
    n, g = k.plan.workers[0], k.plan.gpus_per_node
    if plain is not None and k.node_efficiency is None and not transformer(row):
        f = scaling_model.node_factor(plain.node_loss, n, g)
        if abs(point * f - point) >= scaling_model.ASSUMPTION_MIN and n > g:
            # predict's band: its own and a node's that loses nothing, and the spread.
            low, high = scaling_model.plain_band(point * f, low * f, high, plain.band)
        else:
            low, high = low * f, high * f
        point *= f
    return Scored(row, group, k.measured, point, low, high, share, inter)


def fit_constants(cases: list[scaling_model.Case], cache: dict | None = None) -> scaling_model.Fit:
    """The constants predict fits, fitted to these cases."""
    return scaling_model.fit(cases, cache=cache)


def fit_plain(
    data: dict,
    found: scaling_model.Fit,
    groups: set[str] | None = None,
    cache: dict | None = None,
    cases: list[dict[bool, scaling_model.Case]] | None = None,
) -> scaling_model.PlainFit:
    """The plain-input defaults, fitted on the CNN rows of `groups` (all: None) given the
    link efficiency and interference of `found`. cases: plain_cases of every row, kept
    alive beside `cache` (whose keys are the cases' ids)."""
    cases = cases or [{} if transformer(r) else plain_cases(r) for r in data["rows"]]
    both = [
        c
        for r, c in zip(data["rows"], cases, strict=True)
        if not transformer(r) and (groups is None or group_of(data, r) in groups)
    ]
    return scaling_model.fit_plain(
        {tree: [c[tree] for c in both] for tree in (False, True)}, found, cache=cache
    )


def _fold(
    cases: list[scaling_model.Case], groups: list[str], held: set[str], train: list[bool]
) -> list[scaling_model.Case]:
    """The cases a fit without the groups `held` sees (of those `train` marks), after
    checking that they still hold every transport the held groups' rows need."""
    seen = [k for k, h, t in zip(cases, groups, train, strict=True) if t and h not in held]
    need = {k.transport for k, h in zip(cases, groups, strict=True) if h in held}
    missing = need - {k.transport for k in seen}
    if missing:
        raise SystemExit(f"{sorted(held)}: no other source has {sorted(missing)} rows to fit on")
    return seen


class PlainFolds:
    """The rows of one file as the fits see them: each row's case with its source's
    set-up (the link efficiency and the interference are fitted on those) and a CNN
    row's plain cases (the node loss and NCCL's algorithm are fitted on those), the
    replays kept between fits."""

    def __init__(self, data: dict) -> None:
        self.data = data
        self.groups = [group_of(data, r) for r in data["rows"]]
        self.cnn = [not transformer(r) for r in data["rows"]]
        self.cases = [bare(case(r)) for r in data["rows"]]
        self.plain = [
            plain_cases(r) if c else {} for r, c in zip(data["rows"], self.cnn, strict=True)
        ]
        self.cache: dict = {}
        self.plain_cache: dict = {}

    def fit(self, held: set[str]) -> tuple[scaling_model.Fit, scaling_model.PlainFit]:
        """predict's constants and its plain-input defaults fitted on the CNN groups
        but `held`; the band is the spread that the groups fitted on show when each is
        predicted by a fit without it too, as a cluster no fit saw would be (the
        in-sample spread is narrower than any held-out one)."""
        found, defaults = self._fit(held)
        left: list[float] = []
        for g in dict.fromkeys(
            h for h, c in zip(self.groups, self.cnn, strict=True) if c and h not in held
        ):
            inner, plain = self._fit(held | {g})
            left += [
                c[plain.tree].measured - self._point(c[plain.tree], inner, plain)
                for c, h in zip(self.plain, self.groups, strict=True)
                if h == g
            ]
        return found, dataclasses.replace(defaults, band=scaling_model.spread(left))

    def constants(self, held: set[str]) -> scaling_model.Fit:
        """predict's link efficiency and interference fitted on the CNN groups but
        `held`."""
        return fit_constants(_fold(self.cases, self.groups, held, self.cnn), self.cache)

    def _fit(self, held: set[str]) -> tuple[scaling_model.Fit, scaling_model.PlainFit]:
        found = self.constants(held)
        others = {h for h, c in zip(self.groups, self.cnn, strict=True) if c and h not in held}
        return found, fit_plain(self.data, found, others, self.plain_cache, self.plain)

    def _point(
        self, k: scaling_model.Case, found: scaling_model.Fit, plain: scaling_model.PlainFit
    ) -> float:
        e = found.efficiency[k.transport]
        return point_at(k, e, found.interference, plain.node_loss, self.plain_cache)


def fit_without(folds: PlainFolds, held: set[str]) -> scaling_model.Fit:
    """predict's link efficiency and interference fitted on every row of the groups but
    `held`, CNN and transformer: the constants a transformer group is scored with (the
    link and the computation they describe are both kinds')."""
    every = [True] * len(folds.cases)
    return fit_constants(_fold(folds.cases, folds.groups, held, every), folds.cache)


def point_at(
    k: scaling_model.Case, efficiency: float, interference: float, loss: float, cache: dict
) -> float:
    """A plain case's point under these constants; `cache` keeps its replay per link
    efficiency (scaling_model.cached_parts)."""
    parts = scaling_model.cached_parts(k, efficiency, cache)
    return scaling_model.plain_point(k, parts, interference, loss)


def leave_one_source_out(
    data: dict,
) -> tuple[
    list[Scored], dict[str, scaling_model.Fit], list[Scored], dict[str, scaling_model.PlainFit]
]:
    """Every row predicted with constants fitted on the other groups only: a CNN group
    on the other CNN groups (as before the transformer rows came, so that the CNN
    figures stay comparable), a transformer group on every other group, CNN and
    transformer (the constants describe the link and the computation, which both
    share). A CNN group's rows are predicted twice: with their source's set-up, and as
    a user would call predict (plain inputs only), the plain-input defaults and their
    band fitted after the link efficiency and interference on the same other groups
    (PlainFolds.fit)."""
    rows = data["rows"]
    folds = PlainFolds(data)
    groups = folds.groups
    out, fits, users, plains = [], {}, [], {}
    for g in dict.fromkeys(groups):
        defaults = None
        if folds.cnn[groups.index(g)]:
            fits[g], plains[g] = found, defaults = folds.fit({g})
            with plain_defaults(found, defaults):
                users += [
                    plain_scored(data, r, found.interference)
                    for r, h in zip(rows, groups, strict=True)
                    if h == g
                ]
        else:
            fits[g] = found = fit_without(folds, {g})
        out += [
            scored(k, found, r, h, defaults)
            for k, r, h in zip(folds.cases, rows, groups, strict=True)
            if h == g
        ]
    return out, fits, users, plains


# Resamples of the intervals of figures(); seeded, so that a run prints what the docs hold.
RESAMPLES = 2000
T = TypeVar("T")


def interval(
    errors: list[tuple[str, T]], statistic: Callable[[list[T]], float]
) -> tuple[float, float]:
    """The 95% interval of a statistic of (source group, value) pairs, a value a row's
    point - published (or a pair of them, to compare two models row by row): the groups
    resampled, and each drawn group's rows within it (rows of one source share its
    cluster and set-up, so they are not independent draws)."""
    draw = random.Random(0)
    by_group: dict[str, list[T]] = {}
    for group, e in errors:
        by_group.setdefault(group, []).append(e)
    groups = list(by_group.values())
    values = []
    for _ in range(RESAMPLES):
        drawn = [e for g in draw.choices(groups, k=len(groups)) for e in draw.choices(g, k=len(g))]
        values.append(statistic(drawn))
    cuts = statistics.quantiles(values, n=40, method="inclusive")
    return cuts[0], cuts[-1]


def _median_abs(errors: list[float]) -> float:
    return statistics.median(abs(e) for e in errors)


def errors_line(errors: list[tuple[str, float]]) -> str:
    """Median |point - published| and the bias of (group, error) pairs, each with its
    95% interval (interval())."""
    values = [e for _, e in errors]
    med, bias = interval(errors, _median_abs), interval(errors, statistics.mean)
    return (
        f"median |point - published| {_median_abs(values):.3f} ({med[0]:.3f} to "
        f"{med[1]:.3f}), bias (mean point - published) {statistics.mean(values):+.3f} "
        f"({bias[0]:+.3f} to {bias[1]:+.3f})"
    )


INTERVALS = "95% intervals, source groups and their rows resampled"


def figures(name: str, rows: list[Scored]) -> str:
    """Median |point - published| and the bias with their intervals, and the share
    inside the band."""
    if not rows:
        return f"{name}: no rows"
    inside = sum(s.inside for s in rows)
    return (
        f"{name} ({len(rows)} rows): {errors_line([(s.group, s.error) for s in rows])}, "
        f"published E inside the band in {inside} ({inside / len(rows):.0%}); point above "
        f"published in {sum(s.error > 0 for s in rows)}; {INTERVALS}"
    )


def plain_constants(plain: scaling_model.PlainFit) -> str:
    return (
        f"node loss {plain.node_loss:g} per further GPU, NCCL "
        f"{'ring or tree' if plain.tree else 'rings only'}, band {plain.band[0]:+.3f}/"
        f"{plain.band[1]:+.3f} (5th/95th percentile of published - point, each source "
        "predicted by a fit without it)"
    )


def constants(found: scaling_model.Fit) -> str:
    return (
        "link efficiency "
        + ", ".join(f"{t} {e:.2f}" for t, e in found.efficiency.items())
        + f"; interference {found.interference:.2f}"
    )


def in_sample(data: dict) -> list[Scored]:
    """Every row with predict's defaults (fitted on every row), through predict itself."""
    out = []
    for r in data["rows"]:
        p = predicted(r)
        t = r["transport"]
        out.append(
            Scored(
                r,
                group_of(data, r),
                measured_e(r),
                p["efficiency"],
                p["efficiency_low"],
                p["efficiency_high"],
                scaling_model.LINK_EFFICIENCY[t],
                scaling_model.DEFAULT_INTERFERENCE,
            )
        )
    return out


def _table(results: list[Scored], users: list[Scored]) -> None:
    """The CNN rows' table of docs/benchmarks.md: each row with its source's set-up and
    with plain inputs, its source left out of both fits."""
    plain = {id(s.row): s for s in users}
    print(
        "| source | model | GPUs (nodes x per node) | network | backend | E published | "
        "E point, source left out | band | point - published | plain inputs: point | "
        "band | point - published |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for s in results:
        r, u = s.row, plain[id(s.row)]
        nodes = r["workers"] // r["gpus_per_node"]
        print(
            f"| {r['source']}{' (node)' if node_based(r) else ''} | {r['model']} | "
            f"{r['workers']} ({nodes} x {r['gpus_per_node']}) | {r['network']} | "
            f"{r.get('backend', 'horovod')} | {s.measured:.3f} | {s.point:.3f} | "
            f"{s.low:.2f}-{s.high:.2f} | {s.error:+.3f} | {u.point:.3f} | "
            f"{u.low:.2f}-{u.high:.2f} | {u.error:+.3f} |"
        )


def _transformer_table(results: list[Scored]) -> None:
    """The transformer rows' table: E relative to each source's base run."""
    print(
        "| source | model | seq x batch | GPUs (nodes x per node) | base GPUs | network | "
        "parallel (gathered / reduced) | E published | E point, source left out | band | "
        "point - published |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for s in results:
        r = s.row
        nodes = r["workers"] // r["gpus_per_node"]
        how = r["parallel"] + ("" if r["reshard_after_forward"] == "on" else ", not resharded")
        model = f"{r['model']} ({r['technique']})" if r.get("technique") else r["model"]
        print(
            f"| {r['source']} | {model}"
            f" | {r['seq_len']} x {r['batch']} | {r['workers']} ({nodes} x {r['gpus_per_node']}) | "
            f"{node_workers(r)} | {r['network']} | {how} ({r['param_dtype']} / {r['reduce_dtype']})"
            f" | {s.measured:.3f} | {s.point:.3f} | {s.low:.2f}-{s.high:.2f} | {s.error:+.3f} |"
        )


def unseen_main(data: dict, extra: dict) -> int:
    """Rows no fit has seen, called with plain inputs: with predict's defaults, and where
    their group is in `data`, with the constants fitted without that group."""
    _, fits, _, plains = leave_one_source_out(data)
    both = {"sources": {**data["sources"], **extra["sources"]}, "rows": extra["rows"]}
    rows = [r for r in extra["rows"] if not transformer(r)]
    runs: list[tuple[str, list[Scored]]] = [
        ("plain inputs, predict's defaults", [plain_scored(both, r) for r in rows])
    ]
    for g in dict.fromkeys(group_of(both, r) for r in rows):
        if g in plains:
            with plain_defaults(fits[g], plains[g]):
                scored_ = [
                    plain_scored(both, r, fits[g].interference)
                    for r in rows
                    if group_of(both, r) == g
                ]
            runs.append((f"plain inputs, fitted without {g}", scored_))
    for name, results in runs:
        for s in results:
            r = s.row
            print(
                f"{name}: {r['source']} {r['model']} {r['workers']} GPUs {r['network']}: "
                f"E {s.measured:.3f} point {s.point:.3f} band {s.low:.2f}-{s.high:.2f} "
                f"diff {s.error:+.3f}"
            )
        for line in unseen_figures(name, results, both["sources"]):
            print(line + " (python evaluation/published.py --unseen)")
    return 0


@dataclass(frozen=True)
class Ceiling:
    """The constants that bring plain-input points closest to a set of rows (median
    |point - published|), fitted to those rows themselves, and what they leave."""

    median: float
    bias: float
    above: int
    efficiency: dict[str, float]
    interference: float
    node_loss: float
    tree: bool


def ceiling(plain: list[dict[bool, scaling_model.Case]]) -> Ceiling:
    """The smallest median |point - published| that any of predict's constants reach on
    these plain cases: link efficiency per transport (RDMA's no lower than TCP's),
    interference, one node's loss and NCCL's algorithm, each on the grid it is fitted
    on, chosen for these rows themselves. No default does better on them: a median
    above a target is the model's and its inputs', not its defaults'."""
    import numpy as np

    grid = scaling_model.EFFICIENCY_GRID
    size = len(grid)
    rdma_at_least = np.triu(np.ones((size, size), dtype=bool))  # [tcp index, rdma index]
    best: Ceiling | None = None
    for tree in (False, True):
        ks = [c[tree] for c in plain]
        measured = np.array([k.measured for k in ks])
        tcp = np.array([k.transport == "tcp" for k in ks])
        parts = [[scaling_model.case_parts(k, e) for e in grid] for k in ks]
        for c in scaling_model.INTERFERENCE_GRID:
            base = np.array([[p.point(c) for p in row] for row in parts])  # [row, efficiency]
            for loss in scaling_model.NODE_LOSS_GRID:
                shares = np.array(
                    [
                        scaling_model.node_factor(loss, k.plan.workers[0], k.plan.gpus_per_node)
                        for k in ks
                    ]
                )
                err = base * shares[:, None] - measured[:, None]
                both = np.concatenate(
                    [
                        np.broadcast_to(err[tcp][:, :, None], (int(tcp.sum()), size, size)),
                        np.broadcast_to(err[~tcp][:, None, :], (int((~tcp).sum()), size, size)),
                    ]
                )
                median = np.where(rdma_at_least, np.median(np.abs(both), axis=0), np.inf)
                i, j = np.unravel_index(np.argmin(median), median.shape)
                if best is None or median[i, j] < best.median - 1e-12:
                    chosen = both[:, i, j]
                    best = Ceiling(
                        float(median[i, j]),
                        float(chosen.mean()),
                        int((chosen > 0).sum()),
                        {"tcp": grid[i], "rdma": grid[j]},
                        c,
                        loss,
                        tree,
                    )
    assert best is not None
    return best


def ceiling_line(name: str, rows: list[dict]) -> str:
    """One set of rows' ceiling (ceiling()), as `--ceiling` prints it."""
    c = ceiling([plain_cases(r) for r in rows])
    used = ", ".join(f"{t} {c.efficiency[t]:.2f}" for t in sorted({r["transport"] for r in rows}))
    return (
        f"{name} ({len(rows)} rows), constants fitted to these rows for the least median: "
        f"median |point - published| {c.median:.3f}, bias (mean point - published) "
        f"{c.bias:+.3f}, point above published in {c.above}; link efficiency {used}, "
        f"interference {c.interference:.2f}, node loss {c.node_loss:g} per further GPU, "
        f"NCCL {'ring or tree' if c.tree else 'rings only'}"
    )


def ceiling_main(data: dict, extra: dict | None, command: str) -> int:
    """The ceiling of plain-input predictions on published.json's CNN rows, or on those
    of `extra` (all, and those whose set-up is standard)."""
    if extra is None:
        rows = [r for r in data["rows"] if not transformer(r)]
        print(ceiling_line("plain inputs", rows) + f" ({command})")
        # The same rule fitted without each group: does a least median carry over?
        groups = [group_of(data, r) for r in rows]
        plain = [plain_cases(r) for r in rows]
        left: list[tuple[str, float]] = []
        cache: dict = {}
        for g in dict.fromkeys(groups):
            c = ceiling([k for k, h in zip(plain, groups, strict=True) if h != g])
            at = (c.interference, c.node_loss, cache)
            left += [
                (g, point_at(k, c.efficiency[k.transport], *at) - k.measured)
                for k in (k[c.tree] for k, h in zip(plain, groups, strict=True) if h == g)
            ]
        print(
            f"plain inputs, constants fitted for the least median on the other groups, "
            f"leave one source out, {len(set(groups))} source groups ({len(left)} rows): "
            f"{errors_line(left)}, point above published in {sum(e > 0 for _, e in left)}; "
            f"{INTERVALS} ({command})"
        )
        return 0
    sources = {**data["sources"], **extra["sources"]}
    rows = [r for r in extra["rows"] if not transformer(r)]
    standard = [r for r in rows if sources[r["source"]].get("standard", True)]
    print(ceiling_line("plain inputs", rows) + f" ({command})")
    if 0 < len(standard) < len(rows):
        print(ceiling_line("plain inputs, standard set-ups", standard) + f" ({command})")
    return 0


def unseen_figures(name: str, results: list[Scored], sources: dict) -> list[str]:
    """The summary of one run over unseen rows: all of them, those whose source's set-up is
    one a user would plan (`standard`) where the run also holds others, and each group."""
    lines = [figures(name, results)]
    standard = [s for s in results if sources[s.row["source"]].get("standard", True)]
    if 0 < len(standard) < len(results):
        lines.append(figures(f"{name}, standard set-ups", standard))
    groups = dict.fromkeys(s.group for s in results)
    if len(groups) > 1:
        lines += [figures(f"  {name}: {g}", [s for s in results if s.group == g]) for g in groups]
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--markdown", action="store_true", help="print the table of docs/benchmarks.md")
    p.add_argument(
        "--fit", action="store_true", help="fit predict's constants to every CNN row (its defaults)"
    )
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument(
        "--unseen",
        type=Path,
        default=None,
        help="score the CNN rows of this file (published.json's format) with plain inputs",
    )
    p.add_argument(
        "--ceiling",
        action="store_true",
        help="the least median |point - published| any of predict's constants reach on the "
        "CNN rows (of --unseen's file where given), fitted to those rows themselves",
    )
    args = p.parse_args(argv)
    data = load(args.data)
    if args.ceiling:
        extra = None if args.unseen is None else load(args.unseen)
        command = "python evaluation/published.py --ceiling"
        if args.unseen is not None:
            command += f" --unseen {shlex.quote(str(args.unseen))}"
        return ceiling_main(data, extra, command)
    if args.unseen is not None:
        return unseen_main(data, load(args.unseen))
    if args.fit:
        found, plain = PlainFolds(data).fit(set())
        rows = sum(not transformer(r) for r in data["rows"])
        print(
            f"fitted on all {rows} CNN rows: {constants(found)}; mean |point - published| "
            f"{found.mean_abs:.3f}"
        )
        print(
            f"then, plain inputs only: {plain_constants(plain)}; mean |point - published| "
            f"{plain.mean_abs:.3f}"
        )
        return 0
    results, fits, users, plains = leave_one_source_out(data)
    cnn = [s for s in results if not transformer(s.row)]
    sharded = [s for s in results if transformer(s.row)]
    for s in results:
        node = node_efficiency(s.row) if node_based(s.row) else None
        base = "its base run's" if transformer(s.row) else "its node's"
        print(
            f"{s.group:>26} {s.row['model']:>16} {s.row['workers']:>3} GPUs "
            f"{s.row['network']:<44} E {s.measured:.3f}  point {s.point:.3f}  band "
            f"{s.low:.2f}-{s.high:.2f}  diff {s.error:+.3f}"
            + (f"  (rescaled to {base} E {node:.3f})" if node is not None else ""),
            file=sys.stderr,
        )
    if args.markdown:
        _table(cnn, users)
        if sharded:
            print()
            _transformer_table(sharded)
    else:
        for r in data["rows"]:
            print("python -m hpcbench " + shlex.join(default_argv(r)))
    for g, found in fits.items():
        print(f"fitted without {g}: {constants(found)}", file=sys.stderr)
    for g, plain in plains.items():
        print(f"fitted without {g}, plain inputs: {plain_constants(plain)}", file=sys.stderr)
    for g in fits:
        print(figures(f"  {g}", [s for s in results if s.group == g]), file=sys.stderr)
    print(
        f"predict's defaults, fitted on every CNN row: link efficiency tcp "
        f"{scaling_model.TCP_EFFICIENCY:.2f}, rdma {scaling_model.RDMA_EFFICIENCY:.2f}; "
        f"interference {scaling_model.DEFAULT_INTERFERENCE:.2f}",
        file=sys.stderr,
    )
    everyone = in_sample(data)
    print(
        figures("in sample, predict's defaults", [s for s in everyone if not transformer(s.row)]),
        file=sys.stderr,
    )
    print(
        figures(
            "plain inputs, in sample, predict's defaults",
            [plain_scored(data, r) for r in data["rows"] if not transformer(r)],
        ),
        file=sys.stderr,
    )
    for g in dict.fromkeys(s.group for s in users):
        print(figures(f"  plain inputs: {g}", [s for s in users if s.group == g]), file=sys.stderr)
    print(
        figures(
            "transformers with predict's defaults (fitted on the CNN rows only)",
            [s for s in everyone if transformer(s.row)],
        ),
        file=sys.stderr,
    )
    groups = len({s.group for s in cnn})
    print(
        figures(f"leave one source out, {groups} source groups", cnn)
        + " (python evaluation/published.py)",
        file=sys.stderr,
    )
    print(
        figures(f"plain inputs, leave one source out, {groups} source groups", users)
        + " (python evaluation/published.py)",
        file=sys.stderr,
    )
    if sharded:
        groups = len({s.group for s in sharded})
        print(
            figures(f"transformers, leave one source out, {groups} source groups", sharded)
            + " (python evaluation/published.py)",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
