"""What every scheduler shares: the interface and the Outcome a run ends in.

A scheduler takes a launcher's rendering of a run (commands, a batch
script, a job description), starts or submits it, watches it with a bound,
stops or cancels it, and collects the workload's record into an Outcome.
"""

from __future__ import annotations

import json
import signal
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from hpcbench.core import bounded
from hpcbench.core.registry import Registry
from hpcbench.core.ssh import SshAccess
from hpcbench.launchers.base import Launcher, RunSpec

# Must match bench/runtime.py (bench/ cannot import hpcbench; a unit test checks both).
RESULT_MARKER = "HPCBENCH_RESULT "
TAIL_LINES = 60


@dataclass
class Outcome:
    returncodes: list[int | None]
    records: list[dict[str, Any]]
    tail: list[str]
    launched_at: float
    duration_s: float
    timed_out: bool = False
    argv: list[list[str]] = field(default_factory=list)
    queue_wait_s: float | None = None  # a batch job's time in the queue (Slurm)
    cause: str = ""  # the line of the run's error output that says why it failed (Slurm)
    job_energy: dict[str, Any] | None = None  # the job's ConsumedEnergy (Slurm: sacct)

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
        if self.cause:  # the job's own line first: it is what a cell's cause shows
            why = f"{self.cause} ({why})"
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


def stop_on_signals() -> None:
    """SIGTERM and SIGHUP (a closed terminal or ssh session) unwind like Ctrl-C, so
    that the scheduler stops or cancels the run in flight before the harness exits;
    each, Ctrl-C's SIGINT too, raises bounded.Interrupted, which names it. A signal
    handled already (a clean-up deferring it: bounded.StopGate) keeps its handler,
    and one ignored stays ignored (`nohup` keeps a closed terminal's SIGHUP away)."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) == signal.SIG_DFL:
            signal.signal(sig, bounded.interrupt)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, bounded.interrupt)


class Scheduler(ABC):
    """Runs one RunSpec to its end: submit, poll (bounded), cancel, collect."""

    name: ClassVar[str] = ""
    launcher: Launcher  # whose command lines it runs

    def describe(self, spec: RunSpec) -> str:
        """What --dry-run prints for the run: what run() would start, or submit."""
        return self.launcher.describe(spec)

    def cancel_left(self, job: str) -> bool:
        """A job that an earlier run of this testbed left (the journal's), cancelled
        again; True once it is gone. Processes leave no job a later run could find."""
        return True

    # Where what it runs is seen from, for the checks before a launch (a batch
    # scheduler's job folder, login node and container; processes: this machine's).
    def job_gpus(self, testbed_gpus: int) -> int:
        """The GPUs each node gives a run: the testbed's own, where nothing is booked."""
        return testbed_gpus

    def shared_job_dir(self) -> str:
        """A folder that its runs and the machine that starts them share ("": none)."""
        return ""

    def login(self) -> SshAccess | None:
        """The machine it submits through over SSH (None: this one, or none)."""
        return None

    def container_only(self, data: str, workdir: str) -> bool:
        """--data `data` of a run in `workdir` is a path only the run's container holds
        (its image's, or under a mount at another path): nothing outside can look it up."""
        return False

    def preflight(self, spec: RunSpec) -> None:
        """Before anything is submitted: UsageError naming what would refuse a run of
        this shape (nothing here: processes are refused when they start)."""
        return None

    def prepare(self) -> None:
        """What it learns of the nodes before the first run (nothing here)."""
        return None

    @abstractmethod
    def run(self, spec: RunSpec, timeout_s: float, echo: bool = False) -> Outcome:
        """Start the run, wait for it (at most timeout_s once it runs), return its outcome.

        Ctrl-C, SIGTERM or SIGHUP (raised as KeyboardInterrupt: stop_on_signals)
        stops or cancels the run before it propagates: nothing is left running.
        """


S = TypeVar("S", bound=type[Scheduler])
SCHEDULERS: Registry[type[Scheduler]] = Registry("scheduler", lambda cls: cls)


def register(cls: S) -> S:
    """The class decorator that makes a scheduler found by its name, the one a
    launcher's `scheduler` gives."""
    return SCHEDULERS.register(cls)
