"""The transformer's layouts end to end on this machine (bench/layout.py): gpt-tiny over
Gloo on CPU workers under torchrun, each run against one process that trains the same
global batch of the same token file from the same seed. Tensor parallelism on the
inner dimension of a (2, 2) mesh under FSDP2 and of a (2, 1, 2) mesh under HSDP,
gradient accumulation under DDP and FSDP2, and each activation checkpointing mode
train as the single process does; each rank's record of the memory it held is what the
shapes and the shards say. Tens of seconds a run on two shared cores (four processes:
up to a minute on a loaded machine)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from hpcbench.launchers import torchrun

pytestmark = pytest.mark.integration
torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import transformer_configs  # noqa: E402

# One warm-up step, then one window of two: every run below takes four optimizer steps
# (the single process's fourth is its gradient timeline, a wrapped run's the profiled
# step), so that each reads the same sequences of the token file in the same order.
SMALL = "--model gpt-tiny --seq-len 32 --warmup 1 --windows 1 --steps 2 --device cpu"
GLOBAL_BATCH = 4  # sequences per optimizer step, in every run
# fp32 on both sides, the same sequences and the same initial weights: what differs is
# the order of the sums (TP adds the partial products of a row-split matrix across
# ranks, FSDP2 and DDP average two ranks' gradients, accumulation adds two
# micro-batches'), a few units in the last place of each; four AdamW steps leave the
# loss within a few parts per million (2.5e-6 seen), 1e-4 leaves room for that.
LOSS_TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tokens") / "docs.tok"
    made = subprocess.run(
        [sys.executable, str(REPO / "bench" / "tokens.py"), str(path)],
        capture_output=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    return path


def train(tmp: Path, data: Path, workers: int, *options: str) -> dict:
    out = tmp / f"record-{workers}-{'-'.join(o.strip('-') for o in options)}.json"
    argv = [*torchrun.here(workers), str(REPO / "bench" / "train.py"), *SMALL.split()]
    argv += ["--data", str(data), *options, "--out", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=tmp)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def one_process(tmp_path_factory, data) -> dict:
    """The reference: one worker, unwrapped, the whole global batch in one step."""
    record = train(tmp_path_factory.mktemp("one"), data, 1, "--batch", str(GLOBAL_BATCH))
    assert record["global_batch"] == GLOBAL_BATCH and record["workers"] == 1
    return record


def same_loss(record: dict, reference: dict) -> None:
    assert record["global_batch"] == GLOBAL_BATCH
    assert record["global_loss"] == pytest.approx(reference["global_loss"], rel=LOSS_TOLERANCE)


# ------------------------------------------------------------------ held bytes by hand
def shard_rows(rows: int, parts: int, index: int) -> int:
    """Rows of part `index` when `rows` are split `parts` ways as torch.chunk splits them
    (TP's Shard(0) and FSDP2's dim-0 shards both do)."""
    size = math.ceil(rows / parts)
    return max(0, min(size, rows - index * size))


# torchtitan's plan (docs/method.md, "Layouts"): which dimension TP splits.
COLUMNS = ("wq", "wk", "wv", "w1", "w3", "output", "tok_embeddings", "pos_embeddings")
ROWS = ("wo.weight", "w2.weight")  # their biases, and every norm, are whole on each rank


def expected_held(tp: int, shards: int, rank: int) -> dict[str, int]:
    """gpt-tiny's parameters, gradients and AdamW state on `rank` of a mesh whose inner
    dimension is TP over `tp` ranks and whose next one FSDP2's shards over `shards`, from
    the configuration's shapes: each tensor split by TP (dim 0 of a column-parallel
    weight and its bias or of an embedding table, dim 1 of a row-parallel weight), then
    its first dimension split by FSDP2. fp32 everywhere; AdamW keeps two moments of each
    shard and a float32 step count per tensor (torch/optim/adam.py:169-177,
    torch.tensor(0.0, dtype=_get_scalar_dtype()))."""
    import transformer

    c = transformer_configs.CONFIGS["gpt-tiny"]
    with torch.device("meta"):
        model = transformer.Transformer(c, 32)
    tp_rank, shard = rank % tp, rank // tp % shards
    numel, tensors = 0, 0
    for name, p in model.named_parameters():  # the tied table once
        shape = list(p.shape)
        if name.endswith(ROWS):
            shape[1] = shard_rows(shape[1], tp, tp_rank)
        elif any(f".{part}." in f".{name}" for part in COLUMNS):
            shape[0] = shard_rows(shape[0], tp, tp_rank)
        shape[0] = shard_rows(shape[0], shards, shard)
        numel += math.prod(shape)
        tensors += 1
    return {"params": 4 * numel, "grads": 4 * numel, "optimizer": 8 * numel + 4 * tensors}


# ------------------------------------------------------------------ the layouts
@pytest.mark.parametrize(
    ("parallel", "mesh", "shards"),
    [
        (["--parallel", "fsdp2"], [2, 2], 2),
        # Two replicas of one TP group each: a shard group of 2 workers, a shard of one.
        (["--parallel", "hsdp", "--shard-group", "2"], [2, 1, 2], 1),
    ],
    ids=["fsdp2", "hsdp"],
)
def test_tp2_on_four_workers_trains_as_one_process_of_the_same_global_batch(
    tmp_path, data, one_process, parallel, mesh, shards
):
    record = train(tmp_path, data, 4, *parallel, "--tp", "2", "--batch", "2")
    same_loss(record, one_process)
    # The same bytes on every copy of a shard (HSDP: ranks 0 and 2, 1 and 3).
    assert record["mesh"] == mesh and record["tp"] == 2 and record["weights_in_sync"]
    # Each worker's share of a step's tokens: two data-parallel ranks of 2 x 32 tokens
    # over four workers, so that workers x tokens_per_step is the step's tokens.
    assert record["tokens_per_step"] == 2 * 32 // 2
    assert record["workers"] * record["tokens_per_step"] == GLOBAL_BATCH * 32
    assert record["model_state_bytes"] == [expected_held(2, shards, r) for r in range(4)]
    assert record["peak_memory_bytes"] is None  # no allocator to ask on the CPU
    # Every held-out token scored by one worker of its TP group: each data-parallel
    # rank's batch of 2 sequences of 32, once.
    [samples] = [json.loads(x)["value"] for x in record["mllog"] if '"eval_samples"' in x]
    assert samples == 2 * 2 * 32


@pytest.mark.parametrize("parallel", ["ddp", "fsdp2"])
def test_k_micro_batches_train_as_one_step_of_k_times_the_batch(
    tmp_path, data, one_process, parallel
):
    record = train(tmp_path, data, 2, "--parallel", parallel, "--batch", "1", "--grad-accum", "2")
    same_loss(record, one_process)
    assert record["grad_accum"] == 2 and record["tokens_per_step"] == 2 * 32
    issued = record["collectives_per_step"]
    if parallel == "fsdp2":
        # Both micro-batches gather each block twice and the root once (9 each), but
        # the gradients are reduce-scattered once a step: one per unit (4 blocks, root).
        assert issued["c10d::_allgather_base_"] == 2 * 9
        assert issued["c10d::_reduce_scatter_base_"] == 5
    else:
        # The buckets all-reduced once a step, as a step of one micro-batch does.
        single = train(tmp_path, data, 2, "--parallel", "ddp", "--batch", "2")
        assert issued["c10d::allreduce_"] == single["collectives_per_step"]["c10d::allreduce_"]


@pytest.mark.parametrize("mode", ["full", "selective"])
def test_checkpointing_trains_as_without_it_and_holds_the_same_model_state(
    tmp_path, data, one_process, mode
):
    record = train(
        tmp_path, data, 2, "--parallel", "fsdp2", "--batch", "2", "--activation-checkpoint", mode
    )
    same_loss(record, one_process)
    assert record["activation_checkpoint"] == mode
    assert record["model_state_bytes"] == [expected_held(1, 2, r) for r in range(2)]
    assert one_process["model_state_bytes"] == [expected_held(1, 1, 0)]
