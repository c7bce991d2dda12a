import json
import multiprocessing
import os
import signal

from hpcbench.store import Store, run_key


def _record(repeat: int, status: str = "ok", **extra) -> dict:
    return {
        "kind": "run",
        "env": "localhost",
        "model": "resnet18",
        "backend": "ddp",
        "batch": 8,
        "image_size": 32,
        "data": "synthetic",
        "nodes": 2,
        "workers": 2,
        "gpus_per_node": 1,
        "repeat": repeat,
        "status": status,
        **extra,
    }


def test_append_and_read_back(tmp_path):
    store = Store(tmp_path / "out")
    store.append(_record(0))
    store.append(_record(1, status="failed", error="boom"))
    store.append({"kind": "probe", "workers": 2})
    runs = store.runs()
    assert [r["repeat"] for r in runs] == [0, 1]
    assert all(r["schema"] == 1 for r in runs)
    assert len(store.probes()) == 1
    # Only completed runs count as done, so --resume retries failures.
    assert store.done_keys() == {run_key(_record(0))}


def test_torn_last_line_is_skipped_and_next_append_starts_a_new_line(tmp_path, capsys):
    store = Store(tmp_path)
    store.append(_record(0))
    with store.path.open("a") as f:  # what a kill in the middle of a write would leave
        f.write('{"kind": "run", "repe')
    assert [r["repeat"] for r in store.runs()] == [0]
    assert "torn last line" in capsys.readouterr().err
    store.append(_record(1))
    assert [r["repeat"] for r in store.runs()] == [0, 1]
    lines = store.path.read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[2])["repeat"] == 1


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


def test_missing_store_reads_empty(tmp_path):
    assert Store(tmp_path / "nothing").runs() == []
