"""--data is found before anything is submitted or started, where the workers will
read it: a path not starting with / from bench/, their working folder; on this machine,
or through --slurm-login with one bounded `test -d` over its SSH connection. A missing
folder is one line and exit status 2, and nothing is submitted (a campaign's check job
included)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcbench import cli
from hpcbench.core import paths, ssh
from hpcbench.core.ssh import Reply
from hpcbench.testbeds.target import Target
from tests.unit.test_slurm_login import LoginHere


@pytest.fixture(autouse=True)
def _own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))


class Prepared(Exception):
    """Target.prepare reached: the data check passed and nothing was placed yet."""


def _scale(tmp_path: Path, *extra: str) -> int:
    argv = ["scale", "--out", str(tmp_path / "out"), "--model", "resnet18", "--nodes", "1"]
    argv += ["--batch", "8", "--backend", "ddp", "--repeats", "1", "--no-probe", *extra]
    return cli.main(argv)


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_a_relative_data_folder_is_looked_up_where_the_workers_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """It was looked up from the caller's folder, then read from bench/ by the runs."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "imgs" / "train" / "n01").mkdir(parents=True)
    (tmp_path / "imgs" / "train" / "n01" / "a.JPEG").write_bytes(b"")
    assert _scale(tmp_path, "--env", "localhost", "--data", "imgs", "--dry-run") == 2
    assert one_line(capsys) == (
        f"hpcbench: error: --data imgs: no such directory in {paths.BENCH_DIR}, where the "
        "workers start (or say 'synthetic')"
    )
    assert not (tmp_path / "out").exists()
    assert (
        _scale(tmp_path, "--env", "localhost", "--data", str(tmp_path / "imgs"), "--dry-run") == 0
    )


@pytest.mark.parametrize("layout", ["empty", "files only", "classes without images"])
def test_a_local_folder_without_class_folders_of_images_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], layout: str
) -> None:
    """A folder that exists but that ImageFolder would refuse (/etc, an empty one) is
    named before any worker starts, not at the first run."""
    data = tmp_path / "data"
    (data / "n01").mkdir(parents=True)
    if layout == "files only":
        (data / "a.jpg").write_bytes(b"")
    if layout == "classes without images":
        (data / "n01" / "notes.txt").write_text("x")
    assert _scale(tmp_path, "--env", "localhost", "--data", str(data), "--dry-run") == 2
    assert one_line(capsys) == (
        f"hpcbench: error: --data {str(data)[:80]}: holds no <class>/<image> files: give an "
        "ImageNet-layout folder, DIR/train/<class>/<image>.JPEG (or say 'synthetic')"
    )
    (data / "n01" / "b.png").write_bytes(b"")
    assert _scale(tmp_path, "--env", "localhost", "--data", str(data), "--dry-run") == 0


def _login(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LoginHere:
    """The login node's shell here, its home in the test's folder; Target.prepare (bench/
    placed, then jobs) stops the sweep as it is reached."""
    login = LoginHere(tmp_path / "home")
    login.home.mkdir()
    monkeypatch.setattr(ssh, "call", lambda access, command, **kw: login.run(command))
    monkeypatch.setattr(Target, "prepare", lambda self: (_ for _ in ()).throw(Prepared()))
    return login


LOGIN = ("--env", "slurm", "--slurm-login", "me@login", "--slurm-python", "/opt/py/bin/python")


def test_a_login_node_that_does_not_answer_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        ssh, "call", lambda access, command, **kw: Reply(problem="no answer in 30 s")
    )
    assert _scale(tmp_path, *LOGIN, "--data", "/dss/imagenet") == 2
    assert one_line(capsys) == (
        "hpcbench: error: login node login is unreachable over SSH: no answer in 30 s"
    )


def test_a_path_inside_a_container_mount_is_left_to_the_container(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    login = _login(tmp_path, monkeypatch)
    image = ("--container-image", "nvcr.io#nvidia/pytorch:24.05-py3")
    mounts = ("--container-mounts", "/dss/data:/data")
    with pytest.raises(Prepared):
        _scale(tmp_path, *LOGIN[:4], *image, *mounts, "--data", "/data/imagenet")
    assert login.commands == []
