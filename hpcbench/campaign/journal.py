"""The campaign's journal: what happened to each cell and testbed, append-only.

It is a results store (hpcbench.store: one fsync'd line per record, a torn
line skipped) at the campaign's folder, holding two kinds of record:

    {"kind": "cell", "campaign", "testbed", "cell", "batch", "nodes", "workers",
     "gpus_per_node", "status": pending|deployed|verified|measured|failed, "why", "at", ...}
    {"kind": "phase", "campaign", "testbed", "fingerprint", "phase": deploy|verify|sweep|
     destroy|keep, "status": ok|failed|interrupted, "seconds", "why", "at"}

A cell's status is its latest record; the measurements themselves are in each
testbed's own store (<out>/<testbed>/results.jsonl), which `scale` and
`report` read as they always do. The store's lock makes one campaign per
folder at a time.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcbench import locks
from hpcbench.campaign.campaign_file import Cell, TestbedPlan
from hpcbench.errors import UsageError, one_line
from hpcbench.store import Store

CELL_STATUSES = ("pending", "deployed", "verified", "measured", "failed")
PHASES = ("deploy", "verify", "sweep", "destroy", "keep")
PHASE_STATUSES = ("ok", "failed", "interrupted")
WHY_MAX = 500  # characters of a cause kept in the journal


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def why_line(text: object) -> str:
    """A cause as the journal keeps it: one line of at most WHY_MAX characters."""
    return one_line(str(text), WHY_MAX)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _cell_ok(r: dict[str, Any]) -> bool:
    return (
        isinstance(r.get("cell"), str)
        and isinstance(r.get("testbed"), str)
        and r.get("status") in CELL_STATUSES
        and isinstance(r.get("why", ""), str)
        and all(isinstance(r.get(k), int) for k in ("batch", "nodes", "workers"))
    )


def _phase_ok(r: dict[str, Any]) -> bool:
    return (
        isinstance(r.get("testbed"), str)
        and r.get("phase") in PHASES
        and r.get("status") in PHASE_STATUSES
        and _number(r.get("seconds", 0))
        and isinstance(r.get("why", ""), str)
    )


@dataclass(frozen=True)
class CellState:
    status: str
    why: str = ""
    at: str = ""
    runs: int = 0
    images_per_s: float | None = None
    ci95: float | None = None


class Journal:
    def __init__(self, out: Path, campaign: str) -> None:
        self.store = Store(out)
        self.campaign = campaign
        self._fd: int | None = None

    @property
    def path(self) -> Path:
        return self.store.path

    def records(self) -> list[dict[str, Any]]:
        """This campaign's cell and phase records; damaged ones are skipped and named
        by the store, records of the wrong shape are skipped here."""
        out = []
        for r in self.store.records():
            kind = r.get("kind")
            if kind == "cell" and _cell_ok(r) or kind == "phase" and _phase_ok(r):
                out.append(r)
        return out

    def check_owner(self) -> None:
        """A folder holds one campaign: another's journal there is refused."""
        others = {r.get("campaign") for r in self.records()} - {self.campaign}
        if others:
            raise UsageError(
                f"{self.store.dir} holds campaign {sorted(map(str, others))[0]!r}, not "
                f"{self.campaign!r}: give this campaign another `out:`"
            )

    def lock(self) -> None:
        """The campaign's folder for this run alone; the pid beside the lock tells
        `campaign status` that a run is under way, and whose."""
        if self.path.exists() and not self.path.is_file():
            raise UsageError(
                f"{self.path} is not a file: move it away, or give the campaign another `out:`"
            )
        self.store.dir.mkdir(parents=True, exist_ok=True)
        self._fd = locks.hold_as_process(
            self.store.lock_path,
            f"{self.store.dir} is in use by another campaign run: wait for it to end "
            "(`hpcbench campaign status` shows its progress)",
        )

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def running(self) -> int | None:
        """The pid of the `campaign run` that holds this folder now (0: one that did not
        say), or None when none runs."""
        return locks.holder(self.store.lock_path)

    # ------------------------------------------------------------- writing
    def cell(self, cell: Cell, status: str, why: str = "", **extra: Any) -> None:
        assert status in CELL_STATUSES
        self.store.append(
            {
                "kind": "cell",
                "campaign": self.campaign,
                "testbed": cell.testbed,
                "cell": cell.id,
                "batch": cell.batch,
                "nodes": cell.nodes,
                "workers": cell.workers,
                "gpus_per_node": cell.gpus_per_node,
                "status": status,
                "why": why_line(why),
                "at": now(),
                **extra,
            }
        )

    def phase(
        self, tb: TestbedPlan, phase: str, status: str, seconds: float, why: str = "", **extra: Any
    ) -> None:
        assert phase in PHASES and status in PHASE_STATUSES
        self.store.append(
            {
                "kind": "phase",
                "campaign": self.campaign,
                "testbed": tb.name,
                "env": tb.env,
                "fingerprint": tb.fingerprint,
                "phase": phase,
                "status": status,
                "seconds": round(seconds, 3),
                "why": why_line(why),
                "at": now(),
                **extra,
            }
        )

    # ------------------------------------------------------------- reading
    def cell_states(self, records: list[dict[str, Any]] | None = None) -> dict[str, CellState]:
        """Each cell's latest state, by cell id."""
        states: dict[str, CellState] = {}
        for r in records if records is not None else self.records():
            if r["kind"] != "cell":
                continue
            ips = r.get("images_per_s")
            ci = r.get("ci95")
            states[r["cell"]] = CellState(
                r["status"],
                r.get("why", ""),
                str(r.get("at", "")),
                r.get("runs") if isinstance(r.get("runs"), int) else 0,
                ips if _number(ips) else None,
                ci if _number(ci) else None,
            )
        return states

    def phases(self, records: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        return [
            r for r in (records if records is not None else self.records()) if r["kind"] == "phase"
        ]
