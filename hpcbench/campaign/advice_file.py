"""The campaign file `hpcbench advise --out` writes: the chosen options (the front, or
every option that fits) as a testbed per place and layout, each testbed's keys as its
own file wrote them, so that `campaign run` measures what was advised and `campaign
plan` forecasts each cell as the advice did (hpcbench.campaign.advice)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from hpcbench.campaign.advice import Advice, Option, layout_name
from hpcbench.core.bench import workload_options


def _group_key(o: Option) -> tuple[Any, ...]:
    """What the options one testbed of the written file measures share: their place
    and every layout choice but the parallelism and the node count (those a sweep
    lists, a part per parallelism)."""
    lay = o.layout
    return (
        o.file,
        o.testbed,
        o.gpus_per_node,
        lay.tp,
        lay.micro_batch,
        lay.grad_accum,
        lay.checkpoint,
    )


def chosen_groups(options: list[Option]) -> list[list[Option]]:
    """The chosen options as the written file's testbeds: one per place and layout, in
    the order of their fastest; each option's `name` set to its testbed's."""
    groups: dict[tuple[Any, ...], list[Option]] = {}
    for o in sorted(options, key=lambda o: o.hours or 0):
        groups.setdefault(_group_key(o), []).append(o)
    per_place: dict[tuple[str, str], int] = {}
    for members in groups.values():
        place = (members[0].file, members[0].testbed)
        per_place[place] = per_place.get(place, 0) + 1
    for members in groups.values():
        first = members[0]
        alone = per_place[(first.file, first.testbed)] == 1
        name = (
            first.testbed if alone else layout_name(first.testbed, first.layout, first.transformer)
        )
        for o in members:
            o.name = name
    return list(groups.values())


def campaign_text(
    advice: Advice, chosen: list[Option], out: Path, argv: list[str], results: str | None = None
) -> str:
    """The chosen options (the front, or every option that fits) as a campaign file: a
    testbed per place and layout, its keys as its file wrote them, its sweep the
    options' parallelisms and node counts, less (exclude:) what was not chosen; so that
    `campaign run` measures what was advised, and `campaign plan` forecasts it again."""
    r = advice.request
    stem = (
        re.sub(
            r"[^a-z0-9-]+",
            "-",
            Path(r.model).parent.name.lower() if r.model.endswith(".json") else r.model.lower(),
        ).strip("-")[:30]
        or "model"
    )
    testbeds = []
    for members in chosen_groups(chosen):
        o = members[0]
        nodes = sorted({m.nodes for m in members})
        parallels = [
            p for p in workload_options.PARALLEL if any(m.layout.parallel == p for m in members)
        ]
        own = {
            **o.sweep,
            **o.layout.sweep(o.transformer),
            "nodes": nodes,
            "gpus_per_node": o.gpus_per_node,
        }
        if o.transformer:
            own["parallel"] = parallels if len(parallels) > 1 else parallels[0]
        picked = {(m.nodes, m.layout.parallel) for m in members}
        # A one-worker cell is the first part's baseline whatever it lists: never excluded.
        left = [
            {"nodes": n, "parallel": p}
            for n in nodes
            for p in parallels
            if (n, p) not in picked and n * o.gpus_per_node > 1
        ]
        entry = {
            **o.raw,
            "name": o.name,
            "title": f"{o.title}: {o.layout.label(o.transformer)}",
            "sweep": own,
            **({"exclude": left} if left else {}),
        }
        testbeds.append(entry)
    data_out = {
        "name": f"advice-{stem}"[:40].rstrip("-"),
        "description": f"`hpcbench advise` for {r.model}: {r.budget:.3g} {r.unit}.",
        "out": results or f"results/advice-{stem}",
        # What the report's measured front is drawn for (campaign_file, `advice:`).
        "advice": {"model": r.model, "budget": r.budget, "unit": r.unit},
        "testbeds": testbeds,
    }
    head = f"# written by `hpcbench {' '.join(argv)}`; `campaign plan {out}` forecasts it again\n"
    return head + yaml.safe_dump(data_out, sort_keys=False, default_flow_style=False)
