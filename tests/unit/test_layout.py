"""The transformer's layout in one process (bench/layout.py): what each activation
checkpointing mode runs again in backward, where a TP group's ranks sit, the memory a
rank is said to hold, and the harness's one-line refusal of a layout that cannot run (the
workload's own: tests/integration/test_layout_processes.py). The layouts across
processes: tests/integration/test_transformer_layouts.py."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import layout  # noqa: E402
import steps  # noqa: E402
import transformer  # noqa: E402
import transformer_configs as tc  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

TINY = tc.CONFIGS["gpt-tiny"]
SEQ = 16
MATMULS = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default}
NORM = torch.ops.aten.native_layer_norm.default  # GPT-2's LayerNorm, forward


class Ops(TorchDispatchMode):
    """Counts the ops dispatched while it is on."""

    def __init__(self) -> None:
        super().__init__()
        self.count: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count[func] += 1
        return func(*args, **(kwargs or {}))


def model_and_batch(mode: str = "none"):
    torch.manual_seed(0)
    model = transformer.Transformer(TINY, SEQ)
    layout.apply(model, layout.Layout("ddp", 1, 1, wrapped=False), torch.device("cpu"), False, mode)
    ids = torch.randint(0, TINY.vocab, (2, SEQ + 1), generator=torch.Generator().manual_seed(1))
    return model, ids[:, :-1], ids[:, 1:]


def backward_ops(mode: str) -> Counter:
    model, inputs, labels = model_and_batch(mode)
    loss = steps.loss_of(model(inputs), labels)
    with Ops() as ops:
        loss.backward()
    return ops.count


def matmuls(count: Counter) -> int:
    return sum(n for op, n in count.items() if op in MATMULS)


def test_full_checkpointing_runs_every_blocks_forward_again_in_backward():
    none, full = backward_ops("none"), backward_ops("full")
    model, inputs, _ = model_and_batch()
    with Ops() as forward:
        model.layers[0](model.tok_embeddings(inputs), None)
    # Each block's forward once more, its norms and products up to the last tensor that
    # backward needs: the MLP's output product is not (torch.utils.checkpoint stops a
    # recomputation as soon as it has all it needs: set_checkpoint_early_stop).
    assert matmuls(full) == matmuls(none) + TINY.layers * (matmuls(forward.count) - 1)
    assert full[NORM] == none[NORM] + TINY.layers * 2 and none[NORM] == 0


def test_selective_checkpointing_recomputes_the_norms_and_every_second_matrix_product():
    none, selective = backward_ops("none"), backward_ops("selective")
    model, inputs, _ = model_and_batch()
    with Ops() as forward:
        model.layers[0](model.tok_embeddings(inputs), None)
    # torchtitan's rule: of a block's products (GPT-2's six) the 2nd, 4th and 6th are
    # recomputed, but the 6th (the MLP's output) is not needed by backward (early stop).
    second = len(range(2, matmuls(forward.count) + 1, 2))
    assert matmuls(selective) == matmuls(none) + TINY.layers * (second - 1)
    assert selective[NORM] == TINY.layers * 2  # both LayerNorms of every block, again
    attention = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    assert selective[attention] == none[attention] == 0  # kept, not run again


@pytest.mark.parametrize("mode", ["full", "selective"])
def test_checkpointing_gives_the_gradients_it_would_without(mode):
    def gradients(mode: str) -> dict[str, torch.Tensor]:
        model, inputs, labels = model_and_batch(mode)
        steps.loss_of(model(inputs), labels).backward()
        return {n.replace("block.", ""): p.grad for n, p in model.named_parameters()}

    plain, checkpointed = gradients("none"), gradients(mode)
    assert plain.keys() == checkpointed.keys()
    for name, grad in plain.items():  # the same kernels on the same inputs
        assert torch.equal(grad, checkpointed[name]), name


def test_a_tp_group_is_consecutive_ranks_and_the_data_parallel_ranks_stride_over_them():
    fsdp = layout.Layout("fsdp2", 8, 8, tp=2)
    assert fsdp.shape() == ([4, 2], ("shard", "tp"))
    assert [fsdp.dp_rank(r) for r in range(8)] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert [fsdp.positions(32, r) for r in (0, 1)] == [slice(0, 16), slice(16, 32)]
    # HSDP: a replica is a shard group of 4 workers, two TP groups of 2.
    hsdp = layout.Layout("hsdp", 8, 4, tp=2)
    assert hsdp.shape() == ([2, 2, 2], ("replicate", "shard", "tp"))
    # Ranks 0 and 4 hold the same shard (the same place in each replica).
    assert [hsdp.copy_key(r) for r in range(8)] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert layout.Layout("fsdp2", 2, 2).shape() == ([2], ("shard",))
    assert layout.Layout("ddp", 2, 1).shape() is None


def test_the_memory_held_by_one_worker_is_its_parameters_gradients_and_adams_state():
    model, inputs, labels = model_and_batch()
    optimizer = torch.optim.AdamW(model.parameters())
    steps.loss_of(model(inputs), labels).backward()
    optimizer.step()
    params = tc.param_counts(TINY)["total"]
    tensors = len(list(model.parameters()))  # the tied table once
    assert layout.model_state_bytes(model, optimizer) == {
        "params": 4 * params,
        "grads": 4 * params,
        "optimizer": 2 * 4 * params + 4 * tensors,  # two moments, a float32 step count each
    }


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ("--parallel fsdp2 --tp 3", "--tp 3: gpt-tiny's 4 attention heads do not split 3 ways"),
        ("--parallel fsdp2 --tp 2 --seq-len 33", "sequence parallelism splits --seq-len 33"),
        ("--tp 2", "--tp 2 with --parallel ddp: torch's DDP does not train tensor-parallel"),
        ("--tp 0", "argument --tp: 0 is out of range: use 1 to 1024"),
        ("--model resnet18 --grad-accum 2", "--grad-accum is for the transformer models"),
        ("--model resnet18 --activation-checkpoint full", "--activation-checkpoint is for"),
    ],
)
def test_the_harness_refuses_a_layout_that_cannot_run_in_one_line_before_launch(
    capsys, tmp_path, monkeypatch, options, says
):
    from hpcbench import cli

    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))
    out = tmp_path / "out"
    argv = "scale --env localhost --backend ddp --model gpt-tiny --batch 4 --repeats 1"
    status = cli.main([*f"{argv} {options}".split(), "--out", str(out), "--dry-run"])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and says in err, err
    assert not out.exists()


@pytest.mark.parametrize("mode", ["selective", "full"])
@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_the_forecasts_recompute_is_the_workloads_recomputed_flops(family, mode, monkeypatch):
    """plans.recompute_share, in FLOPs: what backward runs beyond none's, counted by
    torch's FLOP counter over the workload's model."""
    import dataclasses

    from torch.utils.flop_counter import FlopCounterMode

    from hpcbench.core.bench import transformer_configs as shared
    from hpcbench.performance import plans

    config = (
        TINY
        if family == "gpt2"
        else dataclasses.replace(
            tc.CONFIGS["llama-1b"], name="llama-small", dim=128, heads=4, kv_heads=2,
            ffn=352, layers=2, vocab=512,
        )
    )  # fmt: skip
    # Known by name to the forecast too (hpcbench loads bench/'s module on its own), for
    # this test alone.
    monkeypatch.setattr(shared, "_READ", dict(shared._READ))
    if family == "llama":
        shared.remember(shared.TransformerConfig(**dataclasses.asdict(config)))

    def backward_flops(mode: str) -> int:
        torch.manual_seed(0)
        model = transformer.Transformer(config, SEQ)
        plain = layout.Layout("ddp", 1, 1, wrapped=False)
        layout.apply(model, plain, torch.device("cpu"), False, mode)
        ids = torch.randint(0, config.vocab, (2, SEQ + 1))
        loss = steps.loss_of(model(ids[:, :-1]), ids[:, 1:])
        with FlopCounterMode(display=False) as counter:
            loss.backward()
        return counter.get_total_flops()

    again = backward_flops(mode) - backward_flops("none")
    forward = tc.flops_per_token(config, SEQ) / 3 * 2 * SEQ  # two sequences of SEQ
    share = plans.recompute_share(config.name, SEQ, mode)
    assert again > 0
    assert again == pytest.approx(share / (1 - plans.allreduce_model.BACKWARD_SHARE) * forward)


@pytest.fixture
def two_fake_ranks():
    """A process group of two ranks in this process (torch's fake backend: collectives
    that move nothing), so that the TP plan runs on one CPU."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    try:
        yield
    finally:
        dist.destroy_process_group()


class Collectives(TorchDispatchMode):
    """Counts the all-gathers and reduce-scatters dispatched while it is on."""

    NAMES = ("all_gather_into_tensor", "reduce_scatter_tensor")

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "_c10d_functional" and func.__name__.split(".")[0] in self.NAMES:
            self.count += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_the_forecasts_tp_collectives_are_the_workloads_per_block_and_outside(
    family, two_fake_ranks
):
    """sharded_model.TP_PER_BLOCK and TP_OUTSIDE_BLOCKS, in all-reduces (an all-gather or
    a reduce-scatter half of one): what a step of the workload's TP plan dispatches,
    per block from two depths, under each checkpointing mode."""
    import dataclasses

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import loss_parallel

    from hpcbench.performance import sharded_model

    base = TINY if family == "gpt2" else tc.CONFIGS["llama-1b"]
    small = dict(dim=128, heads=4, kv_heads=2, ffn=352, vocab=512)

    def step_collectives(layers: int, mode: str) -> float:
        torch.manual_seed(0)
        config = dataclasses.replace(base, name=f"{family}-small", layers=layers, **small)
        model = transformer.Transformer(config, SEQ)
        layout.tensor_parallel(model, init_device_mesh("cpu", (2,), mesh_dim_names=("tp",)))
        for i, block in enumerate(model.layers):
            model.layers[i] = layout.Checkpointed(block, mode) if mode != "none" else block
        ids = torch.randint(0, config.vocab, (2, SEQ + 1))
        with Collectives() as seen, loss_parallel():
            steps.loss_of(model(ids[:, :-1]), ids[:, 1:]).backward()
        return seen.count / 2

    for mode, per_block in sharded_model.TP_PER_BLOCK.items():
        two, three = step_collectives(2, mode), step_collectives(3, mode)
        assert three - two == per_block, mode
        outside = two - 2 * per_block
        # GPT-2's position table: one more of each, of seq x dim (not counted).
        assert outside == sharded_model.TP_OUTSIDE_BLOCKS + (1 if family == "gpt2" else 0)
