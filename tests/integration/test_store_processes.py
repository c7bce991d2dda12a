"""The results store under a writer killed mid-record, in a process of its own: only
whole records are left (tests/unit/test_store.py: the store in one process)."""

import multiprocessing
import os
import signal

import pytest

from hpcbench.measure.store import Store
from tests.unit.test_store import _record

pytestmark = pytest.mark.integration


def _writer(directory: str, count: int) -> None:
    store = Store(directory)
    for i in range(count):
        store.append(_record(i, payload="x" * 5000))


def test_a_killed_writer_leaves_only_whole_records(tmp_path):
    ctx = multiprocessing.get_context("fork")
    proc = ctx.Process(target=_writer, args=(str(tmp_path), 100_000))
    proc.start()
    # Kill it once it has written something (bounded wait).
    for _ in range(500):
        if (tmp_path / "results.jsonl").exists() and (tmp_path / "results.jsonl").stat().st_size:
            break
        proc.join(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)
    runs = Store(tmp_path).runs()
    assert runs, "the writer wrote nothing before it was killed"
    assert [r["repeat"] for r in runs] == list(range(len(runs)))
    assert all(len(r["payload"]) == 5000 for r in runs)
