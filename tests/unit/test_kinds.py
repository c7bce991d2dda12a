"""Testbed kinds are registered by name and found by name (hpcbench.testbeds.kinds): the kinds
the project ships, and a kind a test registers from here, which a campaign then
plans, dry-runs, runs and reports without any other module knowing of it."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hpcbench import cli
from hpcbench.core.errors import UsageError
from hpcbench.launchers import RunSpec
from hpcbench.launchers.specs import TargetSpec
from hpcbench.schedulers.base import Outcome
from hpcbench.testbeds import kinds, nodeset
from hpcbench.testbeds.kinds import Kind
from hpcbench.testbeds.nodeset import Node
from hpcbench.testbeds.target import Target


class Toy(Kind):
    """Two worker processes of this machine, given by a campaign's `toy:` key."""

    name = "toy"
    reported_as = "toy"
    campaign_key = "toy"
    described = "two processes of this machine"
    campaign_options = {"nodes": None}
    gives_nodes = "toy: nodes gives"

    def testbed(self, spec: TargetSpec) -> nodeset.Testbed:
        nodes = [Node(f"toy{i}", "127.0.0.1", 0, None) for i in range(2)]
        return nodeset.Testbed(env=self.name, nodes=nodes, head="toy0", kind=self.name, iface="lo")


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[RunSpec]]:
    """The toy kind registered for the test; what its runs would start, recorded, each
    answered with a record as the workload prints it (nothing is launched)."""
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))
    kinds.register(Toy)
    started: list[RunSpec] = []

    def run(self: Target, spec: RunSpec, timeout_s: float, echo: bool = False) -> Outcome:
        assert self.testbed.kind == "toy"
        started.append(spec)
        if spec.script == "check_stack.py":
            record: dict[str, Any] = {"kind": "check", "ok": True, "checks": []}
        else:
            workers = sum(p.slots for p in spec.placements)
            record = {"workers": workers, "window_times": [1.0, 1.0], "steps": 2}
        return Outcome([0], [record], [], launched_at=0.0, duration_s=0.01)

    monkeypatch.setattr(Target, "run", run)
    try:
        yield started
    finally:
        kinds.unregister(Toy.name)


CAMPAIGN = """\
name: toys
out: {out}
sweep: {{model: resnet18, image_size: 32, batch: 4, nodes: [1, 2], repeats: 1,
         no_probe: true, backend: ddp, device: cpu}}
testbeds:
  - name: mine
    title: a toy testbed
    toy: {{nodes: 2}}
"""


def main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    try:
        rc = cli.main(list(argv))
    except SystemExit as stop:
        rc = int(stop.code or 0)
    out = capsys.readouterr()
    return rc, out.out + out.err


def test_a_kind_registered_from_a_test_goes_through_a_campaign(
    toy: list[RunSpec], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "toys.yaml"
    path.write_text(textwrap.dedent(CAMPAIGN).format(out=tmp_path / "out"))

    rc, out = main(capsys, "campaign", "plan", str(path))
    assert rc == 0, out
    assert "mine" in out and "2 cell(s)" in out.replace("cells", "cell(s)"), out

    rc, out = main(capsys, "campaign", "run", str(path), "--dry-run")
    assert rc == 0, out
    assert "# the stack check (verify), toy" in out, out
    trains = [line for line in out.splitlines() if " train.py " in line]
    # torchrun's command lines: one for the 1-node run, one per node for the 2-node run.
    nnodes = sorted(t.split("--nnodes ")[1].split()[0] for t in trains)
    assert nnodes == ["1", "2", "2"] and all("torchrun" in t for t in trains), out
    assert toy == [] and not (tmp_path / "out").exists()  # nothing started or written

    rc, out = main(capsys, "campaign", "run", str(path))
    assert rc == 0, out
    assert [s.script for s in toy] == ["check_stack.py", "train.py", "train.py"], toy
    assert sorted(len(s.placements) for s in toy[1:]) == [1, 2]

    rc, out = main(capsys, "campaign", "report", str(path))
    assert rc == 0, out
    systems = json.loads((tmp_path / "out" / "systems.json").read_text())
    assert [(s["testbed"], s["kind"]) for s in systems] == [("mine", "toy")]
    assert "a toy testbed" in (tmp_path / "out" / "report.md").read_text()


def test_a_campaign_names_every_registered_kind_when_none_is_given(
    toy: list[RunSpec], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "none.yaml"
    path.write_text(
        "name: none\nsweep: {model: resnet18, batch: 4, nodes: 1}\ntestbeds:\n  - name: x\n"
    )
    rc, out = main(capsys, "campaign", "plan", str(path))
    assert rc == 2, out
    [line] = [x for x in out.splitlines() if "give one of" in x]
    assert line.endswith(
        "give one of env: (a testbed hpcbench deploys), slurm: (a partition of a cluster "
        "you use), hosts: (machines you have) or toy: (two processes of this machine)"
    ), line


def test_each_shipped_kind_is_found_by_its_name_and_a_new_name_is_refused() -> None:
    shipped = {"deployed", "local", "virtualwall", "gpulab", "openstack", "slurm", "hosts"}
    assert shipped | {"localhost"} == set(kinds.registered())
    for name in ("local", "virtualwall", "gpulab", "openstack"):
        assert kinds.for_env(name).name == name and kinds.for_env(name).deployed
    assert kinds.for_env("slurm").queued and not kinds.for_env("localhost").deployed
    with pytest.raises(ValueError, match="registered twice"):
        kinds.register(type(kinds.named("slurm")))
    with pytest.raises(UsageError, match="unknown environment 'nope'"):
        kinds.for_env("nope")


def test_only_kinds_with_a_lease_size_one_and_the_local_one_names_its_objects() -> None:
    leased = {n for n, k in kinds.registered().items() if k.lease is not None}
    assert leased == {"virtualwall", "gpulab"}
    named = {n for n, k in kinds.registered().items() if k.named_by}
    assert named == {"local"}
