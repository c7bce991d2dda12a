"""Peak memory per GPU of a transformer's training step, forecast from its shape and its
layout (docs/method.md, "Memory per GPU"): each term in bytes, with the formula's source
and the phases of the step that hold it; the total (the fullest phase); whether that fits
an accelerator's memory beside the allocator's headroom; and the smallest layout that
would. Pure arithmetic: no I/O, no torch.

The step has four phases whose held memory differs; the total is the largest:

    loss backward        the loss's fp32 tensors made, every block's activations still
                         kept, the head's saves, the root gathered
    first block backward the last block's backward, the first of backward: the loss's
                         tensors and the head's saves freed, that block's activations
                         (recomputed under checkpointing) beside the others' kept ones,
                         the root's gradients, two blocks gathered and one block's
                         gradients in flight
    root reduce-scatter  FSDP2's last collective of backward, the activations freed
    optimizer step       AdamW's update, with its temporary

Inside a phase each term is counted at its largest, so a phase's sum errs high. Where a
code path could not be pinned, the larger count is kept (RMSNorm below): the forecast
errs high, never low.

The layout is the workload's (bench/lm.py, bench/transformer.py, bench/layout.py): FSDP2
over each block and the root, Megatron-style tensor parallelism with sequence
parallelism inside a node (torchtitan's plan for Llama), AdamW, and torchtitan's
activation checkpointing (full, or its "op" selective policy).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from hpcbench.core.bench import transformer_configs, workload_options
from hpcbench.core.errors import UsageError
from hpcbench.performance import sharded_model
from hpcbench.performance.sharded_model import DTYPE_BYTES

CHECKPOINT = ("none", "selective", "full")  # least recompute first
COMPUTE_DTYPES = ("bf16", "fp32")
STATE_DTYPES = ("bf16", "fp32")
ATTENTION = ("sdpa", "math")

LOSS_BACKWARD = "loss backward"
BLOCK_BACKWARD = "first block backward"
ROOT_REDUCE = "root reduce-scatter"
OPTIMIZER = "optimizer step"
PHASES = (LOSS_BACKWARD, BLOCK_BACKWARD, ROOT_REDUCE, OPTIMIZER)

PARAMETERS = "parameters"
GRADIENTS = "gradients"
OPTIMIZER_STATES = "optimizer states"
MODEL_STATES = (PARAMETERS, GRADIENTS, OPTIMIZER_STATES)
ACTIVATIONS = "activations"

# The step's loss and its backward in fp32: log_softmax saves its result, and the
# backward makes nll_loss's gradient and log_softmax's, each of the logits' size
# (pytorch/pytorch tools/autograd/derivatives.yaml, `_log_softmax`: its backward takes
# `result`), all alive at once: 3 x 4 bytes per logit, measured with torch 2.15 on CPU for
# fp32 and bf16 logits alike (the autograd graph is the device's own either way).
# Korthikanti et al. 2022 count the first alone (4 s b v / t).
LOSS_FP32_TENSORS = 3
# Under TP the loss runs in torch's loss_parallel, whose nll_loss backward does
# log_softmax's too, as `(grad_input + torch.exp(x)) * grad_output`
# (torch/distributed/tensor/parallel/loss.py:451-518, torch 2.15): log_softmax's saved
# result, the zeroed grad_input, their sum and the product are alive at once, four.
LOSS_PARALLEL_FP32_TENSORS = 4
FP32 = 4

# The allocator's headroom. GMLake (Guo et al., ASPLOS 2024, arXiv:2401.08156, abstract)
# removed 15% fragmentation on average (up to 33%) from PyTorch's caching allocator over
# eight LLMs on A100-80GB: that share of reserved memory is not usable by tensors.
FRAGMENTATION = 0.15
# The CUDA context before any tensor: 723 MiB and ~800 MB in two reports on the PyTorch
# forum, "~700+MB" depending on the CUDA version and device in the answer
# (discuss.pytorch.org/t/73021, /t/81330); the larger, 800 MB.
CUDA_CONTEXT = 800 * 10**6
FSDP2 = "torch/distributed/fsdp/_fully_shard/"  # torch 2.15's, where FSDP2's sources cite it


@dataclass(frozen=True)
class Layout:
    """How the step runs. dp: the data-parallel group's ranks, each a tensor-parallel
    group of tp GPUs: the step takes dp x tp GPUs. shard_group: HSDP's ranks that shard
    one copy. defer_reduction: gradient accumulation without reduce-scatter until the
    last micro-batch (FSDP2's set_requires_gradient_sync(False)); torchtitan
    reduce-scatters every micro-batch instead (pytorch/torchtitan#292, #1710), which
    costs no memory. attention: torch's scaled_dot_product_attention (the workload's), or
    the scores' softmax computed in full ("math"). dropout: the block's dropout masks
    (the workload has none). bucket_view: DDP's gradients are views of its buckets (the
    workload's, bench/lm.py). The dtypes: compute (parameters gathered, activations),
    master (parameters and their gradients), optimizer (AdamW's moments), reduce
    (FSDP2's reduce-scatter: MixedPrecisionPolicy.reduce_dtype)."""

    parallel: str = "ddp"
    dp: int = 1
    shard_group: int = 0
    tp: int = 1
    grad_accum: int = 1
    defer_reduction: bool = False
    checkpoint: str = "none"
    compute_dtype: str = "bf16"
    master_dtype: str = "fp32"
    optimizer_dtype: str = "fp32"
    reduce_dtype: str = "fp32"
    attention: str = "sdpa"
    dropout: bool = False
    bucket_view: bool = True

    @property
    def gpus(self) -> int:
        return self.dp * self.tp

    @property
    def shards(self) -> int:
        """The ranks the model states are sharded over, besides tensor parallelism."""
        return {"ddp": 1, "fsdp2": self.dp, "hsdp": self.shard_group}[self.parallel]


@dataclass(frozen=True)
class Term:
    name: str
    bytes: int
    phases: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class Breakdown:
    terms: tuple[Term, ...]

    def phase(self, name: str) -> int:
        return sum(t.bytes for t in self.terms if name in t.phases)

    @property
    def peak_phase(self) -> str:
        return max(PHASES, key=self.phase)

    @property
    def total(self) -> int:
        return self.phase(self.peak_phase)

    def bytes_of(self, name: str) -> int:
        return sum(t.bytes for t in self.terms if t.name == name)


# ------------------------------------------------------------------ input
def check(config: Any, seq_len: int, micro_batch: int, layout: Layout) -> None:
    """One line (UsageError) naming the first value to fix."""
    for key, value, allowed in (
        ("parallel", layout.parallel, workload_options.PARALLEL),
        ("activation checkpoint", layout.checkpoint, CHECKPOINT),
        ("compute dtype", layout.compute_dtype, COMPUTE_DTYPES),
        ("master dtype", layout.master_dtype, STATE_DTYPES),
        ("optimizer dtype", layout.optimizer_dtype, STATE_DTYPES),
        ("reduce dtype", layout.reduce_dtype, STATE_DTYPES),
        ("attention", layout.attention, ATTENTION),
    ):
        if value not in allowed:
            raise UsageError(f"{key} {value!r}: choose one of {', '.join(allowed)}")
    for key, count in (
        ("sequence length", seq_len),
        ("micro-batch", micro_batch),
        ("data-parallel GPUs", layout.dp),
        ("tp", layout.tp),
        ("grad_accum", layout.grad_accum),
    ):
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise UsageError(f"{key} {count!r}: give a whole number from 1")
    if layout.parallel == "hsdp" and (layout.shard_group < 1 or layout.dp % layout.shard_group):
        raise UsageError(
            f"shard group {layout.shard_group}: HSDP's shard group must divide the "
            f"{layout.dp} data-parallel GPUs"
        )
    why = transformer_configs.tp_split_problem(config, layout.tp, seq_len)
    if why:
        raise UsageError(why)


# ------------------------------------------------------------------ activations
def _block_elements(config: Any) -> float:
    """Values of the compute dtype one block saves for backward per token, in units of
    the hidden size h (Korthikanti et al. 2022, section 4.1, counted part by part):
    attention keeps the QKV projection's input, Q, K and V (K and V kv_heads/heads of
    h), and the output, which is the out-projection's input (torch's fused attention
    saves q, k, v and its output); GPT-2's MLP keeps its input, the GELU's input and the
    second linear's input (1 + 2 f/h: 9 at f = 4h, the paper's); SwiGLU keeps its input,
    w1's output (SiLU's input), SiLU's output, w3's output and their product (1 + 4 f/h).
    tests/unit/test_memory.py checks the count against what autograd saves for
    bench/transformer.py's blocks."""
    kv = config.kv_heads / config.heads
    attention = 3 + 2 * kv
    wide = config.ffn / config.dim
    mlp = 1 + (4 if config.family == "llama" else 2) * wide
    return attention + mlp


def _norm_bytes(config: Any, e: int) -> int:
    """Bytes per element a norm saves: LayerNorm its input (native_layer_norm), as the
    paper counts; RMSNorm, as torch 2.15 runs it on CPU (composite), the input upcast to
    fp32 and the fp32 normalized value. CUDA may run the fused kernel, which saves the
    input alone (aten::_fused_rms_norm_backward takes input and rstd): the larger count
    is kept."""
    return 2 * FP32 if config.family == "llama" else e


def _scores_per_block(config: Any, seq_len: int, micro_batch: int, layout: Layout) -> float:
    """The attention scores' term where they are materialised (`math`): the softmax's
    output, and with dropout its mask (1 byte) and output: 5 a s^2 b in 16-bit, the
    paper's. torch's scaled_dot_product_attention, as bench/transformer.py calls it,
    keeps none: on CUDA it runs flash attention (bf16, sm80 and later; cuDNN's first on
    sm90/sm100 with cuDNN above 9.15) or the memory-efficient kernel (fp32), both
    supporting grouped-query attention (pytorch/pytorch@001f694a
    aten/src/ATen/native/transformers/cuda/sdp_utils.cpp, select_sdp_backend,
    can_use_flash_attention, can_use_mem_efficient_attention); on CPU torch 2.15 picks
    its flash kernel for fp32 and bf16 (torch._fused_sdp_choice, checked in
    tests/unit/test_memory.py)."""
    if layout.attention != "math":
        return 0.0
    e = DTYPE_BYTES[layout.compute_dtype]
    per_score = e + (e + 1 if layout.dropout else 0)
    return config.heads * seq_len * seq_len * micro_batch * per_score / layout.tp


def block_bytes(config: Any, seq_len: int, micro_batch: int, layout: Layout) -> float:
    """One block's saved activations without its scores: s b h / t x (e x its values +
    its two norms' bytes + its dropout masks), over t with tensor and sequence
    parallelism. For GPT-3's block in 16-bit (a 4h GELU MLP, dropout) that is 34 s b h / t,
    Korthikanti et al. 2022's table 2. A fp32 compute dtype (e = 4) doubles the values;
    the masks stay one byte each, RMSNorm's saves stay fp32."""
    e = DTYPE_BYTES[layout.compute_dtype]
    masks = 2 if layout.dropout else 0  # after attention and after the MLP, 1 byte each
    per_token = e * _block_elements(config) + 2 * _norm_bytes(config, e) + masks
    return seq_len * micro_batch * config.dim * per_token / layout.tp


def input_bytes(config: Any, seq_len: int, micro_batch: int, layout: Layout) -> float:
    """A block's input, s b h e / t (sequence parallel between the blocks): what
    torch.utils.checkpoint keeps of a checkpointed block to run it again."""
    e = DTYPE_BYTES[layout.compute_dtype]
    return seq_len * micro_batch * config.dim * e / layout.tp


def selective_bytes(config: Any, seq_len: int, micro_batch: int, layout: Layout) -> float:
    """What torchtitan's "op" selective checkpointing keeps of one block from its forward
    to its backward (bench/layout.py, selective_context; torchtitan at 9dec370,
    torchtitan/parallelisms/parallelize_llama.py:213-223, _save_list, and :250-270, its
    policy): the block's input; the output of every other matrix product, the first,
    third, ... (a count per block's forward, the even ones recomputed): a column-parallel
    one's over t, a row-parallel one's the whole partial sum (b, s, h) before its
    reduce-scatter; fused attention's outputs as the kernel returns them, its output (q
    wide) and its fp32 logsumexp (heads values per token; flash, memory-efficient and
    cuDNN kernels alike); and under TP the outputs of the block's two reduce-scatters.
    Math attention is matrix products that are not on the list (aten.bmm) and a
    softmax: none of it is kept. tests/unit/test_memory.py checks the count against what
    a checkpointed bench/transformer.py block holds after its forward."""
    e = DTYPE_BYTES[layout.compute_dtype]
    t = layout.tp
    tokens = seq_len * micro_batch
    products = transformer_configs.block_products(config)[::2]
    kept = [w if rowwise else w / t for _, w, rowwise in products]
    per_token = e * sum(kept)
    if layout.attention != "math":
        per_token += (e * config.heads * config.head_dim + FP32 * config.heads) / t
    if t > 1:  # wo's and w2's outputs reduce-scattered over the sequence
        per_token += 2 * e * config.dim / t
    return input_bytes(config, seq_len, micro_batch, layout) + tokens * per_token


def kept_bytes(config: Any, seq_len: int, micro_batch: int, layout: Layout) -> float:
    """What one block keeps from its forward to its backward under the layout's
    checkpointing: none, every saved activation; selective, selective_bytes; full, its
    input."""
    if layout.checkpoint == "none":
        block = block_bytes(config, seq_len, micro_batch, layout)
        return block + _scores_per_block(config, seq_len, micro_batch, layout)
    if layout.checkpoint == "selective":
        return selective_bytes(config, seq_len, micro_batch, layout)
    return input_bytes(config, seq_len, micro_batch, layout)


def kept_activation_bytes(config: Any, seq_len: int, micro_batch: int, layout: Layout) -> float:
    """Every block's kept activations, as the loss's backward finds them."""
    return config.layers * kept_bytes(config, seq_len, micro_batch, layout)


def activation_bytes(config: Any, seq_len: int, micro_batch: int, layout: Layout) -> float:
    """The activations in the first block's backward (the last block's): without
    checkpointing every block's saves; with it, the others' kept activations beside that
    block's input and its saves, recomputed (a selective block's kept outputs are handed
    to its recomputation, torch/utils/checkpoint.py:1687-1735, _CachedTorchDispatchMode,
    and held no longer than its own saves). For full checkpointing that is
    Korthikanti et al. 2022's L s b h e / t and one block's activations."""
    kept = kept_bytes(config, seq_len, micro_batch, layout)
    if layout.checkpoint == "none":
        return config.layers * kept
    block = block_bytes(config, seq_len, micro_batch, layout)
    recomputed = block + _scores_per_block(config, seq_len, micro_batch, layout)
    return (
        (config.layers - 1) * kept + input_bytes(config, seq_len, micro_batch, layout) + recomputed
    )


def head_bytes(config: Any, seq_len: int, micro_batch: int, layout: Layout) -> float:
    """The final norm's saves (over t: sequence parallel) and the output projection's
    input, gathered to the whole sequence for the column-parallel output (torchtitan's
    plan: norm SequenceParallel, output ColwiseParallel from Shard(1))."""
    e = DTYPE_BYTES[layout.compute_dtype]
    tokens = seq_len * micro_batch * config.dim
    return tokens * _norm_bytes(config, e) / layout.tp + tokens * e


def loss_bytes(config: Any, seq_len: int, micro_batch: int, layout: Layout) -> float:
    """The logits' fp32 tensors of the loss's backward (LOSS_FP32_TENSORS, under TP's
    loss parallel LOSS_PARALLEL_FP32_TENSORS), each of s b v / t: the output
    column-parallel with loss parallel, as torchtitan's plan runs it, so each rank holds
    its part of the vocabulary."""
    tensors = LOSS_PARALLEL_FP32_TENSORS if layout.tp > 1 else LOSS_FP32_TENSORS
    return tensors * FP32 * seq_len * micro_batch * config.vocab / layout.tp


# ------------------------------------------------------------------ the breakdown
def breakdown(config: Any, seq_len: int, micro_batch: int, layout: Layout) -> Breakdown:
    """Bytes per GPU of one training step, term by term (the module's text)."""
    check(config, seq_len, micro_batch, layout)
    blocks, root = sharded_model.units(config, seq_len)
    total = sum(u.params for u in (*blocks, root))
    per_tp = math.ceil(total / layout.tp)  # TP shards every weight; its norms are counted so too
    shard = math.ceil(per_tp / layout.shards)
    block = math.ceil(blocks[0].params / layout.tp)
    head = math.ceil(root.params / layout.tp)
    c = DTYPE_BYTES[layout.compute_dtype]
    master = DTYPE_BYTES[layout.master_dtype]
    moments = DTYPE_BYTES[layout.optimizer_dtype]
    reduce = DTYPE_BYTES[layout.reduce_dtype]
    every = PHASES
    zero = "ZeRO (Rajbhandari et al. 2020, arXiv:1910.02054): 16 bytes per parameter"
    terms = [
        Term(PARAMETERS, shard * master, every, f"{zero}; the master weights' shard"),
        Term(GRADIENTS, shard * master, every, f"{zero}; a gradient in its parameter's dtype"),
        Term(OPTIMIZER_STATES, 2 * shard * moments, every, f"{zero}; AdamW's two moments"),
        Term(
            "optimizer temporary",
            shard * moments,
            (OPTIMIZER,),
            "torch/optim/adam.py:763,791 (2.15): foreach AdamW takes the square root of "
            "the second moments into new tensors",
        ),
    ]
    terms += _working_copies(layout, per_tp, block, head, c, master, reduce, len(blocks))
    sb = (config, seq_len, micro_batch, layout)
    korthikanti = (
        "Korthikanti et al. 2022 (arXiv:2205.05198), table 2, counted part by part for "
        f"this block; checkpointing {layout.checkpoint}"
    )
    terms += [
        Term(
            "kept activations",
            math.ceil(kept_activation_bytes(*sb)),
            (LOSS_BACKWARD,),
            f"{korthikanti}: what each block keeps from its forward to its backward",
        ),
        Term(
            ACTIVATIONS,
            math.ceil(activation_bytes(*sb)),
            (BLOCK_BACKWARD,),
            f"{korthikanti}: the other blocks' kept activations and the last block's "
            "saves (recomputed under checkpointing)",
        ),
        Term(
            "final norm and output projection input",
            math.ceil(head_bytes(*sb)),
            (LOSS_BACKWARD,),
            "the final norm's saves and the output projection's input, freed by their "
            "backward, before any block's",
        ),
        Term(
            "logits and loss",
            math.ceil(loss_bytes(*sb)),
            (LOSS_BACKWARD,),
            "3 fp32 tensors of s b v / t in the loss's backward, 4 under loss parallel "
            "(tp > 1): log_softmax's result and the gradients (Korthikanti et al. 2022 "
            "count the first), freed before the output projection's backward",
        ),
    ]
    return Breakdown(tuple(terms))


def _working_copies(
    layout: Layout, per_tp: int, block: int, head: int, c: int, master: int, reduce: int, n: int
) -> list[Term]:
    """What the data-parallel mode holds beside the model states: DDP's compute copies
    and buckets; FSDP2's gathered parameters and gradients in flight."""
    if layout.parallel == "ddp":
        copy = per_tp * c if layout.compute_dtype != layout.master_dtype else 0
        buckets = 0 if layout.bucket_view else per_tp * master
        return [
            Term(
                "compute copy",
                copy,
                (LOSS_BACKWARD, BLOCK_BACKWARD),
                "bf16 autocast casts each weight once per forward (its weight cache, "
                "torch/amp/autocast_mode.py:218) and each linear saves the cast for backward",
            ),
            Term(
                "DDP buckets",
                buckets,
                PHASES,
                "DistributedDataParallel, gradient_as_bucket_view: the gradients are views "
                "of the buckets, else the buckets are one more copy of them "
                "(torch/nn/parallel/distributed.py:730-734)",
            ),
        ]
    in_flight = min(2, n)
    backward = (LOSS_BACKWARD, BLOCK_BACKWARD)
    terms = [
        Term(
            "gathered root",
            head * c,
            (*backward, ROOT_REDUCE),
            f"FSDP2: the root stays gathered from forward to the end of backward "
            f"({FSDP2}_fsdp_state.py:222-226)",
        ),
        Term(
            "gathered blocks",
            in_flight * block * c,
            (BLOCK_BACKWARD, ROOT_REDUCE),
            f"FSDP2: with one layer of prefetch two blocks are gathered at once, the one "
            f"computing and the next (_fully_shard.py:716; a block is resharded before "
            f"its gradients are reduced, _fsdp_param_group.py:726-727); none in the "
            f"loss's backward: every block is resharded after its forward "
            f"(bench/layout.py) and the last one is gathered again by the root's "
            f"pre-backward hook, a hook on the root's output that runs once the loss's "
            f"backward has made its gradient ({FSDP2}_fsdp_state.py:407-420, 581-599)",
        ),
        Term(
            "root's gradients",
            head * c,
            (BLOCK_BACKWARD, ROOT_REDUCE),
            f"FSDP2: the root's unsharded gradients, made by the output projection's "
            f"backward and reduce-scattered at backward's end, by the root's final "
            f"callback (its input, the tokens, needs no gradient: "
            f"{FSDP2}_fsdp_state.py:422-450)",
        ),
        Term(
            "block's gradients in flight",
            block * (c + reduce),
            (BLOCK_BACKWARD,),
            f"FSDP2: a block's unsharded gradients and one reduce-scatter input in the "
            f"reduce dtype ({FSDP2}_fsdp_collectives.py:659-668; one input buffer by "
            f"default, _fully_shard.py:918)",
        ),
        Term(
            "root's reduce-scatter input",
            head * reduce,
            (ROOT_REDUCE,),
            "FSDP2: the root's gradients copied into the reduce dtype for its reduce-scatter",
        ),
    ]
    if layout.defer_reduction and layout.grad_accum > 1:
        terms.append(
            Term(
                "accumulated gradients",
                per_tp * reduce,
                (*backward, ROOT_REDUCE),
                f"FSDP2 set_requires_gradient_sync(False): unsharded gradients accumulate "
                f"in the reduce dtype until the last micro-batch ({FSDP2}_fully_shard.py:606)",
            )
        )
    return terms


# ------------------------------------------------------------------ fit
@dataclass(frozen=True)
class Fit:
    fits: bool
    need: int
    usable: int
    memory: int


def usable_bytes(memory: int) -> int:
    """What tensors can hold of a GPU's memory: less the CUDA context, less the
    allocator's fragmentation of the rest (FRAGMENTATION, CUDA_CONTEXT)."""
    return max(0, math.floor((memory - CUDA_CONTEXT) * (1 - FRAGMENTATION)))


def fit(total: int, memory: int) -> Fit:
    usable = usable_bytes(memory)
    return Fit(total <= usable, total, usable, memory)


def _candidates(layout: Layout, max_gpus: int, per_node: int) -> Iterator[Layout]:
    """Layouts over more GPUs (up to a node, then whole nodes), each GPU count's in the
    order of least recompute, the asked parallelism before FSDP2, less TP."""
    counts = [n for n in range(layout.gpus, max_gpus + 1) if n <= per_node or n % per_node == 0]
    modes = list(dict.fromkeys((layout.parallel, "fsdp2")))
    for gpus in counts:
        for checkpoint in CHECKPOINT:
            for parallel in modes:
                for tp in range(1, min(per_node, gpus) + 1):
                    # No TP under DDP: torch 2.15 composes the two only through a stated
                    # work-around (torch/nn/parallel/distributed.py:878-891).
                    if gpus % tp or (parallel == "ddp" and tp > 1):
                        continue
                    dp = gpus // tp
                    if parallel == "hsdp" and dp % max(layout.shard_group, 1):
                        continue
                    yield replace(layout, parallel=parallel, dp=dp, tp=tp, checkpoint=checkpoint)


def smallest_layout(
    config: Any,
    seq_len: int,
    micro_batch: int,
    layout: Layout,
    memory: int,
    max_gpus: int,
    per_node: int,
) -> Layout | None:
    """The first layout that fits: fewest GPUs (from the layout's own), then least
    recompute, then the asked parallelism, then the least TP; tp stays inside a node of
    per_node GPUs. None where nothing up to max_gpus fits."""
    check(config, seq_len, micro_batch, layout)
    for candidate in _candidates(layout, max_gpus, per_node):
        if transformer_configs.tp_split_problem(config, candidate.tp, seq_len):
            continue
        if fit(breakdown(config, seq_len, micro_batch, candidate).total, memory).fits:
            return candidate
    return None


def changes(base: Layout, found: Layout) -> str:
    """The options to change, as they are spelt: "--tp 4 --activation-checkpoint full"
    (the GPU count aside)."""
    words = []
    if found.parallel != base.parallel:
        words.append(f"--parallel {found.parallel}")
    if found.tp != base.tp:
        words.append(f"--tp {found.tp}")
    if found.checkpoint != base.checkpoint:
        words.append(f"--activation-checkpoint {found.checkpoint}")
    return " ".join(words)


def verdict(total: int, memory: int, base: Layout, found: Layout | None, max_gpus: int) -> str:
    """One line: fits, or does not and what would."""
    where = f"{memory / 1e9:.0f} GB"
    if fit(total, memory).fits:
        return f"fits in {where} ({total / 1e9:.1f} GB forecast)"
    if found is None:
        return f"does not fit in {where}; no layout up to {max_gpus} GPUs does"
    options = changes(base, found)
    how = " ".join(
        part
        for part in (
            f"with {options}" if options else "",
            f"on {found.gpus} GPUs" if found.gpus != base.gpus else "",
        )
        if part
    )
    return f"does not fit in {where}; fits {how}"
