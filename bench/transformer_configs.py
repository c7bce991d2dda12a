"""The transformer workload's configurations: its named ones, and a Hugging Face
config.json's (from_hf), read into the same TransformerConfig and known by one name
(resolve); their sizes, FLOPs per token, and the options they refuse.

Runs on the nodes and in the harness: no torch, no hpcbench (the harness loads
this file from bench/, hpcbench/core/bench.py), so that a configuration the harness
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
head dimension (head_dim), so H (d_qk + d_v) = 2 d where heads x head_dim = d.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
from dataclasses import dataclass, field, fields, replace
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
    source: str = field(default="", compare=False)  # where it comes from, not what it is
    # A config's head_dim where it is not dim // heads (a head then narrower or wider
    # than dim / heads: q and the output projection heads x head_dim wide); 0: it is.
    explicit_head_dim: int = 0
    qkv_bias: bool = False  # biases on q, k and v alone (Qwen2); gpt2 has them everywhere
    sliding_window: int = 0  # a query attends to the last this many keys; 0: all before it

    @property
    def head_dim(self) -> int:
        return self.explicit_head_dim or self.dim // self.heads

    @property
    def bias(self) -> bool:
        """Biases on every linear layer but the output projection (GPT-2's)."""
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


# ------------------------------------------------------------------ names
# A --model names one of CONFIGS, or gives the path of a Hugging Face config.json
# (from_json, below), whose model is named by its folder and a hash of its shape
# ("qwen2-7b@3f2a91c0"): one name, one shape, so that the runs of a config pool wherever
# its file lies and those of two configs never do. A config once read is known by its
# name in that process (resolve): read from its file, passed to train.py beside its name
# (--model-shape), or kept by a run record (model_shape) for a report that reads only
# the store.
SHAPE_FIELDS = tuple(f.name for f in fields(TransformerConfig) if f.name not in ("name", "source"))
ZERO_IS_NONE = ("explicit_head_dim", "sliding_window")  # the counts whose 0 means none
READ_NAME = re.compile(r"[A-Za-z0-9._-]{1,40}@[0-9a-f]{8}")
_READ: dict[str, TransformerConfig] = {}  # the configs read in this process, by name


def is_config_path(model: str) -> bool:
    """Whether a --model gives a config.json's path rather than a name."""
    return model.endswith(".json") or "/" in model


def is_transformer(model: str) -> bool:
    """A configuration's name, or a read config's, whether its shape is at hand or not (a
    failed run's record, read by the report, may be all there is of it)."""
    return model in CONFIGS or bool(READ_NAME.fullmatch(model))


def resolve(model: str) -> TransformerConfig | None:
    """The configuration a name stands for: one of CONFIGS, or a config read in this
    process; None for anything else (a CNN, an unknown name)."""
    return CONFIGS.get(model) or _READ.get(model)


def remember(c: TransformerConfig) -> TransformerConfig:
    """c, known by its name from here on (resolve). ValueError where the name is another
    shape's already: two shapes whose hashes meet, which a longer name would tell apart."""
    known = _READ.setdefault(c.name, c)
    if shape_of(known) != shape_of(c):
        raise ValueError(f"{c.name} names two shapes: rename one config's folder")
    return known


def shape_of(c: TransformerConfig) -> dict[str, Any]:
    """What a configuration is, less its name and source: a run record's model_shape, and
    what train.py's --model-shape takes."""
    return {f: getattr(c, f) for f in SHAPE_FIELDS}


def _digest(shape: dict[str, Any]) -> str:
    text = json.dumps(shape, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def read_shape(model: str) -> dict[str, Any] | None:
    """The shape of a model read from a config.json; None for one of CONFIGS, or a name of
    no config read here."""
    c = _READ.get(model)
    return None if c is None else shape_of(c)


def shape_argv(model: str) -> list[str]:
    """train.py's --model-shape for a model read from a config.json, as compact JSON
    (the nodes need not see the file); nothing for one of CONFIGS."""
    shape = read_shape(model)
    if shape is None:
        return []
    return ["--model-shape", json.dumps(shape, sort_keys=True, separators=(",", ":"))]


def recorded(model: Any, shape: Any) -> TransformerConfig | None:
    """The configuration a run record names, with the shape it keeps (model_shape): one of
    CONFIGS, a config read here, or one read from the record, known by its name from then
    on (so that a forecast of the run finds it by name); None where the record's shape is
    missing or not its name's, or the model is no transformer."""
    if not isinstance(model, str) or not is_transformer(model):
        return None
    known = resolve(model)
    if known is not None:
        return known
    try:
        return remember(from_shape(model, shape, f"{model}'s recorded shape"))
    except ValueError:
        return None


def from_shape(name: str, shape: Any, where: str) -> TransformerConfig:
    """The configuration of a shape as shape_of gives it (train.py's --model-shape, a run
    record's model_shape), under its name; ValueError (one line) where it is no such
    shape, or not the one its name's hash says."""
    if not READ_NAME.fullmatch(name):
        raise ValueError(f"{where}: {name[:60]!r} is no read config's name (folder@hash)")
    if not isinstance(shape, dict) or set(shape) != set(SHAPE_FIELDS):
        raise ValueError(f"{where}: a shape holds exactly {', '.join(SHAPE_FIELDS)}")
    if shape["family"] not in LAYOUTS:
        raise ValueError(
            f"{where}: family: {str(shape['family'])[:20]!r} is not one of {', '.join(LAYOUTS)}"
        )
    kinds = {f.name: f.type for f in fields(TransformerConfig)}
    values = {}
    for key in SHAPE_FIELDS:
        if kinds[key] == "int":
            values[key] = _count(shape, key, where, low=0 if key in ZERO_IS_NONE else 1)
        elif kinds[key] == "float":
            values[key] = _real(shape, key, where, low=0.0 if key == "rope_theta" else None)
        elif kinds[key] == "bool":
            values[key] = _flag(shape, key, where)
    c = _checked(TransformerConfig(name, shape["family"], source=where, **values), {}, where)
    if name.rsplit("@", 1)[1] != _digest(shape_of(c)):
        raise ValueError(
            f"{where}: the name {name} does not carry this shape's hash {_digest(shape_of(c))}"
        )
    return c


# ------------------------------------------------------------------ sizes
def block_params(c: TransformerConfig) -> int:
    """One block's parameters: attention, MLP and the two norms."""
    q = c.heads * c.head_dim
    kv = c.kv_heads * c.head_dim
    attention = c.dim * q * 2 + c.dim * kv * 2  # q and output; k and v
    mlp = c.dim * c.ffn * (3 if c.family == "llama" else 2)  # SwiGLU has a gate
    norms = 2 * c.dim * (2 if c.family == "gpt2" else 1)  # LayerNorm has a bias
    if c.bias:
        attention += q + c.dim + kv * 2
        mlp += c.ffn + c.dim
    elif c.qkv_bias:
        attention += q + kv * 2
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


def block_products(c: TransformerConfig) -> list[tuple[int, int, bool]]:
    """A block's matrix products in the order its forward runs them (transformer.py: wq,
    wk, wv, wo, then w1, w3, w2 or GPT-2's w1, w2), each as (its input's width, its
    output's width, whether it is row-parallel under TP: wo and w2)."""
    q, kv = c.heads * c.head_dim, c.kv_heads * c.head_dim
    mlp = [(c.dim, c.ffn)] * (2 if c.family == "llama" else 1)
    widths = [(c.dim, q), (c.dim, kv), (c.dim, kv), (q, c.dim), *mlp, (c.ffn, c.dim)]
    return [(i, o, n in (3, len(widths) - 1)) for n, (i, o) in enumerate(widths)]


def flops_per_token(c: TransformerConfig, seq_len: int) -> int:
    """Training FLOPs per token (the module's text): 6N + 6 L H (d_qk + d_v) T."""
    n = param_counts(c)["matmul"]
    return 6 * n + 3 * c.layers * attention_flops(c, seq_len)


def attention_flops(c: TransformerConfig, seq_len: int) -> int:
    """One block's attention forward per token, beside its matrix products: the scores
    and their weighted sum over seq_len keys, 2 H (d_qk + d_v) T."""
    return 2 * c.heads * (2 * c.head_dim) * seq_len


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
    # A query attends to the keys within sliding_window of it (transformers 5.24.0,
    # masking_utils.py:96-97: kv_idx > q_idx - sliding_window): a window at or above the
    # sequence holds every key before each query, as the full causal attention the
    # workload builds does; a shorter one would not.
    if c.sliding_window and seq_len > c.sliding_window:
        raise ValueError(
            f"--seq-len {seq_len}: {c.name} attends within sliding_window {c.sliding_window}, "
            f"and the workload builds full causal attention: use a --seq-len of at most "
            f"{c.sliding_window}"
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
    config = resolve(model)
    if transformer and config is None:
        return f"{model}: no shape of this name is known here: give --model its config.json's path"
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
            f"({', '.join(sorted(CONFIGS))}, or a config.json); {model} trains under ddp or horovod"
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
    if config is not None:
        try:
            resolve_seq_len(config, seq_len)
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
    c = resolve(model)
    if tp == 1 or c is None:
        return None
    if parallel == "ddp":  # bench/layout.py's text: DDP + TP in torch 2.15
        return (
            f"--tp {tp} with --parallel ddp: torch's DDP does not train tensor-parallel "
            f"modules; use --parallel fsdp2, or hsdp --shard-group {tp} (replicas of one TP group)"
        )
    return tp_split_problem(c, tp, seq_len or c.seq_len)


def tp_split_problem(c: TransformerConfig, tp: int, seq_len: int) -> str | None:
    """Why tensor parallelism over tp GPUs cannot split this shape, or None: Megatron's
    split (bench/layout.py) gives each rank whole heads (query and key/value) and an
    equal part of the MLP, and sequence parallelism an equal part of the sequence. The
    one rule: the workload refuses what the memory forecast (hpcbench/performance/memory.py)
    refuses."""
    for what, count in (
        ("attention heads", c.heads),
        ("key-value heads", c.kv_heads),
        ("MLP width", c.ffn),
    ):
        if count % tp:
            return (
                f"--tp {tp}: {c.name}'s {count} {what} do not split {tp} ways; "
                f"use a --tp that divides {count}"
            )
    if seq_len % tp:
        return (
            f"--tp {tp}: sequence parallelism splits --seq-len {seq_len} {tp} ways; "
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


# ------------------------------------------------------------------ a Hugging Face config.json
# The dense decoder-only families the workload builds, by config.json's model_type, and the
# layout each is built in (bench/transformer.py): Llama, Mistral and Qwen2 are RMSNorm,
# SwiGLU, rotary positions and grouped-query attention, Qwen2 with biases on q, k and v
# (modeling_qwen2.py:181-184); GPT-2 is LayerNorm, a GELU MLP, learned positions and biases
# on every layer. What each field means, and what it is when a file leaves it out, is
# transformers 5.24.0's configuration class of the family (models/<type>/configuration_
# <type>.py, cited by line; modeling_*.py where the model reads a field the class lacks).
FAMILIES = {"llama": "llama", "mistral": "llama", "qwen2": "llama", "gpt2": "gpt2"}
LAYOUTS = ("gpt2", "llama")
# Fields that give a model experts (Mixtral's, Qwen2-MoE's and OLMoE's, DeepSeek-V3's:
# configuration_mixtral.py:85, configuration_qwen2_moe.py:99, configuration_deepseek_v3.py:89):
# a mixture of experts is no dense model, whatever its model_type says.
EXPERT_FIELDS = ("num_local_experts", "num_experts", "n_routed_experts")
MAX_CONFIG_BYTES = 1 << 20  # a config.json is a few kB; a model's whole card is not
MAX_COUNT = 1 << 24  # any width, depth, head count or vocabulary above this is a typo
# The training sequence when --seq-len is not given: the context, at most this (a
# context of 131072 tokens is what a model takes, not what a benchmark trains on).
DEFAULT_SEQ_LEN = 2048
_MISSING = object()

# The shape's fields by the names each family's config.json gives them: these the file must
# give; the rest take the family's defaults (_hf_defaults).
_NAMES = {
    "llama": {
        "dim": "hidden_size",
        "layers": "num_hidden_layers",
        "heads": "num_attention_heads",
        "ffn": "intermediate_size",
        "vocab": "vocab_size",
        "context": "max_position_embeddings",
    },
    "gpt2": {  # configuration_gpt2.py:70-82 (its attribute_map names them so)
        "dim": "n_embd",
        "layers": "n_layer",
        "heads": "n_head",
        "vocab": "vocab_size",
        "context": "n_positions",
    },
}


def from_json(data: bytes, where: str) -> TransformerConfig:
    """The model of a config.json's bytes (read bounded by whoever read them), named by the
    file's folder (from_hf); ValueError (one line naming what to fix) where it is no JSON
    object or no dense decoder-only model the workload builds."""
    try:
        # NaN and Infinity are no JSON (RFC 8259); json would take them.
        config = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        why = str(err).splitlines()[0][:80] if str(err) else type(err).__name__
        raise ValueError(f"{_shown(where)}: not JSON ({why})") from None
    return from_hf(config, where)


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is no JSON number")


def from_hf(config: Any, where: str) -> TransformerConfig:
    """A config.json's object as a configuration, named by its folder and its shape's hash;
    ValueError (one line naming the field) where it is a mixture of experts, of a family
    the workload does not build, or a field is missing or of the wrong type or size."""
    shown = _shown(where)
    if not isinstance(config, dict):
        raise ValueError(
            f"{shown}: a config.json holds one JSON object, not {type(config).__name__}"
        )
    for key in EXPERT_FIELDS:
        if config.get(key) not in (None, 0):
            raise ValueError(
                f"{shown}: {key}: a mixture of experts (MoE); the workload builds dense models"
            )
    model_type = config.get("model_type", _MISSING)
    if model_type is _MISSING:
        raise ValueError(f"{shown}: model_type: missing; give one of {', '.join(FAMILIES)}")
    if not isinstance(model_type, str) or model_type not in FAMILIES:
        what = "a mixture of experts (MoE)" if "moe" in str(model_type).lower() else "not built"
        raise ValueError(
            f"{shown}: model_type {str(model_type)[:30]!r}: {what}; the workload builds "
            f"the dense decoder-only {', '.join(FAMILIES)}"
        )
    family = FAMILIES[model_type]
    names = _NAMES[family]
    values = {key: _count(config, name, shown) for key, name in names.items()}
    values.update(_hf_defaults(model_type, config, values, shown))
    source = f"{shown}: a Hugging Face config.json ({model_type})"
    # seq_len 0: the workload's default for the file's context, set by _checked.
    c = TransformerConfig("", family, seq_len=0, source=source, **values)
    llama = family == "llama"
    labels = {
        **names,
        "kv_heads": "num_key_value_heads" if llama else "n_head",
        "ffn": "intermediate_size" if llama else "n_inner",
    }
    c = _checked(c, labels, shown)
    return replace(c, name=f"{_stem(where)}@{_digest(shape_of(c))}")


def _hf_defaults(
    model_type: str, config: dict[str, Any], given: dict[str, int], shown: str
) -> dict[str, Any]:
    """The shape's fields a config.json may leave out, each as the family's class has it."""
    heads, dim = given["heads"], given["dim"]
    if model_type == "gpt2":
        inner = config.get("n_inner")  # None: 4 x n_embd (modeling_gpt2.py:252)
        return {
            "kv_heads": heads,
            "ffn": 4 * dim if inner is None else _count(config, "n_inner", shown),
            "norm_eps": _real(config, "layer_norm_epsilon", shown, 1e-5),  # :87
            "tied": _flag(config, "tie_word_embeddings", shown, True),  # :102
        }
    # num_key_value_heads: null is the heads (configuration_llama.py:88-89,
    # configuration_mistral.py:84-85, configuration_qwen2.py:84-85); absent, the class's
    # default: none for Llama (:68), so the heads; 8 for Mistral (:67), 32 for Qwen2 (:65).
    kv: Any = {"llama": None, "mistral": 8, "qwen2": 32}[model_type]
    if config.get("num_key_value_heads", kv) is not None:
        kv = _count(config, "num_key_value_heads", shown, kv)
    # head_dim: null or absent, hidden_size // num_attention_heads (configuration_llama.py:
    # 86-87, configuration_mistral.py:83; Qwen2's class has none: modeling_qwen2.py:176).
    head_dim = None if config.get("head_dim") is None else _count(config, "head_dim", shown)
    if model_type == "llama":  # its class refuses the rest (configuration_llama.py:95-99)
        if dim % heads:
            raise ValueError(
                f"{shown}: hidden_size {dim} is no multiple of num_attention_heads {heads}"
            )
        for key in ("attention_bias", "mlp_bias"):  # :80, :82; q, k, v and o, or the MLP
            if _flag(config, key, shown, False):
                raise ValueError(
                    f"{shown}: {key}: true is not built; the workload's Llama has no biases"
                )
    # The rotary base: rope_parameters' (rope_scaling's, in older files), then the file's
    # rope_theta, then 10000 (modeling_rope_utils.py:760, 779-785, 794).
    rope = config.get("rope_parameters") or config.get("rope_scaling")
    theta = _real(config, "rope_theta", shown, 10_000.0)
    if isinstance(rope, dict) and "rope_theta" in rope:
        theta = _real(rope, "rope_theta", f"{shown}: rope_parameters")
    return {
        "kv_heads": heads if kv is None else kv,
        "ffn": _count(config, "intermediate_size", shown),
        "norm_eps": _real(config, "rms_norm_eps", shown, 1e-6),  # llama :72, mistral :72, qwen2 :69
        "rope_theta": theta,
        "tied": _flag(config, "tie_word_embeddings", shown, False),  # :78, :77, :71
        "explicit_head_dim": 0 if head_dim in (None, dim // heads) else head_dim,
        "qkv_bias": model_type == "qwen2",
        "sliding_window": _window(model_type, config, given["layers"], shown),
    }


def _window(model_type: str, config: dict[str, Any], layers: int, shown: str) -> int:
    """The sliding window the model's attention keeps (0: none). Mistral: sliding_window,
    4096 where absent, none where null (configuration_mistral.py:79). Qwen2: only with
    use_sliding_window, and only if a layer slides: those from max_window_layers on, or
    those layer_types names "sliding_attention" (configuration_qwen2.py:73-76, 83, 87-93).
    Llama has none."""
    if model_type == "mistral":
        if config.get("sliding_window", 4096) is None:
            return 0
        return _count(config, "sliding_window", shown, 4096)
    if model_type != "qwen2" or not _flag(config, "use_sliding_window", shown, False):
        return 0
    if config.get("sliding_window", 4096) is None:
        return 0
    kinds = config.get("layer_types")
    if kinds is not None:
        if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
            raise ValueError(f"{shown}: layer_types: a list of attention kinds, one per layer")
        sliding = "sliding_attention" in kinds
    else:
        sliding = _count(config, "max_window_layers", shown, 28, low=0) < layers
    return _count(config, "sliding_window", shown, 4096) if sliding else 0


def _checked(c: TransformerConfig, names: dict[str, str], shown: str) -> TransformerConfig:
    """c, where its parts fit together and the workload can build it; ValueError naming
    the field (by `names`, the file's name of each, else the shape's)."""

    def name(key: str) -> str:
        return names.get(key, key)

    if c.heads % c.kv_heads:  # each key-value head serves a whole group of query heads
        raise ValueError(
            f"{shown}: {name('kv_heads')} {c.kv_heads} does not divide "
            f"{name('heads')} {c.heads} (grouped-query attention)"
        )
    if c.family == "gpt2" and c.dim % c.heads:  # modeling_gpt2.py:84-88
        raise ValueError(
            f"{shown}: {name('dim')} {c.dim} is no multiple of {name('heads')} {c.heads}"
        )
    if c.head_dim < 1:
        raise ValueError(
            f"{shown}: {name('dim')} {c.dim} is narrower than {name('heads')} {c.heads}"
        )
    if c.family == "llama" and c.head_dim % 2:  # rotary positions turn pairs of features
        raise ValueError(
            f"{shown}: head_dim {c.head_dim}: rotary positions turn pairs of a head's "
            "features, so a head's width must be even"
        )
    if c.family == "gpt2" and (c.qkv_bias or c.rope_theta or c.sliding_window):
        raise ValueError(f"{shown}: a gpt2 layout takes no qkv_bias, rope_theta or sliding_window")
    if not c.seq_len:  # read from a file: the training sequence it leaves to the workload
        seq_len = min(c.context, c.sliding_window or c.context, DEFAULT_SEQ_LEN)
        c = replace(c, seq_len=seq_len)
    try:
        resolve_seq_len(c, 0)
    except ValueError as err:
        raise ValueError(f"{shown}: seq_len: {err}") from None
    return c


def _count(
    config: dict[str, Any], key: str, shown: str, default: Any = _MISSING, low: int = 1
) -> int:
    value = config.get(key, default)
    if value is _MISSING:
        raise ValueError(f"{shown}: {key}: missing")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{shown}: {key}: {_value(value)} is not a whole number")
    if not low <= value <= MAX_COUNT:
        raise ValueError(f"{shown}: {key}: {value} is out of range; use {low} to {MAX_COUNT}")
    return value


def _real(
    config: dict[str, Any], key: str, shown: str, default: Any = _MISSING, low: float | None = None
) -> float:
    """A positive finite number (at least `low` where given), below 1 for an epsilon."""
    value = config.get(key, default)
    if value is _MISSING:
        raise ValueError(f"{shown}: {key}: missing")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{shown}: {key}: {_value(value)} is not a number")
    number = float(value) if abs(value) < 1e300 else math.inf
    small = number >= low if low is not None else number > 0
    if not (math.isfinite(number) and small and (number < 1 or "eps" not in key)):
        bounds = "a positive number below 1" if "eps" in key else "a positive finite number"
        raise ValueError(f"{shown}: {key}: {_value(value)} is out of range; use {bounds}")
    return number


def _flag(config: dict[str, Any], key: str, shown: str, default: Any = _MISSING) -> bool:
    value = config.get(key, default)
    if not isinstance(value, bool):
        raise ValueError(f"{shown}: {key}: {_value(value)} is not true or false")
    return value


def _value(value: Any) -> str:
    text = "missing" if value is _MISSING else json.dumps(value) if _plain(value) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _plain(value: Any) -> bool:
    return isinstance(value, str | int | float | bool | type(None))


def _shown(where: str) -> str:
    """A path as one short line names it."""
    text = where if where.isprintable() else repr(where)
    return text if len(text) <= 80 else "..." + text[-77:]


def _stem(where: str) -> str:
    """The name a config's model goes by: its folder's (a file named config.json), else
    the file's less .json; in Hugging Face's cache, models--ORG--NAME/snapshots/REV/
    (huggingface.co/docs/hub/local-cache), NAME. Letters, digits, '.', '_' and '-' only."""
    path = os.path.abspath(where)
    folder, file = os.path.split(path)
    stem = file.removesuffix(".json")
    if file == "config.json":
        stem = os.path.basename(folder)
        repo = os.path.basename(os.path.dirname(os.path.dirname(folder)))
        if os.path.basename(os.path.dirname(folder)) == "snapshots" and repo.startswith("models--"):
            stem = repo.rsplit("--", 1)[-1]
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-.")[:40].strip("-.")
    return stem or "model"


def read_config(path: str) -> TransformerConfig:
    """The workload's own read of --model PATH (the harness reads it with
    hpcbench/core/files.py): a regular file, a link at its name followed (the user named
    it; Hugging Face's cache links each file), a FIFO or device never waited on
    (O_NONBLOCK, then fstat), at most MAX_CONFIG_BYTES; ValueError in one line."""
    shown = _shown(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except (OSError, ValueError) as err:
        raise ValueError(f"{shown}: {getattr(err, 'strerror', None) or err}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{shown} is not a regular file (a FIFO, socket, device or folder)")
        data = f.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise ValueError(f"{shown}: over {MAX_CONFIG_BYTES >> 20} MiB; a config.json is a few kB")
    return from_json(data, path)
