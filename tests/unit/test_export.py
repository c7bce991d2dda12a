"""`hpcbench report`'s numbers as data (JSON, CSV) against the documented schema
(docs/configurations.schema.json: the contract programs read; changing a field
means changing it there too)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcbench import cli
from hpcbench.measure.analysis import ConfigSummary
from hpcbench.reports import export
from tests.unit.summaries import summary
from tests.unit.test_report import _store

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "docs/configurations.schema.json").read_text()
)


def _printed(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert cli.main(["report", *argv]) == 0
    return capsys.readouterr().out


def test_json_follows_the_schema_and_holds_what_the_report_shows(tmp_path, capsys):
    store = _store(tmp_path)
    before = sorted(p.name for p in store.dir.iterdir())
    document = json.loads(_printed(capsys, "--out", str(store.dir), "--format", "json"))
    jsonschema.validate(document, SCHEMA)
    assert sorted(p.name for p in store.dir.iterdir()) == before  # nothing written
    configs = {(c["batch"], c["workers"]): c for c in document["configurations"]}
    assert sorted(configs) == [(32, 1), (32, 2), (32, 4), (64, 1), (64, 4)]
    # As the report's table: 1 worker 320 images/s on average, 4 workers E about 0.61.
    four = configs[(32, 4)]
    assert four["efficiency"] == pytest.approx(0.61, abs=0.01)
    assert four["predicted_efficiency_low"] == pytest.approx(0.07, abs=0.01)
    assert configs[(32, 1)]["efficiency"] == 1.0 and configs[(32, 2)]["runs"] == 0
    assert document["store"] == str(store.path)


def test_csv_has_every_field_and_the_same_rows(tmp_path, capsys):
    store = _store(tmp_path)
    document = json.loads(_printed(capsys, "--out", str(store.dir), "--format", "json"))
    rows = list(
        csv.DictReader(io.StringIO(_printed(capsys, "--out", str(store.dir), "--format", "csv")))
    )
    record = SCHEMA["properties"]["configurations"]["items"]
    assert list(rows[0]) == list(export.FIELDS) == record["required"]
    assert len(rows) == len(document["configurations"])
    for row, config in zip(rows, document["configurations"], strict=True):
        for name in ("batch", "workers", "images_per_sec", "efficiency", "ci95"):
            assert row[name] == ("" if config[name] is None else str(config[name]))


def test_the_html_report_writes_the_numbers_beside_it(tmp_path, capsys):
    store = _store(tmp_path)
    _printed(capsys, "--out", str(store.dir))
    document = json.loads((store.dir / "configurations.json").read_text())
    jsonschema.validate(document, SCHEMA)
    assert (store.dir / "configurations.csv").read_text().startswith("env,model,backend,")


def test_every_field_is_documented():
    record = SCHEMA["properties"]["configurations"]["items"]["properties"]
    assert all(record[name]["description"] for name in export.FIELDS)
    assert set(export.FIELDS) <= set(record)


def test_a_figure_that_is_not_a_number_is_null():
    nan = summary(
        throughput=float("nan"),
        ci95=float("inf"),
    )
    document = json.loads(export.as_json([export.configuration(nan)]))
    jsonschema.validate(document, SCHEMA)
    assert document["configurations"][0]["images_per_sec"] is None
    assert document["configurations"][0]["ci95"] is None
    with pytest.raises(ValueError):  # NaN never reaches a JSON file unnoticed
        export.as_json([{"x": float("nan")}])


def test_a_store_with_nothing_usable_says_how_many_lines_and_why(tmp_path, capsys):
    (tmp_path / "results.jsonl").write_text('not json\n{"kind": "run", "nodes": "four"}\n')
    assert cli.main(["report", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "holds no usable run: 2 line(s) skipped" in err and "not JSON" in err, err


# Text a spreadsheet would run, and text around it: names and titles come from files.
_TEXT = st.one_of(
    st.text(max_size=30),
    st.builds(
        lambda c, t: c + t,
        st.sampled_from([*export.FORMULA_START, "'", " ", "\0"]),
        st.text(max_size=20),
    ),
    st.sampled_from(
        [
            '=HYPERLINK("http://x")',
            "@SUM(A1)",
            "+1+cmd|' /C calc'!A0",
            "-2+3",
            "=1",
            "\t=1",
            "\r=1",
            "-",
            "'=already",
        ]
    ),
)
_NUMBER = st.one_of(
    st.integers(-(10**30), 10**30), st.floats(allow_nan=False, allow_infinity=False)
)
_TEXT_FIELDS = (
    "env",
    "model",
    "backend",
    "data",
    "method",
    "ci_method",
    "straggler",
    "cpu_limit",
    "link_rate",
)
_NUMBER_FIELDS = (
    "batch",
    "image_size",
    "gpus_per_node",
    "nodes",
    "workers",
    "runs",
    "failed",
    "throughput",
    "ci95",
    "efficiency",
    "speedup",
    "exposed_comm_s",
)


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(
    st.fixed_dictionaries(
        {
            **{f: _TEXT for f in _TEXT_FIELDS + ("testbed", "title")},
            **{f: _NUMBER for f in _NUMBER_FIELDS},
        }
    )
)
def test_no_text_cell_a_spreadsheet_would_run_and_numbers_stay_numbers(values) -> None:
    summary = ConfigSummary(**{k: v for k, v in values.items() if k not in ("testbed", "title")})
    record = export.configuration(summary, testbed=values["testbed"], title=values["title"])
    text = export.as_csv([record], ("testbed", "title"))
    header, row = list(csv.reader(io.StringIO(text, newline="")))
    cells = dict(zip(header, row, strict=True))
    # The throughput's column is named by its unit (images, the summary's default).
    numbers = {"images_per_sec" if f == "throughput" else f: f for f in _NUMBER_FIELDS}
    for name, cell in cells.items():
        if name in numbers:  # a number, negative ones too, as it was
            assert float(cell) == float(values[numbers[name]]), (name, cell)
        elif cell.startswith(export.FORMULA_START):
            raise AssertionError(f"{name}: {cell!r} would run as a formula")
    for name in (*_TEXT_FIELDS, "testbed", "title"):  # text reads back whole, quote aside
        assert cells[name] in (values[name], f"'{values[name]}"), name
