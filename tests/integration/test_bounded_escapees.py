"""A stopped command takes with it what left its process group: ansible's workers call
setsid and start ssh in sessions of their own, so a Ctrl-C or a timeout that kills only
the group leaves them running, and they go on to open connections after the command has
ended. bounded.run tags its child's environment and kills every process of the tag."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import pytest

from hpcbench.core import bounded

pytestmark = pytest.mark.integration

LIMIT = bounded.Limit("a stand-in", "HPCBENCH_TEST_ESCAPEES_TIMEOUT_S", 1.0)
# A child that leaves the group twice over (setsid), says its pid, then outlives its parent.
SCRIPT = 'setsid bash -c \'echo $$ > "$1"; exec sleep 300\' _ "$1" & sleep 300'


def gone(pid: int, within_s: float = 5.0) -> bool:
    """Whether pid is gone within within_s (init reaps a killed orphan at once)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def escapee(pidfile: Path) -> int:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        text = pidfile.read_text().strip() if pidfile.exists() else ""
        if text:
            return int(text)
        time.sleep(0.02)
    raise AssertionError("the stand-in never said its pid")


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux's /proc")
def test_a_timeout_kills_what_left_the_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    with pytest.raises(bounded.Timeout):
        bounded.run(["bash", "-c", SCRIPT, "_", str(pidfile)], LIMIT, seconds=2.0, grace_s=1.0)
    pid = escapee(pidfile)
    try:
        assert gone(pid), "a process that left the group outlived the stopped command"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux's /proc")
def test_the_tag_finds_only_its_own_run(tmp_path: Path) -> None:
    """Another run's processes, or ours under another tag, are left alone."""
    pidfile = tmp_path / "pid"
    other = bounded.run(
        ["bash", "-c", "setsid sleep 300 >/dev/null 2>&1 & echo $!"], LIMIT, capture=True
    )
    pid = int(other.stdout.strip())
    try:
        with pytest.raises(bounded.Timeout):
            bounded.run(["bash", "-c", SCRIPT, "_", str(pidfile)], LIMIT, seconds=2.0, grace_s=1.0)
        assert not gone(pid, 0.5), "a process of a run that had ended normally was killed"
        assert gone(escapee(pidfile))
    finally:
        os.kill(pid, 9)
