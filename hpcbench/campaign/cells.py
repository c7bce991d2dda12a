"""A testbed's cells measured by one `scale` sweep, whose events are read here: each
run reported as it lands, each cell's status journaled once it needs no further run."""

from __future__ import annotations

import dataclasses
import time
from contextlib import closing
from typing import Any

from hpcbench.campaign.campaign_file import Cell, SweepPart, TestbedPlan
from hpcbench.campaign.console import Console, Stopped
from hpcbench.core.errors import UsageError, one_line
from hpcbench.measure import analysis, sweep


class CellRecorder:
    """What the sweep's events (sweep.Event) mean to the campaign: terminal lines per
    run, and per finished cell its journal status, the cells-done count and the ETA's
    clock. `finished` (shared with the runner) holds the cells that got their final
    status."""

    def __init__(
        self, console: Console, tb: TestbedPlan, todo: list[Cell], finished: set[str]
    ) -> None:
        self.console, self.tb, self.finished = console, tb, finished
        self.by_config = {c.config.key: c for c in todo}
        self.seconds: dict[str, float] = {}  # each cell's runs so far

    def handle(self, event: sweep.Event) -> None:
        """One event of the sweep, for the cell of its configuration (none: not this
        part's, or already given its final status)."""
        cell = self.by_config.get(event.config.key)
        if cell is None or cell.id in self.finished:
            return
        if isinstance(event, sweep.RunLanded):
            self.run_landed(cell, event.summary, event.record)
        else:
            self.cell_done(cell, event.summary)

    def run_landed(
        self, cell: Cell, summary: analysis.ConfigSummary | None, record: dict[str, Any]
    ) -> None:
        took = float(record.get("duration_s") or 0.0)
        if not self.seconds:  # the sweep's first run: the probe ran before it
            probe = time.monotonic() - self.console.phase_started - took
            self.console.clock.finished(self.tb.name, "probe", max(0.0, probe))
        self.seconds[cell.id] = self.seconds.get(cell.id, 0.0) + took
        detail = sweep.progress_detail(record, summary) if summary else ""
        status = "ok" if record.get("status") == "ok" else "FAILED"
        self.console.say(
            f"{cell.label}, repeat {int(record.get('repeat', 0)) + 1}: {status} {detail}"
        )

    def cell_done(self, cell: Cell, summary: analysis.ConfigSummary | None) -> None:
        console, journal = self.console, self.console.journal
        self.finished.add(cell.id)
        console.cells_done += 1
        console.clock.finished(self.tb.name, cell.id, self.seconds.get(cell.id, 0.0))
        if summary is not None and summary.runs:
            figures: dict[str, Any] = {}
            if summary.throughput:
                figures = {
                    "runs": summary.runs,
                    f"{summary.unit}_per_s": summary.throughput,
                    "ci95": summary.ci95,
                }
            journal.cell(cell, "measured", **figures)
            console.say(f"cell {cell.label}: measured; {console.progress()}")
        else:
            errors = (summary.errors if summary else None) or ["no run finished"]
            why = errors[-1].splitlines()[0] if errors[-1] else "failed"
            journal.cell(cell, "failed", f"runs: {why}", runs=0)
            console.say(f"cell {cell.label}: FAILED ({one_line(why, 200)}); {console.progress()}")


def measure_part(
    console: Console, tb: TestbedPlan, part: SweepPart, todo: list[Cell], finished: set[str]
) -> bool:
    """One `scale` sweep over the part's cells left; False when a cell failed."""
    recorder = CellRecorder(console, tb, todo, finished)
    spec = dataclasses.replace(part.sweep, only=frozenset(recorder.by_config))
    label = f"sweep (gpus_per_node {part.gpus_per_node})" if len(tb.parts) > 1 else ""
    try:
        with console.phase(tb, "sweep", label):
            try:
                # Closed on every path: a stop while an event is handled here releases
                # the sweep's store and testbed before it goes on up.
                with closing(sweep.events(part.workload, part.target, spec)) as events:
                    for event in events:
                        recorder.handle(event)
            except (UsageError, RuntimeError) as err:
                raise Stopped(f"sweep: {err}") from None
    except Stopped as err:
        fail(console, [c for c in todo if c.id not in finished], finished, str(err))
        return False
    states = console.journal.cell_states()
    return all(states[c.id].status == "measured" for c in todo if c.id in states)


def fail(console: Console, cells: list[Cell], finished: set[str], why: str) -> None:
    """Cells that will not be measured on this deployment: failed, with the cause."""
    for cell in cells:
        finished.add(cell.id)
        console.cells_done += 1
        console.journal.cell(cell, "failed", why)
