"""An ansible run's ssh connection masters end with the run, including one that the
`ssh -O exit` pass cannot reach: it had no socket yet when the folder was listed (a
Ctrl-C while it was connecting). Stand-ins carry a master's title (`ssh: <folder>/<hash>
[mux]`, what OpenSSH's mux master sets) and must be gone once end_masters returns."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from hpcbench.core import ssh

pytestmark = pytest.mark.integration


def stand_in(title: str, ignore_term: bool = False) -> subprocess.Popen[bytes]:
    trap = 'trap "" TERM; ' if ignore_term else ""
    proc = subprocess.Popen(["bash", "-c", f'{trap}exec -a "{title}" sleep 300'])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # until exec has put the title in place
        if title.encode() in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
            return proc
        time.sleep(0.02)
    proc.kill()
    raise AssertionError(f"{title!r} never showed")


def test_a_master_without_a_socket_is_stopped_and_others_are_left(tmp_path: Path) -> None:
    folder = tmp_path / "cp"
    other = tmp_path / "cp-other"
    folder.mkdir()
    master = stand_in(f"ssh: {folder}/f8ad4d29a0 [mux]")
    stubborn = stand_in(f"ssh: {folder}/7f2d9e4ce8 [mux]", ignore_term=True)
    bystander = stand_in(f"ssh: {other}/0123456789 [mux]")
    try:
        started = time.monotonic()
        ssh.end_masters(folder)
        took = time.monotonic() - started
        assert master.wait(5) < 0  # ended by a signal, within end_masters
        assert stubborn.wait(5) < 0
        assert bystander.poll() is None, "a master of another folder was stopped"
        assert not folder.exists()
        assert took < ssh.MASTER_EXIT_TIMEOUT_S + 2 * ssh.STRAGGLER_TERM_S + 5
    finally:
        for p in (master, stubborn, bystander):
            p.kill()
            p.wait()
