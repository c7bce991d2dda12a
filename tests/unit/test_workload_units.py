"""Units follow the workload: a transformer's records are counted in tokens/s and a
CNN's in images/s in the report's text and tables, the CSV/JSON export and the chart
axes; a transformer's MFU is shown where its runs know it, and why where they do not."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from matplotlib.figure import Figure

from hpcbench.campaign import comparison
from hpcbench.measure import analysis
from hpcbench.measure.store import Store
from hpcbench.reports import export, report
from tests.unit.test_figures import drawn

SEQ = 64
WHY = "no peak FLOPS known for 'cpu' in fp32"


def cnn_run(workers: int, seconds: float, repeat: int = 0) -> dict[str, Any]:
    return {
        "kind": "run",
        "status": "ok",
        "env": "vw",
        "model": "resnet18",
        "backend": "horovod",
        "batch": 8,
        "image_size": 32,
        "data": "synthetic",
        "gpus_per_node": 1,
        "nodes": workers,
        "workers": workers,
        "repeat": repeat,
        "steps": 2,
        "window_times": [seconds, seconds * 1.02],
        "weights_in_sync": True,
        "link_rate": "1gbit",
    }


def lm_run(
    workers: int, seconds: float, parallel: str = "ddp", repeat: int = 0, mfu: float | None = 0.2
) -> dict[str, Any]:
    return {
        **cnn_run(workers, seconds, repeat),
        "model": "gpt-tiny",
        "backend": "ddp",
        "batch": 4,
        "image_size": 0,
        "seq_len": SEQ,
        "parallel": parallel,
        "method": f"parallel={parallel} seq_len={SEQ}",
        "mfu": mfu,
        "mfu_unknown": None if mfu is not None else WHY,
        # What an MFU is computed from: the model's FLOPs per token, and the workers'
        # peak that makes this run's tokens/s (4 x 64 tokens x 2 steps a window) that MFU.
        "flops_per_token": FLOPS,
        "peak_flops": (
            None if mfu is None else workers * 4 * SEQ * 2 / (seconds * 1.01) * FLOPS / mfu
        ),
    }


FLOPS = 1e6  # per token


def store_of(tmp_path: Path, mfu: float | None = 0.2) -> Store:
    store = Store(tmp_path / "vw")
    for repeat in range(2):
        store.append(cnn_run(1, 1.0, repeat))
        store.append(cnn_run(2, 1.2, repeat))
        store.append(lm_run(1, 0.5, repeat=repeat, mfu=mfu))
        store.append(lm_run(2, 0.6, repeat=repeat, mfu=mfu))
    return store


def sections(md: str) -> dict[str, str]:
    """The report's series sections by heading."""
    parts = md.split("\n### ")[1:]
    return {p.split("\n", 1)[0]: p for p in parts}


def test_a_transformers_throughput_is_tokens_per_second_and_a_cnns_images():
    lm = analysis.summarise([lm_run(1, 0.5), lm_run(2, 0.6)])
    cnn = analysis.summarise([cnn_run(1, 1.0), cnn_run(2, 1.2)])
    one_lm = next(s for s in lm if s.workers == 1)
    one_cnn = next(s for s in cnn if s.workers == 1)
    # 4 sequences of 64 tokens, 2 steps a window: 512 tokens in about 0.505 s.
    assert one_lm.unit == "tokens" and one_lm.throughput == pytest.approx(512 / 0.505, 0.01)
    assert one_cnn.unit == "images" and one_cnn.throughput == pytest.approx(16 / 1.01, 0.01)
    assert one_lm.mfu == pytest.approx(0.2) and one_lm.mfu_unknown is None
    assert one_cnn.mfu is None and one_cnn.mfu_unknown is None


def test_the_report_tables_and_text_name_each_workloads_unit_and_mfu(tmp_path):
    md_path, _ = report.build_report(str(store_of(tmp_path).dir))
    by_title = sections(md_path.read_text())
    [lm] = [text for title, text in by_title.items() if title.startswith("gpt-tiny")]
    [cnn] = [text for title, text in by_title.items() if title.startswith("resnet18")]
    assert "tokens/s ± CI95" in lm and "images/s" not in lm
    assert "| MFU |" in lm and "20.0%" in lm
    assert "images/s ± CI95" in cnn and "tokens/s" not in cnn and "MFU" not in cnn


def test_an_unknown_mfu_is_shown_as_unknown_with_the_records_reason(tmp_path):
    md_path, _ = report.build_report(str(store_of(tmp_path, mfu=None).dir))
    [lm] = [t for title, t in sections(md_path.read_text()).items() if title.startswith("gpt")]
    rows = [
        line
        for line in lm.splitlines()
        if line.startswith("| 1 | 1 |") or line.startswith("| 2 | 2 |")
    ]
    assert [r.endswith("| unknown |") for r in rows[:2]] == [True, True], rows
    assert f"MFU unknown (1 worker(s), 2 worker(s)): {WHY}" in lm


def test_the_export_names_the_throughput_by_its_unit(tmp_path):
    store = store_of(tmp_path)
    report.build_report(str(store.dir))
    data = json.loads((store.dir / report.DATA_JSON).read_text())
    rows = {(c["model"], c["workers"]): c for c in data["configurations"]}
    lm, cnn = rows[("gpt-tiny", 2)], rows[("resnet18", 2)]
    assert lm["unit"] == "tokens" and lm["tokens_per_sec"] > 0 and lm["images_per_sec"] is None
    assert lm["tokens_per_sec_per_worker"] == pytest.approx(lm["tokens_per_sec"] / 2)
    assert lm["parallel"] == "ddp" and lm["seq_len"] == SEQ and lm["mfu"] == pytest.approx(0.2)
    assert cnn["unit"] == "images" and cnn["images_per_sec"] > 0 and cnn["tokens_per_sec"] is None
    assert cnn["mfu"] is None and cnn["seq_len"] is None
    table = list(csv.DictReader(io.StringIO((store.dir / report.DATA_CSV).read_text())))
    assert tuple(table[0]) == export.FIELDS
    by = {(r["model"], r["workers"]): r for r in table}
    assert by[("gpt-tiny", "2")]["tokens_per_sec"] and not by[("gpt-tiny", "2")]["images_per_sec"]
    assert by[("resnet18", "2")]["images_per_sec"] and not by[("resnet18", "2")]["tokens_per_sec"]


def ylabels(figs: list[Figure]) -> set[str]:
    return {ax.get_ylabel() for fig in figs for ax in fig.axes if ax.get_ylabel()}


def test_the_report_charts_axes_say_tokens_or_images(monkeypatch, tmp_path):
    summaries = analysis.summarise(store_of(tmp_path).runs())
    lm = [s for s in summaries if s.unit == "tokens"]
    cnn = [s for s in summaries if s.unit == "images"]
    lm_labels = ylabels(drawn(monkeypatch, lambda: report.make_plots(lm, tmp_path / "a")))
    assert "tokens/s (total)" in lm_labels and not any("images" in x for x in lm_labels)
    cnn_labels = ylabels(drawn(monkeypatch, lambda: report.make_plots(cnn, tmp_path / "b")))
    assert "images/s (total)" in cnn_labels and not any("tokens" in x for x in cnn_labels)


def test_the_campaign_charts_give_each_workload_a_panel_in_its_unit(monkeypatch, tmp_path):
    summaries = analysis.summarise(store_of(tmp_path).runs())
    tb = type("Tb", (), {"title": "vw", "name": "vw"})()
    results = [comparison.TestbedResults(tb, [], [], summaries, comparison._points(summaries))]  # type: ignore[arg-type]
    figs = drawn(monkeypatch, lambda: comparison.charts(results, tmp_path, "made by"))
    throughput = [ax.get_ylabel() for fig in figs for ax in fig.axes if "/s" in ax.get_ylabel()]
    assert sorted(throughput) == ["images/s (all workers)", "tokens/s (all workers)"]
    rows = comparison.glance_rows(results)
    cells = {row[4]: row for row in rows}  # by workload
    assert any("tokens/s" in c for c in cells[f"gpt-tiny ddp, seq {SEQ}"])
    assert any("images/s" in c for c in cells["resnet18"])
    assert cells[f"gpt-tiny ddp, seq {SEQ}"][-1] == "20.0%" and cells["resnet18"][-1] == "-"
