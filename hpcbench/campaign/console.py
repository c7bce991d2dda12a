"""What a running campaign tells, and where: one terminal line per step and run,
each phase's full output in `<out>/logs/<testbed>.log`, each phase's time and
outcome in the journal and the ETA's clock.

The terminal may go away at any time (its ssh session drops, the `tee` or `less`
it is piped into exits): a write that fails there is never an error of the
campaign. The console says the rest in the log instead, and whatever the campaign
was doing, a teardown above all, goes on as if the line had been shown.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from hpcbench.campaign.campaign_file import Campaign, TestbedPlan
from hpcbench.campaign.estimate import Clock
from hpcbench.campaign.journal import Journal
from hpcbench.core import files
from hpcbench.core.bounded import stop_name
from hpcbench.core.errors import UsageError, one_line
from hpcbench.core.progress import format_duration
from hpcbench.schedulers import slurm


class Stopped(Exception):
    """A phase failed; the testbed's remaining cells fail with this cause."""


# Lines said once the terminal is gone, while no testbed is in hand (a testbed's
# own go to its log); no testbed's log has this name (a testbed name has no '.').
TERMINAL_LOG = "campaign.terminal.log"


def _open_log(path: Path, root: Path | None) -> int:
    """`path` open for appending, created 0600 (its folder made); a link there or in
    any folder below `root` (the campaign's `out`; None: the log's folder), or anything
    but a regular file at its name, is refused (UsageError naming it), never written
    through."""
    files.make_folder(path.parent, root)
    return files.open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600, root)


def append_lines(path: Path, lines: list[str], root: Path | None = None) -> bool:
    """`lines` appended to the log at `path`; False when it cannot be (said nowhere:
    this is the last place a line goes)."""
    try:
        fd = _open_log(path, root)
    except (UsageError, OSError):
        return False
    try:
        data = "".join(f"{line}\n" for line in lines).encode(errors="replace")
        while data:  # write(2) may take less than it is given
            data = data[os.write(fd, data) :]
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def _flush_std() -> None:
    """stdout's and stderr's buffers written out; a terminal gone while they held
    something must not stop what comes next (the destroy after a phase)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()


@contextlib.contextmanager
def logged(path: Path, must_run: bool = False, root: Path | None = None) -> Iterator[str | None]:
    """This process's stdout and stderr (and so every child's) appended to `path`.
    Yields None, or, with must_run, why the log could not be opened: the output then
    goes to /dev/null rather than the block not running (a destroy never waits on
    its log). Without must_run that is the UsageError or OSError of the open."""
    _flush_std()
    why = None
    try:
        fd = _open_log(path, root)
    except (UsageError, OSError) as err:
        if not must_run:
            raise
        why = str(err) if isinstance(err, UsageError) else f"{path}: {err.strerror or err}"
        fd = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    saved = os.dup(1), os.dup(2)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield why
    finally:
        _flush_std()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (fd, *saved):
            os.close(f)


def _identity(fd: int) -> tuple[int, int] | None:
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class Console:
    """The campaign's terminal and its bookkeeping of progress: cells done, the testbed
    in hand (its lines are prefixed with it), the ETA's clock, the journal's phases."""

    def __init__(self, campaign: Campaign, journal: Journal, term: TextIO) -> None:
        self.campaign, self.journal, self.term = campaign, journal, term
        self.clock = Clock()
        self.started = time.monotonic()
        self.cells_total = len(campaign.cells)
        self.cells_done = 0
        self.tb: TestbedPlan | None = None
        self.tb_number = (0, 0)
        self.phase_started = time.monotonic()  # the phase in hand's start
        self.term_lost = False
        self._dead: tuple[int, int] | None = None  # what the lost terminal was (fstat)

    def say(self, text: str, keep: bool = False) -> None:
        """One line on the terminal; keep: in the log of the testbed in hand as well.
        A terminal that fails a write (EPIPE: its reader exited; EIO: its pty was
        closed) is lost: this line and every later one go to the log instead, and
        nothing here raises."""
        prefix = ""
        if self.tb is not None:
            k, n = self.tb_number
            prefix = f"[testbed {k}/{n} {self.tb.name}] "
        line = f"{prefix}{text}"
        if not self.term_lost:
            try:
                self.term.write(f"{line}\n")
                self.term.flush()
            except (OSError, ValueError):  # ValueError: a closed stream
                self.lose_terminal()
        if self.term_lost or keep:
            append_lines(self.own_log(), [line], self.campaign.out)

    def own_log(self) -> Path:
        """The log of the testbed in hand, or the campaign's own between testbeds."""
        if self.tb is not None:
            return self.log_path(self.tb)
        return self.campaign.out / "logs" / TERMINAL_LOG

    def lose_terminal(self) -> None:
        """The terminal is gone for good: the descriptors of this process that still
        point at it (the console's own, stdout and stderr) point at /dev/null from here
        on, so that no later write, flush or close fails on it (this process's last
        line, the interpreter's final flush)."""
        self.term_lost = True
        with contextlib.suppress(OSError, ValueError):
            self._dead = _identity(self.term.fileno())
        self.sink_lost_terminal()

    def sink_lost_terminal(self) -> None:
        """After a phase's log hands stdout and stderr back: any that is the lost
        terminal goes to /dev/null again."""
        if self._dead is None:
            return
        fds = {1, 2}
        with contextlib.suppress(OSError, ValueError):
            fds.add(self.term.fileno())
        with contextlib.suppress(OSError):  # out of descriptors: the writes fail as before
            sink = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
            try:
                for fd in fds:
                    if _identity(fd) == self._dead:
                        os.dup2(sink, fd)
            finally:
                os.close(sink)

    def progress(self) -> str:
        elapsed = time.monotonic() - self.started
        eta = self.clock.eta()
        eta_text = ""
        if eta is not None and self.cells_done < self.cells_total:
            about, most = (format_duration(seconds) for seconds in eta)
            eta_text = f", ETA {about}" + (f" (at most {most})" if most != about else "")
        return (
            f"cell {self.cells_done} of {self.cells_total} done, "
            f"{format_duration(elapsed)} elapsed{eta_text}"
        )

    def log_path(self, tb: TestbedPlan) -> Path:
        return self.campaign.out / "logs" / f"{tb.name}.log"

    @contextlib.contextmanager
    def phase(
        self, tb: TestbedPlan, name: str, label: str = "", must_run: bool = False
    ) -> Iterator[dict[str, Any]]:
        """One phase: its output to the testbed's log, its time and outcome to the journal
        (with what the phase puts in the dict it is given, failed or not), the ETA's
        clock, a line to the terminal. must_run: the phase runs even where its log
        cannot be written (a destroy), with its output discarded and the reason said."""
        extra: dict[str, Any] = {}
        log = self.log_path(tb)
        shown = label or name
        self.say(f"{shown} ... (output: {log})")
        started = self.phase_started = time.monotonic()
        try:
            try:
                with logged(log, must_run, self.campaign.out) as refused:
                    if refused:
                        self.say(f"{shown}: its output is not kept: {one_line(refused, 300)}")
                    print(
                        f"==== {time.strftime('%Y-%m-%d %H:%M:%S')} {tb.name}: {name}", flush=True
                    )
                    yield extra
            finally:
                self.sink_lost_terminal()
        except KeyboardInterrupt as err:
            self.jobs_left(extra)
            took = time.monotonic() - started
            self.journal.phase(tb, name, "interrupted", took, f"by {stop_name(err)}", **extra)
            raise
        except Stopped as err:
            took = time.monotonic() - started
            self.jobs_left(extra)
            self.journal.phase(tb, name, "failed", took, str(err), **extra)
            self.clock.finished(tb.name, name, took)
            self.say(f"{shown} FAILED in {format_duration(took)}: {one_line(str(err), 300)}")
            raise
        took = time.monotonic() - started
        self.jobs_left(extra)
        self.journal.phase(tb, name, "ok", took, **extra)
        self.clock.finished(tb.name, name, took)
        self.say(f"{shown} ok in {format_duration(took)}; {self.progress()}")

    def jobs_left(self, extra: dict[str, Any]) -> None:
        """The Slurm jobs whose cancel this phase could not confirm: each on the terminal
        (and the log), and in the phase's journal record, with its scancel command; and
        those an earlier run left that are cancelled now (Runner.cancel_left)."""
        left, gone = slurm.take_left(), slurm.take_gone()
        for job in left:
            self.say(f"STILL QUEUED OR RUNNING: {job.line()}", keep=True)
        if left:
            extra["jobs_left"] = [job.record() for job in left]
        if gone:  # left by an earlier run, cancelled since
            extra["jobs_gone"] = gone
