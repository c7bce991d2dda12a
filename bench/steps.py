"""How the workload runs one training step (train.py --step).

eager    PyTorch's default: every kernel is launched from Python, every step.
graph    CUDA graphs (CUDA only): the kernels are captured once and replayed,
         so the host launches a step in a few calls whatever the model's size.
         Two ways, by where the gradient all-reduce can run:
         - whole: forward with the loss, the whole backward, and the optimizer
           step with AMP's gradient scaler, captured as three graphs sharing
           one memory pool; SGD runs fused, so that the scaler's step needs no
           host sync (GraphStep). Single workers, and DDP over NCCL, whose
           bucketed all-reduces are captured in the backward and overlap it as
           in eager ("Usage with DistributedDataParallel", NCCL >= 2.9.6: DDP
           built on a side stream, 11 eager steps before the capture, NCCL's
           async error handling off).
         - partial: the model's forward and backward graphed with
           make_graphed_callables before the wrapper is built, the all-reduces
           run outside the graph as backward returns ("NCCL < 2.9.6": the
           same recipe), the optimizer eagerly after them. Horovod (its
           all-reduces run in its own thread, which a capture forbids) and DDP
           over Gloo (host memory).
compile  torch.compile (TorchInductor, default mode): fused kernels, still
         launched from Python each step; CPU and CUDA alike. DDP is compiled
         around the wrapper (its DDPOptimizer splits the graph at the buckets),
         Horovod's hooks fire as the compiled backward returns.

Runs on the nodes: never imports hpcbench.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

# PyTorch's notes, "Usage with DistributedDataParallel": "Your warmup must run at least
# 11 DDP-enabled eager iterations before capture". Without DDP, cuDNN's autotuning and
# the optimizer's lazily made state need one; three as in the notes' own examples.
DDP_EAGER_STEPS = 11
EAGER_STEPS = 3


def check(mode: str, device: torch.device) -> None:
    """One line and exit status 2 for a mode the device cannot run."""
    if mode == "graph" and device.type != "cuda":
        print(
            "train.py: --step graph needs a CUDA device (CUDA graphs); on the CPU use "
            "--step eager or --step compile",
            file=sys.stderr,
        )
        raise SystemExit(2)


def capture_kind(mode: str, wrapped: bool, backend: str, dist_backend: str) -> str | None:
    """'whole', 'partial' (graph mode, see the module's text) or None (no graphs)."""
    if mode != "graph":
        return None
    if not wrapped or (backend == "ddp" and dist_backend == "nccl"):
        return "whole"
    return "partial"


def before_process_group(mode: str, backend: str) -> None:
    """What must hold before the process group exists (the world size, which decides the
    capture, is not known yet: set for every DDP run in graph mode, a no-op for others)."""
    if mode == "graph" and backend == "ddp":
        # "Disable DDP's internal async error handling" before init_process_group, for a
        # whole capture over NCCL; the variable's name before and after torch 2.2.
        os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0")
        os.environ.setdefault("NCCL_ASYNC_ERROR_HANDLING", "0")


def autocast_factory(amp: bool, capture: str | None) -> Callable[[], Any]:
    """fp16 autocast (or nothing); without its weight cache under graphs, which forbid it
    (make_graphed_callables raises; a whole capture would keep casts of the first step)."""
    if not amp:
        return contextlib.nullcontext
    cache = capture is None
    return lambda: torch.autocast("cuda", dtype=torch.float16, cache_enabled=cache)


def loss_of(output: Any, labels: torch.Tensor) -> torch.Tensor:
    if hasattr(output, "aux_logits") and output.aux_logits is not None:  # Inception's two heads
        return F.cross_entropy(output.logits, labels) + 0.4 * F.cross_entropy(
            output.aux_logits, labels
        )
    if output.dim() == 3:  # a language model's (batch, seq, vocab): every position's next token
        return F.cross_entropy(output.flatten(0, 1), labels.flatten())
    return F.cross_entropy(output, labels)


@dataclass
class Parts:
    """What a step works with. `model` is the plain module (weights, hooks); `forward`
    is the module as trained: wrapped by DDP, graphed or compiled."""

    model: torch.nn.Module
    forward: Callable[[torch.Tensor], Any]
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler | None
    autocast: Callable[[], Any]
    horovod: bool = False  # Horovod's DistributedOptimizer: it reduces in step()
    # Gradient accumulation (bench/layout.py): around each micro-batch, given whether it
    # is the step's last, the context that reduces the gradients on the last alone.
    sync: Callable[[bool], Any] = lambda last: contextlib.nullcontext()
    # Around forward, loss and backward: tensor parallelism's loss_parallel.
    loss_scope: Callable[[], Any] = contextlib.nullcontext


def backward(parts: Parts, loss: torch.Tensor) -> None:
    (loss if parts.scaler is None else parts.scaler.scale(loss)).backward()


def update(parts: Parts) -> None:
    """The optimizer step after backward, with AMP's scaler where there is one."""
    if parts.scaler is None:
        parts.optimizer.step()
        return
    if parts.horovod:
        # Horovod reduces in step(); the scaler must see the reduced gradients.
        parts.optimizer.synchronize()  # type: ignore[attr-defined]
        with parts.optimizer.skip_synchronize():  # type: ignore[attr-defined]
            parts.scaler.step(parts.optimizer)
    else:
        parts.scaler.step(parts.optimizer)
    parts.scaler.update()


def eager_step(
    parts: Parts, micro_batches: Iterable[tuple[torch.Tensor, torch.Tensor]], count: int = 1
) -> torch.Tensor:
    """One optimizer step over `count` micro-batches: each one's loss divided by count,
    so that the gradients summed over them are those of their mean; the step's loss is
    that mean. Its gradients reduced on the last micro-batch alone (parts.sync)."""
    parts.model.zero_grad(set_to_none=True)  # Horovod's optimizer lacks set_to_none
    total: torch.Tensor | None = None
    for i, (images, labels) in enumerate(micro_batches):
        with parts.sync(i == count - 1), parts.loss_scope():
            with parts.autocast():
                loss = loss_of(parts.forward(images), labels)
            backward(parts, loss / count if count > 1 else loss)
        loss = local_of(loss.detach())
        total = loss if total is None else total + loss
    update(parts)
    assert total is not None, "a step of no micro-batches"
    return total / count if count > 1 else total


def local_of(t: torch.Tensor) -> torch.Tensor:
    """A loss as a plain tensor: loss_parallel's is a DTensor, the same on every TP rank."""
    from torch.distributed.tensor import DTensor

    return t.to_local() if isinstance(t, DTensor) else t


def graph_model(
    model: torch.nn.Module, sample: torch.Tensor, autocast: Callable[[], Any]
) -> torch.nn.Module:
    """Partial capture: the module's forward and backward as CUDA graphs; call before any
    wrapper hooks its parameters (make_graphed_callables refuses modules with hooks)."""
    with autocast():
        return torch.cuda.make_graphed_callables(model, (sample,))


class Step:
    """One training step as the mode runs it: call it for (seconds waited for data,
    the loss as a tensor). A step is one optimizer step over `micro_batches` of the
    batches (gradient accumulation), timed whole."""

    def __init__(self, parts: Parts, batches: Any, micro_batches: int = 1) -> None:
        self.parts, self.batches, self.micro_batches = parts, batches, micro_batches
        self.last_loss = torch.zeros(())

    def __call__(self) -> tuple[float, torch.Tensor]:
        waited = 0.0

        def batches() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
            nonlocal waited
            for _ in range(self.micro_batches):
                images, labels, seconds = self.batches.next()
                waited += seconds
                yield images, labels

        self.last_loss = eager_step(self.parts, batches(), self.micro_batches)
        return waited, self.last_loss

    def gradient_timeline(self, device: torch.device) -> list[list[float]]:
        """[seconds after the step started, bytes] per parameter, in the order backward
        makes their gradients (one step, outside the timed windows); of the last
        micro-batch alone, whose gradients are the ones reduced."""
        marks = hooked_timeline(self.parts.model, self, device)[0]
        return marks[len(marks) * (self.micro_batches - 1) // self.micro_batches :]


class GraphStep(Step):
    """Whole capture: forward with the loss, backward, and the optimizer step with AMP's
    scaler, replayed as three CUDA graphs sharing one pool (three, so that forward and
    backward can be timed apart). The optimizer must be fused (fused_optimizer): the
    scaler then hands it the scale and an inf flag as tensors instead of reading the
    flag on the host (torch/amp/grad_scaler.py, step: `_step_supports_amp_scaling`),
    and nothing in the step syncs with the host. Built after the eager steps the
    capture needs (cuDNN's autotuning, the optimizer's state, DDP's bucket rebuild),
    which run on a side stream as PyTorch's notes do; the last of them is timed for the
    gradient timeline when `timeline` is set."""

    def __init__(
        self,
        parts: Parts,
        batches: Any,
        eager_steps: int,
        device: torch.device,
        timeline: bool = False,
    ) -> None:
        super().__init__(parts, batches)
        self.eager_steps = eager_steps
        self._eager_timeline: tuple[list[list[float]], float] | None = None
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for k in range(eager_steps):
                if timeline and k == eager_steps - 1:  # the last: autotuning is done
                    self._eager_timeline = hooked_timeline(
                        parts.model, lambda: Step.__call__(self), device, forward_end=True
                    )
                else:
                    super().__call__()
        torch.cuda.current_stream(device).wait_stream(side)
        self.images, self.labels = batches.static()
        # Gradients set to None: the captured backward allocates them in the graph's pool
        # and each replay refills them in place (no zero_grad between replays).
        parts.model.zero_grad(set_to_none=True)
        self.forward_graph = torch.cuda.CUDAGraph()
        self.backward_graph, self.update_graph = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        # thread_local: the decode thread and the loader's pin-memory thread go on with
        # their own CUDA work while this thread captures (global mode would fail them).
        with torch.cuda.graph(self.forward_graph, capture_error_mode="thread_local"):
            with parts.autocast():
                self.loss = loss_of(parts.forward(self.images), self.labels)
            scaled = self.loss if parts.scaler is None else parts.scaler.scale(self.loss)
        pool = self.forward_graph.pool()
        with torch.cuda.graph(self.backward_graph, pool=pool, capture_error_mode="thread_local"):
            scaled.backward()
        with torch.cuda.graph(self.update_graph, pool=pool, capture_error_mode="thread_local"):
            update(parts)

    def __call__(self) -> tuple[float, torch.Tensor]:
        images, labels, waited = self.batches.next()
        if images.data_ptr() != self.images.data_ptr():  # real data: into the graph's input
            self.images.copy_(images, non_blocking=True)
            self.labels.copy_(labels, non_blocking=True)
        self.forward_graph.replay()
        self.backward_graph.replay()
        self.update_graph.replay()
        return waited, self.loss.detach()

    def gradient_timeline(self, device: torch.device) -> list[list[float]]:
        """The eager step's gradient moments, their backward part stretched to the
        replayed backward graph's length (a graph has no hooks to time): the order and
        the relative spacing are eager's, the start and the length the graph's."""
        if self._eager_timeline is None:
            return []
        marks, forward_end = self._eager_timeline
        torch.cuda.synchronize(device)
        start, middle, end = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        start.record()
        self.forward_graph.replay()
        middle.record()
        self.backward_graph.replay()
        end.record()
        self.update_graph.replay()
        torch.cuda.synchronize(device)
        forward_s = start.elapsed_time(middle) / 1000.0
        backward_s = middle.elapsed_time(end) / 1000.0
        return stretch(marks, forward_end, forward_s, backward_s)


def stretch(
    marks: list[list[float]], forward_end: float, forward_s: float, backward_s: float
) -> list[list[float]]:
    """Moments of an eager backward (after forward_end) mapped onto a backward that starts
    at forward_s and lasts backward_s; the last gradient lands at its end."""
    if not marks:
        return []
    span = max(marks[-1][0] - forward_end, 1e-9)
    return [[forward_s + max(t - forward_end, 0.0) / span * backward_s, b] for t, b in marks]


def hooked_timeline(
    model: torch.nn.Module, step: Callable[[], Any], device: torch.device, forward_end: bool = False
) -> tuple[list[list[float]], float]:
    """Run one step with a mark at each gradient's accumulation (and, if asked, one where
    the model's forward ends): ([[seconds after the step started, bytes]], forward's end
    or 0). On CUDA the marks are events recorded on the stream, so they say when the
    kernels finished, not when they were queued. No module hook unless asked: one added
    to a compiled model would have it compiled again."""
    import runtime  # a sibling module; imported here so that steps.py stands alone in tests

    marks: list[tuple[Any, int]] = []
    ends: list[Any] = []

    def ready(param: torch.Tensor) -> None:
        marks.append((runtime.mark(device), param.numel() * param.element_size()))

    hooks = [
        p.register_post_accumulate_grad_hook(ready) for p in model.parameters() if p.requires_grad
    ]
    if forward_end:
        hooks.append(model.register_forward_hook(lambda *_: ends.append(runtime.mark(device))))
    try:
        runtime.synchronize(device)
        start = runtime.mark(device)
        step()
        runtime.synchronize(device)
    finally:
        for h in hooks:
            h.remove()
    ended = runtime.elapsed_s(start, ends[0]) if ends else 0.0
    return [[runtime.elapsed_s(start, m), b] for m, b in marks], ended


@dataclass
class Workload:
    """A workload built for timing (train.py, measure): its step, its plain module, and
    what its record adds. train.py builds the CNNs', bench/lm.py the transformers'."""

    step: Step
    model: torch.nn.Module  # the module itself (its weights, the gradient hooks)
    wrapped: bool  # DDP, FSDP2 or Horovod around it
    unit: str  # what a step trains: images or tokens
    per_step: int  # of them per worker and step
    fields: Callable[[], dict[str, Any]]  # the workload's own record fields, at the end
    # This rank's weights: {"digest", "weight_sum", "replica"} (ranks of one replica
    # hold the same weights). Every rank calls it: it may gather.
    digest: Callable[[], dict[str, Any]]
    before_windows: Callable[[], dict[str, Any]] = dict  # after warm-up (every rank)
    # Rank 0: figures derived from the finished record (tokens/s, MFU).
    finish: Callable[[dict[str, Any]], None] = lambda record: None
    # The evaluation after the windows (bench/mllog.py): one held-out batch (inputs,
    # labels) per rank, what it is, and the distinct samples the run trains on in its
    # unit, given the workers.
    held_out: Callable[[], tuple[torch.Tensor, torch.Tensor]] | None = None
    held_out_note: str = ""
    train_samples: Callable[[int], int] = lambda workers: 0


def fused_optimizer(capture: str | None) -> bool:
    """SGD's fused kernel where the optimizer step is captured (GraphStep); elsewhere
    the default (foreach on CUDA), as eager PyTorch runs it."""
    return capture == "whole"


def make_step(
    capture: str | None, parts: Parts, batches: Any, device: torch.device, ddp: bool, timeline: bool
) -> Step:
    if capture == "whole":
        eager = DDP_EAGER_STEPS if ddp else EAGER_STEPS
        return GraphStep(parts, batches, eager, device, timeline)
    return Step(parts, batches)


def wrapper_context(capture: str | None, device: torch.device) -> Any:
    """Where DDP is built: on a side stream before a whole capture (PyTorch's notes: "DDP
    must be constructed in a side-stream context"), else where it is."""
    if capture == "whole":
        return torch.cuda.stream(torch.cuda.Stream(device))
    return contextlib.nullcontext()


def compile_forward(forward: Callable[..., Any], backend: str) -> Callable[..., Any]:
    """torch.compile in its default mode (no CUDA graphs of its own), with `backend`
    (--compile-backend: inductor, or aot_eager, which traces as inductor does)."""
    return torch.compile(forward, backend=backend)


# ------------------------------------------------------------------ NHWC under Horovod
class ChannelsLastSafe:
    """A Horovod compressor around another one that hands Horovod NHWC tensors as the
    NHWC-ordered views they are in memory. Horovod reduces and broadcasts only tensors
    that are contiguous in PyTorch's default order (horovod/torch/mpi_ops.py,
    _check_function: `if not tensor.is_contiguous()`), and the gradient of an NHWC
    weight is NHWC. `t.permute(0, 2, 3, 1)` of a channels_last tensor is contiguous and
    shares its memory, so the in-place all-reduce sums the gradient itself; decompress
    turns the result back (horovod/torch/optimizer.py, synchronize:
    `p.grad.set_(self._compression.decompress(output, ctx))`)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def compress(self, tensor: torch.Tensor) -> tuple[torch.Tensor, Any]:
        compressed, ctx = self.inner.compress(tensor)
        flat = as_contiguous_view(compressed)
        return flat, (ctx, flat is not compressed)

    def decompress(self, tensor: torch.Tensor, ctx: Any) -> torch.Tensor:
        inner_ctx, permuted = ctx
        return self.inner.decompress(tensor.permute(0, 3, 1, 2) if permuted else tensor, inner_ctx)


def as_contiguous_view(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor itself if it is contiguous; an NHWC tensor as its NHWC-ordered view (same
    memory, contiguous); anything else is left for Horovod to refuse."""
    if tensor.is_contiguous() or tensor.dim() != 4:
        return tensor
    if tensor.is_contiguous(memory_format=torch.channels_last):
        return tensor.permute(0, 2, 3, 1)
    return tensor


def contiguous_views(tensors: dict[str, torch.Tensor]) -> Iterator[tuple[str, torch.Tensor]]:
    """A state_dict's tensors as views Horovod's broadcast takes (see ChannelsLastSafe)."""
    for name, t in sorted(tensors.items()):
        yield name, as_contiguous_view(t)
