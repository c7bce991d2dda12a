"""Starts a launcher's commands, watches them, and collects the workload's record.

Every wait is bounded: a run that outlives its time limit, or whose peers go
on after one command failed (a dead rank leaves the others blocked in a
collective), is killed with its whole process group.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from hpcbench.launchers.base import Command

# Must match bench/runtime.py (bench/ cannot import hpcbench; a unit test checks both).
RESULT_MARKER = "HPCBENCH_RESULT "
TAIL_LINES = 60
# After one command fails, how long the others get to notice and exit on their own.
PEER_GRACE_S = 15.0


@dataclass
class Outcome:
    returncodes: list[int | None]
    records: list[dict[str, Any]]
    tail: list[str]
    launched_at: float
    duration_s: float
    timed_out: bool = False
    argv: list[list[str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.timed_out and all(rc == 0 for rc in self.returncodes) and bool(self.records)

    def error(self) -> str:
        """Why the run failed and the tail of its output, for the results store."""
        if self.timed_out:
            why = f"timed out after {self.duration_s:.0f} s"
        elif any(rc != 0 for rc in self.returncodes):
            why = f"exit status {self.returncodes}"
        else:
            why = "finished without a result record"
        return why + "\n" + "\n".join(self.tail)


def parse_records(lines: list[str]) -> list[dict[str, Any]]:
    """Records printed by the workload, whatever a launcher prefixed to the line."""
    records = []
    for line in lines:
        at = line.find(RESULT_MARKER)
        if at >= 0:
            try:
                records.append(json.loads(line[at + len(RESULT_MARKER) :]))
            except json.JSONDecodeError:
                continue
    return records


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


def run(commands: list[Command], timeout_s: float, echo: bool = False) -> Outcome:
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
    try:
        for cmd in commands:
            proc = subprocess.Popen(
                cmd.local_argv(),
                env={**os.environ, **cmd.local_env()},
                cwd=cmd.cwd if cmd.access is None else None,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                start_new_session=True,  # its own process group, killed as one
            )
            procs.append(proc)
            reader = threading.Thread(target=read, args=(proc,), daemon=True)
            reader.start()
            readers.append(reader)

        while any(p.poll() is None for p in procs):
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
        returncodes=[p.returncode for p in procs],
        records=parse_records(marked),
        tail=list(tail),
        launched_at=launched_at,
        duration_s=time.monotonic() - start,
        timed_out=timed_out,
        argv=[c.local_argv() for c in commands],
    )
