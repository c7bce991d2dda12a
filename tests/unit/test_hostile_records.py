"""Store records as hostile input: generated from the store's schema, then mutated.

Each example writes a results.jsonl of records made to fit hpcbench.measure.store's
RECORD_SCHEMA (runs ok and failed, probes, a convergence record), some of them
mutated: a field set to a value of the wrong type or at the edge of what a double
holds (10**400, 1e308 whose sums overflow, NaN, a denormal), a key removed, a
type that differs between records (env 3 beside env "a"), a failed run without
its error text, deep nesting, lone surrogates, bytes that are not UTF-8, a line
cut off. `hpcbench report` (in-process, hpcbench.cli.main) must then exit 0 with
its output, having said how many lines it skipped, or exit 2 with one line naming
the file: never a traceback; and so must `compare` and `predict --calibrate`.

The example budget is fixed and derandomised, so CI sees the same cases each run.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from hpcbench import cli
from hpcbench.measure.store import RESULTS_FILE


class Raw(str):
    """JSON text written as it is (a number no float holds, NaN, deep nesting)."""


HOSTILE_RAW = [
    Raw("1" + "0" * 400),  # 10**400: an int no float holds
    Raw("-" + "9" * 5000),  # more digits than int() reads by default
    Raw("1e400"),
    Raw("-1e400"),
    Raw("NaN"),
    Raw("Infinity"),
    Raw("-Infinity"),
    Raw("1.7976931348623157e308"),
    Raw("5e-324"),
    Raw("-0.0"),
    Raw("[" * 3000 + "]" * 3000),  # deeper than the parser's recursion
    Raw('"\\ud800"'),  # a lone surrogate: no UTF-8 encodes it
    Raw('{"a": ' * 200 + "1" + "}" * 200),
]
HOSTILE = st.one_of(
    st.sampled_from(HOSTILE_RAW),
    st.sampled_from(
        [
            None,
            True,
            False,
            0,
            -1,
            2**63,
            1e308,
            -1e308,
            1e-308,
            "",
            "0",
            "nan",
            "\u202e\u0000\x1b[31m",
            [],
            {},
            [[]],
            [None],
            {"": None},
        ]
    ),
    st.integers(),
    st.floats(),
    st.text(max_size=8),
    st.recursive(
        st.none() | st.integers() | st.text(max_size=3),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
        ),
        max_leaves=6,
    ),
)


def _dump(value: Any) -> str:
    """json.dumps, but a Raw value goes in as the text it is."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {_dump(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_dump(v) for v in value) + "]"
    return json.dumps(value)


# ------------------------------------------------------------------ records that fit
_TIMES = st.lists(st.floats(0.01, 10), min_size=1, max_size=4)
_NAME = st.sampled_from(["vw", "gpulab", "localhost", "e"])


@st.composite
def run_record(draw: st.DrawFn) -> dict[str, Any]:
    nodes = draw(st.integers(1, 4))
    workers = nodes * draw(st.integers(1, 2))
    record: dict[str, Any] = {
        "kind": "run",
        "env": draw(_NAME),
        "model": draw(st.sampled_from(["resnet50", "m"])),
        "backend": draw(st.sampled_from(["ddp", "horovod"])),
        "batch": draw(st.sampled_from([8, 32])),
        "image_size": 224,
        "data": "synthetic",
        "gpus_per_node": 1,
        "nodes": nodes,
        "workers": workers,
        "method": "link_rate=1gbit launcher=torchrun",
        "repeat": draw(st.integers(0, 2)),
        "link_rate": "1gbit",
    }
    # What every run records, failed or not: its timing, and a failed run may carry the
    # figures it measured before it failed (readers use them whatever the status).
    record |= {
        "duration_s": draw(st.floats(0, 1e3)),
        "queue_wait_s": draw(st.none() | st.floats(0, 600)),
        "overhead_s": draw(st.floats(-1, 60)),
    }
    if draw(st.booleans()):
        record |= {"status": "failed", "error": draw(st.sampled_from(["timed out\nlast", ""]))}
        if draw(st.booleans()):
            record |= {"allreduce_bytes": 102e6, "data_time_fraction": 0.1, "gpu": {}}
        return record
    record |= {
        "status": "ok",
        "gpu": {"util_mean": draw(st.floats(0, 100)), "mem_used_max_mib": 1024.0},
        "steps": draw(st.integers(1, 20)),
        "window_times": draw(_TIMES),
        "data_time_fraction": draw(st.none() | st.floats(0, 1)),
        "allreduce_bytes": draw(st.sampled_from([None, 4.0, 102e6])),
        "weights_in_sync": draw(st.sampled_from([True, False, None])),
        "rank_window_times": draw(st.lists(_TIMES, min_size=workers, max_size=workers)),
        "fingerprint": {"hosts": [f"n{i}" for i in range(workers)], "torch": "2.5"},
        "grad_timeline": draw(
            st.lists(st.tuples(st.floats(0, 1), st.integers(0, 10**8)).map(list), max_size=3)
        ),
        "nodes_use": {
            "per_host": [
                {
                    "cpu_util": draw(st.floats(0, 1)),
                    "cpu_limit": "1 core",
                    "net": {"eth0": {"rx_bytes_per_s": 1e6, "tx_bytes_per_s": 2e6}},
                }
            ]
        },
    }
    return record


@st.composite
def probe_record(draw: st.DrawFn) -> dict[str, Any]:
    sizes = draw(st.lists(st.sampled_from([4096, 1 << 20, 1 << 26]), min_size=1, max_size=3))
    return {
        "kind": "probe",
        "env": draw(_NAME),
        "backend": draw(st.sampled_from(["ddp", "horovod"])),
        "nodes": 2,
        "workers": draw(st.sampled_from([2, 4])),
        "status": "ok",
        "results": [
            {
                "bytes": s,
                "time_s": draw(st.floats(1e-5, 2)),
                "busbw": 1e8,
                "algbw": 1e8,
                "cpu_s": 0.001,
            }
            for s in sizes
        ],
        "cpu_work": {
            "lost_s_per_byte": 1e-9,
            "background_share": 0.1,
            "allreduces": 4,
            "bytes": sizes[0],
            "per_rank": [{"wall_s": 0.5}],
        },
    }


def convergence_record() -> dict[str, Any]:
    return {
        "kind": "convergence",
        "target_ci": 0.05,
        "configs": [
            {
                "label": "batch 8, 1 node(s), 1 worker(s)",
                "stopped": "max repeats",
                "runs": 2,
                "relative_ci": 0.1,
            }
        ],
    }


# ---------------------------------------------------------------------- mutations
def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in a record a mutation may hit: keys and list items, nested."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _paths(v, (*prefix, i))
    return found


_ODD_KEY = st.sampled_from(["eth0\n\x1b[31mred", "\u202ekind", "", "\0", "k" * 300])


@st.composite
def mutated(draw: st.DrawFn, record: dict[str, Any]) -> dict[str, Any]:
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(record)
        path = draw(st.sampled_from(paths))
        *head, last = path
        holder = record
        for step in head:
            holder = holder[step]
        how = draw(st.sampled_from(["value", "delete", "key"]))
        if how == "delete" and isinstance(holder, dict):
            del holder[last]  # a missing key
        elif how == "key" and isinstance(holder, dict):
            holder[draw(_ODD_KEY)] = {"rx_bytes_per_s": draw(HOSTILE)}  # an odd name, quoted
        else:
            holder[last] = draw(HOSTILE)
    return record


# Values whose type differs between records: each record picks one for the same field.
MIXED = {
    "env": ["a", 3, 2.5, None, True],
    "model": ["m", 7, None],
    "image_size": [224, "224", None],
    "gpus_per_node": [1, "1", None],
    "method": ["x", 1, None],
    "data": ["synthetic", 0, None],
}


@st.composite
def line(draw: st.DrawFn) -> bytes:
    record = draw(
        st.one_of(run_record(), run_record(), probe_record(), st.builds(convergence_record))
    )
    if record["kind"] == "run" and draw(st.booleans()):
        field = draw(st.sampled_from(sorted(MIXED)))
        record[field] = draw(st.sampled_from(MIXED[field]))
    if draw(st.integers(0, 2)) == 0:
        record = draw(mutated(record))
    text = _dump({"schema": 1, **record}).encode("utf-8", "surrogatepass")
    damage = draw(st.sampled_from(["none"] * 6 + ["not utf-8", "bom", "nul", "crlf", "blank"]))
    if damage == "not utf-8":
        text = text.replace(b'"kind"', b'"k\xffind"', 1)
    elif damage == "bom":
        text = b"\xef\xbb\xbf" + text
    elif damage == "nul":
        text = text[:5] + b"\0" + text[5:]
    elif damage == "crlf":
        text += b"\r"
    elif damage == "blank":
        text = b"   "
    return text


@st.composite
def store_bytes(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(line(), min_size=1, max_size=12))
    data = b"\n".join(lines) + b"\n"
    if draw(st.integers(0, 4)) == 0:  # the last line cut off, mid-write
        data = data[: -draw(st.integers(1, min(30, len(lines[-1]) + 1)))]
    return data


def _report(folder: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with warnings.catch_warnings():  # matplotlib's (an empty legend): not hpcbench's lines
        warnings.simplefilter("ignore")
        rc = cli.main(["report", "--out", str(folder), "--format", fmt])
    out, err = capsys.readouterr()
    return rc, out, err


def _check(folder: Path, fmt: str, rc: int, out: str, err: str) -> None:
    path = str(folder / RESULTS_FILE)
    lines = err.strip().splitlines()
    if rc == 2:  # refused: one line naming the file (after the lines it skipped, named)
        assert lines and lines[-1].startswith("hpcbench: error: ") and path in lines[-1], err
        assert all(x.startswith("hpcbench: ") for x in lines), err
        return
    assert rc == 0, err
    if fmt == "json":
        assert json.loads(out)["schema"] == "hpcbench.configurations/1"
    elif fmt == "csv":
        assert out.startswith("env,model,backend,")
    else:
        assert (folder / "report.md").is_file() and (folder / "report.html").is_file()
        json.loads((folder / "configurations.json").read_text())
    assert all(x.startswith("hpcbench: ") for x in lines), err


_SETTINGS = settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)


@_SETTINGS
@given(store_bytes(), st.sampled_from(["json", "json", "csv"]))
def test_report_on_hostile_records_exits_0_or_2_never_a_traceback(
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    data: bytes,
    fmt: str,
) -> None:
    folder = tmp_path_factory.mktemp("store")
    (folder / RESULTS_FILE).write_bytes(data)
    _check(folder, fmt, *_report(folder, fmt, capsys))


@settings(_SETTINGS, max_examples=12)
@given(store_bytes())
def test_the_html_report_on_hostile_records_exits_0_or_2(
    tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], data: bytes
) -> None:
    folder = tmp_path_factory.mktemp("store")
    (folder / RESULTS_FILE).write_bytes(data)
    _check(folder, "html", *_report(folder, "html", capsys))


def _good_run(**changes: Any) -> dict[str, Any]:
    run = {
        "schema": 1,
        "kind": "run",
        "env": "vw",
        "model": "m",
        "backend": "ddp",
        "batch": 8,
        "image_size": 224,
        "data": "synthetic",
        "gpus_per_node": 1,
        "nodes": 1,
        "workers": 1,
        "repeat": 0,
        "status": "ok",
        "steps": 10,
        "window_times": [1.0, 1.1],
    }
    return {**run, **changes}


# The cases the audit found by hand, each once for sure: a line the report cannot use.
NAMED_CASES = {
    "an int no float holds": _dump(_good_run(window_times=[Raw("1" + "0" * 400)])),
    "more digits than int() reads": _dump(_good_run(steps=Raw("9" * 5000))),
    "a window whose throughput overflows": _dump(_good_run(window_times=[5e-324])),
    "windows whose sum overflows": _dump(_good_run(window_times=[1.7e308, 1.7e308])),
    "NaN": _dump(_good_run(window_times=[Raw("NaN")])),
    "an env of another type": _dump(_good_run(env=3)),
    "a model missing": _dump({k: v for k, v in _good_run().items() if k != "model"}),
    "deep nesting": _dump(_good_run(window_times=Raw("[" * 5000 + "]" * 5000))),
    "not UTF-8": _dump(_good_run()).replace('"vw"', '"v\udcffw"'),
    "a lone surrogate": _dump(_good_run(model=Raw('"\\ud800"'))),
    "a probe's time of zero": _dump(
        {
            "schema": 1,
            "kind": "probe",
            "env": "vw",
            "backend": "ddp",
            "nodes": 2,
            "workers": 2,
            "status": "ok",
            "results": [{"bytes": 4, "time_s": 1e-320, "busbw": 1e308}],
        }
    ),
    "a key that breaks the line": _dump(
        _good_run(nodes_use={"per_host": [{"net": {"eth0\n\x1b[31mX": {"rx_bytes_per_s": "x"}}}]})
    ),
}


@pytest.mark.parametrize("case", sorted(NAMED_CASES))
def test_a_named_hostile_line_is_skipped_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    hostile = NAMED_CASES[case].encode("utf-8", "surrogateescape")
    good = _dump(_good_run(repeat=1)).encode()
    (tmp_path / RESULTS_FILE).write_bytes(good + b"\n" + hostile + b"\n")
    rc, out, err = _report(tmp_path, "json", capsys)
    _check(tmp_path, "json", rc, out, err)
    assert rc == 0 and json.loads(out)["configurations"][0]["runs"] == 1
    assert f"{RESULTS_FILE}:2: skipping a line: " in err and len(err.splitlines()) == 1, err


def test_a_failed_run_without_an_error_text_is_a_failed_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        _dump(_good_run()),
        _dump(_good_run(repeat=1, status="failed")),
        _dump(_good_run(repeat=2, status="failed", error="")),
    ]
    (tmp_path / RESULTS_FILE).write_text("\n".join(lines) + "\n")
    rc, _, err = _report(tmp_path, "html", capsys)
    assert rc == 0, err
    report = (tmp_path / "report.md").read_text()
    assert report.count("failed without an error text") == 2


def test_a_gradient_timeline_whose_sums_overflow_is_not_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.unit.test_report import _run, _store

    # The point is then the one the model's layers give, as where no timeline was kept.
    points = []
    for folder, timeline in (("bad", [[1e308, 1e308], [1e308, 1e308]]), ("none", None)):
        store = _store(tmp_path / folder)  # with a probe: the point replays the timeline
        extra = {"grad_timeline": timeline} if timeline else {}
        store.append(_run(1, [1.0, 1.0], repeat=5, **extra))
        rc, out, err = _report(store.dir, "json", capsys)
        assert rc == 0, err
        four = [c for c in json.loads(out)["configurations"] if c["workers"] == 4]
        points.append([c["predicted_efficiency"] for c in four])
    bad, none = points
    assert bad and bad == none and all(0 < p <= 1 for p in bad)


def test_a_convergence_record_without_its_interval_reads_as_no_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    convergence = {
        "schema": 1,
        "kind": "convergence",
        "target_ci": 0.05,
        "configs": [{"label": "batch 8", "stopped": "max repeats", "runs": 1}],
    }
    (tmp_path / RESULTS_FILE).write_text(f"{_dump(_good_run())}\n{_dump(convergence)}\n")
    rc, _, err = _report(tmp_path, "html", capsys)
    assert rc == 0, err
    assert "batch 8: no interval after 1 run(s)" in (tmp_path / "report.md").read_text()


def _command(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with warnings.catch_warnings():  # matplotlib's: not hpcbench's lines
        warnings.simplefilter("ignore")
        rc = cli.main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def _refuse_constant(name: str) -> None:
    raise AssertionError(f"{name} in the output: a figure that is no number")


def _result_or_one_line(rc: int, out: str, err: str, json_out: bool = False) -> None:
    """0 with a result (JSON holds no NaN or Infinity), or 2 with one error line; every
    line on stderr is hpcbench's own (a skipped line named, never a traceback)."""
    lines = err.strip().splitlines()
    assert rc in (0, 2), err
    assert all(x.startswith("hpcbench: ") for x in lines), err
    if rc == 2:
        assert lines and lines[-1].startswith("hpcbench: error: "), err
        return
    assert out.strip(), err
    if json_out:
        json.loads(out, parse_constant=_refuse_constant)


def _calibratable() -> bytes:
    """Runs of one series at 1, 2 and 4 nodes over a known link: what calibrate fits."""
    runs = [
        _good_run(model="resnet18", image_size=32, nodes=n, workers=n, link_rate="1gbit", steps=2)
        for n in (1, 2, 4)
    ]
    return "".join(_dump(r) + "\n" for r in runs).encode()


@settings(_SETTINGS, max_examples=30)
@given(store_bytes(), store_bytes())
def test_compare_and_calibrate_on_hostile_records_exit_0_or_2(
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    first: bytes,
    second: bytes,
) -> None:
    folders = []
    for data in (_calibratable() + first, second):  # the first fits, but for its hostile lines
        folder = tmp_path_factory.mktemp("store")
        (folder / RESULTS_FILE).write_bytes(data)
        folders.append(str(folder))
    rc, out, err = _command(["compare", *folders], capsys)
    _result_or_one_line(rc, out, err)
    event(f"compare exit {rc}")
    rc, out, err = _command(["predict", "--calibrate", folders[0], "--json"], capsys)
    _result_or_one_line(rc, out, err, json_out=True)
    event(f"calibrate exit {rc}")


# A run's fields that readers use whatever its status, each of the wrong type or past
# the schema's bound: the run is left out, named and counted, never read.
BAD_FIELDS = {
    "a failed run's allreduce_bytes of text": {"allreduce_bytes": "lots"},
    "a failed run's data_time_fraction of text": {"data_time_fraction": "half"},
    "a failed run's duration_s of text": {"duration_s": "slow"},
    "an ok run's duration_s of text": {"status": "ok", "duration_s": "slow"},
    "an ok run's duration_s of 1e308": {"status": "ok", "duration_s": 1e308},
    "a queue wait of 1e308 s": {"queue_wait_s": 1e308},
    "an overhead of text": {"status": "ok", "overhead_s": "long"},
    "a GPU use of text": {"status": "ok", "gpu": {"util_mean": "high"}},
    "a GPU memory peak of 1e308 MiB": {"status": "ok", "gpu": {"mem_used_max_mib": 1e308}},
    "a GPU use past 100%": {"status": "ok", "gpu": {"util_mean": 1e300}},
}


@pytest.mark.parametrize("case", sorted(BAD_FIELDS))
def test_a_run_field_of_the_wrong_type_or_size_is_skipped_whatever_the_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    from hpcbench.measure.store import Store

    changes = {"status": "failed", "error": "timed out", **BAD_FIELDS[case]}
    bad = _dump(_good_run(repeat=1, **changes))
    (tmp_path / RESULTS_FILE).write_text(f"{_dump(_good_run())}\n{bad}\n")
    store = Store(tmp_path)
    assert [r["repeat"] for r in store.runs()] == [0]
    field = next(iter(BAD_FIELDS[case].keys() - {"status"}))
    assert [n for n, _ in store.skipped] == [2]
    assert f"whose {field}" in store.skipped[0][1], store.skipped
    assert (
        f"{RESULTS_FILE}:2: skipping a line: a run record whose {field}" in capsys.readouterr().err
    )


def test_a_failed_run_with_allreduce_bytes_of_text_is_skipped_by_every_reader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.unit.test_predict import _store

    store = _store(tmp_path, {2: 0.8, 4: 0.6})  # three node counts: calibrate fits them
    run = {**store.runs()[1], "repeat": 1, "status": "failed", "error": "killed"}
    bad = _dump({**run, "allreduce_bytes": "lots"})
    with store.path.open("a") as f:
        f.write(bad + "\n")
    named = f"{RESULTS_FILE}:4: skipping a line: a run record whose allreduce_bytes"
    folder = str(tmp_path)
    for argv, json_out in [
        (["report", "--out", folder, "--format", "json"], True),
        (["report", "--out", folder, "--format", "csv"], False),
        (["report", "--out", folder], False),  # report.md, report.html and their numbers
        (["compare", folder, folder], False),
        (["predict", "--calibrate", folder, "--json"], True),
    ]:
        rc, out, err = _command(argv, capsys)
        assert rc == 0, (argv, err)
        _result_or_one_line(rc, out, err, json_out)
        assert named in err, (argv, err)
    report = (tmp_path / "report.md").read_text()
    assert "killed" not in report  # the skipped run is not counted as a failure either
