"""What a running campaign tells, and where: one terminal line per step and run,
each phase's full output in `<out>/logs/<testbed>.log`, each phase's time and
outcome in the journal and the ETA's clock."""

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
from hpcbench.errors import one_line
from hpcbench.progress import format_duration


class Stopped(Exception):
    """A phase failed; the testbed's remaining cells fail with this cause."""


@contextlib.contextmanager
def logged(path: Path) -> Iterator[None]:
    """This process's stdout and stderr (and so every child's) appended to `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (fd, *saved):
            os.close(f)


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

    def say(self, text: str) -> None:
        prefix = ""
        if self.tb is not None:
            k, n = self.tb_number
            prefix = f"[testbed {k}/{n} {self.tb.name}] "
        self.term.write(f"{prefix}{text}\n")
        self.term.flush()

    def progress(self) -> str:
        elapsed = time.monotonic() - self.started
        eta = self.clock.eta()
        eta_text = ""
        if eta is not None:
            about, most = (format_duration(seconds) for seconds in eta)
            eta_text = f", ETA {about}" + (f" (at most {most})" if most != about else "")
        return (
            f"cell {self.cells_done} of {self.cells_total} done, "
            f"{format_duration(elapsed)} elapsed{eta_text}"
        )

    def log_path(self, tb: TestbedPlan) -> Path:
        return self.campaign.out / "logs" / f"{tb.name}.log"

    @contextlib.contextmanager
    def phase(self, tb: TestbedPlan, name: str, label: str = "") -> Iterator[dict[str, Any]]:
        """One phase: its output to the testbed's log, its time and outcome to the journal
        (with what the phase puts in the dict it is given), the ETA's clock, a line to
        the terminal."""
        extra: dict[str, Any] = {}
        log = self.log_path(tb)
        shown = label or name
        self.say(f"{shown} ... (output: {log})")
        started = self.phase_started = time.monotonic()
        try:
            with logged(log):
                print(f"==== {time.strftime('%Y-%m-%d %H:%M:%S')} {tb.name}: {name}", flush=True)
                yield extra
        except KeyboardInterrupt:
            self.journal.phase(tb, name, "interrupted", time.monotonic() - started)
            raise
        except Stopped as err:
            took = time.monotonic() - started
            self.journal.phase(tb, name, "failed", took, str(err))
            self.clock.finished(tb.name, name, took)
            self.say(f"{shown} FAILED in {format_duration(took)}: {one_line(str(err), 300)}")
            raise
        took = time.monotonic() - started
        self.journal.phase(tb, name, "ok", took, **extra)
        self.clock.finished(tb.name, name, took)
        self.say(f"{shown} ok in {format_duration(took)}; {self.progress()}")
