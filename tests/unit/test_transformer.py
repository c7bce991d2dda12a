"""The transformer workload's configurations (bench/transformer_configs.py) and model
(bench/transformer.py): the published sizes, FLOPs per token against a hand count, the
model's shapes and causality, and the option combinations refused."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import transformer_configs as tc  # noqa: E402

CONFIGS = tc.CONFIGS


# ------------------------------------------------------------------ sizes
@pytest.mark.parametrize(
    ("name", "total"),
    [
        # GPT-2 124M and 355M (the OpenAI checkpoints' parameter counts, tied embeddings)
        ("gpt2-small", 124_439_808),
        ("gpt2-medium", 354_823_168),
        # Llama 3.2 1B, tied: 1.24B
        ("llama-1b", 1_235_814_400),
    ],
)
def test_the_published_configurations_have_their_published_sizes(name, total):
    assert tc.param_counts(CONFIGS[name])["total"] == total


def test_the_small_configuration_has_a_few_million_parameters():
    assert 1_000_000 < tc.param_counts(CONFIGS["gpt-tiny"])["total"] < 5_000_000


def test_every_configuration_says_where_it_comes_from():
    assert all(len(c.source) > 20 for c in CONFIGS.values())


def test_the_model_holds_the_parameters_counted():
    torch = pytest.importorskip("torch")
    import transformer

    for c in CONFIGS.values():
        with torch.device("meta"):  # shapes only: llama-1b would take 5 GB
            model = transformer.Transformer(c, c.seq_len)
        assert sum(p.numel() for p in model.parameters()) == tc.param_counts(c)["total"], c.name
        if c.tied:
            assert model.output.weight is model.tok_embeddings.weight


# ------------------------------------------------------------------ FLOPs
def test_flops_per_token_of_gpt2_small_by_hand():
    d, layers, vocab, t = 768, 12, 50257, 1024
    per_block = (
        4 * d * d  # q, k, v, output projections
        + 4 * d  # their biases
        + 2 * d * 4 * d  # the MLP's two matrices
        + 4 * d
        + d  # their biases
        + 4 * d  # two LayerNorms, weight and bias
    )
    n = layers * per_block + 2 * d + vocab * d  # final LayerNorm, output projection (tied)
    attention = 6 * layers * 12 * (64 + 64) * t  # QK^T and AV of 12 heads of 64
    assert tc.flops_per_token(CONFIGS["gpt2-small"], t) == 6 * n + attention
    assert 6 * n + attention == 6 * 123_653_376 + 12 * 12 * 768 * 1024


def test_flops_per_token_of_llama_1b_by_hand():
    d, layers, vocab, t = 2048, 16, 128256, 2048
    kv = 8 * 64  # eight key-value heads of 64
    per_block = d * d + 2 * d * kv + d * d + 3 * d * 8192 + 2 * d  # attention, SwiGLU, norms
    n = layers * per_block + d + vocab * d  # final RMSNorm, output projection (tied)
    attention = 6 * layers * 32 * (64 + 64) * t  # every one of 32 query heads
    assert tc.flops_per_token(CONFIGS["llama-1b"], t) == 6 * n + attention
    # tied: N is every parameter (the token table is the output projection)
    assert n == tc.param_counts(CONFIGS["llama-1b"])["total"]


def test_the_attention_term_grows_with_the_sequence_and_n_does_not():
    c = CONFIGS["gpt2-small"]
    assert tc.flops_per_token(c, 1024) - tc.flops_per_token(c, 512) == 12 * 12 * 768 * 512


# ------------------------------------------------------------------ the model
def _tiny_llama():
    return tc.TransformerConfig(
        "t", "llama", dim=64, layers=2, heads=4, kv_heads=2, ffn=96, vocab=50, context=32,
        seq_len=16, tied=False, rope_theta=10000.0,
    )  # fmt: skip


@pytest.mark.parametrize("config", [CONFIGS["gpt-tiny"], _tiny_llama()], ids=["gpt2", "llama"])
def test_logits_for_every_position_and_no_peeking_ahead(config):
    torch = pytest.importorskip("torch")
    import transformer

    torch.manual_seed(0)
    model = transformer.Transformer(config, 16)
    tokens = torch.randint(0, config.vocab, (2, 16))
    logits = model(tokens)
    assert logits.shape == (2, 16, config.vocab)
    changed = tokens.clone()
    changed[:, 10:] = (changed[:, 10:] + 1) % config.vocab
    again = model(changed)
    # Causal: positions before the change see the same context, those after do not.
    assert torch.allclose(logits[:, :10], again[:, :10], atol=1e-5)
    assert not torch.allclose(logits[:, 10:], again[:, 10:], atol=1e-3)


def test_rotary_positions_turn_pairs_without_stretching_them():
    torch = pytest.importorskip("torch")
    import transformer

    cos, sin = transformer.rotary_tables(8, 5, 10000.0)
    x = torch.randn(1, 5, 2, 8)
    turned = transformer.rotate(x, cos, sin)
    assert torch.allclose(turned[:, 0], x[:, 0])  # position 0: no turn
    pairs = lambda t: t.unflatten(-1, (-1, 2)).norm(dim=-1)  # noqa: E731
    assert torch.allclose(pairs(turned), pairs(x), atol=1e-5)


# ------------------------------------------------------------------ refusals
@pytest.mark.parametrize(
    ("options", "says"),
    [
        (("gpt-tiny", "horovod", "fsdp2", 0, 0, 0), "use --backend ddp"),
        (("resnet50", "horovod", "hsdp", 0, 0, 0), "use --backend ddp"),
        (("gpt-tiny", "horovod", "ddp", 0, 0, 0), "use --backend ddp"),
        (("resnet50", "ddp", "fsdp2", 0, 0, 0), "for the transformer models"),
        (("gpt-tiny", "ddp", "fsdp2", 0, 2, 0), "--shard-group 2 is HSDP's"),
        (("gpt-tiny", "ddp", "ddp", 0, 0, 224), "--image-size is for the CNNs"),
        (("resnet50", "ddp", "ddp", 128, 0, 0), "--seq-len is for the transformer"),
        (("gpt-tiny", "ddp", "ddp", 257, 0, 0), "gpt-tiny takes at most 256 tokens"),
        (("gpt2-small", "ddp", "fsdp2", 4096, 0, 0), "at most 1024 tokens"),
    ],
)
def test_combinations_that_cannot_run_are_refused_in_one_line(options, says):
    why = tc.problem(*options)
    assert why is not None and says in why and "\n" not in why


def test_ddps_bucket_size_beside_a_sharded_parallelism_is_refused_in_one_line():
    def why(model: str, parallel: str, bucket_cap_mb: float | None) -> str | None:
        options = dict(seq_len=0, shard_group=0, image_size=0, fp16_allreduce=False)
        return tc.problem_of(
            argparse.Namespace(
                model=model,
                backend="ddp",
                parallel=parallel,
                step="eager",
                bucket_cap_mb=bucket_cap_mb,
                **options,
            )
        )

    for parallel in ("fsdp2", "hsdp"):
        said = why("gpt-tiny", parallel, 50.0)
        assert said is not None and "--bucket-cap-mb is DDP's" in said and "\n" not in said
        assert why("gpt-tiny", parallel, None) is None
    assert why("gpt-tiny", "ddp", 50.0) is None and why("resnet50", "ddp", 50.0) is None


def test_runnable_combinations_pass():
    assert tc.problem("gpt-tiny", "ddp", "hsdp", 256, 2, 0) is None
    assert tc.problem("resnet50", "horovod", "ddp", 0, 0, 224) is None
    assert tc.problem("gpt-tiny", "ddp", "ddp", 0, 0, 0, fp16_allreduce=True) is not None
    assert tc.problem("gpt-tiny", "ddp", "ddp", 0, 0, 0, step="graph") is not None
    assert tc.problem("resnet50", "ddp", "ddp", 0, 0, 0, step="graph") is None


def test_the_shard_group_must_divide_the_workers():
    assert tc.shard_group("hsdp", 0, 8, 4) == 4  # a node's workers
    assert tc.shard_group("hsdp", 2, 8, 4) == 2
    assert tc.shard_group("fsdp2", 0, 8, 4) == 8 and tc.shard_group("ddp", 0, 8, 4) == 1
    with pytest.raises(ValueError, match="must divide the 8 workers"):
        tc.shard_group("hsdp", 3, 8, 4)
    with pytest.raises(ValueError, match="must divide the 6 workers"):
        tc.shard_group("hsdp", 0, 6, 4)


def test_a_single_worker_is_a_group_of_its_own_whatever_the_shard_group():
    """The baseline X(1) trains unwrapped under every parallelism (bench/train.py): a
    sweep's --shard-group does not make its one worker unrunnable."""
    assert tc.shard_group("hsdp", 2, 1, 1) == 1
    assert tc.shard_group("hsdp", 0, 1, 4) == 1
    assert tc.shard_group("fsdp2", 0, 1, 1) == 1


# ------------------------------------------------------------------ layouts (bench/layout.py)
def layout_problem(model: str, parallel: str = "fsdp2", seq_len: int = 0, **asked) -> str | None:
    return tc.problem(model, "ddp", parallel, seq_len, 0, 0, **asked)


@pytest.mark.parametrize(
    ("model", "options", "says"),
    [
        ("gpt-tiny", {"tp": 3}, "--tp 3: gpt-tiny's 4 attention heads do not split 3 ways"),
        ("llama-1b", {"tp": 16}, "--tp 16: llama-1b's 8 key-value heads do not split 16 ways"),
        ("gpt-tiny", {"tp": 4, "seq_len": 66}, "splits --seq-len 66 4 ways"),
        ("gpt-tiny", {"tp": 2, "parallel": "ddp"}, "use --parallel fsdp2, or hsdp --shard-group 2"),
        ("resnet50", {"tp": 2, "parallel": "ddp"}, "--tp is for the transformer models"),
        ("resnet50", {"grad_accum": 4, "parallel": "ddp"}, "--grad-accum is for the transformer"),
        (
            "resnet50",
            {"activation_checkpoint": "full", "parallel": "ddp"},
            "--activation-checkpoint is for the transformer models",
        ),
    ],
)
def test_a_layout_that_cannot_run_is_refused_in_one_line_naming_what_to_change(
    model, options, says
):
    why = layout_problem(model, **options)
    assert why is not None and says in why and "\n" not in why


def test_layouts_that_can_run_pass():
    assert layout_problem("llama-1b", tp=8) is None  # 32 heads, 8 KV heads, 2048 tokens
    assert layout_problem("gpt-tiny", "hsdp", tp=2, grad_accum=4) is None
    assert layout_problem("gpt2-small", "ddp", grad_accum=8, activation_checkpoint="full") is None
    assert layout_problem("resnet50", "ddp") is None


@given(
    model=st.sampled_from(sorted(CONFIGS)),
    tp=st.integers(min_value=1, max_value=64),
    seq_len=st.integers(min_value=0, max_value=1024),
)
def test_a_tp_passes_exactly_where_it_divides_heads_kv_heads_mlp_and_sequence(model, tp, seq_len):
    c = CONFIGS[model]
    seq_len = min(seq_len, c.context)
    divides = all(n % tp == 0 for n in (c.heads, c.kv_heads, c.ffn, seq_len or c.seq_len))
    why = layout_problem(model, seq_len=seq_len, tp=tp)
    assert (why is None) == divides, why
    assert why is None or (why.startswith(f"--tp {tp}: ") and "\n" not in why)


def test_a_tp_group_is_workers_of_one_node_and_an_hsdp_replica_whole_tp_groups():
    tc.check_tp_workers(4, 16, 8, "fsdp2", 16)  # two groups of 4 in each node of 8
    tc.check_tp_workers(2, 8, 4, "hsdp", 4)  # a replica of 4: two TP groups
    tc.check_tp_workers(1, 3, 3, "ddp", 1)
    with pytest.raises(ValueError, match=r"^--tp 4: a TP group is 4 workers of one node, and this"):
        tc.check_tp_workers(4, 12, 6, "fsdp2", 12)
    with pytest.raises(ValueError, match="this run has 1 per node"):
        tc.check_tp_workers(2, 1, 1, "fsdp2", 1)  # one worker: the baseline runs no TP
    with pytest.raises(ValueError, match=r"^--shard-group 6: an HSDP replica holds whole TP"):
        tc.check_tp_workers(4, 24, 8, "hsdp", 6)
