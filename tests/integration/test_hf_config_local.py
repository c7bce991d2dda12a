"""A model of the user's own config.json trained end to end on this machine: a tiny
Qwen2 shape (biases on q, k and v; grouped-query attention) through `scale --env
localhost` on one and two CPU workers under FSDP2, each run's record naming it by its
folder and shape's hash and keeping the shape, and the report, which reads only the
store, counting it in tokens. A few seconds a run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
TINY = {
    "model_type": "qwen2",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "max_position_embeddings": 128,
    "tie_word_embeddings": False,
}


def hpcbench(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hpcbench", *argv],
        cwd=REPO,
        text=True,
        capture_output=True,
        timeout=600,
    )


def test_a_tiny_config_json_trains_through_scale_and_its_runs_name_and_keep_its_shape(tmp_path):
    folder = tmp_path / "tiny-qwen2"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY))
    out = tmp_path / "out"
    done = hpcbench(
        "scale", "--env", "localhost", "--nodes", "1-2", "--backend", "ddp",
        "--parallel", "fsdp2", "--model", str(folder / "config.json"), "--seq-len", "32",
        "--batch", "2", "--warmup", "1", "--windows", "2", "--steps", "2", "--repeats", "1",
        "--device", "cpu", "--no-probe", "--timeout", "300", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = (out / "results.jsonl").read_text().splitlines()
    runs = [r for r in map(json.loads, lines) if r["kind"] == "run"]
    assert sorted(r["workers"] for r in runs) == [1, 2]
    [name] = {r["model"] for r in runs}
    assert name.startswith("tiny-qwen2@") and all(r["status"] == "ok" for r in runs)
    shape = runs[0]["model_shape"]
    assert all(r["model_shape"] == shape for r in runs)
    assert (shape["dim"], shape["kv_heads"], shape["qkv_bias"]) == (64, 2, True)
    # The parameters the workload built: 2 blocks of attention (q, k, v with biases; o),
    # a SwiGLU MLP and 2 RMSNorms, the final norm, the token table and the untied output.
    block = 64 * 64 * 2 + 64 * 32 * 2 + (64 + 32 * 2) + 3 * 64 * 128 + 2 * 64
    assert all(r["params"] == 2 * block + 64 + 2 * 256 * 64 for r in runs)
    assert all(r["seq_len"] == 32 and r["tokens_per_sec"] > 0 for r in runs)

    # The report, in a process of its own, knows the model from the store alone.
    report = hpcbench("report", "--out", str(out))
    assert report.returncode == 0, report.stderr[-3000:]
    table = (out / "report.md").read_text()
    assert name in table and "tokens/s" in table
