"""evaluation/layouts.json: published runs with tensor parallelism, gradient accumulation,
pipeline or context parallelism, each figure quoted from its source, derived from quoted
ones by a rule checked here, assumed with why, or null with why."""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

EVALUATION = Path(__file__).parents[2] / "evaluation"
LAYOUTS = EVALUATION / "layouts.json"

# The figures of a row; each is quoted, derived, assumed or null with why.
FIGURES = (
    "gpus",
    "gpus_per_node",
    "seq_len",
    "micro_batch",
    "global_batch",
    "grad_accum",
    "tp",
    "pp",
    "cp",
    "dp",
    "throughput",
    "step_time_s",
    "mfu_percent",
    "peak_memory_gib",
)
OPTIONAL_FIGURES = ("layers", "vp", "nodes")
WORDS = (
    "gpu",
    "intra_node",
    "network",
    "link",
    "transport",
    "precision",
    "activation_checkpointing",
)
CHECKPOINTING = ("none", "selective", "full")
# How a source's throughput gives tokens/s per GPU.
PER_GPU = ("quoted", "total", "samples", "tflops")


@functools.cache
def load() -> dict[str, Any]:
    """The file, read once: the tests change copies of its rows, never the rows."""
    assert LAYOUTS.is_file(), "evaluation/layouts.json holds no rows"
    data: dict[str, Any] = json.loads(LAYOUTS.read_text())
    return data


def quoted_numbers(text: str) -> set[float]:
    """Every number a quote writes, thousands separators read through ('5,762' is 5762)."""
    text = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)
    return {float(n) for n in re.findall(r"\d+(?:\.\d+)?", text)}


def megatron_flops_per_token(shape: dict[str, Any], seq_len: int) -> float:
    """Megatron-LM's model FLOPs per token of a GPT, as its TFLOP/s/GPU counts them
    (NVIDIA/Megatron-LM@f2e5db402c megatron/training/training.py:73-108,
    num_floating_point_operations at batch 1, over seq_length): 12 l h^2 (attention
    (1 + groups/heads + s/h), MLP ffn/h, logit V/(2 l h)); no gated MLP, kv_channels h/heads."""
    layers, dim, vocab = shape["layers"], shape["dim"], shape["vocab"]
    attention = 1 + shape["kv_heads"] / shape["heads"] + seq_len / dim
    mlp = shape["ffn"] / dim
    logit = vocab / (2 * layers * dim)
    return float(12 * layers * dim * dim * (attention + mlp + logit))


def _known(row: dict[str, Any], *fields: str) -> list[float] | None:
    """The row's figures of those fields, or None where one is not known."""
    if any(row.get(f) is None for f in fields):
        return None
    return [float(row[f]) for f in fields]


# The rules a derived figure follows: the product of the first fields over that of the second.
RULES = {
    "dp": (("gpus",), ("tp", "pp", "cp")),
    "cp": (("gpus",), ("tp", "pp", "dp")),
    "gpus": (("nodes", "gpus_per_node"), ()),
    "grad_accum": (("global_batch",), ("micro_batch", "dp")),
    "global_batch": (("micro_batch", "grad_accum", "dp"), ()),
    "micro_batch": (("global_batch",), ("grad_accum", "dp")),
}


def _derive(field: str, row: dict[str, Any]) -> float | None:
    """A figure from the row's other figures by its rule, or None where it has none."""
    if field not in RULES:
        return None
    above, below = (_known(row, *fields) for fields in RULES[field])
    if above is None or below is None:
        return None
    return math.prod(above) / math.prod(below)


def tokens_per_gpu(data: dict[str, Any], row: dict[str, Any]) -> float:
    """tokens/s per GPU as the row's source's throughput gives it."""
    rule = data["sources"][row["source"]]["per_gpu"]
    if rule == "quoted":
        return float(row["throughput"])
    if rule == "total":
        return float(row["throughput"] / row["gpus"])
    if rule == "samples":
        return float(row["throughput"] * row["seq_len"] / row["gpus"])
    shape = dict(
        data["shapes"][row["model"]], **({"layers": row["layers"]} if "layers" in row else {})
    )
    return row["throughput"] * 1e12 / megatron_flops_per_token(shape, row["seq_len"])


def row_problems(data: dict[str, Any], row: dict[str, Any]) -> list[str]:
    """What is wrong with one row: a figure neither quoted, derived, assumed nor null with
    why; a derivation that does not hold; a layout that contradicts itself."""
    problems: list[str] = []
    source = data["sources"].get(row.get("source"))
    if source is None:
        return [f"source {row.get('source')!r} is not in sources"]
    indices = row.get("from_quotes") or []
    if not indices or any(not 0 <= i < len(source["quotes"]) for i in indices):
        return [f"from_quotes {indices} does not name quotes of {row['source']}"]
    numbers = quoted_numbers(" ".join(source["quotes"][i] for i in indices))
    derived, assumed = row.get("derived", {}), row.get("assumed", {})
    null_why = row.get("null_why", {})
    if row.get("model") not in data["shapes"]:
        problems.append(f"model {row.get('model')!r} has no shape")
    fields = [*FIGURES, *(f for f in OPTIONAL_FIGURES if f in row)]
    for field in fields:
        if field not in row:
            problems.append(f"{field} is missing")
            continue
        value = row[field]
        if value is None:
            if not null_why.get(field):
                problems.append(f"{field} is null with no why")
        elif field in derived:
            expected = _derive(field, row)
            if expected is None or not math.isclose(value, expected, rel_tol=1e-12):
                problems.append(f"{field} {value} is not what its rule gives ({expected})")
        elif field in assumed:
            if not assumed[field]:
                problems.append(f"{field} is assumed with no why")
        elif float(value) not in numbers:
            problems.append(f"{field} {value} is not in the quotes it names")
    for field in WORDS:
        if row.get(field) is None and not null_why.get(field):
            problems.append(f"{field} is null with no why")
    if row.get("activation_checkpointing") not in (*CHECKPOINTING, None):
        problems.append(f"activation_checkpointing {row['activation_checkpointing']!r}")
    layout = _known(row, "gpus", "tp", "pp", "cp", "dp")
    if layout and layout[0] != math.prod(layout[1:]):
        problems.append(f"gpus {layout[0]:g} is not tp x pp x cp x dp")
    batch = _known(row, "global_batch", "micro_batch", "grad_accum", "dp")
    if batch and batch[0] != math.prod(batch[1:]):
        problems.append(f"global batch {batch[0]:g} is not micro x accumulation x dp")
    known = None not in (row.get("throughput"), row.get("gpus"), row.get("seq_len"))
    if known and not math.isclose(
        row["tokens_per_s_per_gpu"], tokens_per_gpu(data, row), rel_tol=1e-9
    ):
        problems.append(f"tokens_per_s_per_gpu is not {source['per_gpu']} throughput's")
    problems += _step_problems(source, row)
    return problems


def _step_problems(source: dict[str, Any], row: dict[str, Any]) -> list[str]:
    """A quoted step time, global batch and throughput of one run agree (the source's
    tables round each): they come from one column of one table."""
    figures = _known(row, "step_time_s", "global_batch", "seq_len")
    if not figures or source["per_gpu"] not in ("total", "samples"):
        return []
    step, batch, seq = figures
    expected = batch * seq / step if source["per_gpu"] == "total" else batch / step
    if abs(expected - row["throughput"]) > 0.01 * row["throughput"]:
        return [f"step {step} s at batch {batch} gives {expected:.0f}, not {row['throughput']}"]
    return []


def test_every_source_and_shape_is_pinned_and_quoted() -> None:
    data = load()
    for key, source in [*data["sources"].items(), *data["shapes"].items()]:
        url = source.get("url") or source.get("from")
        assert url.startswith("https://"), key
        # GitHub addresses are pinned to a commit: the quoted text does not move.
        for address in [url, *source.get("other_urls", [])]:
            if "github.com" in address:
                assert re.search(r"/blob/[0-9a-f]{40}/", address), (key, address)
        quotes = source["quotes"]
        assert quotes and all(q.strip() for q in quotes) and len(set(quotes)) == len(quotes), key
    for key, source in data["sources"].items():
        assert source["title"] and source["setup"] and source["tokens_per_s_from"], key
        assert source["per_gpu"] in PER_GPU, key


def test_every_shape_figure_is_in_its_quotes_or_says_how_it_follows() -> None:
    for name, shape in load()["shapes"].items():
        numbers = quoted_numbers(" ".join(shape["quotes"]))
        said = {**shape.get("derived", {}), **shape.get("assumed", {})}
        for field in ("layers", "dim", "heads", "kv_heads", "ffn", "vocab"):
            assert shape[field] in numbers or said.get(field), (name, field)
        assert shape["activation"] in " ".join(shape["quotes"]) or said.get("activation"), name


def test_every_row_figure_is_quoted_derived_assumed_or_null_with_why() -> None:
    data = load()
    assert len(data["rows"]) >= 10
    problems = {i: row_problems(data, row) for i, row in enumerate(data["rows"])}
    assert {i: p for i, p in problems.items() if p} == {}


def _quoted(row: dict[str, Any], field: str) -> bool:
    untouched = field not in row.get("derived", {}) and field not in row.get("assumed", {})
    return row.get(field) is not None and untouched


@settings(max_examples=200, deadline=None)
@given(st.data(), st.floats(1.001, 7.0))
def test_a_figure_moved_off_its_quote_is_named(draw: st.DataObject, factor: float) -> None:
    """The check can fail: any quoted figure of any row, moved off every number its
    quotes hold, is named as the problem."""
    data = load()
    rows = data["rows"]
    candidates = [(i, f) for i, row in enumerate(rows) for f in FIGURES if _quoted(row, f)]
    assert candidates
    index, field = draw.draw(st.sampled_from(candidates))
    row = rows[index]
    source = data["sources"][row["source"]]
    numbers = quoted_numbers(" ".join(source["quotes"][i] for i in row["from_quotes"]))
    moved = dict(row, **{field: row[field] * factor})
    if moved[field] in numbers:  # landed on another quoted number: nothing to find
        return
    assert any(p.startswith(f"{field} ") for p in row_problems(data, moved)), (field, row)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 10**9),
    st.integers(0, 999),
    st.sampled_from(["{:,}", "{}", "| {} |", "{}%", "x{}x", "TP={},"]),
)
def test_a_number_written_with_separators_or_marks_reads_as_that_number(
    whole: int, part: int, form: str
) -> None:
    assert whole in quoted_numbers(form.format(whole))
    decimal = float(f"{whole}.{part:03d}")
    assert decimal in quoted_numbers(form.replace("{:,}", "{}").format(f"{whole}.{part:03d}"))


def test_a_derived_figure_that_does_not_follow_is_a_problem() -> None:
    data = load()
    row = next(r for r in data["rows"] if "dp" in r.get("derived", {}))
    broken = dict(row, dp=row["dp"] + 1)
    assert any(p.startswith("dp ") for p in row_problems(data, broken))
    unexplained = dict(row, seq_len=None, null_why={})
    assert "seq_len is null with no why" in row_problems(data, unexplained)


def test_rows_needing_pipeline_or_context_parallelism_are_listed_but_not_scored() -> None:
    rows = load()["rows"]
    for row in rows:
        assert row["scored"] == (row["pp"] == 1 and row["cp"] == 1), row
        assert row["scored"] or row["not_scored"].strip(), row
        assert row["tp"] <= row["gpus_per_node"], row  # tensor parallelism inside a node
    assert any(not r["scored"] for r in rows) and any(r["scored"] for r in rows)


def test_every_row_goes_beyond_data_parallelism_or_says_why_it_is_here() -> None:
    for row in load()["rows"]:
        beyond = max(row["tp"], row["pp"], row["cp"], row["grad_accum"] or 1) > 1
        assert beyond or row.get("base", "").strip(), row


def test_three_sources_no_published_table_holds_give_tp_or_accumulation_rows() -> None:
    data = load()
    published = {
        s["url"]
        for name in ("published.json", "unseen.json")
        for s in json.loads((EVALUATION / name).read_text())["sources"].values()
    }
    new = {
        data["sources"][row["source"]]["group"]
        for row in data["rows"]
        if data["sources"][row["source"]]["url"] not in published
        and (row["tp"] > 1 or (row["grad_accum"] or 1) > 1)
    }
    assert len(new) >= 3, new  # three teams' documents, not three files of one


def test_peak_memory_figures_are_quoted_from_their_sources() -> None:
    """Every memory figure, on a row or under peak_memory, is quoted and its source says
    which statistic it is."""
    data = load()
    on_rows = [r for r in data["rows"] if r["peak_memory_gib"] is not None]
    for figure in data["peak_memory"]:
        source = data["sources"][figure["source"]]
        quotes = " ".join(source["quotes"][i] for i in figure["from_quotes"])
        assert figure["value"] in quoted_numbers(quotes), figure
        assert figure["unit"] and figure["run"] and source["peak_memory_what"], figure
    for row in on_rows:
        assert data["sources"][row["source"]]["peak_memory_what"], row["source"]
    assert len(on_rows) + len(data["peak_memory"]) >= 6
