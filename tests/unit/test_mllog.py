"""bench/mllog.py: the lines are byte for byte what mlperf_logging.mllog writes, and the
MLCommons compliance checker (training rules 4.0.0, open division) accepts a ResNet-50
run's log and refuses one that lacks what the rules ask."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import mllog  # noqa: E402

mllog_package = pytest.importorskip("mlperf_logging.mllog.mllog")
mlp_compliance = pytest.importorskip("mlperf_logging.compliance_checker.mlp_compliance")

SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(
    key=st.text(max_size=30),
    value=JSON,
    metadata=st.dictionaries(st.text(max_size=10), JSON, max_size=4),
    time_ms=st.integers(min_value=0, max_value=2**53),
    event_type=st.sampled_from([mllog.POINT_IN_TIME, mllog.INTERVAL_START, mllog.INTERVAL_END]),
)
def test_a_line_is_the_one_the_mlcommons_package_writes(key, value, metadata, time_ms, event_type):
    ours = mllog.encode(key, value, metadata, time_ms, event_type)
    theirs = mllog_package._encode_log("", time_ms, event_type, key, value, metadata)
    # Byte for byte, but for the marker inside the record, which ours escapes so that no
    # text can start a line of its own (the test below).
    assert theirs.startswith(mllog.TOKEN)
    body = theirs.removeprefix(mllog.TOKEN)
    assert ours == mllog.TOKEN + body.replace(":::MLLOG", ":::\\u004dLLOG")


def test_a_line_holding_the_marker_differs_from_the_packages_only_by_its_escape():
    value = "x " + mllog.TOKEN + "{}"
    ours = mllog.encode("eval_error", value, {}, 1)
    theirs = mllog_package._encode_log("", 1, mllog.POINT_IN_TIME, "eval_error", value, {})
    assert ours != theirs and ours == theirs.replace("x :::MLLOG", "x :::\\u004dLLOG")
    assert json.loads(ours.removeprefix(mllog.TOKEN))["value"] == value


# A line of a log as a hostile text would forge it: its own event, after a line break.
FORGED = (
    "\n"
    + mllog.TOKEN
    + json.dumps(
        {
            "namespace": "",
            "time_ms": 1,
            "event_type": mllog.POINT_IN_TIME,
            "key": "eval_accuracy",
            "value": 0.99,
            "metadata": {"epoch_num": 1.0},
        }
    )
)
TEXTS = st.text(max_size=20) | st.text(max_size=20).map(lambda t: t + FORGED)
TEXTS |= st.sampled_from(["\r" + FORGED[1:], "\u2028" + FORGED[1:], "\x85" + FORGED[1:]])


@settings(max_examples=60, deadline=None)
@given(model=TEXTS, platform=TEXTS, data=TEXTS, error=TEXTS)
def test_every_text_a_run_logs_stays_in_its_own_line_as_the_checker_reads_it(
    model, platform, data, error
):
    from mlperf_logging.compliance_checker import mlp_parser

    lines = mllog.run_lines(
        model=model,
        unit="images",
        platform=platform,
        seed=0,
        global_batch=2,
        train_samples=2,
        init_start=1_800_000_000.0,
        ready=1_800_000_001.0,
        windows=[mllog.Window(1_800_000_002.0, 1_800_000_003.0, 2, 1.0)],
        evaluation=mllog.Evaluation(1_800_000_004.0, 1_800_000_005.0, error=error),
        data=data,
    )
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "result_0.txt"
        log.write_text("".join(line + "\n" for line in lines))  # as export writes it
        events, failed = mlp_parser.parse_file(str(log), ruleset=mllog.RULESET)
    assert failed == []
    assert [e.key for e in events] == [
        json.loads(x.removeprefix(mllog.TOKEN))["key"] for x in lines
    ]
    by_key = {e.key: e.value for e in events}
    assert by_key["run_start"]["metadata"]["model"] == model
    assert by_key["submission_platform"]["value"] == platform
    assert by_key["cache_clear"]["metadata"]["data"] == data
    assert by_key["eval_error"]["value"] == (error or "no held-out sample")


def resnet_lines(evaluation: mllog.Evaluation | None, model: str = "resnet50") -> list[str]:
    start = 1_800_000_000.0
    windows = [mllog.Window(start + 10 + 2 * k, start + 11 + 2 * k, 64, 1.0) for k in range(3)]
    return mllog.run_lines(
        model=model,
        unit="images",
        platform="2x1 AMD EPYC",
        seed=0,
        global_batch=64,
        train_samples=64,
        init_start=start,
        ready=start + 5,
        windows=windows,
        evaluation=evaluation,
        data="synthetic",
    )


def check(lines: list[str], tmp_path: Path, ruleset: str = "4.0.0") -> bool:
    log = tmp_path / "result_0.txt"
    log.write_text("\n".join(lines) + "\n")
    checker = mlp_compliance.make_checker("training", ruleset, False, False)
    valid, *_ = mlp_compliance.main(str(log), f"training_{ruleset}/common.yaml", checker)
    return valid


def test_a_resnet50_log_passes_the_compliance_checker_open_division_ruleset_4(tmp_path):
    evaluation = mllog.Evaluation(1_800_000_020.0, 1_800_000_021.0, 1, 64, "held out")
    lines = resnet_lines(evaluation)
    assert check(lines, tmp_path)
    events = [json.loads(line.removeprefix(mllog.TOKEN)) for line in lines]
    by_key = {e["key"]: e for e in events}
    assert by_key["submission_benchmark"]["value"] == "resnet"
    assert by_key["submission_division"]["value"] == "open"
    assert by_key["eval_accuracy"]["value"] == pytest.approx(1 / 64)
    stats = [e for e in events if e["key"] == "tracked_stats"]
    assert [e["metadata"]["step"] for e in stats] == [1, 2, 3]
    assert all(e["value"] == {"throughput": 64.0} for e in stats)
    assert by_key["run_stop"]["metadata"]["status"] == "aborted"
    assert by_key["run_stop"]["metadata"]["samples_count"] == 192


def test_a_log_without_an_accuracy_is_refused_by_the_checker(tmp_path):
    failed = mllog.Evaluation(1_800_000_020.0, 1_800_000_021.0, error="RuntimeError: boom")
    lines = resnet_lines(failed)
    assert any('"eval_error"' in line and "boom" in line for line in lines)
    assert not check(lines, tmp_path)


def test_other_models_are_named_as_themselves_which_no_ruleset_covers():
    assert mllog.benchmark("resnet50") == "resnet"
    assert mllog.benchmark("gpt-tiny") == "gpt-tiny"
    lines = resnet_lines(None, model="vgg16")
    assert any('"submission_benchmark", "value": "vgg16"' in line for line in lines)


def test_ruleset_6_1_has_no_open_resnet_rules_which_is_why_4_0_is_used():
    rules = Path(mlp_compliance.__file__).parent
    assert (rules / "training_4.0.0" / "open_resnet.yaml").is_file()
    assert not (rules / "training_6.1.0" / "open_resnet.yaml").exists()
    assert mllog.RULESET == "4.0.0"


def test_evaluation_counts_top1_hits_and_leaves_the_model_training():
    torch = pytest.importorskip("torch")
    model = torch.nn.Linear(4, 3)
    with torch.no_grad():
        model.weight.zero_()
        model.bias.copy_(torch.tensor([0.0, 1.0, 0.0]))  # always class 1
    labels = torch.tensor([1, 1, 0, 2])
    clock = iter([10.0, 11.0])
    batch = lambda: (torch.ones(4, 4), labels)  # noqa: E731
    result = mllog.evaluate(torch, model, batch, "x", lambda: next(clock))
    assert (result.correct, result.count, result.start, result.end) == (2, 4, 10.0, 11.0)
    assert model.training

    def broken() -> tuple:
        raise RuntimeError("no data")

    failed = mllog.evaluate(torch, model, broken, "x", lambda: 0.0)
    assert failed.count == 0 and failed.error == "RuntimeError: no data"
    assert "no held-out batch" in mllog.evaluate(torch, model, None, "x", lambda: 0.0).error
