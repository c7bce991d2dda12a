"""A transformer's layout (--tp, --grad-accum, --activation-checkpoint) as `scale` runs it:
handed to every run but the single worker's tensor parallelism, checked against each
configuration's workers before anything starts, and counted in what a step trains."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from hpcbench import cli
from hpcbench.measure import analysis


@pytest.fixture(autouse=True)
def _own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))


def _dry(tmp_path: Path, capfd: pytest.CaptureFixture[str], extra: str) -> tuple[int, str, str]:
    argv = "--env localhost --model gpt-tiny --backend ddp --parallel fsdp2 --batch 2 --repeats 1"
    code = cli.main(
        ["scale", "--dry-run", "--out", str(tmp_path / "r"), *shlex.split(argv)]
        + shlex.split(extra)
    )
    said = capfd.readouterr()
    return code, said.out, said.err


def test_every_run_gets_the_layout_but_the_single_worker_no_tensor_parallelism(tmp_path, capfd):
    code, out, _ = _dry(
        tmp_path,
        capfd,
        "--nodes 1 --gpus-per-node 2 --tp 2 --grad-accum 4 --activation-checkpoint full",
    )
    assert code == 0
    runs = [line for line in out.splitlines() if " train.py " in line]
    one = [r for r in runs if "--nproc-per-node 1 " in r]
    two = [r for r in runs if "--nproc-per-node 2 " in r]
    assert one and two
    # One worker trains unwrapped: no TP group, the same micro-batches and recompute.
    assert all("--tp" not in r and "--grad-accum 4" in r for r in one)
    assert all("--tp 2" in r and "--activation-checkpoint full" in r for r in two)


def test_a_tp_group_wider_than_a_node_is_refused_before_anything_starts(tmp_path, capfd):
    code, _, err = _dry(tmp_path, capfd, "--nodes 1-2 --gpus-per-node 1 --tp 2")
    assert code == 2
    [line] = err.strip().splitlines()
    assert "--tp 2" in line and "1 per node" in line
    assert not (tmp_path / "r").exists()


def test_a_step_trains_its_micro_batches_and_one_stream_per_tp_group():
    run = {"workers": 4, "batch": 2, "model": "gpt-tiny", "seq_len": 64}
    assert analysis.work_per_step(run) == 4 * 2 * 64
    assert analysis.work_per_step({**run, "tp": 2, "grad_accum": 3}) == 4 * 2 * 64 * 3 / 2
