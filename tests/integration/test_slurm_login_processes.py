"""`scale --env slurm --slurm-login`: bench/ copied to the login node once and checked,
the shell lines hpcbench sends it run here, in bash, against a folder that stands for
its home (the options and the dry run: tests/unit/test_slurm_login.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcbench.core import paths, ssh
from hpcbench.launchers.slurm import SlurmLauncher
from hpcbench.launchers.specs import TargetSpec
from hpcbench.measure import scale_options
from hpcbench.testbeds import manifest
from hpcbench.testbeds.target import Target
from tests.unit.test_slurm_login import (
    LoginHere,
    _own_state,  # noqa: F401  (autouse)
)

pytestmark = pytest.mark.integration


def _target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Target, LoginHere]:
    login = LoginHere(tmp_path / "home")
    login.home.mkdir(exist_ok=True)
    monkeypatch.setattr(ssh, "call", lambda access, command, **kw: login.run(command))
    monkeypatch.setattr(ssh, "send", lambda access, command, data, **kw: login.run(command, data))
    args = scale_options.scale_parser().parse_args(
        [
            "--env",
            "slurm",
            "--nodes",
            "1",
            "--slurm-login",
            "me@login",
            "--container-image",
            "nvcr.io#nvidia/pytorch:24.05-py3",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    spec: TargetSpec = scale_options.target_spec(args)
    return Target.resolve(spec), login


def test_bench_is_copied_to_the_login_node_once_and_checked(tmp_path, monkeypatch):
    target, login = _target(tmp_path, monkeypatch)
    target.prepare()
    bench = login.home / ".cache" / "hpcbench" / "bench"
    assert target.testbed.bench_dir == str(bench)
    assert isinstance(target.launcher, SlurmLauncher)
    assert target.launcher.options.job_dir == str(login.home / ".cache" / "hpcbench" / "slurm")
    assert (login.home / ".cache" / "hpcbench" / "slurm").is_dir()
    assert manifest.compute(bench) == manifest.compute(paths.BENCH_DIR)
    copies = sum("tar -C" in c for c in login.commands)
    assert copies == 1
    # The same checkout again: the manifest matches, nothing is copied.
    again, login2 = _target(tmp_path, monkeypatch)
    again.prepare()
    assert not any("tar -C" in c for c in login2.commands)
    # A changed copy on the cluster is replaced whole.
    (bench / "train.py").write_text("# someone else's workload\n")
    (bench / "stale.py").write_text("")
    third, login3 = _target(tmp_path, monkeypatch)
    third.prepare()
    assert sum("tar -C" in c for c in login3.commands) == 1
    assert manifest.compute(bench) == manifest.compute(paths.BENCH_DIR)
    assert not (bench / "stale.py").exists()
