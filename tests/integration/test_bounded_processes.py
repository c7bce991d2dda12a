"""bounded.run: a child that will not stop on Ctrl-C is killed, whatever the user presses."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcbench.core import paths
from tests.interrupt import as_from_a_terminal

pytestmark = pytest.mark.integration


# A tool that notes each SIGINT/SIGTERM it gets and goes on (as a busy terraform or
# java may), in its own process group as bounded.run starts it.
STUBBORN = """
import os, signal, sys, time
def noted(signum, frame):
    with open(sys.argv[1] + ".signals", "a") as f:
        f.write(f"{signum}\\n")
signal.signal(signal.SIGINT, noted)
signal.signal(signal.SIGTERM, noted)
open(sys.argv[1], "w").write(str(os.getpid()))
while True:
    time.sleep(0.1)
"""


# The harness: one bounded step with a long grace period.
HARNESS = """
import sys
from hpcbench.core import bounded
bounded.run([sys.executable, "-c", {code!r}, {pid_file!r}], bounded.TERRAFORM, grace_s=600)
"""


def _gone(pid: int) -> bool:
    """Exited (a zombie no one has reaped yet counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def _until(condition, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_a_second_ctrl_c_in_the_grace_period_still_kills_the_child(tmp_path):
    pid_file = tmp_path / "child.pid"
    signals = tmp_path / "child.pid.signals"
    harness = subprocess.Popen(
        [sys.executable, "-c", HARNESS.format(code=STUBBORN, pid_file=str(pid_file))],
        cwd=paths.REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=as_from_a_terminal,
    )
    child = 0
    try:
        assert _until(lambda: pid_file.exists() and pid_file.read_text().strip()), "no child"
        child = int(pid_file.read_text())
        harness.send_signal(signal.SIGINT)  # Ctrl-C: the child is asked to stop, ignores it
        assert _until(lambda: signals.exists() and str(int(signal.SIGINT)) in signals.read_text())
        harness.send_signal(signal.SIGINT)  # the impatient second Ctrl-C, mid-grace
        harness.wait(timeout=20)
        assert harness.returncode != 0  # the interrupt reached the harness's caller
        assert _until(lambda: _gone(child), 10), "the child outlived its harness"
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
        if child and not _gone(child):
            os.kill(child, signal.SIGKILL)
