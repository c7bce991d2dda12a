"""A campaign's journal and its testbeds' stores as hostile input, generated.

Each example writes a campaign's journal (cell and phase records whose numbers are of
the wrong type, non-finite or huge: NaN, inf, 1e308, ints past 4300 digits; whose text
holds terminal escapes, line breaks and lone surrogates) and its testbeds' stores
(tests/unit/test_hostile_records.py's generated lines), then runs `campaign plan`,
`campaign status` and `campaign report` in-process. Each must exit 0 with its result
or 2 with one line; every line it prints is one printable line, no figure reads inf
or nan, and a record it cannot use is named on stderr, never a traceback.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import operator
import os
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import event, given, settings
from hypothesis import strategies as st

from hpcbench import cli
from hpcbench.campaign import campaign_file, comparison
from hpcbench.campaign.journal import (
    CELL_STATUSES,
    FORECASTS,
    PHASE_STATUSES,
    PHASES,
    Journal,
)
from hpcbench.core import paths
from hpcbench.core.errors import UsageError
from hpcbench.core.progress import format_duration
from hpcbench.measure.store import RESULTS_FILE, Store
from hpcbench.schedulers.slurm import JOB_STATUSES
from tests.unit.test_campaign import Fakes, base
from tests.unit.test_campaign_inputs import paths_of, put
from tests.unit.test_hostile_records import (
    _SETTINGS,
    Raw,
    _dump,
    _refuse_constant,
    store_bytes,
)

CAMPAIGN: dict[str, Any] = {
    "name": "fuzz",
    "sweep": {"model": "resnet18", "image_size": 32, "batch": [4, 8], "nodes": [1, 2]},
    "testbeds": [
        {
            "name": "a",
            "title": "Local, 1 Gbit/s",
            "env": "local",
            "settings": {"node_count": 2, "link_rate": "1gbit"},
            "expect": {"images_per_s": 10},
        },
        {"name": "b", "slurm": {"partition": "p", "nodes": 2, "gpus_per_node": 1}},
        {"name": "c", "hosts": ["h1:1", "h2:1"]},
    ],
}
TESTBEDS = [tb["name"] for tb in CAMPAIGN["testbeds"]]


def write_campaign(tmp: Path) -> Path:
    path = tmp / "c.yaml"
    path.write_text(yaml.safe_dump({**CAMPAIGN, "out": str(tmp / "out")}))
    (tmp / "out").mkdir(exist_ok=True)
    return path


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with warnings.catch_warnings():  # matplotlib's (an empty legend): not hpcbench's lines
        warnings.simplefilter("ignore")
        rc = cli.main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


# A figure printed from a non-finite number ("inf node-hours", "nan images/s").
NOT_A_NUMBER = re.compile(r"\b(inf|nan)\b", re.IGNORECASE)


def check(rc: int, out: str, err: str) -> None:
    """0 with a result, or 2 with one error line; every line printable, hpcbench's own
    on stderr, no figure that is no number and no hours booked below zero."""
    assert rc in (0, 2), err
    lines = err.strip().splitlines()
    assert all(x.startswith("hpcbench: ") for x in lines), err
    if rc == 2:
        assert lines and lines[-1].startswith("hpcbench: error: "), err
    else:
        assert out.strip(), err
    for line in (out + err).splitlines():
        assert line.isprintable(), repr(line)
    assert not NOT_A_NUMBER.search(out + err), out + err
    booked = re.findall(r"(-?[\d.]+) (?:node|GPU)-hours", out)
    assert all(float(x) >= 0 for x in booked), out


# ------------------------------------------------------------------ generated
NUMBERS = st.one_of(
    st.sampled_from(
        [
            0,
            2.5,
            600.0,
            -1,
            1e7,
            1e308,
            -1e308,
            5e-324,
            2**63,
            True,
            None,
            "slow",
            "",
            [],
            {},
            Raw("1e400"),
            Raw("NaN"),
            Raw("Infinity"),
            Raw("-Infinity"),
            Raw("9" * 5000),  # past the 4300 digits int() reads
            Raw("1" + "0" * 400),  # an int no float holds
        ]
    ),
    st.floats(),
    st.integers(),
)
# Text without letters of its own, so that a journal's cause can never read "inf".
TEXTS = st.one_of(
    st.sampled_from(
        [
            "",
            "deploy: timed out",
            "\x1b[2J\x1b[31mred\x1b[0m",
            "a\nb\r\nc",
            "\u202eright to left",
            "\x00\x07",
            "\x9b2J",
            "\u00e9" * 600,
            Raw('"\\udcff"'),  # a lone surrogate
            Raw('"x\\ud800"'),
            3,
            None,
        ]
    ),
    st.text(st.characters(exclude_categories=["Lu", "Ll", "Lt", "Lm", "Lo"]), max_size=10),
)


def mostly(good: Any) -> st.SearchStrategy[Any]:
    """The value a campaign writes three times in four, else a hostile one."""
    return st.one_of(st.just(good), st.just(good), st.just(good), NUMBERS)


def good_record(kind: str, testbed: str, cell: str) -> dict[str, Any]:
    """A record of the kind as the journal writes it (hpcbench.campaign.journal):
    every field the commands read, each a spot the suites below make hostile."""
    record: dict[str, Any] = {"kind": kind, "campaign": "fuzz", "testbed": testbed}
    if kind == "cell":
        return record | {
            "cell": cell,
            **{"batch": 4, "nodes": 1, "workers": 1, "gpus_per_node": 1},
            "status": "measured",
            "why": "",
            "at": "2026-01-31T10:00:00+0000",
            **{"runs": 2, "images_per_s": 12.5, "ci95": 0.5},
        }
    lease = {"variable": "max_duration", "value": "90m", "ends_at": 1.8e9}
    if kind == "phase":
        return record | {
            **{"env": "local", "fingerprint": "0123456789abcdef"},
            **{"phase": "deploy", "status": "ok", "seconds": 60.0, "why": "", "at": "now"},
            "lease": lease,
            "still_held": ["STILL HELD: job 7"],
            "jobs_left": [
                {"job": "4242", "scancel": "scancel 4242", "where": "on this machine", "why": "x"}
            ],
            "jobs_gone": ["4241"],
        }
    forecast_cell = {
        "cell": cell,
        **{"batch": 4, "nodes": 1, "workers": 1, "gpus_per_node": 1},
        **{"single_images_per_s": 10.0, "single_source": "given", "images_per_s": 10.0},
        **{"efficiency": 1.0, "efficiency_low": 1.0, "efficiency_high": 1.0},
        "link_source": "one worker",
    }
    if kind == "job":
        return record | {
            **{"name": "hpcbench-0123abcd", "job": "4242", "partition": "p"},
            **{"where": "on this machine", "scancel": "scancel 4242"},
            **{"status": "queued", "why": "", "at": "2026-01-31T10:00:00+0000"},
        }
    return record | {"made": "plan", "at": "now", "cells": [forecast_cell], "lease": lease}


KINDS = ("cell", "phase", "forecast", "job")
# Values of every JSON type, and the hostile ones: a field holding any of them is read
# as it is or its record skipped and named.
HOSTILE = st.one_of(
    NUMBERS,
    TEXTS,
    st.sampled_from([[1], ["fuzz"], {"a": 1}, [[]], [{"x": None}], False, -1, "other"]),
)


@st.composite
def journal_record(draw: st.DrawFn, cells: list[tuple[str, str]]) -> dict[str, Any]:
    testbed, cell = draw(st.sampled_from(cells))
    record = good_record(draw(st.sampled_from(KINDS)), testbed, cell)
    if record["kind"] == "cell":
        record["status"] = draw(st.sampled_from(CELL_STATUSES))
    elif record["kind"] == "phase":
        record["phase"] = draw(st.sampled_from(PHASES))
        record["status"] = draw(st.sampled_from(PHASE_STATUSES))
    elif record["kind"] == "job":
        record["status"] = draw(st.sampled_from(JOB_STATUSES))
        record["job"] = draw(st.sampled_from(["4242", "", "4243"]))
    else:
        record["made"] = draw(st.sampled_from(FORECASTS))
    spots = [p for p in paths_of(record) if p]
    for _ in range(draw(st.sampled_from([0, 1, 1, 2, 3]))):  # a field of another type, or gone
        where = draw(st.sampled_from(spots))
        try:
            parent = functools.reduce(operator.getitem, where[:-1], record)
        except (KeyError, IndexError, TypeError):
            continue  # a field under one already replaced
        last = where[-1]
        if isinstance(parent, list) and isinstance(last, int) and last < len(parent):
            parent[last] = draw(HOSTILE)
        elif isinstance(parent, dict) and draw(st.booleans()):
            parent.pop(last, None)
        elif isinstance(parent, dict):
            parent[last] = draw(HOSTILE)
    return record


def cells_of(path: Path) -> list[tuple[str, str]]:
    return [(c.testbed, c.id) for c in campaign_file.load(path).cells]


# The hostile-store suite's settings, with fewer examples: each runs four commands.
@settings(_SETTINGS, max_examples=30)
@given(st.data(), st.lists(store_bytes(), min_size=1, max_size=2))
def test_plan_status_and_report_on_a_hostile_journal_and_stores(
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    data: st.DataObject,
    stores: list[bytes],
) -> None:
    tmp = tmp_path_factory.mktemp("campaign")
    path = write_campaign(tmp)
    records = data.draw(st.lists(journal_record(cells_of(path)), max_size=8))
    text = "\n".join(_dump({"schema": 1, **r}) for r in records) + "\n"
    (tmp / "out" / RESULTS_FILE).write_bytes(text.encode("utf-8", "surrogatepass"))
    for name, lines in zip(TESTBEDS, stores, strict=False):
        (tmp / "out" / name).mkdir()
        (tmp / "out" / name / RESULTS_FILE).write_bytes(lines)
    for action in ("plan", "status", "report"):
        rc, out, err = run(["campaign", action, str(path)], capsys)
        check(rc, out, err)
        event(f"{action} exit {rc}, {'some' if 'skipping' in err else 'no'} line skipped")
    rc, out, err = run(["campaign", "status", str(path), "--json"], capsys)
    check(rc, out, err)
    json.loads(out, parse_constant=_refuse_constant)
    if (tmp / "out" / "configurations.json").exists():
        text = (tmp / "out" / "configurations.json").read_text()
        json.loads(text, parse_constant=_refuse_constant)
    owner_checked(tmp / "out", capsys)


def owner_checked(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What `campaign run` and `campaign report` read first: whose journal it is; one
    line where it is another campaign's, never a traceback."""
    try:
        Journal(out, "fuzz").check_owner()
    except UsageError as err:
        assert len(str(err).splitlines()) == 1 and "holds campaign" in str(err)
    capsys.readouterr()


# A field's value of each JSON type, and the hostile ones.
FIELD_VALUES = [
    [1],
    {"a": 1},
    None,
    True,
    -1,
    1.5,
    "text",
    "\x1b[2J",
    Raw("1e400"),
    Raw("NaN"),
    Raw("9" * 5000),
    Raw('"\\udcff"'),
]


@pytest.mark.parametrize("kind", KINDS)
def test_every_field_of_a_journal_record_of_any_type_gives_a_result_or_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """Each field of the kind (nested ones too) given each value, and left out: plan,
    status and report read the journal or skip the record and name it."""
    path = write_campaign(tmp_path)
    Store(tmp_path / "out" / "a").append(run_record())
    testbed, cell = cells_of(path)[0]
    good = good_record(kind, testbed, cell)
    records = [good]
    for where in paths_of(good)[1:]:
        for value in FIELD_VALUES:
            if where == ("campaign",) and isinstance(value, str) and not isinstance(value, Raw):
                continue  # another campaign's record: its refusal is tested on its own
            records.append(put(copy.deepcopy(good), where, value))
        gone = copy.deepcopy(good)
        parent = functools.reduce(operator.getitem, where[:-1], gone)
        del parent[where[-1]]
        records.append(gone)
    text = "\n".join(_dump({"schema": 1, **r}) for r in records) + "\n"
    (tmp_path / "out" / RESULTS_FILE).write_bytes(text.encode("utf-8", "surrogatepass"))
    for argv in (["plan"], ["status"], ["status", "--json"], ["report"]):
        rc, out, err = run(["campaign", *argv, str(path)], capsys)
        check(rc, out, err)
        assert rc == 0 and "skipping a line" in err, (argv, err)
    owner_checked(tmp_path / "out", capsys)


# ---------------------------------------------------------------- by hand
def journal(tmp: Path, *records: dict[str, Any]) -> None:
    lines = [_dump({"schema": 1, "campaign": "fuzz", **r}) for r in records]
    (tmp / "out" / RESULTS_FILE).write_text("\n".join(lines) + "\n")


def phase(testbed: str, name: str, seconds: Any, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "phase",
        "testbed": testbed,
        "env": "local",
        "phase": name,
        "status": "ok",
        "seconds": seconds,
        "why": "",
        **extra,
    }


def test_phases_of_1e308_seconds_are_left_out_of_the_plan_never_summed_to_inf(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_campaign(tmp_path)
    journal(tmp_path, phase("a", "deploy", 1e308), phase("a", "destroy", 1e308))
    rc, out, err = run(["campaign", "plan", str(path)], capsys)
    check(rc, out, err)
    assert rc == 0 and "deploy 10m00s (assumed)" in out and "destroy 2m00s (assumed)" in out
    assert err.count("skipping a line: a phase record whose seconds breaks maximum") == 2, err


def run_record(**changes: Any) -> dict[str, Any]:
    record = {
        "kind": "run",
        "env": "local",
        "model": "resnet18",
        "backend": "horovod",
        "batch": 4,
        "image_size": 32,
        "data": "synthetic",
        "nodes": 1,
        "workers": 1,
        "gpus_per_node": 1,
        "method": "m",
        "repeat": 0,
        "status": "ok",
        "steps": 2,
        "window_times": [1.0, 1.1],
        "duration_s": 30.0,
        "gpu": {"util_mean": 80.0, "mem_used_max_mib": 2048.0},
    }
    return {**record, **changes}


def test_plan_leaves_out_an_ok_run_whose_duration_is_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_campaign(tmp_path)
    store = Store(tmp_path / "out" / "a")
    store.append(run_record())
    store.append(run_record(repeat=1, duration_s="slow"))
    rc, out, err = run(["campaign", "plan", str(path)], capsys)
    check(rc, out, err)
    assert rc == 0 and "3 x 30 s measured earlier" in out
    assert "skipping a line: a run record whose duration_s is not number or null" in err


def test_a_negative_launch_overhead_makes_no_negative_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_campaign(tmp_path)
    Store(tmp_path / "out" / "a").append(run_record(overhead_s=-1e7))  # a node's clock skewed
    rc, out, err = run(["campaign", "plan", str(path)], capsys)
    check(rc, out, err)
    assert rc == 0 and re.findall(r"\d+ x (-?\d+) s", out), out
    assert all(float(x) >= 0 for x in re.findall(r"\d+ x (-?\d+) s", out)), out
    assert all(float(x) >= 0 for x in re.findall(r"(-?[\d.]+) node-hours", out)), out


def test_a_queue_wait_of_1e308_s_is_neither_planned_nor_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_campaign(tmp_path)
    store = Store(tmp_path / "out" / "b")
    store.append(run_record(env="slurm", queue_wait_s=20.0))
    store.append(run_record(env="slurm", repeat=1, queue_wait_s=1e308))
    rc, out, err = run(["campaign", "plan", str(path)], capsys)
    check(rc, out, err)
    assert "mean of 1 job(s) measured" in out or "20 s queue wait" in out, out
    rc, out, err = run(["campaign", "report", str(path)], capsys)
    check(rc, out, err)
    systems = json.loads((tmp_path / "out" / "systems.json").read_text())
    assert [s["queue_wait_per_job"] for s in systems] == ["median 20s over 1 jobs (20s-20s)"]


def test_campaign_report_leaves_out_a_run_whose_gpu_use_is_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_campaign(tmp_path)
    store = Store(tmp_path / "out" / "a")
    store.append(run_record())
    store.append(run_record(repeat=1, gpu={"util_mean": "high"}))
    rc, out, err = run(["campaign", "report", str(path)], capsys)
    check(rc, out, err)
    assert rc == 0 and "whose gpu.util_mean is not number or null" in err
    systems = json.loads((tmp_path / "out" / "systems.json").read_text())
    assert systems[0]["gpu_busy"] == "80% mean over 1 runs (80-80%)"


def test_status_shows_a_journals_cause_as_one_line_its_escapes_written_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_campaign(tmp_path)
    testbed, cell = cells_of(path)[0]
    why = "deploy: \x1b[2J\x1b[31mgone\nnext line\x07"
    record = {"kind": "cell", "testbed": testbed, "cell": cell, "batch": 4, "nodes": 1}
    journal(tmp_path, {**record, "workers": 1, "status": "failed", "why": why, "at": "\x1b[5m"})
    rc, out, err = run(["campaign", "status", str(path)], capsys)
    check(rc, out, err)
    assert "deploy: \\x1b[2J\\x1b[31mgone next line\\x07" in out
    rc, out, err = run(["campaign", "status", str(path), "--json"], capsys)
    assert rc == 0 and "\\u001b" not in out  # the JSON's text went through the filter too


def test_status_shows_a_job_left_as_one_line_its_escapes_written_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_campaign(tmp_path)
    job = {"job": "42\x1b[2J", "scancel": "scancel 42\nrm -rf ~", "where": "on\x07", "why": ""}
    journal(tmp_path, phase("b", "sweep", 1.0, status="interrupted", at="t", jobs_left=[job]))
    rc, out, err = run(["campaign", "status", str(path)], capsys)
    check(rc, out, err)
    assert (
        "STILL QUEUED OR RUNNING: slurm job 42\\x1b[2J of testbed b may still be queued or "
        "running since its sweep at t: `scancel 42 rm -rf ~` on\\x07 cancels it"
    ) in out.splitlines()


def test_status_leaves_out_a_lease_that_ends_past_any_clock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_campaign(tmp_path)
    lease = {"variable": "max_duration\x1b[31m", "value": "90m", "ends_at": 1e308}
    journal(tmp_path, phase("a", "deploy", 60.0, lease=lease))
    rc, out, err = run(["campaign", "status", str(path)], capsys)
    check(rc, out, err)
    assert rc == 0 and "whose lease.ends_at breaks maximum" in err


def test_a_title_holding_a_lone_surrogate_is_written_out_in_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_campaign(tmp_path)
    Store(tmp_path / "out" / "a").append(run_record())
    loaded = campaign_file.load(path)
    titled = tuple(
        dataclasses.replace(tb, title="odd \udcff title\x1b[31m") for tb in loaded.testbeds
    )
    campaign = dataclasses.replace(loaded, testbeds=titled, description="about \udcff it\nand more")
    written = comparison.build(campaign)
    page = written[0].read_text()
    assert "odd \\udcff title\\x1b[31m" in page and "about \\udcff it and more" in page
    rows = (tmp_path / "out" / "configurations.csv").read_text()
    assert "odd \\udcff title" in rows


@pytest.mark.parametrize(
    "seconds, shown",
    [
        (float("inf"), "over 277777h46m"),
        (1e308, "over 277777h46m"),
        (10**5000, "over 277777h46m"),
        (float("nan"), "unknown"),
        (3700.0, "1h01m"),
    ],
    ids=["inf", "1e308", "5001 digits", "nan", "an hour"],
)
def test_a_duration_past_any_plan_reads_as_over_the_cap(seconds: float, shown: str) -> None:
    assert format_duration(seconds) == shown


def test_run_names_a_journal_record_whose_campaign_is_a_list_and_refuses_the_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`campaign run` crashed on it (an unhashable campaign) before it could refuse the
    folder another campaign's journal holds."""
    path = write_campaign(tmp_path)
    journal(
        tmp_path,
        phase("a", "deploy", 60.0, campaign=["fuzz"]),
        phase("a", "deploy", 60.0, campaign="other"),
    )
    rc, out, err = run(["campaign", "run", str(path)], capsys)
    check(rc, out, err)
    assert rc == 2 and "a phase record whose campaign is not string" in err
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith(f"hpcbench: error: {tmp_path / 'out'} holds campaign 'other', not 'fuzz'")
    )


@pytest.mark.parametrize("gpus", [[1], {"n": 1}, "1", 1.5, True])
def test_report_names_a_forecast_cell_whose_gpus_per_node_is_not_a_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], gpus: Any
) -> None:
    """A list crashed `campaign report` (an unhashable key); the others were read as
    counts they are not."""
    path = write_campaign(tmp_path)
    Store(tmp_path / "out" / "a").append(run_record())
    cell = {"cell": "x", "batch": 4, "nodes": 1, "workers": 1, "gpus_per_node": gpus}
    journal(tmp_path, {"kind": "forecast", "testbed": "a", "made": "plan", "cells": [cell]})
    rc, out, err = run(["campaign", "report", str(path)], capsys)
    check(rc, out, err)
    assert rc == 0 and "a forecast record whose cells.0.gpus_per_node is not integer" in err


def test_report_refuses_a_folder_whose_journal_is_another_campaigns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It overwrote the other campaign's report and exited 0."""
    path = write_campaign(tmp_path)
    Store(tmp_path / "out" / "a").append(run_record())
    journal(tmp_path, phase("a", "deploy", 60.0, campaign="other"))
    (tmp_path / "out" / "report.md").write_text("the other campaign's report\n")
    rc, out, err = run(["campaign", "report", str(path)], capsys)
    check(rc, out, err)
    assert rc == 2 and err.strip() == (
        f"hpcbench: error: {tmp_path / 'out'} holds campaign 'other', not 'fuzz': "
        "give this campaign another `out:`"
    )
    assert (tmp_path / "out" / "report.md").read_text() == "the other campaign's report\n"
    assert not (tmp_path / "out" / "report.html").exists()


@pytest.mark.parametrize(
    "argv",
    [["status"], ["status", "--json"], ["run", "--dry-run"], ["run", "--dry-run", "--resume"]],
)
def test_status_and_a_dry_run_refuse_a_folder_whose_journal_is_another_campaigns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """Both read the other campaign's journal as this one's: its cells measured, and
    'nothing to do' for a run that would be refused."""
    path = write_campaign(tmp_path)
    Store(tmp_path / "out" / "a").append(run_record())
    journal(tmp_path, phase("a", "deploy", 60.0, campaign="other"))
    rc, out, err = run(["campaign", argv[0], str(path), *argv[1:]], capsys)
    check(rc, out, err)
    assert rc == 2 and err.strip() == (
        f"hpcbench: error: {tmp_path / 'out'} holds campaign 'other', not 'fuzz': "
        "give this campaign another `out:`"
    )


# ---------------------------------------------- a journal that is not the campaign's
COMMANDS = [["run"], ["run", "--resume"], ["run", "--dry-run"], ["status"], ["report"]]


def nothing_booked(fakes: Fakes, out: Path) -> None:
    """Nothing planned, deployed or written for the campaign."""
    assert fakes.calls == []
    assert not (out / "logs").exists() and not (out / "report.html").exists()
    assert not (paths.state_root() / "campaigns").exists()


@pytest.mark.parametrize("argv", [*COMMANDS, ["plan"]], ids=" ".join)
def test_a_journal_hard_linked_to_a_file_elsewhere_is_refused_in_one_line_and_left_alone(
    tmp_path: Path, fakes: Fakes, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """Its other name is outside the folder: appending would write there."""
    path = base(tmp_path)
    out = campaign_file.load(path).out
    out.mkdir()
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_text("not the campaign's\n")
    os.link(elsewhere, out / RESULTS_FILE)
    rc, _, err = run(["campaign", argv[0], str(path), *argv[1:]], capsys)
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("hpcbench: error: "), err
    assert lines[0].endswith(  # `plan` names the campaign file first
        f"{out / RESULTS_FILE} is one of 2 hard links to a file, which hpcbench never writes "
        "through: remove it"
    ), err
    assert elsewhere.read_text() == "not the campaign's\n"
    nothing_booked(fakes, out)


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_an_out_folder_holding_a_scale_store_is_refused_before_anything_is_booked(
    tmp_path: Path, fakes: Fakes, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """`scale --out DIR` wrote runs there: the campaign's journal would be appended to
    that store and its report written over scale's."""
    path = base(tmp_path)
    out = campaign_file.load(path).out
    store = Store(out)
    store.append(run_record())
    store.append(run_record(repeat=1))
    kept = (out / RESULTS_FILE).read_bytes()
    rc, _, err = run(["campaign", argv[0], str(path), *argv[1:]], capsys)
    assert rc == 2 and err.strip().splitlines()[-1] == (
        f"hpcbench: error: {out} holds a results store of `scale` (2 run or probe record(s) "
        "in results.jsonl), not a campaign's journal: give this campaign an `out:` of its own"
    ), err
    assert len(err.strip().splitlines()) == 1, err
    assert (out / RESULTS_FILE).read_bytes() == kept
    nothing_booked(fakes, out)


def test_a_campaigns_own_journal_is_taken_as_before(
    tmp_path: Path, fakes: Fakes, capsys: pytest.CaptureFixture[str]
) -> None:
    """The refusals above leave a journal of the campaign's own records alone."""
    path = base(tmp_path)
    assert run(["campaign", "run", str(path)], capsys)[0] == 0
    assert run(["campaign", "run", "--resume", str(path)], capsys)[0] == 0
    rc, out, _ = run(["campaign", "status", str(path)], capsys)
    assert rc == 0 and "measured" in out
