"""HSDP's single-worker baseline as a sweep launches it: `scale --parallel hsdp
--shard-group 2` prints one worker with the sweep's options, and bench/train.py runs it
on this machine (gpt-tiny, one CPU worker under torchrun), unwrapped. A few seconds."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from hpcbench import cli
from hpcbench.launchers import torchrun

pytestmark = pytest.mark.integration
pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
SWEEP = "scale --env localhost --backend ddp --model gpt-tiny --batch 4 --repeats 1 --nodes 1-2"
SHORT = ["--seq-len", "64", "--warmup", "1", "--windows", "2", "--steps", "1", "--device", "cpu"]


def test_the_baseline_a_shard_group_sweep_launches_trains_unwrapped(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))
    argv = [*shlex.split(SWEEP), "--parallel", "hsdp", "--shard-group", "2"]
    assert cli.main([*argv, "--out", str(tmp_path / "results"), "--dry-run", "--no-probe"]) == 0
    runs = capsys.readouterr().out.split("# batch")[1:]
    words = shlex.split(next(r for r in runs if "1 worker(s)" in r).split("\n")[1])
    script = words[words.index("train.py") + 1 :]
    assert script[script.index("--shard-group") + 1] == "2"
    out = tmp_path / "record.json"
    done = subprocess.run(
        [*torchrun.here(1), str(REPO / "bench" / "train.py"), *script, *SHORT, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(out.read_text())
    assert record["workers"] == 1 and record["parallel"] == "hsdp"
    assert record["wrapped"] is False and record["shard_group"] is None
    assert record["tokens_per_sec"] > 0
