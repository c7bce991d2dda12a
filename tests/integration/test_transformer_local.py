"""The transformer workload end to end on this machine: gpt-tiny on two CPU workers
(torchrun, Gloo) under DDP, FSDP2 and HSDP (a 2x1 mesh), and what each record says:
tokens/s, MFU or why it is unknown, the weights the same on every copy, and the
collectives the step issued, with what Gloo ran for each. A few seconds a run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hpcbench.launchers import torchrun

pytestmark = pytest.mark.integration
pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
SMALL = "--model gpt-tiny --seq-len 64 --batch 4 --warmup 2 --windows 3 --steps 2 --device cpu"


def train(tmp_path: Path, *options: str) -> dict:
    out = tmp_path / "record.json"
    argv = [*torchrun.here(2), str(REPO / "bench" / "train.py"), *SMALL.split(), *options]
    done = subprocess.run(
        [*argv, "--out", str(out)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def common_checks(record: dict) -> None:
    assert record["workers"] == 2 and record["unit"] == "tokens" and record["wrapped"]
    tokens = record["workers"] * 4 * 64 * record["steps"] * record["windows"]
    assert record["tokens_per_sec"] == pytest.approx(tokens / sum(record["window_times"]))
    assert record["tokens_per_sec_per_worker"] == pytest.approx(record["tokens_per_sec"] / 2)
    assert record["flops_per_token"] > 6 * record["params_matmul"]
    # CPU: the peak is a GEMM measured on every worker; an MFU, or why there is none.
    assert len(record["peak_flops_per_worker"]) == 2 and "measured" in record["peak_source"]
    assert (0 < record["mfu"] <= 1) if record["mfu"] is not None else record["mfu_unknown"]
    assert record["weights_in_sync"] is True and record["weight_sum_spread"] == 0
    assert record["collectives"]["reduce_scatter"] == {
        "ran": ["gloo:all_reduce"],
        "emulated": True,
    }
    assert record["collectives"]["all_gather"] == {"ran": ["gloo:all_gather"], "emulated": False}


def test_ddp_all_reduces_the_gradients(tmp_path):
    record = train(tmp_path, "--parallel", "ddp")
    common_checks(record)
    assert record["mesh"] is None and record["allreduce_bytes"] == 4 * record["params"]
    issued = record["collectives_per_step"]
    assert issued.get("c10d::allreduce_", 0) >= 1 and "c10d::_allgather_base_" not in issued


def test_fsdp2_gathers_each_block_twice_and_reduce_scatters_it_once(tmp_path):
    record = train(tmp_path, "--parallel", "fsdp2")
    common_checks(record)
    assert record["mesh"] == [2] and record["shard_group"] == 2
    assert record["fsdp_units"] == 5 and record["reshard_after_forward"] is True
    issued = record["collectives_per_step"]
    # Four blocks gathered in forward and again in backward, the root once (it is not
    # resharded after forward); a reduce-scatter per unit, each run by Gloo as an all-reduce.
    assert issued["c10d::_allgather_base_"] == 9 and issued["gloo:all_gather"] == 9
    assert issued["c10d::_reduce_scatter_base_"] == 5 and issued["gloo:all_reduce"] == 5


def test_hsdp_on_a_2x1_mesh_all_reduces_across_the_replicas(tmp_path):
    data = tmp_path / "docs.tok"
    made = subprocess.run(
        [sys.executable, str(REPO / "bench" / "tokens.py"), str(data)],
        capture_output=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    record = train(tmp_path, "--parallel", "hsdp", "--shard-group", "1", "--data", str(data))
    common_checks(record)
    assert record["mesh"] == [2, 1] and record["shard_group"] == 1
    assert record["token_file"]["vocab"] == 256 and 0 <= record["data_time_fraction"] < 1
    # A shard group of one: nothing to gather or scatter, each unit's gradients
    # all-reduced across the two replicas.
    assert record["collectives_per_step"]["c10d::allreduce_"] == 5
