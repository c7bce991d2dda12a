"""How the transformer is laid out over its workers (bench/lm.py), applied in one place
(apply), in torchtitan's order (pytorch/torchtitan@a33d0e3673da3de5a48a573f577226bd071cb433,
torchtitan/models/llama3/infra/parallelize.py:54-158, parallelize_llama: tensor
parallelism, then activation checkpointing, then compile, then FSDP). torch's files
are cited at torch 2.15.0.

The mesh: the data-parallel dimensions outside, tensor parallelism (--tp) on the inner
one, so that a TP group is tp consecutive ranks: a node's (transformer_configs.
check_tp_workers refuses a TP that does not divide a node's workers). Rank r is data-parallel rank
r // tp and TP rank r % tp.

    fsdp2   (dp, tp)             fully_shard over dp
    hsdp    (replicas, shard, tp) fully_shard over (replicas, shard): a replica is
                                 --shard-group workers, shard = group / tp
    ddp     no mesh              DistributedDataParallel (tp 1 only: see below)

Tensor parallelism (tensor_parallel), torchtitan's plan for Llama (the same file,
apply_tp, :161-253): each block's wq, wk, wv and w1, w3 ColwiseParallel, wo and w2
RowwiseParallel with their outputs reduce-scattered over the sequence, both norms
SequenceParallel; the token table RowwiseParallel (its output sharded over the
sequence), the final norm SequenceParallel, the output projection ColwiseParallel. The
output stays sharded over the vocabulary and the loss runs under torch's loss_parallel
(torch/distributed/tensor/parallel/loss.py:31, loss_parallel), which Gloo and NCCL both
carry (its collectives are all-reduces: :197-222, :315): no worker gathers the (batch,
seq, vocab) logits. GPT-2's learned positions: RowwiseParallel too, their output sharded over the
sequence as the token table's. A tied output projection is tied again after the plan
(both are Shard(0) over the vocabulary: one parameter, as in the single worker).

DDP and TP: torch 2.15 composes them only through DistributedDataParallel(device_mesh=
a 1-D slice of a larger mesh), which calls _pre_dp_module_transform
(torch/nn/parallel/distributed.py:878-891, "a temporary work around to enable DDP +
TP"; torch/distributed/tensor/parallel/ddp.py:51-105): after every forward it wraps
each local shard in a new nn.Parameter, so from the second step on the gradients land
on tensors that neither DDP's reducer nor the optimizer holds. torchtitan refuses the
same ("DDP has not supported > 1D parallelism", parallelize.py:150-151); so does this
workload, before it starts (transformer_configs.problem): `--parallel hsdp
--shard-group <tp>` is the replicated layout with TP inside (a shard of one).

Activation checkpointing (--activation-checkpoint), each block wrapped (Checkpointed)
before FSDP shards it, so that FSDP's hooks stay outside the recomputed region:
full       torch.utils.checkpoint of the whole block: only its input is kept, its
           forward runs again in backward.
selective  the same with torchtitan's "op" policy, as its benchmarks run it (the
           8B config's "mode = 'selective'" with "selective_ac_option = 'op'"): keep
           the outputs of attention, of TP's reduce-scatters and of every other matrix
           product (the 1st, 3rd, ... of a block's forward: wq, wv, w1 and Llama's w2),
           recompute the rest (the other products, norms, activations, rotary turns,
           residual adds). pytorch/torchtitan@9dec370ad26b5f8e9a7333a0e36165018262644b,
           the benchmark's version: train_configs/llama3_8b.toml:53-55;
           torchtitan/parallelisms/parallelize_llama.py:213-223 (_save_list) and
           :250-270 (the policy, its mm count per block's forward); the same rule at
           a33d0e3, torchtitan/distributed/activation_checkpoint.py:98-124. The
           every-other-product rule is followed, not dropped, so that "selective" keeps
           what torchtitan's users mean by it and hpcbench's memory forecast
           (hpcbench/performance/memory.py, selective_bytes) can be held to torchtitan's
           published peaks; it trades one product in two for about half their bytes.
           torchtitan counts aten.mm alone, its Llama having no biases; a linear with a
           bias reaches the dispatcher as aten.addmm (GPT-2's, Qwen2's q, k and v),
           counted here as the same product. Math attention is aten.bmm and a softmax,
           neither on the list: recomputed.

Gradient accumulation (--grad-accum K): the layout's `sync(last)` around each
micro-batch reduces gradients on the last alone: DDP's no_sync
(torch/nn/parallel/distributed.py:1681-1705) on the others; FSDP2's
set_requires_gradient_sync(False) and set_is_last_backward(False) on the others, True
on the last (torch/distributed/fsdp/_fully_shard/_fully_shard.py:597-632 and 445-453:
"Before gradient clipping or an optimizer step, enable the required reductions and
call set_is_last_backward(True) for the final backward"). FSDP2 still gathers each
block's parameters in every micro-batch's forward and backward.

Runs on the nodes: never imports hpcbench.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import nn
from transformer import Transformer


@dataclass(frozen=True)
class Layout:
    """Where each worker sits: `group` workers hold one copy of the model between them
    (transformer_configs.shard_group; at least tp), `tp` of them one TP group."""

    parallel: str  # ddp, fsdp2, hsdp
    workers: int
    group: int
    tp: int = 1
    wrapped: bool = True  # False: one worker, trained without DP (train.py)

    @property
    def dp(self) -> int:
        """Data-parallel ranks: each a different batch."""
        return self.workers // self.tp

    @property
    def sharded(self) -> bool:
        return self.wrapped and self.parallel != "ddp"

    def shape(self) -> tuple[list[int], tuple[str, ...]] | None:
        """The device mesh's shape and dimension names; None where there is none."""
        if not self.wrapped or self.parallel == "ddp":  # DDP with TP: refused (module text)
            return None
        shape: list[int] = [self.dp]
        names: tuple[str, ...] = ("shard",)
        if self.parallel == "hsdp":
            shape, names = (
                [self.workers // self.group, self.group // self.tp],
                ("replicate", "shard"),
            )
        if self.tp > 1:
            return [*shape, self.tp], (*names, "tp")
        return shape, names

    def dp_rank(self, rank: int) -> int:
        return rank // self.tp

    def tp_rank(self, rank: int) -> int:
        return rank % self.tp

    def positions(self, seq_len: int, rank: int) -> slice:
        """The positions of a sequence this rank's TP part covers (sequence parallelism's
        Shard(1): seq_len / tp of them, transformer_configs.problem checks it divides)."""
        part = seq_len // self.tp
        first = self.tp_rank(rank) * part
        return slice(first, first + part)

    def copy_key(self, rank: int) -> int:
        """Ranks with the same key hold the same bytes (DDP: all; FSDP2: none alike;
        HSDP: a shard's copies across the replicas)."""
        return rank % self.group if self.sharded else self.tp_rank(rank)


@dataclass
class Applied:
    """The module as trained and the contexts a step runs it in."""

    forward: Any  # DDP around the module, or the module itself (sharded in place)
    sync: Callable[[bool], contextlib.AbstractContextManager[Any]]  # around a micro-batch
    loss_scope: Callable[[], contextlib.AbstractContextManager[Any]]  # forward to backward
    mesh_shape: list[int] | None  # the device mesh's, None without one
    tp_local_params: int  # parameters of one TP rank's part (all of them without TP)


def apply(
    model: Transformer,
    layout: Layout,
    device: torch.device,
    bf16: bool,
    checkpoint: str = "none",
    compile_backend: str | None = None,
    bucket_cap_mb: float | None = None,
) -> Applied:
    """The whole layout: mesh, TP, activation checkpointing, compile, then FSDP2/HSDP or
    DDP (only what `layout` asks: one worker gets checkpointing and compile alone)."""
    mesh = None
    dims = layout.shape()
    if dims is not None:
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh(device.type, tuple(dims[0]), mesh_dim_names=dims[1])
    loss_scope: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext
    if mesh is not None and layout.tp > 1:
        from torch.distributed.tensor.parallel import loss_parallel

        tensor_parallel(model, mesh["tp"])
        loss_scope = loss_parallel
    tp_local = sum(local(p).numel() for p in model.parameters())
    if checkpoint != "none":
        for i, block in enumerate(model.layers):
            model.layers[i] = Checkpointed(block, checkpoint)
    if compile_backend is not None:  # each block, before FSDP (as torchtitan compiles)
        for i, block in enumerate(model.layers):
            model.layers[i] = cast(nn.Module, torch.compile(block, backend=compile_backend))
    shape = None if dims is None else dims[0]
    if not layout.wrapped:
        return Applied(model, unsynced, loss_scope, shape, tp_local)
    if layout.parallel == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        ddp = DDP(
            model,
            device_ids=[device.index] if device.type == "cuda" else None,
            bucket_cap_mb=bucket_cap_mb,
            gradient_as_bucket_view=True,
        )

        def ddp_sync(last: bool) -> contextlib.AbstractContextManager[Any]:
            return contextlib.nullcontext() if last else ddp.no_sync()

        return Applied(ddp, ddp_sync, loss_scope, shape, tp_local)
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    assert mesh is not None, "FSDP2 without a mesh"
    dp_mesh = mesh["shard"] if layout.parallel == "fsdp2" else mesh["replicate", "shard"]
    policy = MixedPrecisionPolicy()  # the parameters' own dtype: fp32
    if bf16:
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.layers:
        fully_shard(block, mesh=dp_mesh, mp_policy=policy, reshard_after_forward=True)
    # The root: what the blocks leave (the token table, which is the output projection
    # where tied, the position table, the final norm).
    fully_shard(model, mesh=dp_mesh, mp_policy=policy)
    return Applied(model, fsdp_sync(model), loss_scope, shape, tp_local)


def unsynced(last: bool) -> contextlib.AbstractContextManager[Any]:
    """One worker: nothing to reduce."""
    return contextlib.nullcontext()


def fsdp_sync(model: Any) -> Callable[[bool], contextlib.AbstractContextManager[Any]]:
    @contextlib.contextmanager
    def sync(last: bool) -> Iterator[None]:
        model.set_requires_gradient_sync(last)
        model.set_is_last_backward(last)
        yield

    return sync


def tensor_parallel(model: Transformer, tp_mesh: Any) -> None:
    """torchtitan's plan (the module's text) on the blocks and the root, in place."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    sequence = Shard(1)  # activations (batch, seq, dim) between the blocks
    root: dict[str, Any] = {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=sequence),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(
            input_layouts=sequence, output_layouts=Shard(-1), use_local_output=False
        ),
    }
    if getattr(model, "pos_embeddings", None) is not None:  # (seq, dim): seq is dim 0
        root["pos_embeddings"] = RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(0))
    parallelize_module(model, tp_mesh, root)
    for block in model.layers:
        plan: dict[str, Any] = {
            "attention_norm": SequenceParallel(),
            "attention": PrepareModuleInput(
                input_layouts=(sequence, None), desired_input_layouts=(Replicate(), None)
            ),
            "attention.wq": ColwiseParallel(),
            "attention.wk": ColwiseParallel(),
            "attention.wv": ColwiseParallel(),
            "attention.wo": RowwiseParallel(output_layouts=sequence),
            "mlp_norm": SequenceParallel(),
            "mlp": PrepareModuleInput(
                input_layouts=(sequence,), desired_input_layouts=(Replicate(),)
            ),
            "mlp.w1": ColwiseParallel(),
            "mlp.w2": RowwiseParallel(output_layouts=sequence),
        }
        if getattr(block.mlp, "w3", None) is not None:  # SwiGLU's gate
            plan["mlp.w3"] = ColwiseParallel()
        parallelize_module(block, tp_mesh, plan)
    if model.config.tied:  # the plan gave the output its own copy of the table
        model.output.weight = model.tok_embeddings.weight
    model.register_forward_hook(scored_positions)


def scored_positions(module: nn.Module, inputs: Any, logits: Any) -> Any:
    """In evaluation (bench/mllog.py), logits sharded over the vocabulary become this TP
    rank's positions over the whole vocabulary (Layout.positions): an argmax per token,
    each token scored by one worker of its group. Training keeps them for loss_parallel."""
    if module.training:
        return logits
    from torch.distributed.tensor import Shard

    return logits.redistribute(placements=[Shard(1)]).to_local()


# ------------------------------------------------------------------ checkpointing
def saved_ops() -> set[Any]:
    """What selective checkpointing keeps: the outputs of attention, TP's reduce-scatters
    and the matrix products (every other one: selective_context) (torchtitan's list, the
    module's text, less its low-precision and flex-attention entries)."""
    aten = torch.ops.aten
    return {
        *products(),
        aten._scaled_dot_product_efficient_attention.default,
        aten._scaled_dot_product_flash_attention.default,
        aten._scaled_dot_product_flash_attention_for_cpu.default,
        aten._scaled_dot_product_cudnn_attention.default,
        aten._scaled_dot_product_fused_attention_overrideable.default,
        torch.ops._c10d_functional.reduce_scatter_tensor.default,
    }


def products() -> set[Any]:
    """A linear's matrix product as the dispatcher sees it: aten.mm, aten.addmm with a
    bias (F.linear on a 3-D input, after a view)."""
    return {torch.ops.aten.mm.default, torch.ops.aten.addmm.default}


def selective_context() -> tuple[Any, Any]:
    """One block's forward: MUST_SAVE for the saved ops but every second matrix product,
    PREFER_RECOMPUTE for the rest (torch/utils/checkpoint.py:1737,
    create_selective_checkpoint_contexts). A count per pass, as torchtitan's: torch
    before 2.15 calls the policy in recomputation too, 2.15 in forward alone."""
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    saved, matmuls = saved_ops(), products()
    count = {False: 0, True: 0}  # products seen, by ctx.is_recompute

    def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
        if func in matmuls:
            count[ctx.is_recompute] += 1
            if count[ctx.is_recompute] % 2 == 0:
                return CheckpointPolicy.PREFER_RECOMPUTE
        return CheckpointPolicy.MUST_SAVE if func in saved else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


class Checkpointed(nn.Module):
    """A block whose forward runs again in backward (full), or whose cheap ops do
    (selective): torch.utils.checkpoint, non-reentrant."""

    def __init__(self, block: nn.Module, mode: str) -> None:
        super().__init__()
        self.block, self.mode = block, mode

    def forward(self, x: torch.Tensor, rope: Any) -> torch.Tensor:
        from torch.utils.checkpoint import checkpoint, noop_context_fn

        context = selective_context if self.mode == "selective" else noop_context_fn
        return checkpoint(self.block, x, rope, use_reentrant=False, context_fn=context)


# ------------------------------------------------------------------ memory
def local(t: torch.Tensor) -> torch.Tensor:
    """What this rank holds of a tensor: its shard of a DTensor, else the tensor."""
    from torch.distributed.tensor import DTensor

    return t.to_local() if isinstance(t, DTensor) else t


def nbytes(t: torch.Tensor) -> int:
    mine = local(t)
    return mine.numel() * mine.element_size()


def model_state_bytes(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """The bytes of the parameters, gradients and optimizer state this rank holds, summed
    from its shards (a tied table once). Call between steps with FSDP's parameters
    resharded (reshard)."""
    params = list(model.parameters())
    return {
        "params": sum(nbytes(p) for p in params),
        "grads": sum(nbytes(p.grad) for p in params if p.grad is not None),
        "optimizer": sum(
            nbytes(v)
            for state in optimizer.state.values()
            for v in state.values()
            if torch.is_tensor(v)
        ),
    }


def reshard(model: nn.Module) -> None:
    """Every FSDP unit's parameters back to their shards (the root is not resharded after
    a forward, e.g. the evaluation's)."""
    from torch.distributed.fsdp import FSDPModule

    for m in model.modules():
        if isinstance(m, FSDPModule):
            m.reshard()
