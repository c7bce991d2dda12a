"""The results store: one JSON record per line in DIR/results.jsonl, append-only.

Each record goes to disk as one write() of a whole line on an O_APPEND
descriptor followed by fsync, so a killed sweep loses at most the run in
flight; a write that fails (a full disk, a short write) is cut off again, so the
file is as it was. The file is opened through hpcbench.core.files: never through a
symbolic link at its name or in its folder below the one the user named (one planted
at results.jsonl is refused, the file it points at untouched), never waiting on a
FIFO there, and read to at most files.RESULTS bytes. A torn
last line (power loss mid-write, an older hpcbench) is skipped on reading, and so
is any line that is not a record analysis can use (named on stderr, counted
in `Store.skipped`), so a damaged store still reports and resumes.

A record that cannot be written (a read-only or full disk, a folder gone) is not
lost: it goes to a file beside the store, or in the temporary folder, or whole
on stdout, and the failure is one line naming the path, the cause and where the
record is (StoreWriteError: exit status 1).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import stat
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema

from hpcbench.core import files, locks
from hpcbench.core.errors import UsageError, one_line
from hpcbench.launchers.parse import MAX_BATCH, MAX_NODES, MAX_SLOTS
from hpcbench.measure.identity import CONFIG_FIELDS

RESULTS_FILE = "results.jsonl"
LOCK_FILE = ".lock"
# The version every line carries. History (a reader of version N reads every line
# written under N; a field is only ever added under one version, and a reader takes
# its absence as what every earlier run had, identity.ADDED_LATER):
#   1  2026-11-22  one JSON object per line: runs and probes (f233d13)
#      2026-11-23  + method fields, convergence records (e135c3d)
#      2026-11-25  read against RECORD_SCHEMA, a line that does not fit is skipped (a0ee18e)
#      2026-11-26  + step and decode, written only when not eager/auto (74182f7)
#      2026-11-27  + a probe's budget_s and stopped_early (absent: the full size sweep)
#      2026-11-28  + the transformers' parallel, seq_len and shard_group (labels at
#                  ddp, 0, 0 as before); a probe's all_gather, reduce_scatter and
#                  collectives (absent: all-reduce alone)
#      2026-11-28  + a run's energy, slurm_energy, fabric and mllog (absent: none
#                  recorded; bench/energy.py, bench/nccl_log.py, bench/mllog.py)
#      2026-12-02  the method label names every option that decides what a run
#                  measures (hpcbench/measure/identity.py), each left out at its
#                  default: the labels of the runs before are as they were
#      2026-12-07  + a probe's cpu_period_s (absent: the kernel's default period,
#                  allreduce_model.CFS_PERIOD_S)
# A change of a field's meaning or unit is version 2, with a reader for 1.
# What is read: version 1, every line of it, the one format written so far; there is
# no older format and so no reader for one. ADDED_LATER is part of version 1 as it is
# written today (a label leaves step and decode out at eager and auto), not a reader
# of an earlier format: dropping it would change the labels of today's records and
# the cell ids of today's campaign journals.
SCHEMA = 1


def config_key(record: dict[str, Any]) -> tuple:
    return tuple(record.get(f) for f in CONFIG_FIELDS)


def run_key(record: dict[str, Any]) -> tuple:
    return (*config_key(record), record.get("repeat"))


# The one schema of a record, as the store writes it and as the report may read it:
# the fields analysis and the report use, their types and their bounds (a record of
# 10**18 nodes would have the report allocate for them). What does not fit is skipped.
# Every number analysis computes with is bounded far beyond any measurement and far
# below a double's limits, so that no sum, product or quotient of them overflows
# (1e308 + 1e308, 8 images / 5e-324 s): a window of a nanosecond or a year is no
# measurement, nor a petabyte of gradients.
_COUNT = {"type": "integer", "minimum": 1}
MAX_SECONDS = 1e7  # seconds: a window, a run, an all-reduce (four months)
_MAX_BYTES = 1e15  # bytes, and bytes per second
_SECONDS = {"type": "number", "minimum": 1e-9, "maximum": MAX_SECONDS}
_BYTES = {"type": "number", "exclusiveMinimum": 0, "maximum": _MAX_BYTES}
_RATE = {"type": "number", "minimum": 0, "maximum": _MAX_BYTES}  # an idle link's 0 too
_SHARE_OR_NULL = {"type": ["number", "null"], "minimum": 0, "maximum": 1}
_SECONDS_OR_NULL = {"type": ["number", "null"], "minimum": 0, "maximum": MAX_SECONDS}
_SCALAR = {"type": ["string", "number", "null"]}
_TEXT = {"type": "string"}
_TEXT_OR_NULL = {"type": ["string", "null"]}
_WHOLE_OR_NULL = {"type": ["integer", "null"], "minimum": 0, "maximum": 10**18}
# Joules over a run's windows, or the reason there are none (bench/energy.py).
_ENERGY_READING = {
    "type": ["object", "null"],
    "properties": {
        "joules": {"type": ["number", "null"], "minimum": 0, "maximum": 1e15},
        "seconds": {"type": ["number", "null"], "minimum": 0, "maximum": 1e7},
        "gpus": _WHOLE_OR_NULL,
        "hosts": _WHOLE_OR_NULL,
        "unknown": _TEXT_OR_NULL,
    },
}
_RUN = {
    # The series' names are text and its sizes whole numbers in every record (a report
    # sorts and joins them): a store whose records mix 3 and "a" has those skipped.
    "required": [*(f for f in CONFIG_FIELDS if f != "method"), "repeat", "status"],
    "properties": {
        **{f: _SCALAR for f in CONFIG_FIELDS},
        "env": _TEXT,
        "model": _TEXT,
        "backend": _TEXT,
        "data": _TEXT,
        "method": {"type": ["string", "null"]},
        "image_size": {"type": "integer", "minimum": 0, "maximum": 1 << 20},
        "gpus_per_node": {**_COUNT, "maximum": MAX_SLOTS},
        "nodes": {**_COUNT, "maximum": MAX_NODES},
        "workers": {**_COUNT, "maximum": MAX_NODES * MAX_SLOTS},
        "batch": {**_COUNT, "maximum": MAX_BATCH},
        "repeat": {"type": "integer", "minimum": 0, "maximum": 1_000_000},
        "status": {"type": "string"},
        "error": {"type": "string"},
        # Read from failed runs as from ok ones (a series' gradient bytes, a plan's run
        # length, a queue's wait): bounded whatever the status.
        "data_time_fraction": _SHARE_OR_NULL,
        "allreduce_bytes": {"type": ["number", "null"], "minimum": 0, "maximum": _MAX_BYTES},
        "duration_s": _SECONDS_OR_NULL,
        "queue_wait_s": _SECONDS_OR_NULL,
        # Launch (this host's clock) to the first timed step (the node's): two clocks,
        # so a little below zero is a real record.
        "overhead_s": {"type": ["number", "null"], "minimum": -MAX_SECONDS, "maximum": MAX_SECONDS},
        "gpu": {
            "type": ["object", "null"],
            "properties": {
                "util_mean": {"type": ["number", "null"], "minimum": 0, "maximum": 100},
                "mem_used_max_mib": {"type": ["number", "null"], "minimum": 0, "maximum": 1e9},
            },
        },
        "weights_in_sync": {"type": ["boolean", "null"]},
        "energy": {
            "type": ["object", "null"],
            "properties": {
                "samples": _WHOLE_OR_NULL,
                "unit": _TEXT_OR_NULL,
                "nvml": _ENERGY_READING,
                "rapl": _ENERGY_READING,
            },
        },
        "slurm_energy": _ENERGY_READING,
        "fabric": {
            "type": ["object", "null"],
            "properties": {
                "transport": _TEXT_OR_NULL,
                "gdr": {"type": ["boolean", "null"]},
                "nics": {"type": ["array", "null"], "items": _TEXT},
                "per_host": {
                    "type": ["array", "null"],
                    "items": {
                        "type": "object",
                        "properties": {
                            "host": _SCALAR,
                            "transport": _TEXT_OR_NULL,
                            "skipped": _TEXT_OR_NULL,
                            "rdma": {
                                "type": ["array", "null"],
                                "items": {
                                    "type": "object",
                                    "properties": {
                                        "device": _TEXT,
                                        "link_layer": _TEXT,
                                        "state": _TEXT,
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
        "mllog": {"type": ["array", "null"], "items": _TEXT},
        # A transformer's: its tokens per sequence multiply its throughput (a bound as
        # the CLI's), and its MFU is a share, never above 1 (bench/peak_flops.py).
        "seq_len": {"type": ["integer", "null"], "minimum": 0, "maximum": 1 << 20},
        # Its layout multiplies (K micro-batches) and divides (a TP group) what a step
        # trains: bounded as the workload's options are (bench/units.py).
        "tp": {"type": ["integer", "null"], "minimum": 1, "maximum": 1024},
        "grad_accum": {"type": ["integer", "null"], "minimum": 1, "maximum": 1 << 16},
        "activation_checkpoint": {"enum": [None, "none", "selective", "full"]},
        "parallel": {"type": ["string", "null"]},
        "mfu": _SHARE_OR_NULL,
        "mfu_unknown": {"type": ["string", "null"]},
        # What the report's MFU is computed from: the workers' peak (an exaflop of
        # peak per rank is beyond any accelerator) and the model's FLOPs per token.
        "peak_flops": {"type": ["number", "null"], "minimum": 0, "maximum": 1e21},
        "flops_per_token": {"type": ["number", "null"], "minimum": 0, "maximum": 1e18},
        "fingerprint": {
            "type": ["object", "null"],
            "properties": {"hosts": {"type": ["array", "null"], "items": _SCALAR}},
        },
        "rank_window_times": {
            "type": ["array", "null"],
            "items": {
                "type": "array",
                "items": {"type": "number", "minimum": 0, "maximum": MAX_SECONDS},
            },
        },
        "nodes_use": {
            "type": ["object", "null"],
            "properties": {
                "per_host": {
                    "type": ["array", "null"],
                    "items": {
                        "type": "object",
                        "properties": {
                            "cpu_util": {"type": ["number", "null"], "minimum": 0, "maximum": 1e3},
                            "net": {
                                "type": ["object", "null"],
                                "additionalProperties": {
                                    "properties": {
                                        "rx_bytes_per_s": _RATE,
                                        "tx_bytes_per_s": _RATE,
                                    },
                                },
                            },
                        },
                    },
                }
            },
        },
    },
    "if": {"properties": {"status": {"const": "ok"}}},
    "then": {
        "required": ["steps", "window_times"],
        "properties": {
            "steps": {**_COUNT, "maximum": 10**9},
            "window_times": {"type": "array", "minItems": 1, "items": _SECONDS},
        },
    },
}
_PROBE = {
    "required": ["env", "backend", "nodes", "workers", "status"],
    "properties": {
        "env": {"type": "string"},
        "backend": {"type": "string"},
        "nodes": {**_COUNT, "maximum": MAX_NODES},
        "workers": {**_COUNT, "maximum": MAX_NODES * MAX_SLOTS},
        "status": {"type": "string"},
        "duration_s": _SECONDS_OR_NULL,
        # --probe-budget, and whether it stopped the size sweep before --probe-max-bytes
        # (then results end at the largest size completed).
        "budget_s": _SECONDS_OR_NULL,
        "stopped_early": {"type": ["boolean", "null"]},
        "cpus": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 1e6},
        # The CFS period the quota is counted over (bench/nodemon.py; the kernel takes
        # 1 ms-1 s: Documentation/scheduler/sched-bwc.rst).
        "cpu_period_s": {"type": ["number", "null"], "minimum": 1e-3, "maximum": 1.0},
        # bench/allreduce.py's CPU-work phase on CPU nodes (performance/allreduce_model.py reads it)
        "cpu_work": {
            "type": ["object", "null"],
            "properties": {
                "lost_s_per_byte": {"type": ["number", "null"], "maximum": 1.0},
                "background_share": {"type": ["number", "null"], "maximum": 1e3},
                "allreduces": {"type": ["integer", "null"], "minimum": 0, "maximum": 10**9},
                "bytes": _SCALAR,
                "per_rank": {
                    "type": ["array", "null"],
                    "items": {
                        "type": "object",
                        "properties": {
                            "wall_s": {
                                "type": ["number", "null"],
                                "minimum": 0,
                                "maximum": MAX_SECONDS,
                            }
                        },
                    },
                },
            },
        },
    },
    "if": {"properties": {"status": {"const": "ok"}}},
    "then": {
        "required": ["results"],
        "properties": {
            "results": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["bytes", "time_s", "busbw"],
                    "properties": {
                        "bytes": {**_BYTES, "minimum": 1},
                        "time_s": _SECONDS,
                        "busbw": _BYTES,
                        "algbw": {"type": "number"},
                        "cpu_s": {"type": "number", "minimum": 0, "maximum": MAX_SECONDS},
                    },
                },
            }
        },
    },
}
_CONVERGENCE = {
    "required": ["target_ci", "configs"],
    "properties": {
        "target_ci": _SECONDS,
        "configs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["label", "stopped", "runs"],
                "properties": {
                    "label": {"type": "string"},
                    "stopped": {
                        "enum": ["target reached", "max repeats", "budget", "node unreachable"]
                    },
                    "runs": {"type": "integer", "minimum": 0},
                    "relative_ci": {"type": ["number", "null"]},
                },
            },
        },
    },
}
RECORD_KINDS: dict[str, dict[str, Any]] = {
    "run": _RUN,
    "probe": _PROBE,
    "convergence": _CONVERGENCE,
}


def _record_schema(kinds: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "allOf": [
            {"if": {"properties": {"kind": {"const": kind}}, "required": ["kind"]}, "then": schema}
            for kind, schema in kinds.items()
        ],
    }


RECORD_SCHEMA = _record_schema(RECORD_KINDS)
# A whole number is an int (JSON Schema would take 2.0 as one; range() would not).
_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool)
    ),
)
_VALIDATOR = _Validator(RECORD_SCHEMA)


def validator(kinds: Mapping[str, dict[str, Any]]) -> jsonschema.protocols.Validator:
    """RECORD_SCHEMA's validator with more kinds of record (a campaign journal's), so
    that a store holding them skips and names a bad one as it does a bad run."""
    return _Validator(_record_schema({**RECORD_KINDS, **kinds}))


def record_problem(
    record: dict[str, Any], checker: jsonschema.protocols.Validator = _VALIDATOR
) -> str | None:
    """Why a record does not fit RECORD_SCHEMA (the field and the rule), or None."""
    error = jsonschema.exceptions.best_match(checker.iter_errors(record))
    if error is None:
        return None
    rule, wanted = error.validator, error.validator_value
    path = [str(p) for p in error.absolute_path]
    if rule == "required":  # message: "'env' is a required property"
        return f"{'.'.join([*path, error.message.split(chr(39))[1]])} is missing"
    field = ".".join(path) or "the record"
    if rule == "type":
        return f"{field} is not {' or '.join(wanted) if isinstance(wanted, list) else wanted}"
    return f"{field} breaks {rule} {str(wanted)[:80]}"


def _finite(text: str) -> float | None:
    """A JSON number as read: one beyond a float's range (1e400) reads as null, as
    NaN and Infinity do, so that the schema's number rules hold for every value read."""
    value = float(text)
    return value if math.isfinite(value) else None


def _integer(text: str) -> int | None:
    """A JSON integer as read: one no float holds (10**400, whose float() raises in the
    analysis; past 4300 digits int() itself refuses it) reads as null, as 1e400 does."""
    if len(text.lstrip("-")) > len(str(int(sys.float_info.max))):
        return None
    value = int(text)
    return value if abs(value) <= sys.float_info.max else None


# Why an append was refused: a link where the store writes would send the record to
# the file it points at (outside the folder, perhaps); the user removes it.
LINK_REFUSED = "a symbolic link, which hpcbench never writes through (remove it)"

# A JSON escape of half a UTF-16 pair: decoded alone it is text that no report, CSV or
# terminal can write (UnicodeEncodeError), so a record holding one is skipped.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")

# The records that are measurements, each made once (its own launch time): a second
# line identical to one of them is a copy, read once.
MEASUREMENTS = ("run", "probe")

# What a failed run that recorded no error text reads with.
NO_ERROR_TEXT = "failed without an error text"

# How many skipped lines are named one by one on stderr; the rest are counted.
NAMED_PROBLEMS = 5


def _shown(path: Path | str) -> str:
    """A path for a one-line message: a very long one is cut in the middle."""
    text = str(path)
    return text if len(text) <= 120 else f"{text[:60]}...{text[-50:]}"


class StoreWriteError(RuntimeError):
    """A record could not be appended; the message says why and where it was kept."""


def _nearest_existing(path: Path) -> Path:
    return next(p for p in (path, *path.parents) if p.exists())


def _write_new(path: Path | None, data: bytes, root: Path | None = None) -> str:
    """data in a new file: `path` (no link followed below `root`), or a fresh one in
    the temporary folder; its name."""
    if path is None:
        fd, name = tempfile.mkstemp(prefix="hpcbench-unsaved-", suffix=".jsonl")
    else:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        fd, name = files.open_regular(path, flags, 0o644, root), str(path)
    try:
        if os.write(fd, data) != len(data):
            raise OSError(f"short write to {name}")
        os.fsync(fd)
    except OSError:
        with contextlib.suppress(OSError):  # no torn copy left behind
            files.remove(Path(name), root if path is not None else None)
        raise
    finally:
        os.close(fd)
    return name


class Store:
    def __init__(
        self,
        directory: Path | str,
        checker: jsonschema.protocols.Validator = _VALIDATOR,
        root: Path | str | None = None,
        one_link: bool = False,
    ) -> None:
        self.dir = Path(directory)
        # The folder the user named (`directory` or one above it, as a campaign's `out`
        # above each testbed's store): no link is followed below it (hpcbench.core.files).
        self.root = self.dir if root is None else Path(root)
        self._checker = checker  # what a record read must fit (validator())
        self.one_link = one_link  # a file of other names (hard links) refused (files.py)
        self.path = self.dir / RESULTS_FILE
        self.lock_path = self.dir / LOCK_FILE
        # (line number, why) of every line the last read skipped.
        self.skipped: list[tuple[int, str]] = []
        self._lock_fd: int | None = None

    def append(self, record: dict[str, Any]) -> None:
        """One record, whole, or StoreWriteError once the record is kept elsewhere."""
        line = json.dumps({"schema": SCHEMA, **record}, sort_keys=True) + "\n"
        try:
            self._append(line.encode())
        except OSError as err:
            kept = self._keep(line)
            raise StoreWriteError(
                f"cannot write {_shown(self.path)}: {err.strerror or err}; {kept}"
            ) from None
        except UsageError as err:  # planted on the way: a link, a FIFO (named in err)
            kept = self._keep(line)
            raise StoreWriteError(
                f"cannot write {_shown(self.path)}: {one_line(str(err), 300)}; {kept}"
            ) from None

    def _keep(self, line: str) -> str:
        """Where a record the store refused went: beside the store, else in the
        temporary folder, else stdout (the measurement is never dropped)."""
        beside = self.dir / f"results.unsaved-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.jsonl"
        for path in (beside, None):
            try:
                name = _write_new(path, line.encode(), self.root)
            except (OSError, UsageError):
                continue
            return f"the record is kept in {_shown(name)} (append it to the store when it is fixed)"
        sys.stdout.write(line)
        sys.stdout.flush()
        return "the record is printed whole on stdout"

    def check_writable(self) -> None:
        """Refuse, before anything is launched, a store no record could go to: one line
        naming what to fix (UsageError, exit status 2); nothing is created."""
        try:
            problem = self._write_problem()
        except OSError as err:
            problem = f"cannot write there ({err.strerror or err})"
        if problem:
            raise UsageError(f"--out {_shown(self.dir)}: {problem}; choose another --out")

    def _write_problem(self) -> str | None:
        if self.dir.exists() and not self.dir.is_dir():
            return "a file, not a folder"
        try:
            at_name = files.present(self.path, self.root)  # refuses a link on the way
        except UsageError as err:
            return str(err)
        if at_name and stat.S_ISLNK(os.lstat(self.path).st_mode):
            return f"its {RESULTS_FILE} is {LINK_REFUSED}"
        if at_name and not (self.path.is_file() and os.access(self.path, os.W_OK)):
            return f"its {RESULTS_FILE} is not a writable file"
        where = _nearest_existing(self.dir)
        if not where.is_dir():
            return f"{_shown(where)} is a file, not a folder"
        tempfile.TemporaryFile(dir=where).close()  # can a file be made there? (O_TMPFILE: no name)
        return None

    def _append(self, data: bytes) -> None:
        files.make_folder(self.dir, self.root)
        fd = files.open_regular(
            self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644, self.root, self.one_link
        )
        try:
            # After a torn last line, start on a fresh line so only the torn record is lost.
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data
            try:
                written = os.write(fd, data)
                if written != len(data):  # a short write would leave a torn line
                    raise OSError(f"short write: {written} of {len(data)} bytes")
                os.fsync(fd)
            except BaseException:
                # Whatever part of the line got in goes again (the record is kept elsewhere):
                # the store is as it was, byte for byte.
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)

    def lock(self) -> None:
        """Hold the store for one writer (a sweep) until release() or exit.

        Two sweeps appending to one store would interleave their repeats and
        each resume the other's runs; the second (or a probe) is refused in one line.
        """
        files.make_folder(self.dir, self.root)
        self._lock_fd = locks.hold(
            self.lock_path,
            f"{self.dir} is in use by another sweep or probe: wait for it, or choose another --out",
            self.root,
        )

    def release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing drops the flock
            self._lock_fd = None

    def exists(self) -> bool:
        """Whether anything is at the results file's name (a link or a FIFO too: reading
        it then says what it is); a path the system refuses (too long, unreadable) or a
        link on the way is one line naming it (UsageError)."""
        try:
            return files.present(self.path, self.root)
        except OSError as err:
            raise UsageError(f"{_shown(self.path)}: {err.strerror}") from None

    def check_readable(self) -> None:
        """Refuse, before it is needed, a results file that could not be read: missing,
        a link, a FIFO, over files.RESULTS (one UsageError line naming it)."""
        os.close(self._open())

    def _open(self) -> int:
        try:
            fd = files.open_regular(self.path, os.O_RDONLY, root=self.root, one_link=self.one_link)
        except OSError as err:
            raise UsageError(f"cannot read {_shown(self.path)}: {err.strerror}") from None
        try:
            files.check_size(self.path, os.fstat(fd).st_size, files.RESULTS)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _lines(self) -> Iterator[tuple[int, bytes]]:
        fd = self._open()
        with os.fdopen(fd, "rb") as f:
            read = 0
            for number, line in enumerate(f, 1):
                read += len(line)
                files.check_size(self.path, read, files.RESULTS)  # it may have grown
                yield number, line

    def _skip(self, number: int, why: str) -> None:
        why = one_line(why)  # it may quote a key of the line: a line break, a terminal escape
        self.skipped.append((number, why))
        if len(self.skipped) <= NAMED_PROBLEMS:
            print(f"hpcbench: {self.path}:{number}: skipping a line: {why}", file=sys.stderr)

    def records(self, kind: str | None = None) -> Iterator[dict[str, Any]]:
        """Whole, valid records; every other line is skipped, named and counted."""
        self.skipped = []
        if not self.exists():
            return
        # A measurement written twice (a store copied onto its own end, a line pasted
        # again) is one run, not two repeats: each holds its own launch time.
        seen: dict[bytes, int] = {}
        for number, raw in self._lines():
            if not raw.endswith(b"\n"):  # cut off mid-write (a crash, an older hpcbench)
                self._skip(number, "a torn last line")
                break
            try:
                record = json.loads(
                    raw.decode("utf-8"),
                    parse_float=_finite,
                    parse_int=_integer,
                    parse_constant=lambda _: None,
                )
                if _SURROGATE_ESCAPE.search(raw):  # "\ud800": text no file can hold if unpaired
                    json.dumps(record, ensure_ascii=False).encode("utf-8")
            except UnicodeDecodeError:
                self._skip(number, "not UTF-8 text")
                continue
            except UnicodeEncodeError:
                self._skip(number, "text with an unpaired surrogate, which UTF-8 cannot hold")
                continue
            except json.JSONDecodeError:
                self._skip(number, "not JSON")
                continue
            except RecursionError:  # [[[[...]]]] deeper than the parser goes
                self._skip(number, "JSON nested too deep")
                continue
            if not isinstance(record, dict):
                self._skip(number, "not a JSON object")
                continue
            problem = record_problem(record, self._checker)
            if problem:
                self._skip(number, f"a {record['kind']} record whose {problem}")
                continue
            if record.get("kind") in MEASUREMENTS:
                digest = hashlib.blake2b(raw.strip(), digest_size=16).digest()
                if digest in seen:
                    self._skip(number, f"a copy of line {seen[digest]}")
                    continue
                seen[digest] = number
            failed = record.get("kind") == "run" and record.get("status") != "ok"
            if failed and not record.get("error", "").strip():
                record["error"] = NO_ERROR_TEXT  # a failed run is told by its error's first line
            if kind is None or record.get("kind") == kind:
                yield record
        if len(self.skipped) > NAMED_PROBLEMS:
            print(
                f"hpcbench: {self.path}: skipped {len(self.skipped)} lines in all",
                file=sys.stderr,
            )

    def runs(self) -> list[dict[str, Any]]:
        return list(self.records("run"))

    def probes(self) -> list[dict[str, Any]]:
        return list(self.records("probe"))

    def done_keys(self) -> set[tuple]:
        """Run keys that completed; failed runs are not 'done' so --resume retries them."""
        return {run_key(r) for r in self.runs() if r.get("status") == "ok"}


def done_configs(runs: Iterable[dict[str, Any]]) -> set[tuple]:
    """The configurations of which a run completed, by the key `--resume` matches
    (run_key, Store.done_keys) less the repeat: a campaign's cell is one of them."""
    return {config_key(r) for r in runs if r.get("status") == "ok"}
