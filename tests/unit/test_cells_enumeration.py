"""A campaign's cells are the configurations its `scale` sweeps run (Hypothesis): the
same list, from one enumeration (hpcbench.measure.sweep.configurations), for generated sweeps
(node counts, batches, gpus_per_node lists, repeats, backends, exclusions). A cell the
sweep would not run would stay pending with no error; a configuration the sweep runs
that is no cell would be measured for nothing."""

from __future__ import annotations

import collections
import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcbench.campaign import campaign_file
from hpcbench.core.errors import UsageError
from hpcbench.measure import sweep
from hpcbench.testbeds.target import Target

HOSTS = [f"h{i}:4" for i in range(4)]  # up to 4 nodes of up to 4 workers
DRY_RUN_LINE = re.compile(r"# batch (\d+), (\d+) node\(s\), (\d+) worker\(s\), repeat (\d+)")
SMALL = st.integers(1, 4)


@pytest.fixture(autouse=True)
def _own_state(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))


@st.composite
def campaigns(draw: st.DrawFn) -> dict[str, Any]:
    """A campaign of one testbed of hosts, its sweep and exclusions generated."""
    batches = draw(st.lists(st.sampled_from([4, 8, 16, 32]), min_size=1, max_size=3))
    sweep_keys = {
        "model": "resnet18",
        "image_size": 32,
        "batch": batches,
        "nodes": draw(st.lists(SMALL, min_size=1, max_size=4)),
        "gpus_per_node": draw(st.lists(SMALL, min_size=1, max_size=3)),
        "repeats": draw(st.integers(1, 3)),
        "backend": draw(st.sampled_from(["horovod", "ddp"])),
        "seed": draw(st.integers(0, 2**16)),
    }
    rule = st.fixed_dictionaries(
        {},
        optional={
            "batch": st.sampled_from(batches),
            "nodes": SMALL,
            "workers": st.integers(1, 16),
            "gpus_per_node": SMALL,
        },
    ).filter(bool)
    testbed: dict[str, Any] = {"name": "mine", "hosts": HOSTS}
    rules = draw(st.lists(rule, max_size=2))
    if rules:
        testbed["exclude"] = rules
    return {"name": "enum", "sweep": sweep_keys, "testbeds": [testbed]}


def load(tmp_path: Path, doc: dict[str, Any]) -> campaign_file.Campaign | None:
    """The campaign, or None where the exclusions leave no cell (refused in one line)."""
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**doc, "out": str(tmp_path / "out")}))
    try:
        return campaign_file.load(path)
    except UsageError as err:
        assert "leaves no cell to run" in str(err)
        return None


def dry_run(part: campaign_file.SweepPart, capsys: pytest.CaptureFixture[str]) -> list[Any]:
    """The runs the part's sweep makes, as the campaign starts it (cells.measure_part:
    its cells' keys as `only`), from its dry run: (configuration, repeat) pairs."""
    spec = dataclasses.replace(
        part.sweep, only=frozenset(c.config.key for c in part.cells), dry_run=True
    )
    capsys.readouterr()
    assert sweep.run(part.workload, part.target, spec) == 0
    found = DRY_RUN_LINE.findall(capsys.readouterr().out)
    return [(sweep.Config(int(b), int(n), int(w)), int(r) - 1) for b, n, w, r in found]


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(doc=campaigns())
def test_a_campaigns_cells_are_the_configurations_its_sweeps_run(
    doc: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    campaign = load(tmp_path, doc)
    if campaign is None:
        return
    [tb] = campaign.testbeds
    rules = doc["testbeds"][0].get("exclude", [])

    def excluded(config: sweep.Config, per_node: int) -> bool:
        values = {**dataclasses.asdict(config), "gpus_per_node": per_node}
        return any(all(values[k] == v for k, v in rule.items()) for rule in rules)

    # The sweep's configurations on each gpus_per_node's target, resolved as `scale`
    # resolves it: one baseline per batch (the first gpus_per_node's), less what
    # exclude: names. The campaign's cells are that list, in that order.
    first = tb.parts[0]
    expected: list[tuple[sweep.Config, int]] = []
    every: dict[int, set[sweep.Config]] = {}
    # gpus_per_node read as the command line reads a list: sorted, each once.
    for index, per_node in enumerate(sorted(set(doc["sweep"]["gpus_per_node"]))):
        target = Target.resolve(dataclasses.replace(first.target, gpus_per_node=per_node))
        configs = sweep.configurations(
            first.sweep.batches, target.node_counts, target.workers, baselines=index == 0
        )
        expected += [(c, per_node) for c in configs if not excluded(c, per_node)]
        planned = sweep.plan(target, first.sweep.batches, first.sweep.repeats, first.sweep.seed)
        every[per_node] = {c for c, _ in planned}
    assert [(c.config, c.gpus_per_node) for c in tb.cells] == expected
    assert len({c.id for c in tb.cells}) == len(tb.cells)

    cells_of = collections.defaultdict(set)
    for cell in tb.cells:
        cells_of[cell.gpus_per_node].add(cell.config)
    # Each batch's baseline belongs to the first gpus_per_node (excluded with it).
    lowest = min(every)
    baselines = {sweep.Config(b, 1, 1) for b in first.sweep.batches}
    for part in tb.parts:
        # The part's sweep runs each of its cells --repeats times, and nothing else.
        repeats = part.sweep.repeats
        runs = dry_run(part, capsys)
        assert sorted(runs, key=repr) == sorted(
            ((c.config, r) for c in part.cells for r in range(repeats)), key=repr
        )
        # What the sweep would run unrestricted is a cell, excluded, or a baseline the
        # first gpus_per_node holds: nothing is dropped silently.
        for config in every[part.gpus_per_node] - cells_of[part.gpus_per_node]:
            if not excluded(config, part.gpus_per_node):
                assert config in baselines and part.gpus_per_node != lowest
                assert config in cells_of[lowest] or excluded(config, lowest)


def test_a_later_gpus_per_node_leaves_the_baseline_to_the_first() -> None:
    def workers(per_node: int) -> Any:
        return lambda n: n * per_node

    first = sweep.configurations([8], [1, 2], workers(2))
    later = sweep.configurations([8], [1, 2], workers(4), baselines=False)
    assert [c.key for c in first] == [(8, 1, 1), (8, 1, 2), (8, 2, 4)]
    assert [c.key for c in later] == [(8, 1, 4), (8, 2, 8)]
    # One worker per node on one node is the baseline's configuration: kept.
    assert [c.key for c in sweep.configurations([8], [1], workers(1), False)] == [(8, 1, 1)]
