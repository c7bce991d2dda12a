"""A campaign file's transformer sweep: model, parallel (one sweep part per value of a
list), seq_len and shard_group, checked together before anything launches; generated
files (Hypothesis) give a plan or one line, and exactly the combinations the workload
refuses are refused."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcbench import cli
from hpcbench.campaign import campaign_file, scoring
from hpcbench.campaign.journal import Journal
from hpcbench.core.bench import transformer_configs, workload_options
from hpcbench.measure import analysis
from tests.unit.test_campaign_inputs import VALUES, outcome

BASE: dict[str, Any] = {
    "name": "lm",
    "sweep": {
        "model": "gpt-tiny",
        "backend": "ddp",
        "parallel": ["ddp", "fsdp2"],
        "seq_len": 64,
        "batch": [4],
        "nodes": [1, 2],
        "repeats": 1,
        "device": "cpu",
    },
    "testbeds": [
        {
            "name": "a",
            "env": "local",
            "settings": {"node_count": 2, "cpus_per_node": 1, "link_rate": "1gbit"},
            "expect": {"tokens_per_s": 3000},
        }
    ],
}


# A 2-worker transformer configuration as the analysis summarises it.
SUMMARY: dict[str, Any] = {
    "env": "local",
    "model": "gpt-tiny",
    "backend": "ddp",
    "batch": 4,
    "image_size": 0,
    "data": "synthetic",
    "gpus_per_node": 1,
    "nodes": 2,
    "workers": 2,
    "runs": 1,
    "failed": 0,
    "unit": "tokens",
    "seq_len": 64,
}


def write(tmp: Path, doc: dict[str, Any]) -> Path:
    doc = copy.deepcopy(doc)
    doc["out"] = str(tmp / "out")
    path = tmp / "lm.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def with_sweep(**keys: Any) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    doc["sweep"].update(keys)
    return doc


def test_a_parallel_list_is_a_sweep_part_each_sharing_one_baseline(tmp_path):
    campaign = campaign_file.load(write(tmp_path, BASE))
    [tb] = campaign.testbeds
    assert [p.workload.parallel for p in tb.parts] == ["ddp", "fsdp2"]
    assert all(p.target.backend == "ddp" and p.workload.seq_len == 64 for p in tb.parts)
    labels = [[c.label for c in p.cells] for p in tb.parts]
    # One worker trains unwrapped under either: the first part measures it for both.
    assert labels == [
        ["batch 4, 1 node(s), 1 worker(s), ddp", "batch 4, 2 node(s), 2 worker(s), ddp"],
        ["batch 4, 2 node(s), 2 worker(s), fsdp2"],
    ]
    assert len({c.id for c in campaign.cells}) == 3


def test_plan_forecasts_each_parallelism_in_tokens(tmp_path, capsys):
    assert cli.main(["campaign", "plan", str(write(tmp_path, BASE))]) == 0
    out = capsys.readouterr().out
    assert "tokens/s" in out and "images/s" not in out
    assert "DDP: gradients all-reduced" in out and "FSDP2: parameters gathered" in out
    assert not (tmp_path / "out").exists()


def test_status_counts_a_measured_transformer_cell_in_tokens(tmp_path, capsys):
    path = write(tmp_path, BASE)
    campaign = campaign_file.load(path)
    cell = campaign.cells[-1]
    Journal(campaign.out, campaign.name).cell(cell, "measured", runs=2, images_per_s=1234.5)
    assert cli.main(["campaign", "status", str(path)]) == 0
    [line] = [x for x in capsys.readouterr().out.splitlines() if cell.id in x]
    assert line.endswith("fsdp2 measured  1234.5 tokens/s over 2 run(s)"), line
    assert cli.main(["campaign", "status", "--json", str(path)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["unit"] for r in rows["cells"]} == {"tokens"}


def test_the_forecasts_tokens_are_scored_per_parallelism_in_tokens(tmp_path):
    campaign = campaign_file.load(write(tmp_path, BASE))
    [tb] = campaign.testbeds
    journal = Journal(campaign.out, campaign.name)
    parallel_of = {c.id: p.workload.parallel for p in tb.parts for c in p.cells}
    for part, e in zip(tb.parts, (0.8, 0.6), strict=True):
        cells = [
            {"cell": c.id, "batch": c.batch, "nodes": c.nodes, "workers": c.workers}
            | {"gpus_per_node": 1, "efficiency": e}
            | {"images_per_s": 3000.0 * c.workers * e, "unit": "tokens"}
            for c in part.cells
        ]
        journal.forecast(tb, "plan", cells)
    forecasts = scoring.load(journal, parallel_of)
    two = {
        p: analysis.ConfigSummary(**SUMMARY, parallel=p, efficiency=0.7) for p in ("ddp", "fsdp2")
    }
    ddp, fsdp2 = (forecasts.fields("a", two[p]) for p in ("ddp", "fsdp2"))
    assert ddp["forecast_plan_tokens_per_s"] == pytest.approx(4800.0)
    assert fsdp2["forecast_plan_tokens_per_s"] == pytest.approx(3600.0)
    assert ddp["forecast_plan_images_per_s"] is None
    assert ddp["forecast_plan_error"] == pytest.approx(0.1)
    assert fsdp2["forecast_plan_error"] == pytest.approx(-0.1)


def test_exclude_names_a_parallelism(tmp_path):
    doc = with_sweep(parallel=["ddp", "fsdp2", "hsdp"])
    doc["testbeds"][0]["exclude"] = [{"parallel": "hsdp"}, {"parallel": ["ddp"], "nodes": 2}]
    campaign = campaign_file.load(write(tmp_path, doc))
    assert [c.label.rsplit(", ", 1)[1] for c in campaign.cells] == ["ddp", "fsdp2"]


def test_a_testbeds_own_sweep_is_checked_with_the_campaigns_beneath_it(tmp_path):
    doc = with_sweep(parallel="ddp")
    doc["testbeds"][0]["sweep"] = {"parallel": "fsdp2", "seq_len": 128}
    [tb] = campaign_file.load(write(tmp_path, doc)).testbeds
    assert [(p.workload.parallel, p.workload.seq_len) for p in tb.parts] == [("fsdp2", 128)]


@pytest.mark.parametrize(
    "keys, testbed_sweep, where, says",
    [
        # FSDP with Horovod: the transformer trains under torch.distributed.
        ({"backend": "horovod"}, None, "sweep.model", "use --backend ddp"),
        (
            {"backend": "horovod", "model": "resnet18", "seq_len": None},
            None,
            "sweep.parallel",
            "shards with torch.distributed (FSDP2): use --backend ddp",
        ),
        ({"backend": "horovod"}, {"model": "resnet18"}, "sweep.model", "use --backend ddp"),
        # A shard group that does not divide the 2 workers of the 2-node cell.
        (
            {"parallel": ["ddp", "hsdp"], "shard_group": 3},
            None,
            "testbeds[0].sweep",
            "must divide the 2 workers",
        ),
        ({"seq_len": 1000}, None, "sweep.seq_len", "at most 256 tokens"),
        ({}, {"seq_len": 257}, "testbeds[0].sweep.seq_len", "at most 256 tokens"),
        ({"model": "gpt-huge"}, None, "sweep.model", "unknown model 'gpt-huge'"),
        ({"parallel": ["ddp", "zero3"]}, None, "sweep.parallel", "one of ddp, fsdp2, hsdp"),
        ({"parallel": ["ddp", "ddp"]}, None, "sweep.parallel", "names a value twice"),
        ({"parallel": "ddp", "shard_group": 2}, None, "sweep.shard_group", "HSDP's"),
        ({"image_size": 64}, None, "sweep.image_size", "takes --seq-len"),
    ],
)
def test_keys_that_do_not_fit_together_are_one_line_before_anything(
    tmp_path, capsys, keys, testbed_sweep, where, says
):
    doc = with_sweep(**keys)
    doc["sweep"] = {k: v for k, v in doc["sweep"].items() if v is not None}
    if testbed_sweep:
        doc["testbeds"][0]["sweep"] = testbed_sweep
    path = write(tmp_path, doc)
    for action in (["plan"], ["run", "--dry-run"], ["run"]):
        assert cli.main(["campaign", *action, str(path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"hpcbench: error: {path}: {where}:"), err
        assert says in err[0], err
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- generated files
TRANSFORMER_SPOTS = [
    ("sweep", "model"),
    ("sweep", "parallel"),
    ("sweep", "seq_len"),
    ("sweep", "shard_group"),
    ("sweep", "backend"),
    ("testbeds", 0, "expect", "tokens_per_s"),
    ("testbeds", 0, "exclude"),
    ("testbeds", 0, "sweep"),
]
PARALLELS = st.sampled_from(workload_options.PARALLEL)


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.sampled_from(TRANSFORMER_SPOTS), VALUES | PARALLELS | st.lists(PARALLELS, max_size=3))
def test_any_value_at_a_transformer_key_gives_a_plan_or_one_line(
    tmp_path, capsys, monkeypatch, where, value
):
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))
    doc = copy.deepcopy(BASE)
    node: Any = doc
    for key in where[:-1]:
        node = node[key] if isinstance(key, int) else node.setdefault(key, {})
    node[where[-1]] = value
    doc["out"] = str(tmp_path / "out")
    outcome(tmp_path, yaml.safe_dump(doc, allow_unicode=True), capsys)
    assert not (tmp_path / "out").exists() and not (tmp_path / "state").exists()


def refused(model: str, backend: str, parallels: list[str], seq_len: int, shard: int) -> bool:
    """Whether the workload refuses a part (bench/transformer_configs.py): its options
    together, then HSDP's shard group against the workers of its cells across nodes, 2
    (two nodes of one worker); the first part's baseline, one worker, trains unwrapped
    whatever the shard group."""
    for parallel in parallels:
        group = shard if parallel == "hsdp" else 0
        if transformer_configs.problem(model, backend, parallel, seq_len, group, 0):
            return True
        if parallel == "hsdp" and shard and 2 % shard:
            return True
    return False


@settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    model=st.sampled_from(["gpt-tiny", "gpt2-small", "resnet18"]),
    backend=st.sampled_from(["ddp", "horovod"]),
    parallels=st.lists(PARALLELS, min_size=1, max_size=3, unique=True),
    seq_len=st.sampled_from([0, 1, 64, 256, 257, 1024, 1025]),
    shard=st.sampled_from([0, 1, 2, 3]),
)
def test_a_generated_sweep_is_refused_exactly_when_the_workload_would_refuse_it(
    tmp_path, capsys, monkeypatch, model, backend, parallels, seq_len, shard
):
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))
    sweep = {**BASE["sweep"], "model": model, "backend": backend, "parallel": parallels}
    sweep.pop("seq_len")
    if seq_len:
        sweep["seq_len"] = seq_len
    if shard:
        sweep["shard_group"] = shard
    doc = {**copy.deepcopy(BASE), "sweep": sweep}
    if model == "resnet18":
        sweep["image_size"] = 32
        doc["testbeds"][0]["expect"] = {"images_per_s": 90}  # a CNN's one worker
    # A shard group given beside ddp or fsdp2 only is HSDP's alone: refused as scale does.
    alone = bool(shard) and "hsdp" not in parallels
    expected = 2 if alone or refused(model, backend, parallels, seq_len, shard) else 0
    code = cli.main(["campaign", "plan", str(write(tmp_path, doc))])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == expected, (sweep, err)
    assert len(err) == (1 if code else 0), err
    assert not (tmp_path / "out").exists()
