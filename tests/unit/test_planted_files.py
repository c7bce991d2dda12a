"""Files planted in a results folder cannot be turned against a campaign: a link
where hpcbench writes is never written through, a FIFO where it reads or locks
never makes it wait, and each is refused in one line naming it (exit status 2)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from hpcbench import cli, files, locks, sweep
from hpcbench.campaign import console
from hpcbench.errors import UsageError
from tests.unit.test_campaign import Fakes, base

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 20  # a hang fails the test instead of stopping the suite


def hpcbench(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hpcbench", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, (proc.returncode, proc.stderr)
    return lines[0]


@pytest.fixture(autouse=True)
def no_hang() -> Iterator[None]:
    """An open that waits on a FIFO fails the test after TIMEOUT_S (SIGALRM interrupts
    the open), rather than stopping the suite."""

    def late(signum: int, frame: object) -> None:  # not an OSError, which code may catch
        pytest.fail(f"still waiting after {TIMEOUT_S} s")

    before = signal.signal(signal.SIGALRM, late)
    signal.alarm(TIMEOUT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim"
    path.write_text("not yours\n")
    return path


# ------------------------------------------------------------ the one helper
@pytest.mark.parametrize(
    "flags", [os.O_RDONLY, os.O_WRONLY | os.O_APPEND | os.O_CREAT], ids=["read", "append"]
)
def test_open_regular_refuses_a_link_a_fifo_and_a_folder(
    tmp_path: Path, victim: Path, flags: int
) -> None:
    link, fifo, folder = tmp_path / "link", tmp_path / "fifo", tmp_path / "folder"
    link.symlink_to(victim)
    os.mkfifo(fifo)
    folder.mkdir()
    with pytest.raises(UsageError, match=f"{link} is a symbolic link"):
        files.open_regular(link, flags)
    for path in (fifo, folder):  # a FIFO with no writer (or reader) would block the open
        with pytest.raises(UsageError, match=f"{path} is not a regular file"):
            files.open_regular(path, flags)
    assert victim.read_text() == "not yours\n"
    fd = files.open_regular(victim, flags)
    try:
        assert os.get_blocking(fd)
    finally:
        os.close(fd)


# ----------------------------------------------------------------- the lock
def test_a_link_at_the_pid_file_is_replaced_never_written_through(
    tmp_path: Path, victim: Path
) -> None:
    lock = tmp_path / ".lock"
    locks.pid_file(lock).symlink_to(victim)
    fd = locks.hold_as_process(lock, "busy")
    try:
        assert victim.read_text() == "not yours\n"
        pid_file = locks.pid_file(lock)
        assert not pid_file.is_symlink() and pid_file.read_text() == f"{os.getpid()}\n"
        assert locks.holder(lock) == os.getpid()
    finally:
        os.close(fd)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_fifo_at_the_pid_file_is_replaced_without_waiting(tmp_path: Path) -> None:
    lock = tmp_path / ".lock"
    os.mkfifo(locks.pid_file(lock))
    fd = locks.hold_as_process(lock, "busy")
    try:
        assert locks.pid_file(lock).read_text() == f"{os.getpid()}\n"
    finally:
        os.close(fd)


def test_a_fifo_at_the_pid_file_of_a_held_lock_is_refused_when_read(tmp_path: Path) -> None:
    lock = tmp_path / ".lock"
    fd = locks.hold(lock, "busy")
    try:
        os.mkfifo(locks.pid_file(lock))
        with pytest.raises(UsageError, match=r"\.lock\.pid is not a regular file"):
            locks.holder(lock)
    finally:
        os.close(fd)


@pytest.mark.parametrize("action", ["run", "status"])
def test_a_fifo_at_the_campaigns_lock_is_one_line_not_a_hang(tmp_path: Path, action: str) -> None:
    path = base(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / ".lock")
    line = one_error_line(hpcbench("campaign", action, str(path)))
    assert f"{out / '.lock'} is not a regular file" in line


def test_status_beside_a_running_campaign_refuses_a_fifo_at_its_pid_file(tmp_path: Path) -> None:
    path = base(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    fd = locks.hold(out / ".lock", "busy")  # a campaign running
    try:
        os.mkfifo(out / ".lock.pid")
        line = one_error_line(hpcbench("campaign", "status", str(path)))
        assert f"{out / '.lock.pid'} is not a regular file" in line
    finally:
        os.close(fd)


# ------------------------------------------------------------------ the logs
def test_a_link_at_a_testbeds_log_is_refused_before_anything_is_created(
    tmp_path: Path, victim: Path, fakes: Fakes, capfd: pytest.CaptureFixture[str]
) -> None:
    path = base(tmp_path)
    logs = tmp_path / "out" / "logs"
    logs.mkdir(parents=True)
    (logs / "b.log").symlink_to(victim)
    assert cli.main(["campaign", "run", str(path)]) == 2
    err = capfd.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last.startswith("hpcbench: error: ") and "Traceback" not in err, err
    assert f"{logs / 'b.log'} is a symbolic link" in last
    assert victim.read_text() == "not yours\n"
    assert [c for c in fakes.calls if c[0] != "check"] == []  # nothing deployed


def test_a_link_planted_at_the_log_during_a_run_still_lets_the_destroy_run(
    tmp_path: Path,
    victim: Path,
    fakes: Fakes,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = base(tmp_path)
    log = tmp_path / "out" / "logs" / "a.log"
    events = fakes.sweep

    def planted_then_sweep(*args: Any) -> Generator[sweep.Event, None, int]:
        if not log.is_symlink():  # testbed a's first sweep: the link appears mid-run
            log.unlink()
            log.symlink_to(victim)
        return (yield from events(*args))

    # The campaign iterates the sweep's events; monkeypatch puts them back after.
    monkeypatch.setattr(sweep, "events", planted_then_sweep)
    cli.main(["campaign", "run", str(path)])
    err = capfd.readouterr().err
    assert ("destroy", "a") in fakes.calls and fakes.held() == []
    assert f"destroy: its output is not kept: {log} is a symbolic link" in err
    assert victim.read_text() == "not yours\n"


def test_lines_for_a_log_never_go_through_a_link(tmp_path: Path, victim: Path) -> None:
    link = tmp_path / "logs" / "a.log"
    link.parent.mkdir()
    link.symlink_to(victim)
    assert not console.append_lines(link, ["STILL HELD: machines"])
    assert victim.read_text() == "not yours\n"
    with pytest.raises(UsageError, match="is a symbolic link"), console.logged(link):
        pass
    with console.logged(link, must_run=True) as refused:
        print("destroying")
    assert refused is not None and str(link) in refused
    assert victim.read_text() == "not yours\n"
