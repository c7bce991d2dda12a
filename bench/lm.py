"""The transformers' path through train.py: the model of bench/transformer.py laid out
by bench/layout.py (DDP, FSDP2 or HSDP, tensor parallelism inside a node, activation
checkpointing), its tokens, its steps of --grad-accum micro-batches, and its figures
(tokens/s, MFU, the memory it held).

Parallelism (--parallel), with --tp workers of a node in one tensor-parallel group
(bench/layout.py says how each is applied):
ddp    DistributedDataParallel: gradients all-reduced in buckets during backward.
fsdp2  torch.distributed.fsdp.fully_shard on each block, then on the root (token
       table = output projection, final norm), over the data-parallel ranks,
       parameters resharded after forward: each block's parameters are all-gathered
       in forward and again in backward, its gradients reduce-scattered.
hsdp   the same over (replicate, shard): a block is sharded inside a group of
       --shard-group workers (default: a node's) and its shards all-reduced across
       the groups.
On CUDA in bf16: FSDP2's MixedPrecisionPolicy (bf16 parameters, fp32 gradient
reduction); DDP and the single worker under bf16 autocast. On CPU: fp32. One
worker trains the module unwrapped, as the CNNs do (train.py). The record names
what the backend ran for each collective (runtime.collective_paths: Gloo carries
out reduce_scatter_tensor as an all-reduce) and counts the collectives of one
step run under the profiler (collectives_per_step).

Tokens: synthetic (random ids, --grad-accum micro-batches per data-parallel rank
made once, as the CNNs' synthetic images), or a token file (bench/tokens.py), each
data-parallel rank reading its own consecutive sequences of seq_len + 1 tokens
(inputs and the next tokens). The workers of one TP group train the same sequences.

A step is one optimizer step: --grad-accum micro-batches of --batch sequences on each
data-parallel rank, the global batch batch x grad_accum x dp sequences. Its tokens
per worker (tokens_per_step) are the global batch's tokens over the workers, batch x
seq_len x grad_accum / tp: a TP group shares its micro-batches' tokens.

MFU: the model's FLOPs per token (transformer_configs.flops_per_token) times
tokens/s, over the workers' peak FLOPS: bench/peak_flops.py's for a GPU at the
training precision, and on CPU nodes a GEMM measured on the node at start
(measured_gemm_flops). Model FLOPs only: the forward that activation checkpointing
runs again in backward is no useful work and is not counted. An MFU above 1 is
never given (peak_flops.mfu).

Memory (after the timed windows, each rank): the bytes of the parameters, gradients
and optimizer state it holds, summed from its shards (layout.model_state_bytes),
and on CUDA the allocator's peaks since the model was laid out
(torch.cuda.max_memory_allocated and max_memory_reserved).

Runs on the nodes: never imports hpcbench.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from typing import Any

import layout
import peak_flops
import runtime
import steps
import tokens
import torch
import transformer_configs
from transformer import Transformer
from transformer_configs import TransformerConfig

ADAMW_LR = 3e-4
# The CPU peak: fp32 products of GEMM_DIM-square matrices on every worker at once, each
# with its own threads (the node's cores shared as in training); the best of
# GEMM_ROUNDS rounds of GEMM_ROUND_S seconds.
GEMM_DIM = 1024
GEMM_ROUNDS = 3
GEMM_ROUND_S = 0.1


def training_precision(args: argparse.Namespace, device: torch.device) -> str:
    """bf16 on a CUDA device that computes it natively (unless --amp off), else fp32
    (tf32 where torch's float32 matmuls are allowed TF32). Natively: torch's default also
    says yes where bf16 is only emulated (Volta, Pascal), at a fraction of fp32's rate."""
    if device.type == "cuda":
        if args.amp != "off" and torch.cuda.is_bf16_supported(including_emulation=False):
            return "bf16"
        if torch.get_float32_matmul_precision() != "highest":
            return "tf32"
    return "fp32"


def measured_gemm_flops(comm: runtime.Comm) -> float:
    """This worker's fp32 matrix-product rate (FLOP/s), all workers measuring at once."""
    a, b = torch.randn(GEMM_DIM, GEMM_DIM), torch.randn(GEMM_DIM, GEMM_DIM)
    out = torch.empty(GEMM_DIM, GEMM_DIM)
    torch.mm(a, b, out=out)  # warm-up: the first product pays for the thread pool
    comm.barrier()
    best = 0.0
    for _ in range(GEMM_ROUNDS):
        done, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < GEMM_ROUND_S or done == 0:
            torch.mm(a, b, out=out)
            done += 1
        best = max(best, done * 2 * GEMM_DIM**3 / elapsed)
    return best


class TokenBatches:
    """(inputs, next tokens, seconds waited for data) per micro-batch, on the device, for
    data-parallel rank `rank` of `size`."""

    def __init__(
        self,
        args: argparse.Namespace,
        c: TransformerConfig,
        rank: int,
        size: int,
        device: torch.device,
        positions: slice = slice(None),
    ) -> None:
        self.batch, self.seq_len, self.device = args.batch, args.seq_len, device
        self.micro_batches = args.grad_accum
        self.file: tokens.TokenFile | None = None
        self.vocab = c.vocab
        self.positions = positions  # of the held-out labels this worker scores
        self._held_out_seed = args.seed + size + rank  # a seed no rank of this run trains on
        if args.data == "synthetic":
            # A step's micro-batches, made once: micro-batch k is rows k*batch onwards,
            # so that K micro-batches of B are the sequences of one batch of K*B.
            gen = torch.Generator().manual_seed(args.seed + rank)
            rows = args.batch * self.micro_batches
            ids = torch.randint(0, c.vocab, (rows, args.seq_len + 1), generator=gen)
            self._static = [self._split(part.to(device)) for part in ids.split(args.batch)]
            self._turn = 0
            return
        self.file = tokens.TokenFile(args.data, c.vocab, args.seq_len)
        self.sequences = (self.file.header.count - 1) // args.seq_len
        self.index, self.stride = rank * args.batch, size * args.batch

    @staticmethod
    def _split(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return ids[:, :-1].contiguous(), ids[:, 1:].contiguous()

    def static(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self._static[0]

    @property
    def held_out_note(self) -> str:
        if self.file is None:
            return "one synthetic batch of sequences per worker, from a seed no worker trained on"
        return "per worker, the sequences of --data after the last ones trained"

    def held_out(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Sequences for the evaluation (the next token at each position), the labels of
        this worker's positions (a TP group's workers score a part each)."""
        if self.file is not None:
            inputs, labels, _ = self.next()
        else:
            gen = torch.Generator().manual_seed(self._held_out_seed)
            ids = torch.randint(0, self.vocab, (self.batch, self.seq_len + 1), generator=gen)
            inputs, labels = self._split(ids.to(self.device))
        return inputs, labels[:, self.positions]

    def train_samples(self, ranks: int) -> int:
        """The distinct tokens the run trains on: one step's synthetic micro-batches per
        data-parallel rank, or the file's."""
        if self.file is None:
            return self.batch * self.micro_batches * self.seq_len * ranks
        return self.file.header.count

    def next(self) -> tuple[torch.Tensor, torch.Tensor, float]:
        if self.file is None:
            part = self._static[self._turn % self.micro_batches]
            self._turn += 1
            return (*part, 0.0)
        start = time.perf_counter()
        first = [(self.index + i) % self.sequences * self.seq_len for i in range(self.batch)]
        self.index += self.stride
        ids = self.file.windows(first, self.seq_len + 1).to(self.device, non_blocking=True)
        return (*self._split(ids), time.perf_counter() - start)


def local_and_full(model: torch.nn.Module) -> tuple[str, str, float]:
    """SHA-256 of what this rank holds (its shards under FSDP2), SHA-256 of the full
    parameters (gathered: every rank takes part), and their sum."""
    from torch.distributed.tensor import DTensor

    local, full, total = hashlib.sha256(), hashlib.sha256(), 0.0
    for p in model.parameters():
        data = p.detach()
        mine = data.to_local() if isinstance(data, DTensor) else data
        whole = data.full_tensor() if isinstance(data, DTensor) else data
        local.update(mine.float().cpu().contiguous().numpy().tobytes())
        whole = whole.float().cpu().contiguous()
        full.update(whole.numpy().tobytes())
        total += float(whole.double().sum())
    return local.hexdigest(), full.hexdigest(), total


def refuse(message: str) -> SystemExit:
    print(f"train.py: {message}", file=sys.stderr)
    return SystemExit(2)


def build(args: argparse.Namespace, comm: runtime.Comm, device: torch.device) -> steps.Workload:
    c = transformer_configs.resolve(args.model)  # train.py read it, or knows it by name
    assert c is not None
    try:
        group = transformer_configs.shard_group(
            args.parallel, args.shard_group, comm.size, comm.local_size
        )
        transformer_configs.check_tp_workers(
            args.tp, comm.size, comm.local_size, args.parallel, group
        )
    except ValueError as err:
        raise refuse(str(err)) from None
    lay = layout.Layout(
        args.parallel,
        comm.size,
        max(group, args.tp),
        args.tp,
        wrapped=comm.size > 1 or args.wrap == "on",
    )
    precision = training_precision(args, device)
    bf16 = precision == "bf16"
    gemm = measured_gemm_flops(comm) if device.type == "cpu" else None
    positions = lay.positions(args.seq_len, comm.rank)
    try:
        batches = TokenBatches(args, c, lay.dp_rank(comm.rank), lay.dp, device, positions)
    except tokens.TokenFileError as err:
        raise refuse(str(err)) from None

    torch.manual_seed(args.seed)  # every rank builds the same weights (FSDP2 broadcasts none)
    with torch.device(device):
        model = Transformer(c, args.seq_len)
    laid = layout.apply(
        model,
        lay,
        device,
        bf16,
        args.activation_checkpoint,
        args.compile_backend if args.step == "compile" else None,
        args.bucket_cap_mb,
    )
    autocast: Any = steps.autocast_factory(False, None)
    if bf16 and not lay.sharded:
        autocast = lambda: torch.autocast("cuda", dtype=torch.bfloat16)  # noqa: E731
    lr = ADAMW_LR if args.lr is None else args.lr
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)  # after sharding: the shards
    laid.forward.train()
    parts = steps.Parts(
        model, laid.forward, optimizer, None, autocast, sync=laid.sync, loss_scope=laid.loss_scope
    )
    step = steps.Step(parts, batches, args.grad_accum)
    counts = transformer_configs.param_counts(c)
    # Each worker's share of a step's tokens: a TP group trains the same sequences.
    per_step = args.batch * args.seq_len * args.grad_accum // args.tp
    global_batch = args.batch * args.grad_accum * lay.dp
    if device.type == "cuda":  # the peaks of training, not of building the whole model
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    held: dict[str, Any] = {}  # each rank's memory and the step's loss, from digest()

    # Each worker's peak FLOPS and where it comes from, or (None, why there is none).
    if device.type == "cuda":
        peak, source = peak_flops.lookup(torch.cuda.get_device_name(device), precision)
        peaks = None if peak is None else [peak] * comm.size
    else:
        peaks = comm.gather(gemm)
        source = (
            f"fp32 {GEMM_DIM}x{GEMM_DIM} matrix products measured on each worker at start, "
            f"all at once, best of {GEMM_ROUNDS} rounds of {GEMM_ROUND_S:g} s"
        )

    def before_windows() -> dict[str, Any]:
        """What the backend runs for each collective, and the collectives of one step."""
        if not (lay.wrapped and isinstance(comm, runtime.TorchComm)):
            return {"collectives": None, "collectives_per_step": None}
        prefixes = ("c10d::", f"{comm.dist_backend}:")
        per_step = runtime.profiled(lambda: (step(), runtime.synchronize(device)), prefixes)
        return {
            "collectives": runtime.collective_paths(comm, device),
            "collectives_per_step": per_step,
        }

    def fields() -> dict[str, Any]:
        # What one step's data-parallel collectives carry in all, of a TP rank's part of
        # the model: DDP all-reduces the gradients; FSDP2 all-gathers the parameters (in
        # the compute dtype, in every micro-batch) and reduce-scatters the gradients
        # (fp32, once a step).
        grad_bytes = laid.tp_local_params * 4
        sharded = lay.sharded
        info = None
        if batches.file is not None:
            h = batches.file.header
            info = {"dtype": h.dtype, "vocab": h.vocab, "tokens": h.count}
        return {
            "seq_len": args.seq_len,
            "parallel": args.parallel,
            "shard_group": lay.group if sharded else None,
            "mesh": laid.mesh_shape,
            "tp": args.tp,
            "grad_accum": args.grad_accum,
            "activation_checkpoint": args.activation_checkpoint,
            "global_batch": global_batch,
            "reshard_after_forward": True if sharded else None,
            "fsdp_units": c.layers + 1 if sharded else None,
            "precision": precision,
            "amp": bf16,
            "mixed_precision": (
                {"param_dtype": "bfloat16", "reduce_dtype": "float32"} if sharded and bf16 else None
            ),
            "params": counts["total"],
            "params_matmul": counts["matmul"],
            "flops_per_token": transformer_configs.flops_per_token(c, args.seq_len),
            "tokens_per_step": per_step,
            "grad_bytes": grad_bytes,
            "allreduce_bytes": grad_bytes if lay.wrapped and not sharded else None,
            "param_bytes": laid.tp_local_params * (2 if bf16 else 4) if sharded else None,
            "bucket_cap_mb": args.bucket_cap_mb if args.parallel == "ddp" else None,
            "token_file": info,
            "config_source": c.source,
            "model_shape": transformer_configs.shape_of(c),
            "peak_flops_per_worker": peaks,
            "peak_source": source if peaks else None,
            **held,
        }

    def digest() -> dict[str, Any]:
        if lay.sharded:  # the evaluation's forward left the root gathered
            layout.reshard(model)
        mine, full, total = local_and_full(model)
        peaks_now = None
        if device.type == "cuda":
            peaks_now = {
                "allocated": torch.cuda.max_memory_allocated(device),
                "reserved": torch.cuda.max_memory_reserved(device),
            }
        state = layout.model_state_bytes(model, optimizer)
        ranks = comm.gather([state, peaks_now, float(step.last_loss)])
        held["model_state_bytes"] = [r[0] for r in ranks]
        held["peak_memory_bytes"] = (
            {k: [r[1][k] for r in ranks] for k in ("allocated", "reserved")}
            if peaks_now is not None
            else None
        )
        # The last step's loss over the global batch: the mean of every rank's (a TP
        # group's workers hold the same loss).
        held["global_loss"] = sum(r[2] for r in ranks) / len(ranks)
        return {
            "digest": mine,
            "full_digest": full,
            "weight_sum": total,
            "replica": lay.copy_key(comm.rank),
        }

    def finish(record: dict[str, Any]) -> None:
        seconds = sum(record["window_times"])
        total = record["workers"] * per_step * record["steps"] * record["windows"] / seconds
        record["tokens_per_sec"] = total
        record["tokens_per_sec_per_worker"] = total / record["workers"]
        peak = sum(peaks) if peaks else None
        record["peak_flops"] = peak
        # Model FLOPs: a forward recomputed by activation checkpointing counts for nothing.
        record["mfu"], record["mfu_unknown"] = peak_flops.mfu(
            total * record["flops_per_token"], peak, source
        )

    return steps.Workload(
        step,
        model,
        lay.wrapped,
        "tokens",
        per_step,
        fields,
        digest,
        before_windows,
        finish,
        held_out=batches.held_out,
        held_out_note=batches.held_out_note,
        train_samples=lambda workers: batches.train_samples(workers // args.tp),
    )
