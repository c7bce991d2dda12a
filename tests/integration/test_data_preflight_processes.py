"""--data on the login node of `--slurm-login`: the one bounded `test -d` hpcbench sends
it runs here, in bash, against a folder that stands for the login node's home (the
other cases, with no process started: tests/unit/test_data_preflight.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcbench import cli
from hpcbench.core import ssh
from tests.unit.test_campaign_clusters import CLUSTERS_ONLY, Cluster, write
from tests.unit.test_data_preflight import (
    LOGIN,
    Prepared,
    _login,
    _own_state,  # noqa: F401  (autouse)
    _scale,
    one_line,
)
from tests.unit.test_slurm_login import LoginHere

pytestmark = pytest.mark.integration


def test_a_missing_data_folder_on_the_login_node_is_one_line_before_anything_is_placed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """It was looked up on this machine, not the cluster's, and found by the jobs."""
    login = _login(tmp_path, monkeypatch)
    assert _scale(tmp_path, *LOGIN, "--data", "/dss/imagenet") == 2
    assert one_line(capsys) == (
        "hpcbench: error: --data /dss/imagenet: no such directory on login node login "
        "(or say 'synthetic')"
    )
    assert len(login.commands) == 1 and login.commands[0].startswith("test -d ")
    assert not (tmp_path / "out").exists()


def test_a_data_folder_the_login_node_holds_passes_with_one_test(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    login = _login(tmp_path, monkeypatch)
    (login.home / "imagenet").mkdir()
    with pytest.raises(Prepared):
        _scale(tmp_path, *LOGIN, "--data", str(login.home / "imagenet"))
    # A relative path: from bench/ on the cluster, in the login's home until placed.
    (login.home / ".cache/hpcbench/bench/imgs").mkdir(parents=True)
    with pytest.raises(Prepared):
        _scale(tmp_path, *LOGIN, "--data", "imgs")
    assert len(login.commands) == 2


def test_a_campaign_finds_a_missing_data_folder_before_the_partitions_check_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """It was found by the sweep, after the check job had been submitted and run."""
    cluster = Cluster(monkeypatch)
    login = LoginHere(tmp_path / "home")
    login.home.mkdir()
    monkeypatch.setattr(ssh, "call", lambda access, command, **kw: login.run(command))
    path = write(tmp_path, CLUSTERS_ONLY.replace("backend: ddp", "backend: ddp, data: /dss/x"))
    assert cli.main(["campaign", "run", str(path)]) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert err[-1] == (
        f"hpcbench: error: {path}: testbeds[0] (fast): --data /dss/x: no such directory on "
        "login node login.example.org (or say 'synthetic')"
    )
    assert cluster.calls == [("preflight", "slurm")]  # no check job, no sweep
    assert len(login.commands) == 1
