"""evaluation/layouts_score.py: `hpcbench predict` in a transformer's layout scored against
the published runs of evaluation/layouts.json, each with constants fitted without its
source, the intervals over source groups."""

from __future__ import annotations

import copy
import json
import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcbench.performance import memory, scaling_model
from tests.unit.conftest import EVALUATION

FIT = scaling_model.Fit({"tcp": 0.6, "rdma": 0.9}, 0.2, 0.0)


@pytest.fixture
def score(evaluation):
    return evaluation("layouts_score")  # beside it, on the path: published


def _subset(ls, runs: dict[str, set[str]]) -> dict:
    """layouts.json with only these runs (by source), copied: the file's rows stay."""
    data = ls.load()
    rows = [copy.deepcopy(r) for r in data["rows"] if r["run"] in runs.get(r["source"], set())]
    assert sum(map(len, runs.values())) == len(rows)
    return {
        "shapes": {m: data["shapes"][m] for m in {r["model"] for r in rows}},
        "sources": {s: data["sources"][s] for s in runs},
        "rows": rows,
        "peak_memory": [],
    }


PLANTED = {
    "dgxc-25.01-nemotron4-15b": {"BF16, 16 GPUs", "BF16, 256 GPUs"},
    "torchtitan-llama3-h100": {"Table 2, FSDP 8, CP 1, sequence 32768", "Table 4, 2D"},
}


def _row(data: dict, run: str) -> dict:
    return next(r for r in data["rows"] if r["run"] == run)


def test_a_planted_row_scores_the_forecasts_own_point(score):
    """Rows whose published figures are the forecast's own at one worker rate score no
    error: E (over a base of the layout), tokens/s per GPU (one worker found from the
    base, or from another model's base by its MFU) and reserved memory."""
    data = _subset(score, PLANTED)
    fits = {g: FIT for g in ("dgxc-benchmarking", "torchtitan")}
    base, wide = _row(data, "BF16, 16 GPUs"), _row(data, "BF16, 256 GPUs")
    small, big = _row(data, "Table 2, FSDP 8, CP 1, sequence 32768"), _row(data, "Table 4, 2D")
    rate = 6000.0
    with score.shapes_known(data):
        for row, at in ((base, rate), (wide, rate), (small, rate)):
            row["tokens_per_s_per_gpu"] = _per_gpu(score, row, at)
        big["tokens_per_s_per_gpu"] = _per_gpu(
            score, big, rate * score.flops(small) / score.flops(big)
        )
        held = score.forecast(big, [big["gpus"]], 1.0, FIT)[0]["memory_bytes"]
        big["peak_memory_gib"] = held / (1 - memory.FRAGMENTATION) / score.GIB
        small["peak_memory_gib"] = None
        scores = score.score(data, fits)
    (e,) = scores.efficiency
    assert e.row is wide and e.measured < 0.999  # not a vacuous 1
    assert e.point == pytest.approx(e.measured, abs=1e-7)
    assert e.low <= e.point <= e.high
    assert {t.row["run"]: t.kind for t in scores.tokens} == {wide["run"]: "base", big["run"]: "mfu"}
    assert all(abs(t.error) < 1e-7 for t in scores.tokens)
    (m,) = scores.memory
    assert m.row["run"] == big["run"] and m.kind == "reserved" and abs(m.error) < 1e-9


def _per_gpu(score, row: dict, rate: float) -> float:
    return score.forecast(row, [row["gpus"]], rate, FIT)[0]["tokens_per_s"] / row["gpus"]


def test_a_rows_source_is_left_out_of_its_fit(score, monkeypatch):
    """Each layout group's constants are fitted on published.json's rows of every other
    group (CNN and transformer), never its own, and each row is forecast with its own
    group's constants."""
    import published

    folds: list = []
    real_folds = published.PlainFolds

    class Recording(real_folds):
        def __init__(self, data):
            super().__init__(data)
            folds.append(self)

    seen: list[set[str]] = []

    def fit_constants(cases, cache=None):
        (f,) = folds
        group = {id(k): g for k, g in zip(f.cases, f.groups, strict=True)}
        seen.append({group[id(k)] for k in cases})
        n = len(seen)  # a fit of its own per call: 0.05, 0.10, ... interference
        return scaling_model.Fit({"tcp": 0.5, "rdma": 0.8}, round(0.05 * n, 2), 0.0)

    monkeypatch.setattr(published, "PlainFolds", Recording)
    monkeypatch.setattr(published, "fit_constants", fit_constants)
    layouts, pub = score.load(), published.load()
    fits = score.fold_fits(layouts, pub)
    every = {published.group_of(pub, r) for r in pub["rows"]}
    mine = {published.group_of(layouts, r) for r in layouts["rows"] if r["scored"]}
    assert set(fits) == mine and len(seen) == len(mine)
    assert mine & every  # groups with rows in published.json, which must be left out
    for group, found in fits.items():
        fitted_on = seen[round(found.interference / 0.05) - 1]
        assert fitted_on == every - {group}
    data = _subset(score, PLANTED)
    with score.shapes_known(data):
        scores = score.score(data, fits)
    assert len(scores.tokens) == 2 and scores.efficiency
    for s in scores.tokens:
        group = published.group_of(data, s.row)
        at = s.command.index("--interference") + 1
        assert s.command[at] == f"{fits[group].interference:g}"
    for e in scores.efficiency:
        assert e.interference == fits[published.group_of(data, e.row)].interference


def test_the_intervals_resample_source_groups_not_rows(score):
    """Ten rows of one source that the forecast meets and one of another it misses by
    half: drawing the groups, both draws fall on the second a quarter of the time, so the
    bias's 95% interval reaches the whole miss (drawing rows, it would stop near 0.14)."""
    import published

    ratios = [score.Ratio({}, "a", 1.0, 1.0, "base", "", []) for _ in range(10)] + [
        score.Ratio({}, "b", 1.0, 1.5, "base", "", [])
    ]
    line = score.ratio_line("tokens/s per GPU", ratios, 0.05)
    assert "bias (mean forecast / published - 1) +4.5% (+0.0% to +50.0%)" in line
    assert "median |forecast / published - 1| 0.0% (0.0% to 50.0%)" in line
    scored = [published.Scored({}, "a", 0.9, 0.9, 0.8, 1.0, 0.9, 0.2) for _ in range(10)]
    scored.append(published.Scored({}, "b", 0.9, 1.4, 1.3, 1.5, 0.9, 0.2))  # outside its band
    (e, targets) = score.efficiency_lines(scored)
    assert "bias (mean point - published) +0.045 (+0.000 to +0.500)" in e
    assert "inside the band >= 80%: 91% (0% to 100%), met, not its whole interval" in targets


def test_each_shape_holds_the_parameters_its_source_gives(score):
    """The shapes as the forecast counts them: MPT's exactly llm-foundry's NumParams (its
    output the token table), the others within 5% of the size their names give (each with
    an output projection of its own: Megatron's 1.7B would count 1.49B tied)."""
    from hpcbench.core.bench import transformer_configs

    data = score.load()
    quoted = " ".join(data["sources"]["llm-foundry-grad-accum"]["quotes"])
    for name, shape in data["shapes"].items():
        held = transformer_configs.param_counts(score.config_of(name, shape, data["rows"]))
        size = re.search(r"-(\d+(?:\.\d+)?)([bm])$", name)
        assert size, name
        if name.startswith("mpt-"):
            assert f"| {held['total']} |" in quoted, name
        else:
            said = float(size[1]) * (1e9 if size[2] == "b" else 1e6)
            assert abs(held["total"] / said - 1) < 0.05, name


def test_the_memory_figures_layouts_are_their_captions(score):
    """The layouts the scoring gives published.json's memory figures are their captions'
    (the GPUs, the local batch, the checkpointing) and the config's sequence."""
    data = score.load()
    for (source, quote), caption in score.CAPTIONS.items():
        text = data["sources"][source]["quotes"][quote]
        layout = {**score.CAPTION_LAYOUT, **caption}
        assert f"{layout['gpus']} GPUs." in text
        assert f"Local batch size {layout['micro_batch']}," in text
        assert f"{layout['activation_checkpointing'].capitalize()} activation checkpointing" in text
    quotes = data["sources"]["torchtitan-llama3-h100"]["quotes"]
    assert f"seq_len = {score.CAPTION_LAYOUT['seq_len']}" in quotes


BAD = {
    "gpus": [0, -8, 1.5, "16", True, None],
    "tp": [0, 2.0, "4", None],
    "seq_len": [0, -1, "4096", None, False],
    "tokens_per_s_per_gpu": [0, -5.0, "fast", None, True, float("inf")],
    "model": ["no-such-model", None, 7, ["llama3.1-8b"]],
    "source": ["no-such-source", None, {"a": 1}],
    "activation_checkpointing": ["sometimes", 3, ["full"]],
    "transport": ["pigeon", 1],
    "intra_node": ["nvlink99"],
    "scored": ["yes", None, 1],
    "pp": [2],
    "gpu": [None, 3],
}


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    pick=st.sampled_from(sorted((k, i) for k, vs in BAD.items() for i in range(len(vs)))),
    which=st.integers(min_value=0, max_value=64),
)
def test_a_bad_figure_in_the_rows_is_one_line_and_status_2(score, tmp_path, capsys, pick, which):
    """A scored row's figure the scoring reads, made wrong, stops it before any forecast:
    one line naming the row and the figure, exit status 2, nothing written."""
    key, i = pick
    data = json.loads((EVALUATION / "layouts.json").read_text())
    scored = [r for r in data["rows"] if r["scored"]]
    row = scored[which % len(scored)]
    row[key] = BAD[key][i]
    path = tmp_path / f"bad-{key}-{i}-{which}.json"
    path.write_text(json.dumps(data))
    before = sorted(os.listdir(tmp_path))
    assert score.main(["--data", str(path)]) == 2
    out, err = capsys.readouterr()
    line = err.strip()
    assert out == "" and "\n" not in line and line.startswith("layouts_score.py: error: ")
    assert key in line
    assert sorted(os.listdir(tmp_path)) == before


def test_a_file_that_is_no_rows_is_one_line_and_status_2(score, tmp_path, capsys):
    """Not JSON, a FIFO at the name (not waited on), a list: one line each, status 2."""
    text = tmp_path / "text.json"
    text.write_text("{not json")
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    listed = tmp_path / "list.json"
    listed.write_text("[]")
    for path, said in ((text, "text.json"), (fifo, "fifo.json"), (listed, "shapes")):
        assert score.main(["--data", str(path)]) == 2
        line = capsys.readouterr().err.strip()
        assert "\n" not in line and said in line
