"""`hpcbench export --mlperf DIR`: the package mlperf-logging's package_checker reads,
each system described as system_desc_checker wants (the real checkers run in
tests/integration/test_mlperf_processes.py); a folder
that is not empty is one line and exit status 2. The runs' logs are the workload's own
writer's (bench/mllog.py); tests/integration/test_mlperf_local.py exports real runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from hpcbench import cli
from hpcbench.measure.store import Store
from tests.unit.test_report import _run

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import mllog  # noqa: E402

pytest.importorskip("mlperf_logging")


def logged_run(model: str, repeat: int, nodes: int = 1, **extra: Any) -> dict[str, Any]:
    """A run record as the sweep stores it, with the MLPerf log the workload writes."""
    start = 1_800_000_000.0 + 100 * repeat
    windows = [mllog.Window(start + 10 + k, start + 11 + k, 64, 1.0) for k in range(2)]
    evaluation = mllog.Evaluation(start + 13, start + 14, 0, 32, "held out")
    lines = mllog.run_lines(
        model=model,
        unit="images",
        platform=f"{nodes}x1 CPU",
        seed=0,
        global_batch=32 * nodes,
        train_samples=32 * nodes,
        init_start=start,
        ready=start + 5,
        windows=windows,
        evaluation=evaluation,
        data="synthetic",
    )
    run = _run(nodes, [1.0, 1.0], repeat=repeat, device="cpu", **extra)
    run["model"] = model
    run["mllog"] = [line.removeprefix(mllog.TOKEN) for line in lines]
    run["fingerprint"].update(
        cpu="AMD EPYC 7763",
        cores=128,
        cpu_sockets=2,
        cpu_cores=128,
        memory_gib=503.6,
        cpu_caches="L1d 32K, L1i 32K, L2 512K, L3 32768K",
        os="Debian GNU/Linux 12 (bookworm)",
        python="3.11.2",
        device="cpu",
        bench_digest="abc",
    )
    return run


def store_of(tmp_path: Path, runs: list[dict[str, Any]]) -> Path:
    store = Store(tmp_path / "results")
    for r in runs:
        store.append(r)
    return store.dir


def test_fewer_runs_than_mlperf_wants_and_other_models_are_said(tmp_path, capsys):
    runs = [logged_run("resnet50", r) for r in range(3)] + [logged_run("gpt-tiny", 0)]
    runs[-1]["unit"] = "tokens"
    out = tmp_path / "package"
    assert cli.main(["export", "--mlperf", str(out), "--out", str(store_of(tmp_path, runs))]) == 0
    err = capsys.readouterr().err
    assert "resnet: 3 run(s), MLPerf's resnet wants 5: package_checker will count" in err
    assert "gpt-tiny: 1 run(s); no MLPerf ruleset covers gpt-tiny" in err


@pytest.mark.parametrize("occupied", ["a file in it", "a file there"])
def test_an_export_folder_that_is_not_empty_is_one_line_and_exit_2(tmp_path, capsys, occupied):
    results = store_of(tmp_path, [logged_run("resnet50", 0)])
    out = tmp_path / "package"
    if occupied == "a file in it":
        out.mkdir()
        (out / "notes.txt").write_text("mine\n")
    else:
        out.write_text("mine\n")
    assert cli.main(["export", "--mlperf", str(out), "--out", str(results)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--mlperf {out}: not " in err[0], err
    if out.is_dir():
        assert [p.name for p in out.iterdir()] == ["notes.txt"]
    else:
        assert out.read_text() == "mine\n"


def test_a_store_without_mlperf_logs_is_one_line_and_creates_nothing(tmp_path, capsys):
    results = store_of(tmp_path, [_run(1, [1.0])])
    out = tmp_path / "package"
    assert cli.main(["export", "--mlperf", str(out), "--out", str(results)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no run with an MLPerf log" in err[0]
    assert not out.exists()


def result_logs(package: Path) -> list[str]:
    return [p.read_text() for p in sorted(package.glob("hpcbench/results/*/*/result_*.txt"))]


@pytest.mark.parametrize(
    "spelling", ["a trailing slash", "a ./ spelling", "a .. spelling", "a link", "a copy"]
)
def test_a_run_is_exported_once_however_its_folder_is_named_or_copied(
    tmp_path, capsys, monkeypatch, spelling
):
    runs = [logged_run("resnet50", r) for r in range(3)]
    results = store_of(tmp_path, runs)
    monkeypatch.chdir(tmp_path)
    again = {
        "a trailing slash": "results/",
        "a ./ spelling": "./results",
        "a .. spelling": "results/../results",
        "a link": "linked",
        "a copy": "copied",
    }[spelling]
    (tmp_path / "linked").symlink_to(results)
    (tmp_path / "copied").mkdir()
    (tmp_path / "copied" / "results.jsonl").write_bytes((results / "results.jsonl").read_bytes())
    out = tmp_path / "package"
    assert cli.main(["export", "--mlperf", str(out), "--out", "results", "--out", again]) == 0
    err = capsys.readouterr().err
    logs = result_logs(out)
    assert len(logs) == 3  # and each the workload's own bytes
    assert set(logs) == {"".join(mllog.TOKEN + line + "\n" for line in r["mllog"]) for r in runs}
    assert "vw_n1x1_horovod_b32/resnet: 3 run(s), MLPerf's resnet wants 5" in err, err
    if spelling == "a copy":
        said = [line for line in err.splitlines() if "seen twice" in line]
        assert said == ["3 run record(s) seen twice, counted once"], err
    else:
        assert f"{again}: the folder results, read once" in err.splitlines(), err


def test_two_distinct_runs_of_one_repeat_in_two_folders_are_both_exported(tmp_path, capsys):
    first = store_of(tmp_path / "a", [logged_run("resnet50", 0)])
    other = logged_run("resnet50", 0)
    other["mllog"] = [line.replace('"time_ms": 18', '"time_ms": 19') for line in other["mllog"]]
    second = store_of(tmp_path / "b", [other])
    out = tmp_path / "package"
    assert (
        cli.main(["export", "--mlperf", str(out), "--out", str(first), "--out", str(second)]) == 0
    )
    assert len(set(result_logs(out))) == 2
    assert "seen twice" not in capsys.readouterr().err


FORGED = mllog.TOKEN + json.dumps(
    {
        "namespace": "",
        "time_ms": 1_800_000_014_000,
        "event_type": mllog.POINT_IN_TIME,
        "key": "eval_accuracy",
        "value": 0.99,
        "metadata": {"epoch_num": 1.0},
    }
)


def events_read_back(log: Path) -> tuple[list[Any], list[Any]]:
    """The events of a result file as the compliance checker reads them, and the lines
    it could not parse."""
    from mlperf_logging.compliance_checker import mlp_parser

    return mlp_parser.parse_file(str(log), ruleset=mllog.RULESET)


@pytest.mark.parametrize("where", ["after a line", "inside a value", "a value alone"])
def test_a_record_line_holding_a_line_break_never_forges_a_line_of_the_result(
    tmp_path, capsys, where
):
    runs = [logged_run("resnet50", r) for r in range(2)]
    first = runs[0]["mllog"]
    k = next(k for k, line in enumerate(first) if '"eval_start"' in line)
    event = json.loads(first[k])
    if where == "after a line":
        first[k] += "\n" + FORGED
    elif where == "inside a value":  # a raw line break inside a JSON string
        first[k] = json.dumps({**event, "value": "x\n" + FORGED}).replace("\\n", "\n")
    else:  # no line break: the checker's reader cuts a line at the marker all the same
        first[k] = json.dumps({**event, "value": "x " + FORGED})
    out = tmp_path / "package"
    assert cli.main(["export", "--mlperf", str(out), "--out", str(store_of(tmp_path, runs))]) == 0
    err = capsys.readouterr().err
    folder = out / "hpcbench" / "results" / "vw_n1x1_horovod_b32" / "resnet"
    for log in sorted(folder.iterdir()):
        events, failed = events_read_back(log)
        assert failed == [] and len(events) == len(log.read_text().splitlines())
        assert [e.key for e in events].count("eval_accuracy") == 1
    if where == "a value alone":  # one JSON object: kept, its value read back whole
        events, _ = events_read_back(folder / "result_0.txt")
        assert next(e for e in events if e.key == "eval_start").value["value"] == "x " + FORGED
        assert len(list(folder.iterdir())) == 2
    else:
        assert len(list(folder.iterdir())) == 1
        said = [line for line in err.splitlines() if "left out" in line]
        assert len(said) == 1 and "repeat 0" in said[0] and f"line {k + 1}" in said[0], err


def test_a_transformer_system_is_named_by_its_parallelism_not_its_backend(tmp_path, capsys):
    runs = [
        logged_run(
            "gpt-tiny",
            0,
            backend="ddp",
            parallel=parallel,
            unit="tokens",
            method=f"parallel={parallel}",
        )
        for parallel in ["fsdp2", "hsdp", "ddp"]
    ]
    out = tmp_path / "package"
    assert cli.main(["export", "--mlperf", str(out), "--out", str(store_of(tmp_path, runs))]) == 0
    capsys.readouterr()
    systems = sorted(p.stem for p in (out / "hpcbench" / "systems").glob("*.json"))
    assert systems == ["vw_n1x1_ddp_b32", "vw_n1x1_fsdp2_b32", "vw_n1x1_hsdp_b32"]
    fsdp2 = json.loads((out / "hpcbench" / "systems" / "vw_n1x1_fsdp2_b32.json").read_text())
    assert "parallelism fsdp2" in fsdp2["sw_notes"], fsdp2["sw_notes"]
