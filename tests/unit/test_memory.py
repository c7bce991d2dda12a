"""The memory forecast per GPU (hpcbench/performance/memory.py): each term against its
formula by hand, the block's count against what autograd saves for the workload's
blocks, generated shapes and layouts, published figures, and the smallest layout that
fits."""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcbench.core.bench import transformer_configs as tc
from hpcbench.core.bench import workload_options
from hpcbench.core.errors import UsageError
from hpcbench.performance import memory, sharded_model
from hpcbench.performance.memory import Layout

BENCH = Path(__file__).resolve().parents[2] / "bench"
GiB = 2**30
TINY = tc.CONFIGS["gpt-tiny"]  # dim 192, 4 layers, 4 heads, ffn 768, vocab 4096, tied
# The shape as its config.json gives it (tests/fixtures/README.md).
LLAMA3_70B = tc.read_config(str(BENCH.parent / "tests/fixtures/llama-3-70b/config.json"))
LLAMA3_8B = sharded_model.PUBLISHED_SHAPES["llama3.1-8b"]


def params(config):
    return tc.param_counts(config)["total"]


# ------------------------------------------------------------------ terms by hand
def test_fsdp2_holds_zeros_16_bytes_per_parameter_of_its_shard():
    layout = Layout(parallel="fsdp2", dp=4)
    b = memory.breakdown(TINY, 128, 2, layout)
    shard = math.ceil(params(TINY) / 4)
    states = sum(b.bytes_of(name) for name in memory.MODEL_STATES)
    assert states == 16 * shard
    assert b.bytes_of(memory.OPTIMIZER_STATES) == 8 * shard
    assert b.bytes_of("optimizer temporary") == 4 * shard


def test_bf16_states_hold_half_the_bytes_of_fp32_ones():
    layout = Layout(parallel="fsdp2", dp=2, master_dtype="bf16", optimizer_dtype="bf16")
    b = memory.breakdown(TINY, 128, 2, layout)
    shard = math.ceil(params(TINY) / 2)
    assert sum(b.bytes_of(name) for name in memory.MODEL_STATES) == 8 * shard


def test_fsdp2_gathers_the_root_and_two_blocks_and_holds_one_blocks_gradients_in_flight():
    blocks, root = sharded_model.units(TINY, 128)
    b = memory.breakdown(TINY, 128, 2, Layout(parallel="fsdp2", dp=8))
    assert b.bytes_of("gathered root") == 2 * root.params
    assert b.bytes_of("gathered blocks") == 2 * 2 * blocks[0].params
    assert b.bytes_of("root's gradients") == 2 * root.params
    # bf16 unsharded gradients, and their copy into the fp32 reduce-scatter input
    assert b.bytes_of("block's gradients in flight") == (2 + 4) * blocks[0].params
    assert b.bytes_of("root's reduce-scatter input") == 4 * root.params


def test_ddp_keeps_a_bf16_copy_under_autocast_and_no_buckets_of_its_own_with_bucket_views():
    b = memory.breakdown(TINY, 128, 2, Layout(parallel="ddp", dp=8))
    assert b.bytes_of("compute copy") == 2 * params(TINY)
    assert b.bytes_of("DDP buckets") == 0
    copied = memory.breakdown(TINY, 128, 2, Layout(parallel="ddp", dp=8, bucket_view=False))
    assert copied.bytes_of("DDP buckets") == 4 * params(TINY)
    fp32 = Layout(parallel="ddp", compute_dtype="fp32")
    assert memory.breakdown(TINY, 128, 2, fp32).bytes_of("compute copy") == 0


def test_deferred_reduction_holds_every_gradient_unsharded_in_the_reduce_dtype():
    base = Layout(parallel="fsdp2", dp=8, grad_accum=4)
    assert memory.breakdown(TINY, 128, 2, base).bytes_of("accumulated gradients") == 0
    deferred = dataclasses.replace(base, defer_reduction=True)
    assert memory.breakdown(TINY, 128, 2, deferred).bytes_of("accumulated gradients") == (
        4 * params(TINY)
    )
    once = dataclasses.replace(deferred, grad_accum=1)
    assert memory.breakdown(TINY, 128, 2, once).bytes_of("accumulated gradients") == 0


# A GPT-3 block: LayerNorm, multi-head attention, a 4h GELU MLP, dropout (the paper's).
def test_a_gpt3_block_holds_korthikantis_34_sbh_plus_5_as2b_in_16_bit():
    s, b, h, a = 128, 2, TINY.dim, TINY.heads
    for t in (1, 2, 4):
        layout = Layout(tp=t, attention="math", dropout=True)
        got = memory.activation_bytes(TINY, s, b, layout) / TINY.layers
        assert got == pytest.approx(s * b * h * (34 / t + 5 * a * s / (h * t)))
        fused = dataclasses.replace(layout, attention="sdpa")
        assert memory.activation_bytes(TINY, s, b, fused) / TINY.layers == pytest.approx(
            s * b * h * 34 / t
        )


def test_fp32_doubles_the_16_bit_values_but_not_the_one_byte_dropout_masks():
    s, b, h, a = 128, 2, TINY.dim, TINY.heads
    layout = Layout(compute_dtype="fp32", master_dtype="fp32", attention="math", dropout=True)
    got = memory.activation_bytes(TINY, s, b, layout) / TINY.layers
    # 16 values of 2 bytes and 2 masks of 1 byte (34); softmax and dropout output, mask (5)
    assert got == pytest.approx(s * b * h * (16 * 4 + 2) + a * s * s * b * (2 * 4 + 1))


def test_full_checkpointing_keeps_each_blocks_input_and_one_block_recomputed():
    s, b, h, L = 128, 2, TINY.dim, TINY.layers
    for t in (1, 4):
        layout = Layout(tp=t, checkpoint="full", attention="math", dropout=True)
        block = s * b * h * (34 + 5 * TINY.heads * s / h) / t
        assert memory.activation_bytes(TINY, s, b, layout) == pytest.approx(
            L * 2 * s * b * h / t + block
        )


def test_selective_keeps_the_input_every_other_product_attention_and_the_reduce_scatters():
    s, b, L = 128, 2, SMALL_LLAMA.layers
    h, f, q, kv, a = SMALL_LLAMA.dim, SMALL_LLAMA.ffn, 256, 64, SMALL_LLAMA.heads
    for t in (1, 2):
        layout = Layout(tp=t, checkpoint="selective")
        # input / t; wq, wv, w1 over t and w2's whole partial sum; attention's output
        # and fp32 logsumexp; with TP the two reduce-scatters' outputs.
        per_token = 2 * (h / t + q / t + kv / t + f / t + h) + (2 * q + 4 * a) / t
        per_token += 2 * 2 * h / t if t > 1 else 0
        kept = s * b * per_token
        assert memory.selective_bytes(SMALL_LLAMA, s, b, layout) == pytest.approx(kept)
        recomputed = memory.block_bytes(SMALL_LLAMA, s, b, layout) + s * b * h * 2 / t
        assert memory.activation_bytes(SMALL_LLAMA, s, b, layout) == pytest.approx(
            (L - 1) * kept + recomputed
        )
        assert memory.kept_activation_bytes(SMALL_LLAMA, s, b, layout) == pytest.approx(L * kept)
    # GPT-2: wq, wv and w1 kept of six products; math attention keeps nothing, its scores
    # are held for the recomputed block alone.
    h, a = TINY.dim, TINY.heads
    math_ = Layout(checkpoint="selective", attention="math", dropout=True)
    kept = s * b * 2 * (h + h + h + 4 * h)
    assert memory.selective_bytes(TINY, s, b, math_) == pytest.approx(kept)
    scores = 5 * a * s * s * b
    assert memory.activation_bytes(TINY, s, b, math_) == pytest.approx(
        (TINY.layers - 1) * kept + 2 * s * b * h + 34 * s * b * h + scores
    )


def test_the_loss_holds_three_fp32_logit_tensors_and_four_under_loss_parallel():
    s, b = 128, 2
    for t, tensors in ((1, 3), (2, 4)):
        got = memory.breakdown(TINY, s, b, Layout(tp=t)).bytes_of("logits and loss")
        assert got == tensors * 4 * s * b * TINY.vocab / t


def test_the_output_projections_input_is_gathered_and_the_final_norm_split():
    s, b, h = 128, 2, TINY.dim
    got = memory.breakdown(TINY, s, b, Layout(tp=2)).bytes_of(
        "final norm and output projection input"
    )
    assert got == s * b * h * (2 / 2 + 2)  # LayerNorm's bf16 input over t, the gathered input


def test_the_total_is_the_fullest_phase():
    b = memory.breakdown(TINY, 128, 2, Layout(parallel="fsdp2", dp=2))
    phases = {p: b.phase(p) for p in memory.PHASES}
    assert b.total == max(phases.values()) and b.peak_phase == memory.LOSS_BACKWARD
    # Without activations worth the name, the optimizer's temporary decides.
    small = memory.breakdown(TINY, 1, 1, Layout(parallel="ddp", compute_dtype="fp32"))
    assert small.peak_phase == memory.OPTIMIZER


def test_the_loss_and_the_recomputed_block_are_held_in_different_phases():
    layout = Layout(parallel="fsdp2", dp=8, checkpoint="full")
    b = memory.breakdown(LLAMA3_8B, 8192, 2, layout)
    loss = {t.name for t in b.terms if memory.LOSS_BACKWARD in t.phases}
    block = {t.name for t in b.terms if memory.BLOCK_BACKWARD in t.phases}
    assert {"logits and loss", "final norm and output projection input"} <= loss - block
    assert {memory.ACTIVATIONS, "root's gradients", "gathered blocks"} <= block - loss
    assert "gathered root" in loss & block
    # Each term keeps its source.
    assert all(t.source for t in b.terms)
    # Both phases hold the model states; the loss's holds every block's kept input.
    s, L = 8192 * 2, LLAMA3_8B.layers
    assert b.bytes_of("kept activations") == L * s * LLAMA3_8B.dim * 2


# ------------------------------------------------------------------ against torch
def _bench_block(config, seq_len, batch, dtype_name, checkpoint):
    """torch, one bench/transformer.py block in the dtype (under bench/layout.py's
    checkpointing unless "none"), an input that needs its gradient, its rotary tables."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(BENCH))
    try:
        from layout import Checkpointed
        from transformer import Block, rotary_tables
    finally:
        sys.path.remove(str(BENCH))
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype_name]
    torch.manual_seed(0)
    block = Block(config).to(dtype)
    if checkpoint != "none":
        block = Checkpointed(block, checkpoint)
    x = torch.randn(batch, seq_len, config.dim, dtype=dtype, requires_grad=True)
    rope = rotary_tables(config.head_dim, seq_len, 10000.0) if config.family == "llama" else None
    return torch, block, x, rope


def _saved_bytes(config, seq_len, batch, dtype_name):
    """What autograd saves for one bench/transformer.py block, in bytes (the block's
    weights left out, each storage once), on CPU."""
    torch, block, x, rope = _bench_block(config, seq_len, batch, dtype_name, "none")
    weights = {p.untyped_storage().data_ptr() for p in block.parameters()}
    saved: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in weights:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        block(x, rope)
    return sum(saved.values())


SMALL_LLAMA = dataclasses.replace(
    tc.CONFIGS["llama-1b"], name="llama-small", dim=256, heads=8, kv_heads=2, ffn=704, layers=1
)


@pytest.mark.parametrize("config", [TINY, SMALL_LLAMA], ids=lambda c: c.name)
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_the_block_count_is_what_autograd_saves_for_the_workloads_block(config, dtype):
    seq_len, batch = 64, 2
    saved = _saved_bytes(config, seq_len, batch, dtype)
    layout = Layout(compute_dtype=dtype, master_dtype=dtype)
    # Left out: the row statistics (norms' rstd, attention's logsumexp), under 1% here.
    assert memory.block_bytes(config, seq_len, batch, layout) == pytest.approx(saved, rel=0.01)


def _kept_bytes(config, seq_len, batch, dtype_name):
    """What a bench/layout.py selectively checkpointed block holds after its forward,
    in bytes: every storage made in that forward still alive once it returns (the
    checkpoint's input, the policy's cache, each storage once), on CPU."""
    from torch.multiprocessing.reductions import StorageWeakRef
    from torch.utils._python_dispatch import TorchDispatchMode

    torch, block, leaf, rope = _bench_block(config, seq_len, batch, dtype_name, "selective")
    made: list = []

    class Made(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor):
                    storage = t.untyped_storage()
                    made.append((StorageWeakRef(storage), storage.nbytes()))
            return out

    with Made():
        x = leaf * 1  # the block's input, held by nothing but the checkpoint
        y = block(x, rope)
    del x
    # Left out: the output, the weights (a linear's transposed view of its weight) and
    # the rotary tables (the model's, shared by every block).
    others = (y, *block.parameters(), *(rope or ()))
    held = {StorageWeakRef(t.untyped_storage()).cdata for t in others}
    alive = {ref.cdata: n for ref, n in made if not ref.expired() and ref.cdata not in held}
    return sum(alive.values())


@pytest.mark.parametrize("config", [TINY, SMALL_LLAMA], ids=lambda c: c.name)
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_the_selective_count_is_what_the_workloads_checkpointed_block_keeps(config, dtype):
    seq_len, batch = 64, 2
    kept = _kept_bytes(config, seq_len, batch, dtype)
    layout = Layout(compute_dtype=dtype, master_dtype=dtype, checkpoint="selective")
    assert memory.selective_bytes(config, seq_len, batch, layout) == pytest.approx(kept, rel=0.01)


def test_torch_runs_a_fused_attention_on_cpu_which_keeps_no_scores():
    torch = pytest.importorskip("torch")
    flash = int(torch.nn.attention.SDPBackend.FLASH_ATTENTION)
    for dtype in (torch.float32, torch.bfloat16):
        q = torch.randn(2, 8, 64, 32, dtype=dtype, requires_grad=True)
        kv = torch.randn(2, 2, 64, 32, dtype=dtype, requires_grad=True)
        assert torch._fused_sdp_choice(q, kv, kv, None, 0.0, True, enable_gqa=True) == flash


# ------------------------------------------------------------------ generated
@st.composite
def shapes(draw):
    family = draw(st.sampled_from(["gpt2", "llama"]))
    kv_heads = draw(st.sampled_from([1, 2, 4, 8]))
    heads = kv_heads * draw(st.sampled_from([1, 2, 4]))
    head_dim = draw(st.sampled_from([8, 16, 64]))
    return tc.TransformerConfig(
        "generated",
        family,
        dim=heads * head_dim,
        layers=draw(st.integers(1, 6)),
        heads=heads,
        kv_heads=kv_heads,
        ffn=8 * draw(st.integers(1, 64)),
        vocab=draw(st.integers(1, 50_000)),
        context=4096,
        seq_len=128,
        tied=draw(st.booleans()),
    )


@st.composite
def layouts(draw):
    parallel = draw(st.sampled_from(workload_options.PARALLEL))
    dp = draw(st.integers(1, 64))
    group = draw(st.sampled_from([g for g in range(1, dp + 1) if dp % g == 0]))
    return Layout(
        parallel=parallel,
        dp=dp,
        shard_group=group,
        tp=draw(st.sampled_from([1, 2, 4, 8])),
        grad_accum=draw(st.integers(1, 8)),
        defer_reduction=draw(st.booleans()),
        checkpoint=draw(st.sampled_from(memory.CHECKPOINT)),
        compute_dtype=draw(st.sampled_from(memory.COMPUTE_DTYPES)),
        master_dtype=draw(st.sampled_from(memory.STATE_DTYPES)),
        optimizer_dtype=draw(st.sampled_from(memory.STATE_DTYPES)),
        reduce_dtype=draw(st.sampled_from(memory.STATE_DTYPES)),
        attention=draw(st.sampled_from(memory.ATTENTION)),
        dropout=draw(st.booleans()),
        bucket_view=draw(st.booleans()),
    )


SEQ_LENS = st.integers(1, 512).map(lambda n: 8 * n)  # sequence parallelism splits up to 8 ways


def _fitting(config, layout):
    """The layout with a tp that splits the shape (generated shapes have 1 to 8 KV heads)."""
    tp = layout.tp
    while tc.tp_split_problem(config, tp, 8):
        tp //= 2
    return dataclasses.replace(layout, tp=tp)


@settings(max_examples=200, deadline=None)
@given(shapes(), layouts(), SEQ_LENS, st.integers(1, 16))
def test_every_term_is_a_whole_number_of_bytes_from_zero(config, layout, seq_len, batch):
    b = memory.breakdown(config, seq_len, batch, _fitting(config, layout))
    assert all(isinstance(t.bytes, int) and t.bytes >= 0 for t in b.terms)
    assert b.total >= max(t.bytes for t in b.terms)


@settings(max_examples=200, deadline=None)
@given(shapes(), layouts(), SEQ_LENS, st.integers(1, 16))
def test_more_tp_or_more_fsdp_gpus_never_raise_the_model_states_per_gpu(
    config, layout, seq_len, batch
):
    layout = _fitting(config, layout)

    def states(lay):
        b = memory.breakdown(config, seq_len, batch, lay)
        return [b.bytes_of(name) for name in memory.MODEL_STATES]

    more_tp = dataclasses.replace(layout, tp=layout.tp * 2)
    if not tc.tp_split_problem(config, more_tp.tp, seq_len):
        assert all(m <= n for m, n in zip(states(more_tp), states(layout), strict=True))
    fsdp = dataclasses.replace(layout, parallel="fsdp2")
    wider = dataclasses.replace(fsdp, dp=fsdp.dp * 3)
    assert all(m <= n for m, n in zip(states(wider), states(fsdp), strict=True))


@settings(max_examples=200, deadline=None)
@given(shapes(), layouts(), SEQ_LENS, st.integers(1, 16))
def test_full_checkpointing_never_keeps_more_than_selective_nor_selective_than_none(
    config, layout, seq_len, batch
):
    # From two blocks on: one block alone, recomputed, holds its activations beside its
    # kept input, which is more than keeping them. And an MLP at least twice as wide as
    # the model (published shapes: 2.7 to 4 times): selective keeps outputs that nothing
    # in backward saves (wq's before its rotary turn, w2's partial sum before its
    # reduce-scatter), more than a narrower MLP's saves.
    config = dataclasses.replace(
        config, layers=max(2, config.layers), ffn=max(config.ffn, 2 * config.dim)
    )
    layout = _fitting(config, layout)
    kept = [
        memory.activation_bytes(config, seq_len, batch, dataclasses.replace(layout, checkpoint=c))
        for c in ("full", "selective", "none")
    ]
    assert kept[0] <= kept[1] * (1 + 1e-12) and kept[1] <= kept[2] * (1 + 1e-12)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"parallel": "zero3"}, "parallel 'zero3'"),
        ({"checkpoint": "some"}, "activation checkpoint 'some'"),
        ({"compute_dtype": "fp16"}, "compute dtype 'fp16'"),
        ({"master_dtype": "fp8"}, "master dtype 'fp8'"),
        ({"attention": "flash"}, "attention 'flash'"),
        ({"dp": 0}, "data-parallel GPUs 0"),
        ({"tp": 0}, "tp 0"),
        ({"tp": 3}, "--tp 3: gpt-tiny"),
        ({"grad_accum": -1}, "grad_accum -1"),
        ({"dp": True}, "data-parallel GPUs True"),
        ({"parallel": "hsdp", "dp": 8, "shard_group": 3}, "shard group 3"),
        ({"tp": 4}, "--tp 4: sequence parallelism splits --seq-len 102"),
    ],
)
def test_a_bad_value_is_one_line_naming_it(change, named):
    with pytest.raises(UsageError) as err:
        memory.breakdown(TINY, 102, 2, dataclasses.replace(Layout(), **change))
    message = str(err.value)
    assert "\n" not in message and message.startswith(named)


@given(st.integers(-(2**40), 0), st.sampled_from(["seq_len", "batch"]))
def test_a_count_below_one_is_one_line_naming_it(count, which):
    args = {"seq_len": 128, "batch": 2, which: count}
    with pytest.raises(UsageError) as err:
        memory.breakdown(TINY, args["seq_len"], args["batch"], Layout())
    named = "sequence length" if which == "seq_len" else "micro-batch"
    assert "\n" not in str(err.value) and str(err.value).startswith(f"{named} {count}")


# ------------------------------------------------------------------ published figures
def test_the_forecasts_drop_from_8_to_128_gpus_is_torchtitans_up_to_fragmentation():
    """torchtitan, docs/performance.md at eaea6f6a, Tables 1 and 3: Llama 3.1 8B under
    FSDP, local batch 2 (seq_len 8192), 82.4 GiB on 8 H100 and 67.0 GiB on 128: peak
    reserved memory (torchtitan/metrics.py, get_peak_stats: reserved_bytes.all.peak).
    Only the sharded states differ between the two runs; reserved memory is allocated
    memory and at most FRAGMENTATION of itself besides."""
    layout = Layout(parallel="fsdp2", dp=8, checkpoint="selective")
    eight = memory.breakdown(LLAMA3_8B, 8192, 2, layout).total
    more = memory.breakdown(LLAMA3_8B, 8192, 2, dataclasses.replace(layout, dp=128)).total
    drop, published = (eight - more) / GiB, 82.4 - 67.0
    assert drop <= published <= drop / (1 - memory.FRAGMENTATION)


# ------------------------------------------------------------------ fit and search
def test_the_70b_shape_has_its_published_parameter_count():
    assert params(LLAMA3_70B) == 70_553_706_496


def test_llama3_70b_under_fsdp2_on_one_node_of_80_gb_does_not_fit_and_the_search_finds_one():
    base = Layout(parallel="fsdp2", dp=8)
    gpu = 80 * 10**9
    total = memory.breakdown(LLAMA3_70B, 8192, 1, base).total
    assert not memory.fit(total, gpu).fits
    found = memory.smallest_layout(LLAMA3_70B, 8192, 1, base, gpu, max_gpus=64, per_node=8)
    assert found is not None
    assert memory.fit(memory.breakdown(LLAMA3_70B, 8192, 1, found).total, gpu).fits
    # Nothing on fewer GPUs fits, whatever its TP and checkpointing.
    for gpus in range(8, found.gpus):
        for tp in (1, 2, 4, 8):
            for checkpoint in memory.CHECKPOINT:
                if gpus % tp or (gpus > 8 and gpus % 8):
                    continue
                lay = dataclasses.replace(base, dp=gpus // tp, tp=tp, checkpoint=checkpoint)
                assert not memory.fit(memory.breakdown(LLAMA3_70B, 8192, 1, lay).total, gpu).fits
    line = memory.verdict(total, gpu, base, found, 64)
    assert line.startswith("does not fit in 80 GB; fits with ")
    assert f"on {found.gpus} GPUs" in line and f"--activation-checkpoint {found.checkpoint}" in line


def test_the_search_prefers_tp_and_checkpointing_on_the_same_gpus_to_more_gpus():
    base = Layout(parallel="fsdp2", dp=8)
    gpu = 80 * 10**9
    found = memory.smallest_layout(LLAMA3_8B, 8192, 8, base, gpu, max_gpus=64, per_node=8)
    assert found is not None and found.gpus == 8
    # Selective before full: least recompute first.
    assert found.checkpoint in ("selective", "full")
    assert memory.changes(base, found) in {
        f"--tp {found.tp} --activation-checkpoint {found.checkpoint}",
        f"--activation-checkpoint {found.checkpoint}",
    }
    if found.checkpoint == "full":
        selective = dataclasses.replace(found, checkpoint="selective")
        assert not memory.fit(memory.breakdown(LLAMA3_8B, 8192, 8, selective).total, gpu).fits
    total = memory.breakdown(LLAMA3_8B, 8192, 8, base).total
    line = memory.verdict(total, gpu, base, found, 64)
    assert line == f"does not fit in 80 GB; fits with {memory.changes(base, found)}"


def test_more_gpus_alone_are_said_as_such():
    base = Layout(parallel="fsdp2", dp=1, checkpoint="full")
    wider = dataclasses.replace(base, dp=4)
    assert memory.changes(base, wider) == ""
    assert memory.verdict(10**12, 80 * 10**9, base, wider, 8) == (
        "does not fit in 80 GB; fits on 4 GPUs"
    )


def test_the_search_says_none_where_nothing_within_the_bounds_fits():
    base = Layout(parallel="fsdp2", dp=8)
    assert memory.smallest_layout(LLAMA3_70B, 8192, 1, base, 16 * 10**9, 16, 8) is None
    line = memory.verdict(10**12, 16 * 10**9, base, None, 16)
    assert line == "does not fit in 16 GB; no layout up to 16 GPUs does"


def test_the_headroom_takes_the_context_and_the_fragmentation_from_the_memory():
    assert memory.usable_bytes(80 * 10**9) == math.floor(
        (80 * 10**9 - memory.CUDA_CONTEXT) * (1 - memory.FRAGMENTATION)
    )
    assert memory.usable_bytes(0) == 0


def test_the_docs_70b_example_is_what_the_forecast_says():
    base = Layout(parallel="fsdp2", dp=8)
    gpu = 80 * 10**9
    total = memory.breakdown(LLAMA3_70B, 8192, 1, base).total
    found = memory.smallest_layout(LLAMA3_70B, 8192, 1, base, gpu, max_gpus=64, per_node=8)
    assert found is not None
    found_total = memory.breakdown(LLAMA3_70B, 8192, 1, found).total
    text = " ".join((Path(__file__).resolve().parents[2] / "docs/method.md").read_text().split())
    assert f"{total / 1e9:.0f} GB forecast" in text
    assert f'"{memory.verdict(total, gpu, base, found, 64)}" ({found_total / 1e9:.1f} GB' in text
