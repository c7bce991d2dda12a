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
from hpcbench.core import paths
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


class QueuedToy(Toy):
    """The toy as a kind whose runs are batch jobs that wait in a queue and book their
    own nodes (as a PBS or Slurm partition would)."""

    described = "two processes of this machine, each run a job"
    queues_jobs = True

    def booked_line(self, where: str, env: str, nodes: int, gpus: int | None) -> str:
        return f"{where}: each job books its own toy nodes"

    def node_hours(self, nodes: int, wall_s: float, jobs_node_s: float) -> float:
        return jobs_node_s / 3600


class DeployedToy(Toy):
    """The toy as a kind the campaign makes for its turn and gives back after: what it
    holds is a file in the testbed's state folder."""

    described = "two processes of this machine, made for the campaign"
    phases = {"deploy": 60.0, "verify": 30.0, "destroy": 10.0}
    booking_check = "the toy's own plan"
    calls: list[str] = []

    def check_booking(self, env: str, settings: tuple[tuple[str, str], ...]) -> None:
        self.calls.append("check")

    def acquire(self, env: str, settings: tuple[tuple[str, str], ...]) -> None:
        self.calls.append("acquire")
        paths.ensure_env_state(env).joinpath("toy.held").write_text("two processes\n")

    def verify(self, env: str) -> int | None:
        self.calls.append("verify")
        return 0

    def release(self, env: str) -> int:
        self.calls.append("release")
        paths.env_state(env).joinpath("toy.held").unlink()
        return 0

    def held(self, env: str) -> list[str]:
        held = paths.env_state(env) / "toy.held"
        return [held.read_text().strip()] if held.exists() else []

    def node_hours(self, nodes: int, wall_s: float, jobs_node_s: float) -> float:
        return nodes * wall_s / 3600


@pytest.fixture(params=[Toy])
def toy(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[RunSpec]]:
    """The toy kind (request.param: which of them) registered for the test; what its
    runs would start, recorded, each answered with a record as the workload prints it
    (nothing is launched)."""
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))
    kinds.register(request.param)
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
        "give one of env: (a testbed hpcbench deploys), hosts: (machines you have), slurm: "
        "(a partition of a cluster you use) or toy: (two processes of this machine)"
    ), line


def test_each_shipped_kind_is_found_by_its_name_and_a_new_name_is_refused() -> None:
    shipped = {"deployed", "local", "virtualwall", "gpulab", "openstack", "slurm", "hosts"}
    assert shipped | {"localhost"} == set(kinds.registered())
    for name in ("local", "virtualwall", "gpulab", "openstack"):
        assert kinds.for_env(name).name == name and kinds.for_env(name).from_folder
    assert kinds.for_env("slurm").queues_jobs and not kinds.for_env("localhost").from_folder
    with pytest.raises(ValueError, match="registered twice"):
        kinds.register(type(kinds.named("slurm")))
    with pytest.raises(UsageError, match="unknown environment 'nope'"):
        kinds.for_env("nope")


def test_only_kinds_with_a_lease_size_one_and_the_local_one_names_its_objects() -> None:
    leased = {n for n, k in kinds.registered().items() if k.lease is not None}
    assert leased == {"virtualwall", "gpulab"}
    named = {n for n, k in kinds.registered().items() if k.named_by}
    assert named == {"local"}


@pytest.mark.parametrize("toy", [QueuedToy], indirect=True)
def test_a_queued_kind_goes_through_a_campaign_as_its_module_says(
    toy: list[RunSpec], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Booked per job: the plan says so, waits for the queue and sums the jobs'
    node-hours; the run checks the stack with a job, then measures; nothing is held."""
    path = tmp_path / "toys.yaml"
    path.write_text(textwrap.dedent(CAMPAIGN).format(out=tmp_path / "out"))
    rc, out = main(capfd, "campaign", "plan", str(path))
    assert rc == 0, out
    assert "toy: each job books its own toy nodes" in out, out
    assert "queue waits are unknown until a job has run" in out, out

    rc, out = main(capfd, "campaign", "run", str(path))
    assert rc == 0, out
    assert [s.script for s in toy] == ["check_stack.py", "train.py", "train.py"], toy
    assert "holds nothing" in main(capfd, "campaign", "destroy", str(path))[1]


@pytest.mark.parametrize("toy", [DeployedToy], indirect=True)
def test_a_deployed_kind_goes_through_a_campaign_as_its_module_says(
    toy: list[RunSpec], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Booked for the campaign's turn: the plan counts its phases and its nodes for the
    whole wall time; the run checks its plan first, makes it, runs its own checks (no
    stack-check job), measures and gives it back, so that nothing is held after."""
    DeployedToy.calls.clear()
    path = tmp_path / "toys.yaml"
    path.write_text(textwrap.dedent(CAMPAIGN).format(out=tmp_path / "out"))
    rc, out = main(capfd, "campaign", "plan", str(path))
    assert rc == 0, out
    [phases] = [line for line in out.splitlines() if "deploy 1m" in line]
    assert "verify 30s" in phases and "destroy 10s" in phases, phases

    rc, out = main(capfd, "campaign", "run", str(path), "--dry-run")
    assert rc == 0 and "deploy toy (its defaults), verify, measure 2 cell(s)" in out, out
    assert DeployedToy.calls == [] and toy == []

    rc, out = main(capfd, "campaign", "run", str(path))
    assert rc == 0, out
    assert "the toy's own plan, nothing created" in out, out
    assert DeployedToy.calls == ["check", "acquire", "verify", "release"]
    assert [s.script for s in toy] == ["train.py", "train.py"], toy  # its own verify
    rc, out = main(capfd, "campaign", "destroy", str(path))
    assert rc == 0 and "holds nothing" in out, out
