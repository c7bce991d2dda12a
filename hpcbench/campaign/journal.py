"""The campaign's journal: what happened to each cell and testbed, append-only.

It is a results store (hpcbench.measure.store: one fsync'd line per record, a torn
line skipped) at the campaign's folder, holding four kinds of record:

    {"kind": "cell", "campaign", "testbed", "cell", "batch", "nodes", "workers",
     "gpus_per_node", "status": pending|deployed|verified|measured|failed|skipped, "why",
     "at", ...} (skipped: never launched, as it does not fit its GPUs; why says so)
    {"kind": "phase", "campaign", "testbed", "fingerprint", "phase": deploy|verify|sweep|
     destroy|keep, "status": ok|failed|interrupted, "seconds", "why", "at",
     "jobs_left": [{"job", "scancel", "where", "why"}, ...] (Slurm jobs not confirmed gone),
     "jobs_gone": [job, ...] (jobs an earlier phase left, cancelled since)}
    {"kind": "forecast", "campaign", "testbed", "made": plan|booking, "at",
     "cells": [forecast.CellForecast.record(), ...], "lease"}
    {"kind": "job", "campaign", "testbed", "name", "job", "partition", "where",
     "scancel", "status": sbatch|queued|left|gone, "why", "at"} (a Slurm job as it
     comes and goes: hpcbench.schedulers.slurm.JobNote)

A cell's status is its latest record; the measurements themselves are in each
testbed's own store (<out>/<testbed>/results.jsonl), which `scale` and
`report` read as they always do. The store's lock makes one campaign per
folder at a time. A Slurm job is open from its first job record until one says
it is gone (or, in journals written before job records, from the phase that
left it until one names it in jobs_gone).

The journal is never written through a link: a symbolic link at its name or in
its folder, and a journal of more than one name (a hard link to a file
elsewhere), are refused in one line naming it (hpcbench.core.files); a folder
that holds `scale`'s own results (runs, probes) is no campaign's (check_owner).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcbench.campaign.campaign_file import Cell, TestbedPlan
from hpcbench.core import locks
from hpcbench.core.errors import UsageError, one_line
from hpcbench.measure.store import MAX_SECONDS, RECORD_KINDS, Store, validator
from hpcbench.schedulers.slurm import JOB_STATUSES, JobNote

CELL_STATUSES = ("pending", "deployed", "verified", "measured", "failed", "skipped")
PHASES = ("deploy", "verify", "sweep", "destroy", "keep")
PHASE_STATUSES = ("ok", "failed", "interrupted")
# A forecast made by `campaign run` before anything was booked (plan), and the one made
# again just before each testbed is booked, from what the earlier ones measured.
FORECASTS = ("plan", "booking")
WHY_MAX = 500  # characters of a cause kept in the journal
# Why a job is named by its unique name: sbatch had not answered when the run ended.
NO_ID = "sbatch did not return its id"


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def why_line(text: object) -> str:
    """A cause as the journal keeps it: one line of at most WHY_MAX characters."""
    return one_line(str(text), WHY_MAX)


# A lease's end (seconds since the epoch) past the year 9999 is no time a clock shows.
_LAST_EPOCH_S = 253402300799
# The shapes of the two kinds of record: a record that does not fit is skipped and named
# by the store (hpcbench.measure.store.validator), as a bad run is; every number is finite and
# bounded, so that no sum of them overflows or prints as inf.
_STRING = {"type": "string"}
_FIGURE = {"type": ["number", "null"], "minimum": 0, "maximum": 1e15}
_COUNT = {"type": "integer"}
# Every kind's fields read back as the journal writes them: a record that does not fit
# is skipped and named, never a key nothing can hash or a number nothing can sum.
_EVERY = {"campaign": _STRING, "testbed": _STRING, "at": _STRING}
_CELL = {
    "required": ["campaign", "cell", "testbed", "status", "batch", "nodes", "workers"],
    "properties": {
        **_EVERY,
        "cell": _STRING,
        "status": {"enum": list(CELL_STATUSES)},
        "why": _STRING,
        **{k: _COUNT for k in ("batch", "nodes", "workers", "gpus_per_node")},
        "runs": {"type": ["integer", "null"], "minimum": 0, "maximum": 10**9},
        # The measured throughput, named by its unit (a journal written before named a
        # transformer's tokens/s images_per_s too: per_s reads either).
        "images_per_s": _FIGURE,
        "tokens_per_s": _FIGURE,
        "ci95": _FIGURE,
    },
}
_LEASE = {
    "type": ["object", "null"],
    "properties": {
        "variable": _STRING,
        "value": {"type": ["string", "number"]},
        "ends_at": {"type": ["number", "null"], "minimum": 0, "maximum": _LAST_EPOCH_S},
    },
}
_PHASE = {
    "required": ["campaign", "testbed", "phase", "status", "seconds"],
    "properties": {
        **_EVERY,
        "env": _STRING,
        "fingerprint": _STRING,
        "phase": {"enum": list(PHASES)},
        "status": {"enum": list(PHASE_STATUSES)},
        "seconds": {"type": "number", "minimum": 0, "maximum": MAX_SECONDS},
        "why": _STRING,
        "lease": _LEASE,
        "still_held": {"type": "array", "items": _STRING},
        # Slurm jobs whose cancel could not be confirmed in the phase (LeftJob.record).
        "jobs_left": {
            "type": "array",
            "maxItems": 10_000,
            "items": {
                "type": "object",
                "required": ["job", "scancel", "where"],
                "properties": {
                    k: _STRING for k in ("job", "scancel", "where", "why", "name", "partition")
                },
            },
        },
        # Jobs an earlier phase left (their "job"), confirmed gone since.
        "jobs_gone": {"type": "array", "maxItems": 10_000, "items": _STRING},
    },
}
_EFFICIENCY = {"type": ["number", "null"], "minimum": 0, "maximum": 10}
_FORECAST = {
    "required": ["campaign", "testbed", "made", "cells"],
    "properties": {
        **_EVERY,
        "made": {"enum": list(FORECASTS)},
        "cells": {
            "type": "array",
            "maxItems": 100_000,
            "items": {
                "type": "object",
                "required": ["cell", "batch", "nodes", "workers"],
                "properties": {
                    "cell": _STRING,
                    **{k: _COUNT for k in ("batch", "nodes", "workers", "gpus_per_node")},
                    # The throughput fields, named by the unit they count (a
                    # journal written before named both units images_per_s).
                    **{
                        f"{single}{unit}_per_s": _FIGURE
                        for single in ("", "single_")
                        for unit in ("images", "tokens")
                    },
                    # What the throughput fields count (forecast.CellForecast.record).
                    "unit": {"enum": ["images", "tokens"]},
                    "single_source": _STRING,
                    "link_source": _STRING,
                    **{k: _EFFICIENCY for k in ("efficiency", "efficiency_low", "efficiency_high")},
                },
            },
        },
        "lease": _LEASE,
    },
}
_JOB = {
    "required": ["campaign", "testbed", "name", "job", "status"],
    "properties": {
        **_EVERY,
        **{k: _STRING for k in ("name", "job", "partition", "where", "scancel", "why")},
        "status": {"enum": list(JOB_STATUSES)},
    },
}
_CHECKER = validator({"cell": _CELL, "phase": _PHASE, "forecast": _FORECAST, "job": _JOB})
# The kinds Journal.records() reads (forecasts are read on their own).
_RECORDS = ("cell", "phase", "job")


def _printable(record: dict[str, Any]) -> dict[str, Any]:
    """A record whose text a command may print as one line: its cause, its time and its
    lease's names through the one-line filter (a terminal escape written out)."""
    record["why"] = why_line(record.get("why", ""))
    record["at"] = why_line(record.get("at", ""))
    lease = record.get("lease")
    if isinstance(lease, dict):
        for key in ("variable", "value"):
            if isinstance(lease.get(key), str):
                lease[key] = why_line(lease[key])
    for job in record.get("jobs_left") or []:
        for key in ("job", "scancel", "where", "why", "name", "partition"):
            if key in job or key in ("job", "scancel", "where", "why"):
                job[key] = why_line(job.get(key, ""))
    if record.get("jobs_gone"):
        record["jobs_gone"] = [why_line(job) for job in record["jobs_gone"]]
    if record.get("kind") == "job":
        for key in ("name", "job", "partition", "where", "scancel"):
            record[key] = why_line(record.get(key, ""))
    return record


def left_line(job: dict[str, Any]) -> str:
    """A job the journal says may be left (Journal.jobs_left), as one line naming it,
    its partition where known, and the scancel command that cancels it (every part as
    the journal holds it, escapes and line breaks written out: one printable line)."""
    why = f" ({job['why']})" if job.get("why") else ""
    on = ""  # a journal before partitions were kept: not said
    if "partition" in job:
        on = (
            f" on partition {job['partition']}"
            if job["partition"]
            else " on the cluster's default partition"
        )
    since = (
        f"since its {job['phase']} at {job['at']}"
        if job.get("phase")
        else f"since it was submitted at {job['at']}"
    )
    return one_line(
        f"slurm job {job['job']} of testbed {job['testbed']}{on} may still be queued or "
        f"running {since}{why}: `{job['scancel']}` {job['where']} cancels it"
    )


def per_s(record: dict[str, Any], single: bool = False) -> float | None:
    """A journal record's throughput (`single`: one worker's), named by its unit: tokens_per_s
    where it holds one, else images_per_s (what every record before the units named it)."""
    prefix = "single_" if single else ""
    value = record.get(f"{prefix}tokens_per_s")
    return value if value is not None else record.get(f"{prefix}images_per_s")


@dataclass(frozen=True)
class CellState:
    status: str
    why: str = ""
    at: str = ""
    runs: int = 0
    per_s: float | None = None  # its throughput, in its sweep's unit
    ci95: float | None = None


class Journal:
    def __init__(self, out: Path, campaign: str) -> None:
        self.store = Store(out, _CHECKER, one_link=True)
        self.campaign = campaign
        self._fd: int | None = None

    @property
    def path(self) -> Path:
        return self.store.path

    def records(self) -> list[dict[str, Any]]:
        """This campaign's cell, phase and job records, their text one line each; damaged
        ones and ones of the wrong shape are skipped and named by the store."""
        return [_printable(r) for r in self.store.records() if r.get("kind") in _RECORDS]

    def forecasts(self) -> list[dict[str, Any]]:
        """This campaign's forecast records, oldest first, their text one line each."""
        out = []
        for r in self.store.records():
            if r.get("kind") != "forecast" or r.get("campaign") != self.campaign:
                continue
            for c in r["cells"]:
                for key in ("single_source", "link_source"):
                    c[key] = why_line(c.get(key, ""))
            out.append(_printable(r))
        return out

    def check_owner(self) -> None:
        """A folder holds one campaign: another's journal there is refused, and so is
        `scale`'s own results store (`scale --out` there: its runs and probes), which
        the journal would be appended to and the report written over."""
        records = list(self.store.records())
        kinds = tuple(RECORD_KINDS)  # a tuple: a kind that is a list compares, never hashes
        measured = [r for r in records if r.get("kind") in kinds]
        if measured:
            raise UsageError(
                f"{self.store.dir} holds a results store of `scale` ({len(measured)} "
                f"run or probe record(s) in {self.path.name}), not a campaign's journal: "
                "give this campaign an `out:` of its own"
            )
        journal = [r for r in records if r.get("kind") in _RECORDS]
        others = {r.get("campaign") for r in journal} - {self.campaign}
        if others:
            raise UsageError(
                f"{self.store.dir} holds campaign {sorted(map(str, others))[0]!r}, not "
                f"{self.campaign!r}: give this campaign another `out:`"
            )

    def lock(self) -> None:
        """The campaign's folder for this run alone; the pid beside the lock tells
        `campaign status` that a run is under way, and whose."""
        if self.store.exists():  # a link, a FIFO, a folder, an oversized file: refused now
            self.store.check_readable()
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

    def job(self, tb: TestbedPlan, note: JobNote) -> None:
        """A Slurm job of the testbed as it comes and goes (slurm.booked: before sbatch
        runs, the moment its id is back, when it is left or gone), fsync'd."""
        self.store.append(
            {
                "kind": "job",
                "campaign": self.campaign,
                "testbed": tb.name,
                "name": note.name,
                "job": note.job,
                "partition": note.partition,
                "where": note.where,
                "scancel": note.scancel,
                "status": note.status,
                "why": why_line(note.why),
                "at": now(),
            }
        )

    def forecast(
        self,
        tb: TestbedPlan,
        made: str,
        cells: list[dict[str, Any]],
        lease: dict[str, Any] | None = None,
    ) -> None:
        assert made in FORECASTS
        self.store.append(
            {
                "kind": "forecast",
                "campaign": self.campaign,
                "testbed": tb.name,
                "made": made,
                "at": now(),
                "cells": cells,
                **({"lease": lease} if lease else {}),
            }
        )

    # ------------------------------------------------------------- reading
    def cell_states(self, records: list[dict[str, Any]] | None = None) -> dict[str, CellState]:
        """Each cell's latest state, by cell id."""
        states: dict[str, CellState] = {}
        for r in records if records is not None else self.records():
            if r["kind"] != "cell":
                continue
            states[r["cell"]] = CellState(
                r["status"],
                r["why"],
                r["at"],
                r.get("runs") or 0,
                per_s(r),
                r.get("ci95"),
            )
        return states

    def phases(self, records: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        return [
            r for r in (records if records is not None else self.records()) if r["kind"] == "phase"
        ]

    def jobs_left(self, records: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """Every Slurm job that may still be queued or running, in the order the journal
        last spoke of each: one whose job records end in no "gone", or one a phase could
        not confirm cancelled (LeftJob.record) that no later record names gone. Each as
        {"job": its id, or its name where sbatch gave none, "testbed", "scancel",
        "where", "why", "at", and where known "name", "partition", "phase" (the one that
        left it)}; a job named by its id and by its name is one job."""
        left: list[dict[str, Any]] = []

        def take(testbed: str, *handles: str) -> dict[str, Any]:
            """The open job of the testbed that a handle names, taken out ({}: none)."""
            wanted = {h for h in handles if h}
            for k, job in enumerate(left):
                ids = job["job"].split(", ")  # LeftJob.job: the ids a cancel by name found
                if job["testbed"] == testbed and wanted & {job["job"], *ids, job.get("name")}:
                    return left.pop(k)
            return {}

        for r in records if records is not None else self.records():
            testbed = r["testbed"]
            if r["kind"] == "job":
                known = take(testbed, r["job"], r["name"])
                if r["status"] != "gone":
                    left.append(
                        {
                            "at": r["at"],  # when it was submitted, if known
                            **known,
                            **{k: r[k] for k in ("name", "partition", "scancel", "where")},
                            "testbed": testbed,
                            "job": r["job"] or r["name"],
                            "why": r["why"] or ("" if r["job"] else NO_ID),
                        }
                    )
            elif r["kind"] == "phase":
                for gone in r.get("jobs_gone") or []:
                    take(testbed, gone)
                for job in r.get("jobs_left") or []:
                    known = take(testbed, job["job"], job.get("name", ""))
                    left.append(
                        {**known, **job, "testbed": testbed, "phase": r["phase"], "at": r["at"]}
                    )
        return left
