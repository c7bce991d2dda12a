import fcntl
import json
import os
from pathlib import Path

import pytest

from hpcbench import cli
from hpcbench.core import files
from hpcbench.core.errors import UsageError
from hpcbench.measure.store import Store, StoreWriteError, run_key


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
        "steps": 5,
        "window_times": [1.0, 1.1],
        **extra,
    }


def test_append_and_read_back(tmp_path):
    store = Store(tmp_path / "out")
    store.append(_record(0))
    store.append(_record(1, status="failed", error="boom"))
    store.append(
        {
            "kind": "probe",
            "env": "localhost",
            "backend": "ddp",
            "nodes": 2,
            "workers": 2,
            "status": "failed",
            "error": "timed out",
        }
    )
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


def test_missing_store_reads_empty(tmp_path):
    assert Store(tmp_path / "nothing").runs() == []


def test_damaged_lines_are_skipped_named_and_counted_and_resume_still_works(tmp_path, capsys):
    store = Store(tmp_path)
    store.append(_record(0))
    with store.path.open("ab") as f:
        f.write(b"7\n")  # JSON, but not a record
        f.write(b"\xff\xfe not utf-8\n")
        f.write(b'{"kind": "run"}\n')  # a run without its fields
        f.write(json.dumps(_record(1, window_times=[1.0, 0])).encode() + b"\n")  # 0 s window
        f.write(json.dumps(_record(2, nodes="2")).encode() + b"\n")
        f.write(
            json.dumps(
                {
                    "kind": "probe",
                    "workers": 2,
                    "status": "ok",
                    "results": [{"bytes": 4, "time_s": 0}],
                }
            ).encode()
            + b"\n"
        )
        f.write(b"not json\n")
    store.append(_record(3))
    assert [r["repeat"] for r in store.runs()] == [0, 3]
    assert store.probes() == []
    assert [n for n, _ in store.skipped] == [2, 3, 4, 5, 6, 7, 8]
    err = capsys.readouterr().err
    assert ":2: skipping a line: not a JSON object" in err
    assert ":3: skipping a line: not UTF-8 text" in err
    assert "skipped 7 lines in all" in err
    assert store.done_keys() == {run_key(_record(0)), run_key(_record(3))}


def test_a_second_writer_is_refused_while_the_first_holds_the_store(tmp_path):
    first, second = Store(tmp_path), Store(tmp_path)
    first.lock()
    with pytest.raises(UsageError, match="in use by another sweep"):
        second.lock()
    first.release()
    second.lock()  # free again once the first let go
    second.release()


def test_the_store_lock_holds_no_file_open_for_writing(tmp_path):
    """A sweep holds its store's lock for its whole life: with a file open for writing,
    the results file system could not be remounted read-only meanwhile (EBUSY)."""
    store = Store(tmp_path)
    store.lock()
    try:
        assert store._lock_fd is not None
        assert fcntl.fcntl(store._lock_fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY
    finally:
        store.release()


def test_a_path_the_system_refuses_is_one_line(tmp_path):
    store = Store(tmp_path / ("x" * 300))  # ENAMETOOLONG
    with pytest.raises(UsageError, match="File name too long"):
        store.runs()
    (tmp_path / "file").write_text("")
    assert Store(tmp_path / "file" / "sub").runs() == []  # ENOTDIR: nothing there


def test_an_unreadable_store_is_one_line(tmp_path, monkeypatch, capsys):
    store = Store(tmp_path)
    store.append({"kind": "run"})

    def refuse(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    # root reads every file: refuse it where every read opens it
    monkeypatch.setattr(files, "open_regular", refuse)
    assert cli.main(["report", "--out", str(tmp_path)]) == 2
    assert cli.main(["compare", str(tmp_path), str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all("Permission denied" in line for line in err)


def _outside(tmp_path: Path) -> Path:
    """A file outside the results folder that a planted link points at."""
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"not yours\n")
    return victim


def test_an_append_never_follows_a_link_planted_at_the_results_file(tmp_path):
    victim = _outside(tmp_path)
    store = Store(tmp_path / "out")
    store.dir.mkdir()
    store.path.symlink_to(victim)
    with pytest.raises(UsageError, match="results.jsonl is a symbolic link"):
        store.check_writable()  # a sweep refuses it before launching anything
    with pytest.raises(StoreWriteError, match="results.jsonl is a symbolic link, which hpcbench"):
        store.append(_record(0))
    assert victim.read_bytes() == b"not yours\n"
    kept = list(store.dir.glob("results.unsaved-*.jsonl"))  # the record is not lost
    assert len(kept) == 1 and json.loads(kept[0].read_text())["repeat"] == 0


def test_the_store_lock_never_follows_a_planted_link(tmp_path):
    store = Store(tmp_path / "out")
    store.dir.mkdir()
    store.lock_path.symlink_to(tmp_path / "made-outside")  # a dangling link: O_CREAT's target
    with pytest.raises(UsageError, match="a symbolic link, which hpcbench never opens"):
        store.lock()
    assert not (tmp_path / "made-outside").exists()


def _break_the_write_of(marker: bytes, monkeypatch, how: str) -> None:
    """os.write and os.fsync as a full disk would have them, for the line holding marker."""
    write, fsync, broken = os.write, os.fsync, set()

    def half(fd: int, data: bytes) -> int:
        if marker not in data:
            return write(fd, data)
        broken.add(fd)
        done = write(fd, data[: len(data) // 2])
        if how == "raise":
            raise OSError(28, "No space left on device")
        return done  # "short": a short count, as write(2) may return

    def failing_fsync(fd: int) -> None:
        if how == "fsync" and fd in broken:
            raise OSError(5, "Input/output error")
        fsync(fd)

    monkeypatch.setattr(os, "write", half)
    monkeypatch.setattr(os, "fsync", failing_fsync)
    if how == "fsync":  # the whole line written, the disk failing after it
        monkeypatch.setattr(os, "write", lambda fd, data: broken.add(fd) or write(fd, data))


@pytest.mark.parametrize("how", ["raise", "short", "fsync"])
@pytest.mark.parametrize("torn", [False, True])
def test_a_failed_append_leaves_the_store_byte_for_byte_as_it_was(tmp_path, monkeypatch, how, torn):
    store = Store(tmp_path)
    store.append(_record(0))
    if torn:  # a torn last line from before: the append would start a fresh line
        with store.path.open("ab") as f:
            f.write(b'{"kind": "run", "rep')
    before = store.path.read_bytes()
    _break_the_write_of(b'"repeat": 1,', monkeypatch, how)
    with pytest.raises(StoreWriteError, match="cannot write"):
        store.append(_record(1))
    monkeypatch.undo()
    assert store.path.read_bytes() == before
    store.append(_record(2))  # and the store goes on
    assert [r["repeat"] for r in store.runs()] == [0, 2]


def test_a_torn_last_line_is_skipped_and_counted(tmp_path, capsys):
    store = Store(tmp_path)
    store.append(_record(0))
    with store.path.open("ab") as f:  # an older hpcbench, or a crash, cut it off
        f.write(json.dumps(_record(1)).encode()[:40])
    assert [r["repeat"] for r in store.runs()] == [0]
    assert store.skipped == [(2, "a torn last line")]
    assert cli.main(["report", "--out", str(tmp_path), "--format", "json"]) == 0
    assert ":2: skipping a line: a torn last line" in capsys.readouterr().err


def test_the_edges_of_real_measurements_fit_the_schema(tmp_path):
    """Bounds keep sums finite, not real figures out: an idle interface's 0 bytes/s,
    no data wait, a probe's microsecond all-reduce."""
    store = Store(tmp_path)
    store.append(
        _record(
            0,
            data_time_fraction=0.0,
            allreduce_bytes=0,
            nodes_use={
                "per_host": [
                    {"cpu_util": 0.0, "net": {"ifb1": {"rx_bytes_per_s": 0.0, "tx_bytes_per_s": 0}}}
                ]
            },
        )
    )
    store.append(
        {
            "kind": "probe",
            "env": "localhost",
            "backend": "ddp",
            "nodes": 2,
            "workers": 2,
            "status": "ok",
            "results": [{"bytes": 4, "time_s": 2e-6, "busbw": 2e6, "algbw": 2e6}],
        }
    )
    assert len(store.runs()) == 1 and len(store.probes()) == 1 and store.skipped == []


def test_a_run_written_twice_is_one_run_not_two_repeats(tmp_path, capsys):
    from hpcbench.measure import analysis

    store = Store(tmp_path)
    store.append(_record(0, launched_at=1.0))
    store.append(_record(1, launched_at=2.0, window_times=[1.2, 1.3]))
    line = store.path.read_bytes().splitlines(keepends=True)[0]
    with store.path.open("ab") as f:  # the first line pasted again at the end
        f.write(line)
    runs = store.runs()
    assert [r["repeat"] for r in runs] == [0, 1]
    assert "results.jsonl:3: skipping a line: a copy of line 1" in capsys.readouterr().err
    [summary] = analysis.summarise(runs)
    assert summary.runs == 2  # not three repeats, and not the narrower interval of three
