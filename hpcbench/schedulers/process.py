"""Direct processes: start a launcher's commands, watch them, collect the record.

Every wait is bounded: a run that outlives its time limit, or whose peers go
on after one command failed (a dead rank leaves the others blocked in a
collective), is killed with its whole process group. Each command's stdin is
a pipe this process holds: when it closes, the ranks' leashes (bench/leash.py)
stop them, on this machine and at the far end of ssh alike.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections import deque

from hpcbench.launchers.base import Command, Launcher, RunSpec
from hpcbench.schedulers.base import (
    RESULT_MARKER,
    TAIL_LINES,
    Outcome,
    Scheduler,
    parse_records,
    register,
)

# After one command fails, how long the others get to notice and exit on their own.
PEER_GRACE_S = 15.0


def _kill(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def stop(procs: list[subprocess.Popen]) -> None:
    """TERM, then KILL, each command's whole process group, with bounded waits."""
    for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        alive = [p for p in procs if p.poll() is None]
        if not alive:
            break
        for p in alive:
            _kill(p, sig)
        deadline = time.monotonic() + wait_s
        for p in alive:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(max(0.0, deadline - time.monotonic()))
    for p in procs:  # stragglers the leaders left behind (DataLoader workers, ranks)
        _kill(p, signal.SIGKILL)
        if p.stdin is not None:
            with contextlib.suppress(OSError):
                p.stdin.close()


def run_commands(commands: list[Command], timeout_s: float, echo: bool = False) -> Outcome:
    """Run the commands together; return when all have exited or were killed."""
    launched_at = time.time()
    start = time.monotonic()
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    marked: list[str] = []
    lock = threading.Lock()
    procs: list[subprocess.Popen] = []
    readers = []

    def read(proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            with lock:
                if RESULT_MARKER in line:
                    marked.append(line)
                else:
                    tail.append(line)
            if echo:
                print(line, flush=True)

    timed_out = False
    failed_at: float | None = None
    unstarted: int | None = None
    try:
        for cmd in commands:
            try:
                proc = subprocess.Popen(
                    cmd.local_argv(),
                    env=cmd.environ(),  # allow-listed: no secret of the user's shell
                    cwd=cmd.cwd if cmd.access is None else None,
                    # Held open, never written: its end (this run over, or the harness
                    # killed) is what the rank's leash stops on, across ssh too.
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    errors="replace",
                    start_new_session=True,  # its own process group, killed as one
                )
            except OSError as err:  # no such program, or not executable: a failed run
                tail.append(f"cannot start {cmd.local_argv()[0]}: {err.strerror or err}")
                unstarted = 127  # the shell's status for a command it cannot run
                break
            procs.append(proc)
            reader = threading.Thread(target=read, args=(proc,), daemon=True)
            reader.start()
            readers.append(reader)

        while unstarted is None and any(p.poll() is None for p in procs):
            now = time.monotonic()
            if now - start > timeout_s:
                timed_out = True
                break
            if failed_at is None and any(p.returncode not in (None, 0) for p in procs):
                failed_at = now
            if failed_at is not None and now - failed_at > PEER_GRACE_S:
                break
            time.sleep(0.05)
    finally:  # also on Ctrl-C or SIGTERM: never leave ranks running behind the harness
        stop(procs)
    for reader in readers:
        reader.join(5.0)
    return Outcome(
        returncodes=[p.returncode for p in procs] + ([unstarted] if unstarted else []),
        records=parse_records(marked),
        tail=list(tail),
        launched_at=launched_at,
        duration_s=time.monotonic() - start,
        timed_out=timed_out,
        argv=[c.local_argv() for c in commands],
    )


@register
class ProcessScheduler(Scheduler):
    """The launcher's commands as processes of this machine (ssh for remote nodes)."""

    name = "process"

    def __init__(self, launcher: Launcher) -> None:
        self.launcher = launcher

    def run(self, spec: RunSpec, timeout_s: float, echo: bool = False) -> Outcome:
        return run_commands(self.launcher.commands(spec), timeout_s=timeout_s, echo=echo)
