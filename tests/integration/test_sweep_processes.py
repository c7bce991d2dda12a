"""A sweep whose nodes ssh cannot reach, with ssh run here (a stand-in that hangs for a
dead node, and the real client for a host that does not resolve); the sweep's logic:
tests/unit/test_sweep.py."""

import os
import time

import pytest
import yaml

from hpcbench.measure import sweep
from hpcbench.testbeds.target import Target
from tests.unit.test_sweep import (
    _deploy_local,
    _FakeRuns,
    _own_state,  # noqa: F401  (autouse)
    _scale,
    args_of,
)

pytestmark = pytest.mark.integration


def _deploy_with_a_dead_node(tmp_path, monkeypatch, dead: str = "n2") -> None:
    """A deployed testbed of four nodes on ports 2200..2203 and an ssh on PATH that answers
    for each but `dead`, which hangs as a powered-off VM's address does."""
    _deploy_local(tmp_path, monkeypatch)
    path = tmp_path / "state" / "local" / "inventory.yml"
    inventory = yaml.safe_load(path.read_text())
    for i, host in enumerate(inventory["all"]["hosts"].values()):
        host["ansible_port"] = 2200 + i
    path.write_text(yaml.safe_dump(inventory))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    port = 2200 + int(dead.removeprefix("n"))
    (bin_dir / "ssh").write_text(
        f'#!/bin/bash\nfor a; do [ "$a" = {port} ] && exec sleep 60; done\nexit 0\n'
    )
    (bin_dir / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("HPCBENCH_PREFLIGHT_TIMEOUT_S", "1")
    monkeypatch.setattr(Target, "prepare", lambda self: None)  # it was alive at the start


def test_a_run_needing_a_dead_node_fails_in_seconds_and_its_configurations_stop(
    tmp_path, capsys, monkeypatch
):
    _deploy_with_a_dead_node(tmp_path, monkeypatch)
    fake = _FakeRuns({1: [1.0], 2: [1.0], 3: [1.0], 4: [1.0]})
    monkeypatch.setattr(
        Target, "run", lambda self, spec, timeout_s, echo=False: fake(spec, timeout_s, echo)
    )
    started = time.monotonic()
    code = _scale(
        tmp_path,
        *args_of(
            "--env local --nodes 1-4 --batch 8 --backend ddp --no-probe --repeats 3 --timeout 300"
        ),
    )
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    # One run found n2 gone, in about the check's bound, not --timeout; nothing waited more.
    assert time.monotonic() - started < 20
    records = list(sweep.Store(tmp_path / "out").records())
    [failed] = [r for r in records if r.get("status") == "failed"]
    assert failed["error"] == "node n2 is unreachable before launch: no answer in 1 s"
    assert failed["workers"] in (3, 4) and failed["duration_s"] < 5
    # The configurations on n0 and n1 made every run; those that need n2 none after it.
    assert fake.calls == {1: 3, 2: 3}
    for workers in (3, 4):
        assert (
            f"batch 8, {workers} node(s), {workers} worker(s): no further run, node n2 "
            "is unreachable (no answer in 1 s)"
        ) in err
    [conv] = [r for r in records if r["kind"] == "convergence"]
    stopped = {c["label"]: c["stopped"] for c in conv["configs"]}
    assert stopped["batch 8, 3 node(s), 3 worker(s)"] == "node unreachable"
    assert stopped["batch 8, 2 node(s), 2 worker(s)"] != "node unreachable"


def test_a_host_ssh_cannot_reach_exits_2_with_one_line(tmp_path, capsys):
    """test_bad_input_exits_2_with_one_line's case that asks ssh itself."""
    assert _scale(tmp_path, "--hosts", "nonexistent.invalid:1", "--nodes", "1") == 2
    err = capsys.readouterr().err
    assert "unreachable over SSH" in err and err.count("\n") == 1
    assert err.startswith("hpcbench: error: ") and not (tmp_path / "out").exists()
