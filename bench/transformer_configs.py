"""The transformer workload's named configurations, their sizes, and FLOPs per token.

Runs on the nodes and in the harness: no torch, no hpcbench (the harness loads
this file from bench/, hpcbench.launchers.specs), so that a configuration the harness
accepts is the one the workload builds, and the FLOPs the forecast will use are
the ones the workload's MFU uses.

FLOPs per token of training (docs/method.md, "Transformers"), stated once here
(flops_per_token):

    6 N + 6 L H (d_qk + d_v) T   =   6 N + 12 L d T

N counts the parameters a token's matmuls use: every block's weights, biases and
norms, the final norm, and the output projection (vocab x dim), counted once even
where it shares its storage with the token table. The embedding lookups (token
and learned position tables) are left out: they cost no multiply-adds. This is
nanoGPT's "non-embedding" count for GPT-2 (its get_num_params subtracts the
position table and keeps the tied token table as the output layer), and
torchtitan's for Llama (models/utils.py, get_dense_model_nparams_and_flops: all
parameters less the token table when untied, all of them when tied). 6N is two
FLOPs per multiply-add, once in forward and twice in backward. The attention
term counts QK^T and AV of every query head against T keys, forward and
backward, without halving for the causal mask (torchtitan's convention); T is
the training sequence length, L the layers, H the query heads, d_qk = d_v the
head dimension, so H (d_qk + d_v) = 2 d.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TransformerConfig:
    name: str
    family: str  # gpt2: LayerNorm, GELU MLP, learned positions; llama: RMSNorm, SwiGLU, RoPE
    dim: int
    layers: int
    heads: int
    kv_heads: int  # fewer than heads: grouped-query attention
    ffn: int  # the MLP's hidden width
    vocab: int
    context: int  # the longest sequence the model takes
    seq_len: int  # the training sequence when --seq-len is not given
    tied: bool  # the output projection is the token table
    norm_eps: float = 1e-5
    rope_theta: float = 0.0  # llama: the rotary base
    source: str = ""

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    @property
    def bias(self) -> bool:
        return self.family == "gpt2"


CONFIGS = {
    c.name: c
    for c in (
        TransformerConfig(
            "gpt-tiny",
            "gpt2",
            dim=192,
            layers=4,
            heads=4,
            kv_heads=4,
            ffn=768,
            vocab=4096,
            context=256,
            seq_len=128,
            tied=True,
            source="this project's: GPT-2's layout at 2.6M parameters, for a CPU core in the tests",
        ),
        TransformerConfig(
            "gpt2-small",
            "gpt2",
            dim=768,
            layers=12,
            heads=12,
            kv_heads=12,
            ffn=4 * 768,
            vocab=50257,
            context=1024,
            seq_len=1024,
            tied=True,
            source="openai/gpt-2@c2dae27c1029770cea40978813f17a5fd545b883 src/model.py "
            "default_hparams (n_ctx 1024, n_embd 768, n_head 12, n_layer 12; 4x MLP, "
            "LayerNorm eps 1e-5, logits against wte); vocab 50257 as in "
            "karpathy/nanoGPT model.py GPT.from_pretrained",
        ),
        TransformerConfig(
            "gpt2-medium",
            "gpt2",
            dim=1024,
            layers=24,
            heads=16,
            kv_heads=16,
            ffn=4 * 1024,
            vocab=50257,
            context=1024,
            seq_len=1024,
            tied=True,
            source="karpathy/nanoGPT model.py GPT.from_pretrained: gpt2-medium n_layer 24, "
            "n_head 16, n_embd 1024, vocab 50257, block_size 1024 (GPT-2 paper, Table 2: "
            "24 layers, d_model 1024)",
        ),
        TransformerConfig(
            "llama-1b",
            "llama",
            dim=2048,
            layers=16,
            heads=32,
            kv_heads=8,
            ffn=8192,
            vocab=128256,
            context=131072,
            seq_len=2048,
            tied=True,
            rope_theta=500000.0,
            source="Llama 3.2 1B: pytorch/torchtune@2cb2470f999a69bba530021e0e35dfce5b5b90e5 "
            "torchtune/models/llama3_2/_model_builders.py llama3_2_1b (vocab 128256, 16 "
            "layers, 32 heads, 8 KV heads, dim 2048, max_seq_len 131072, intermediate 8192, "
            "norm_eps 1e-5, rope_base 500000); tied embeddings as in "
            "pytorch/torchtitan@b5bcd76c66d0acb1a08b176d9639425bc55e0b2a "
            "torchtitan/models/llama3/__init__.py:148-188 (enable_weight_tying=True). "
            "RoPE without Llama 3's long-context frequency scaling (values, not cost)",
        ),
    )
}


def is_transformer(model: str) -> bool:
    return model in CONFIGS


# ------------------------------------------------------------------ sizes
def block_params(c: TransformerConfig) -> int:
    """One block's parameters: attention, MLP and the two norms."""
    kv = c.kv_heads * c.head_dim
    attention = c.dim * c.dim * 2 + c.dim * kv * 2  # q and output; k and v
    mlp = c.dim * c.ffn * (3 if c.family == "llama" else 2)  # SwiGLU has a gate
    norms = 2 * c.dim * (2 if c.family == "gpt2" else 1)  # LayerNorm has a bias
    if c.bias:
        attention += c.dim * 2 + kv * 2
        mlp += c.ffn + c.dim
    return attention + mlp + norms


def param_counts(c: TransformerConfig) -> dict[str, int]:
    """total: the parameters the model holds (a tied table once); matmul: N of
    flops_per_token; embedding: the lookup tables (token, and position where learned)."""
    final_norm = c.dim * (2 if c.family == "gpt2" else 1)
    token = c.vocab * c.dim
    position = c.context * c.dim if c.family == "gpt2" else 0
    output = c.vocab * c.dim
    blocks = c.layers * block_params(c)
    total = blocks + final_norm + token + position + (0 if c.tied else output)
    return {
        "total": total,
        "matmul": blocks + final_norm + output,
        "embedding": token + position,
    }


def flops_per_token(c: TransformerConfig, seq_len: int) -> int:
    """Training FLOPs per token (the module's text): 6N + 6 L H (d_qk + d_v) T."""
    n = param_counts(c)["matmul"]
    return 6 * n + 6 * c.layers * c.heads * (2 * c.head_dim) * seq_len


# ------------------------------------------------------------------ refusals
# Each check is one line naming the option to change; the harness asks them before a
# launch (hpcbench.measure.scale_options), the workload again before it builds anything.
def resolve_seq_len(c: TransformerConfig, asked: int) -> int:
    """--seq-len, or the configuration's own (0); ValueError with one line if longer
    than the model's context."""
    seq_len = asked or c.seq_len
    if seq_len > c.context:
        raise ValueError(
            f"--seq-len {seq_len}: {c.name} takes at most {c.context} tokens (its context)"
        )
    return seq_len


def problem(
    model: str,
    backend: str,
    parallel: str,
    seq_len: int,
    shard: int,
    image_size: int,
    fp16_allreduce: bool = False,
    step: str = "eager",
    bucket_cap_mb: float | None = None,
    tp: int = 1,
    grad_accum: int = 1,
    activation_checkpoint: str = "none",
) -> str | None:
    """Why these options cannot run together (one line), or None. parallel is one of
    bench/workload_options.py's PARALLEL (its parsers check that)."""
    transformer = is_transformer(model)
    if backend == "horovod" and parallel != "ddp":
        return (
            f"--parallel {parallel} shards with torch.distributed (FSDP2): use --backend ddp; "
            "Horovod runs the CNNs"
        )
    if transformer and backend == "horovod":
        return f"{model} trains under torch.distributed: use --backend ddp (Horovod runs the CNNs)"
    if parallel != "ddp" and not transformer:
        return (
            f"--parallel {parallel} is for the transformer models "
            f"({', '.join(sorted(CONFIGS))}); {model} trains under ddp or horovod"
        )
    if shard and parallel != "hsdp":
        return f"--shard-group {shard} is HSDP's: give it with --parallel hsdp"
    if transformer and image_size:
        return f"--image-size is for the CNNs; {model} takes --seq-len"
    if transformer and step == "graph":
        return f"--step graph: CUDA graphs are for the CNNs; {model} runs eager or compile"
    if transformer and fp16_allreduce:
        return f"--fp16-allreduce is for the CNNs; {model} reduces in fp32 (bf16 on CUDA)"
    why = unbucketed(parallel, bucket_cap_mb)
    if why:
        return why
    if not transformer and seq_len:
        return f"--seq-len is for the transformer models; {model} takes --image-size"
    if transformer:
        try:
            resolve_seq_len(CONFIGS[model], seq_len)
        except ValueError as err:
            return str(err)
    return layout_problem(model, parallel, seq_len, tp, grad_accum, activation_checkpoint)


def problem_of(args: Any) -> str | None:
    """problem() of parsed options (train.py's, or `scale`'s: the same names)."""
    return problem(
        args.model,
        args.backend,
        args.parallel,
        args.seq_len,
        args.shard_group,
        args.image_size,
        args.fp16_allreduce,
        args.step,
        args.bucket_cap_mb,
        # The layout's options where the namespace has them (problem's defaults if not).
        **{k: getattr(args, k) for k in LAYOUT_OPTIONS if hasattr(args, k)},
    )


LAYOUT_OPTIONS = ("tp", "grad_accum", "activation_checkpoint")  # problem's, by dest


def unbucketed(parallel: str, bucket_cap_mb: float | None) -> str | None:
    """--bucket-cap-mb beside a sharded parallelism (one line), or None: FSDP2 reduces
    each unit's gradients in one reduce-scatter and takes no bucket size (torch 2.15.0,
    torch/distributed/fsdp/_fully_shard/_fully_shard.py:100-110: fully_shard takes a
    mesh, reshard_after_forward, shard_placement_fn, mp_policy, offload_policy,
    ignored_params, dp_mesh_dims; bench/lm.py hands bucket_cap_mb to DDP alone)."""
    if bucket_cap_mb is None or parallel == "ddp":
        return None
    return (
        f"--bucket-cap-mb is DDP's gradient buckets; --parallel {parallel} reduce-scatters "
        "each FSDP unit's gradients whole: drop it"
    )


def layout_problem(
    model: str, parallel: str, seq_len: int, tp: int, grad_accum: int, checkpoint: str
) -> str | None:
    """Tensor parallelism, gradient accumulation and activation checkpointing
    (bench/layout.py) beside the other options: one line, or None."""
    if not is_transformer(model):
        asked = {"--tp": tp > 1, "--grad-accum": grad_accum > 1}
        asked["--activation-checkpoint"] = checkpoint != "none"
        flag = next((f for f, given in asked.items() if given), None)
        return f"{flag} is for the transformer models; {model} takes none" if flag else None
    if tp == 1:
        return None
    c = CONFIGS[model]
    if parallel == "ddp":  # bench/layout.py's text: DDP + TP in torch 2.15
        return (
            f"--tp {tp} with --parallel ddp: torch's DDP does not train tensor-parallel "
            f"modules; use --parallel fsdp2, or hsdp --shard-group {tp} (replicas of one TP group)"
        )
    for what, count in (("attention heads", c.heads), ("key-value heads", c.kv_heads)):
        if count % tp:
            return (
                f"--tp {tp}: {model}'s {count} {what} do not split {tp} ways; "
                f"use a --tp that divides {count}"
            )
    length = seq_len or c.seq_len
    if length % tp:
        return (
            f"--tp {tp}: sequence parallelism splits --seq-len {length} {tp} ways; "
            f"use a --seq-len that {tp} divides"
        )
    return None


def check_tp_workers(tp: int, workers: int, per_node: int, parallel: str, group: int) -> None:
    """ValueError with one line where a TP group cannot be consecutive workers of one node
    (bench/layout.py's mesh): tp must divide a node's workers, and an HSDP replica (its
    shard group) hold whole TP groups."""
    if tp == 1:
        return
    if per_node % tp or workers % tp:
        raise ValueError(
            f"--tp {tp}: a TP group is {tp} workers of one node, and this run has "
            f"{per_node} per node: use a --tp that divides {per_node}"
        )
    if parallel == "hsdp" and group % tp:
        raise ValueError(
            f"--shard-group {group}: an HSDP replica holds whole TP groups: "
            f"use a multiple of --tp {tp}"
        )


def shard_group(parallel: str, asked: int, workers: int, per_node: int) -> int:
    """The ranks that hold one copy of the model between them: all workers under FSDP2,
    --shard-group (else a node's workers) under HSDP, one under DDP and for a single
    worker (it trains unwrapped, bench/train.py: the baseline X(1) of every parallelism;
    on a 1 x 1 mesh under --wrap on). ValueError with one line where HSDP's group does
    not divide the workers."""
    if parallel == "fsdp2":
        return workers
    if parallel != "hsdp" or workers <= 1:
        return 1
    group = asked or per_node
    if group < 1 or workers % group:
        raise ValueError(
            f"--shard-group {group}: HSDP's shard group must divide the {workers} workers"
        )
    return group
