"""Two forms of one node's sharing, scored held out: why predict keeps a share per GPU.

    python evaluation/node_sharing.py

A plain-input call does not know how the GPUs of a node share its PCIe switches, NIC
and host, and predict takes a loss per further busy GPU fitted to published rows
(scaling_model.NODE_LOSS): the same share for every model and step. The other form
tried here costs each further GPU a time per byte of the model's gradients every step,
L = cost x gradient bytes / step, so that a larger model or a faster step loses more
inside a node, as each cluster that published two precisions shows (printed below:
the faster step's node runs at a lower share of its lone GPUs).

Both are fitted the way published.py fits predict's plain defaults (least absolute
error, after the link efficiency and the interference, NCCL's algorithm with them):
leave one source group out of published.json, and on all of it for the rows of
unseen.json that no fit saw. Printed: each form's median |point - published| and
bias, and the difference of the two row by row (per gradient byte minus per GPU), each
with its 95% interval (source groups and their rows resampled, published.interval).
A difference whose interval holds 0 is not a reason to change the default.
Nothing here is measured on this machine.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import published
from published import INTERVALS, errors_line, interval

scaling_model = published.scaling_model  # hpcbench's, on the path published.py sets

UNSEEN = Path(__file__).resolve().parent / "unseen.json"
# A node's cost per gradient byte and further GPU: 0-5e-11 s on a 1e-12 s grid.
COST_GRID = tuple(round(1e-12 * i, 14) for i in range(51))
Cases = list[dict[bool, scaling_model.Case]]


def per_byte(k: scaling_model.Case, parts, interference: float, cost: float) -> float:
    """A plain case's point where each further GPU of a node costs `cost` seconds per
    byte of its gradients every step."""
    plan = k.plan
    grads = sum(size for size, _ in scaling_model.model_layers(plan.model, plan.image_size))
    loss = cost * grads / plan.step_time_s
    return parts.point(interference) * scaling_model.node_factor(
        loss, plan.workers[0], plan.gpus_per_node
    )


FORMS: dict[str, tuple[Callable, tuple[float, ...]]] = {
    "a share per GPU": (scaling_model.plain_point, scaling_model.NODE_LOSS_GRID),
    "a cost per gradient byte": (per_byte, COST_GRID),
}


def fit(form: str, cases: Cases, found: scaling_model.Fit, cache: dict) -> tuple[bool, float]:
    """NCCL's algorithm and the form's constant closest to the cases, as predict's plain
    defaults are fitted (scaling_model.fit_plain), given the link efficiency and the
    interference."""
    point, grid = FORMS[form]
    by_tree = {tree: [c[tree] for c in cases] for tree in (False, True)}
    plain = scaling_model.fit_plain(by_tree, found, grid, cache, point)
    return plain.tree, plain.node_loss


def errors(
    form: str, k: scaling_model.Case, found: scaling_model.Fit, value: float, cache: dict
) -> float:
    """point - published for one case under the form's constant."""
    parts = scaling_model.cached_parts(k, found.efficiency[k.transport], cache)
    return FORMS[form][0](k, parts, found.interference, value) - k.measured


@dataclass(frozen=True)
class Scores:
    """One form's (group, point - published) of each row."""

    held_out: list[tuple[str, float]]  # published.json, each group left out of the fit
    unseen: list[tuple[str, float]]  # unseen.json's standard rows, fitted on all of it
    constant: float  # the form's constant fitted on all of published.json


def scored(data: dict, extra: dict) -> dict[str, Scores]:
    """Each form's errors held out on published.json, and on the standard rows of
    `extra` fitted on all of published.json."""
    folds = published.PlainFolds(data)
    rows = [r for r in data["rows"] if not published.transformer(r)]
    groups = [published.group_of(data, r) for r in rows]
    cases = [published.plain_cases(r) for r in rows]
    sources = {**data["sources"], **extra["sources"]}
    both = {"sources": sources}
    unseen = [
        r
        for r in extra["rows"]
        if not published.transformer(r) and sources[r["source"]].get("standard", True)
    ]
    unseen_cases = [published.plain_cases(r) for r in unseen]
    # The link efficiency and interference are the same for both forms: fitted once.
    founds = {g: folds.constants({g}) for g in dict.fromkeys(groups)}
    everyone = folds.constants(set())
    cache: dict = {}
    out: dict[str, Scores] = {}
    for form in FORMS:
        held = []
        for g, found in founds.items():
            train = [c for c, h in zip(cases, groups, strict=True) if h != g]
            tree, value = fit(form, train, found, cache)
            held += [
                (g, errors(form, c[tree], found, value, cache))
                for c, h in zip(cases, groups, strict=True)
                if h == g
            ]
        tree, value = fit(form, cases, everyone, cache)
        seen = [
            (published.group_of(both, r), errors(form, c[tree], everyone, value, cache))
            for r, c in zip(unseen, unseen_cases, strict=True)
        ]
        out[form] = Scores(held, seen, value)
    return out


def difference(
    first: list[tuple[str, float]], second: list[tuple[str, float]]
) -> list[tuple[str, tuple[float, float]]]:
    """The two forms' errors row by row, as (group, (first, second))."""
    return [(g, (a, b)) for (g, a), (_, b) in zip(first, second, strict=True)]


def _median_change(pairs: list[tuple[float, float]]) -> float:
    return statistics.median(abs(b) for _, b in pairs) - statistics.median(abs(a) for a, _ in pairs)


def _bias_change(pairs: list[tuple[float, float]]) -> float:
    return statistics.mean(b - a for a, b in pairs)


def node_rows(data: dict, extra: dict) -> list[str]:
    """Each row with a measured node, once per source, batch and one GPU's rate: its step
    and what the node runs at of its lone GPUs."""
    seen, lines = set(), []
    for r in [*data["rows"], *extra["rows"]]:
        if published.transformer(r):
            continue
        node = published.node_efficiency(r)
        if node is None and r.get("node_ips") is not None:
            node = r["node_ips"] / (published.node_workers(r) * r["single_ips"])
        key = (r["source"], r["batch"], r["single_ips"])
        if node is None or key in seen:
            continue
        seen.add(key)
        lines.append(
            f"{r['source']}: {r['model']} batch {r['batch']} at {r['single_ips']:g} images/s "
            f"(step {r['batch'] / r['single_ips'] * 1e3:.0f} ms), {published.node_workers(r)} "
            f"GPUs of a node at {node:.3f} of lone GPUs"
        )
    return lines


def main() -> int:
    data, extra = published.load(), published.load(UNSEEN)
    for line in node_rows(data, extra):
        print(line)
    out = scored(data, extra)
    names = list(FORMS)
    runs = {"held out": "held_out", "unseen, standard set-ups": "unseen"}
    for name in names:
        print(f"{name} (fitted on every row: {out[name].constant:g}):")
        for run, field in runs.items():
            errs = getattr(out[name], field)
            print(f"  {run} ({len(errs)} rows): {errors_line(errs)}")
    for run, field in runs.items():
        pairs = difference(getattr(out[names[0]], field), getattr(out[names[1]], field))
        med, bias = interval(pairs, _median_change), interval(pairs, _bias_change)
        values = [p for _, p in pairs]
        print(
            f"{run}, {names[1]} minus {names[0]}: median |point - published| "
            f"{_median_change(values):+.3f} ({med[0]:+.3f} to {med[1]:+.3f}), bias "
            f"{_bias_change(values):+.3f} ({bias[0]:+.3f} to {bias[1]:+.3f}); {INTERVALS} "
            "(python evaluation/node_sharing.py)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
