"""The transformers' path through train.py: the model of bench/transformer.py under
DDP, FSDP2 or HSDP, its tokens, and its figures (tokens/s, MFU).

Parallelism (--parallel), applied in one place (parallelize):
ddp    DistributedDataParallel: gradients all-reduced in buckets during backward.
fsdp2  torch.distributed.fsdp.fully_shard on each block, then on the root (token
       table = output projection, final norm), over a 1-D mesh of all workers,
       parameters resharded after forward: each block's parameters are all-gathered
       in forward and again in backward, its gradients reduce-scattered.
hsdp   the same over a 2-D mesh (replicate, shard): a block is sharded inside a group
       of --shard-group workers (default: a node's) and its shards all-reduced
       across the groups.
On CUDA in bf16: FSDP2's MixedPrecisionPolicy (bf16 parameters, fp32 gradient
reduction); DDP and the single worker under bf16 autocast. On CPU: fp32. One
worker trains the module unwrapped, as the CNNs do (train.py). The record names
what the backend ran for each collective (runtime.collective_paths: Gloo carries
out reduce_scatter_tensor as an all-reduce) and counts the collectives of one
step run under the profiler (collectives_per_step).

Tokens: synthetic (random ids, one batch per rank made once, as the CNNs'
synthetic images), or a token file (bench/tokens.py), each rank reading its own
consecutive sequences of seq_len + 1 tokens (inputs and the next tokens).

MFU: the model's FLOPs per token (transformer_configs.flops_per_token) times
tokens/s, over the workers' peak FLOPS: bench/peak_flops.py's for a GPU at the
training precision, and on CPU nodes a GEMM measured on the node at start
(measured_gemm_flops). An MFU above 1 is never given (peak_flops.mfu).

Runs on the nodes: never imports hpcbench.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from typing import Any

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
    """bf16 on a CUDA device that has it (unless --amp off), else fp32 (tf32 where torch's
    float32 matmuls are allowed TF32)."""
    if device.type == "cuda":
        if args.amp != "off" and torch.cuda.is_bf16_supported():
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
    """(inputs, next tokens, seconds waited for data) per step, on the device."""

    def __init__(
        self, args: argparse.Namespace, c: TransformerConfig, rank: int, size: int, device
    ) -> None:
        self.batch, self.seq_len, self.device = args.batch, args.seq_len, device
        self.file: tokens.TokenFile | None = None
        self.vocab = c.vocab
        self._held_out_seed = args.seed + size + rank  # a seed no rank of this run trains on
        if args.data == "synthetic":
            gen = torch.Generator().manual_seed(args.seed + rank)
            ids = torch.randint(0, c.vocab, (args.batch, args.seq_len + 1), generator=gen)
            self._static = self._split(ids.to(device))
            return
        self.file = tokens.TokenFile(args.data, c.vocab, args.seq_len)
        self.sequences = (self.file.header.count - 1) // args.seq_len
        self.index, self.stride = rank * args.batch, size * args.batch

    @staticmethod
    def _split(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return ids[:, :-1].contiguous(), ids[:, 1:].contiguous()

    def static(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self._static

    @property
    def held_out_note(self) -> str:
        if self.file is None:
            return "one synthetic batch of sequences per worker, from a seed no worker trained on"
        return "per worker, the sequences of --data after the last ones trained"

    def held_out(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Sequences for the evaluation (the next token at each position)."""
        if self.file is not None:
            inputs, labels, _ = self.next()
            return inputs, labels
        gen = torch.Generator().manual_seed(self._held_out_seed)
        ids = torch.randint(0, self.vocab, (self.batch, self.seq_len + 1), generator=gen)
        return self._split(ids.to(self.device))

    def train_samples(self, workers: int) -> int:
        """The distinct tokens the run trains on: one synthetic batch per worker, or the
        file's."""
        if self.file is None:
            return self.batch * self.seq_len * workers
        return self.file.header.count

    def next(self) -> tuple[torch.Tensor, torch.Tensor, float]:
        if self.file is None:
            return (*self._static, 0.0)
        start = time.perf_counter()
        first = [(self.index + i) % self.sequences * self.seq_len for i in range(self.batch)]
        self.index += self.stride
        ids = self.file.windows(first, self.seq_len + 1).to(self.device, non_blocking=True)
        return (*self._split(ids), time.perf_counter() - start)


def parallelize(
    model: Transformer,
    parallel: str,
    comm: runtime.Comm,
    device: torch.device,
    group: int,
    bf16: bool,
    bucket_cap_mb: float | None,
) -> tuple[Any, list[int] | None]:
    """The module as trained (DDP around it, or the module sharded in place) and the
    device mesh's shape (None under DDP)."""
    if parallel == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        ddp = DDP(
            model,
            device_ids=[device.index] if device.type == "cuda" else None,
            bucket_cap_mb=bucket_cap_mb,
            gradient_as_bucket_view=True,
        )
        return ddp, None
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    if parallel == "fsdp2":
        shape, names = [comm.size], ("shard",)
    else:  # rank r is replica r // group, shard r % group: a group is consecutive ranks
        shape, names = [comm.size // group, group], ("replicate", "shard")
    mesh = init_device_mesh(device.type, tuple(shape), mesh_dim_names=names)
    policy = MixedPrecisionPolicy()  # the parameters' own dtype: fp32
    if bf16:
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.layers:
        fully_shard(block, mesh=mesh, mp_policy=policy, reshard_after_forward=True)
    # The root: what the blocks leave (the token table, which is the output projection
    # where tied, the position table, the final norm).
    fully_shard(model, mesh=mesh, mp_policy=policy)
    return model, shape


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
    c = transformer_configs.CONFIGS[args.model]
    wrapped = comm.size > 1 or args.wrap == "on"
    try:
        group = transformer_configs.shard_group(
            args.parallel, args.shard_group, comm.size, comm.local_size
        )
    except ValueError as err:
        raise refuse(str(err)) from None
    precision = training_precision(args, device)
    bf16 = precision == "bf16"
    sharded = wrapped and args.parallel != "ddp"
    gemm = measured_gemm_flops(comm) if device.type == "cpu" else None
    try:
        batches = TokenBatches(args, c, comm.rank, comm.size, device)
    except tokens.TokenFileError as err:
        raise refuse(str(err)) from None

    torch.manual_seed(args.seed)  # every rank builds the same weights (FSDP2 broadcasts none)
    with torch.device(device):
        model = Transformer(c, args.seq_len)
    if args.step == "compile":  # each block, before any wrapper (as torchtitan compiles)
        for i, block in enumerate(model.layers):
            model.layers[i] = torch.compile(block, backend=steps.compile_backend())
    forward: Any = model
    mesh = None
    if wrapped:
        forward, mesh = parallelize(
            model, args.parallel, comm, device, group, bf16, args.bucket_cap_mb
        )
    autocast: Any = steps.autocast_factory(False, None)
    if bf16 and not sharded:
        autocast = lambda: torch.autocast("cuda", dtype=torch.bfloat16)  # noqa: E731
    lr = ADAMW_LR if args.lr is None else args.lr
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)  # after sharding: the shards
    forward.train()
    step = steps.Step(steps.Parts(model, forward, optimizer, None, autocast), batches)
    counts = transformer_configs.param_counts(c)
    per_step = args.batch * args.seq_len

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
        if not (wrapped and isinstance(comm, runtime.TorchComm)):
            return {"collectives": None, "collectives_per_step": None}
        prefixes = ("c10d::", f"{comm.dist_backend}:")
        per_step = runtime.profiled(lambda: (step(), runtime.synchronize(device)), prefixes)
        return {
            "collectives": runtime.collective_paths(comm, device),
            "collectives_per_step": per_step,
        }

    def fields() -> dict[str, Any]:
        grad_bytes = counts["total"] * 4  # fp32 gradients, reduced in fp32
        info = None
        if batches.file is not None:
            h = batches.file.header
            info = {"dtype": h.dtype, "vocab": h.vocab, "tokens": h.count}
        return {
            "seq_len": args.seq_len,
            "parallel": args.parallel,
            "shard_group": group if sharded else None,
            "mesh": mesh,
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
            # What one step's collectives carry in all: DDP all-reduces the gradients;
            # FSDP2 all-gathers the parameters (in the compute dtype) and reduce-scatters
            # the gradients (fp32).
            "allreduce_bytes": grad_bytes if wrapped and not sharded else None,
            "param_bytes": counts["total"] * (2 if bf16 else 4) if sharded else None,
            "bucket_cap_mb": args.bucket_cap_mb if args.parallel == "ddp" else None,
            "token_file": info,
            "config_source": c.source,
            "peak_flops_per_worker": peaks,
            "peak_source": source if peaks else None,
        }

    def digest() -> dict[str, Any]:
        mine, full, total = local_and_full(model)
        # The ranks that must hold the same bytes: all under DDP, a shard's copies across
        # HSDP's replicas, none under FSDP2 (each shard has one copy).
        replica = 0 if not sharded else comm.rank % group
        return {"digest": mine, "full_digest": full, "weight_sum": total, "replica": replica}

    def finish(record: dict[str, Any]) -> None:
        seconds = sum(record["window_times"])
        total = record["workers"] * per_step * record["steps"] * record["windows"] / seconds
        record["tokens_per_sec"] = total
        record["tokens_per_sec_per_worker"] = total / record["workers"]
        peak = sum(peaks) if peaks else None
        record["peak_flops"] = peak
        record["mfu"], record["mfu_unknown"] = peak_flops.mfu(
            total * record["flops_per_token"], peak, source
        )

    return steps.Workload(
        step,
        model,
        wrapped,
        "tokens",
        per_step,
        fields,
        digest,
        before_windows,
        finish,
        held_out=batches.held_out,
        held_out_note=batches.held_out_note,
        train_samples=batches.train_samples,
    )
