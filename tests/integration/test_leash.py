"""bench/leash.py: a rank dies with the run that started it (real processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

LEASH = Path(__file__).resolve().parents[2] / "bench" / "leash.py"

# A 'rank' that leaves a child in the group and a grandchild in a session of its
# own (as torchrun's workers are), prints their pids and blocks.
RANK = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
escaped = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                           start_new_session=True)
print(os.getpid(), child.pid, escaped.pid, flush=True)
time.sleep(120)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pids: list[int], within_s: float) -> list[int]:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def start(*options: str, stdin: int | None = subprocess.PIPE) -> tuple[subprocess.Popen, list[int]]:
    proc = subprocess.Popen(
        [sys.executable, str(LEASH), "--grace", "1", *options, "--", sys.executable, "-c", RANK],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    pids = [int(x) for x in proc.stdout.readline().split()]
    assert len(pids) == 3 and all(alive(p) for p in pids)
    return proc, pids


@pytest.fixture(autouse=True)
def no_leftovers():
    started: list[int] = []
    yield started
    for pid in started:  # only what this test started, should an assertion fail
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_the_time_limit_stops_the_rank_and_everything_it_started(no_leftovers):
    proc, pids = start("--time-limit", "1")
    no_leftovers += pids
    assert proc.wait(15) == 124
    assert wait_gone(pids, 5) == []
    assert "time limit" in proc.stderr.read()


def test_end_of_input_stops_the_rank(no_leftovers):
    # The harness holds the ssh client's stdin; its end reaches the leash as EOF.
    proc, pids = start("--stdin")
    no_leftovers += pids
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(15)
    assert wait_gone(pids, 5) == []
    assert "end of input" in proc.stderr.read()


def test_without_stdin_watch_an_empty_stdin_is_fine(no_leftovers):
    # Ranks that horovodrun starts over its own ssh have /dev/null as stdin.
    proc, pids = start("--time-limit", "3", stdin=subprocess.DEVNULL)
    no_leftovers += [*pids, proc.pid]
    time.sleep(1)
    assert proc.poll() is None and all(alive(p) for p in pids)
    proc.wait(15)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_stops_the_rank(no_leftovers, sig):
    proc, pids = start()
    no_leftovers += pids
    proc.send_signal(sig)
    assert proc.wait(15) == 143
    assert wait_gone(pids, 5) == []


def test_an_output_nobody_reads_stops_the_rank(no_leftovers):
    # sshd gone with a dropped connection: the rank's stdout has no reader left.
    proc, pids = start()
    no_leftovers += pids
    assert proc.stdout is not None
    proc.stdout.close()
    proc.wait(15)
    assert wait_gone(pids, 5) == []


def test_a_rank_that_ends_passes_its_status_on():
    out = subprocess.run(
        [sys.executable, str(LEASH), "--", sys.executable, "-c", "print('hi'); exit(3)"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 3 and out.stdout == "hi\n" and out.stderr == ""


def test_no_command_is_refused():
    out = subprocess.run([sys.executable, str(LEASH), "--"], capture_output=True, timeout=30)
    assert out.returncode == 2
