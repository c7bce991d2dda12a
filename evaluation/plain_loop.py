"""A plain single-process training loop: the reference for the harness's fidelity.

No launcher, no process group, no harness code: torchvision model, SGD,
one synthetic batch, warm-up, then K windows of B steps timed with
perf_counter. On a GPU, the same choices the workload makes there: cuDNN
autotuning, fp16 autocast with a gradient scaler (--amp on), NHWC
(--channels-last on), and a device synchronisation at each window's end.
--step graph captures forward, loss, backward and the step of SGD's fused
kernel (which takes AMP's scale without a host sync) in one CUDA graph, from
PyTorch's notes on whole-network capture, independently of the workload's
bench/steps.py; --step compile runs torch.compile on the model.
Prints images/s (mean over windows) as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time

import torch
import torch.nn.functional as F
import torchvision
from cli import add_loop_arguments  # evaluation/cli.py: no harness code, options only


def main() -> None:
    p = argparse.ArgumentParser()
    add_loop_arguments(p)  # the fidelity benchmark's own (evaluation/cli.py)
    p.add_argument("--channels-last", default="off", choices=["on", "off"])
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda:
        torch.backends.cudnn.benchmark = True
    fmt = torch.channels_last if args.channels_last == "on" else torch.contiguous_format
    kwargs = {"aux_logits": True, "init_weights": True} if args.model == "inception_v3" else {}
    model = torchvision.models.get_model(args.model, weights=None, num_classes=1000, **kwargs)
    model = model.to(device, memory_format=fmt)
    opt = torch.optim.SGD(
        model.parameters(),
        lr=0.01,
        momentum=0.9,
        weight_decay=1e-4,
        fused=True if args.step == "graph" else None,
    )
    images = torch.randn(args.batch, 3, args.image_size, args.image_size).to(device)
    images = images.contiguous(memory_format=fmt)
    labels = torch.randint(0, 1000, (args.batch,)).to(device)
    amp = args.amp == "on"
    scaler = torch.amp.GradScaler("cuda") if amp else None
    model.train()

    forward = torch.compile(model) if args.step == "compile" else model
    graphed = args.step == "graph"

    def loss_of_batch() -> torch.Tensor:
        cast = (
            torch.autocast("cuda", dtype=torch.float16, cache_enabled=not graphed)
            if amp
            else contextlib.nullcontext()
        )
        with cast:
            out = forward(images)
            if hasattr(out, "aux_logits") and out.aux_logits is not None:
                return F.cross_entropy(out.logits, labels) + 0.4 * F.cross_entropy(
                    out.aux_logits, labels
                )
            return F.cross_entropy(out, labels)

    def backward(loss: torch.Tensor) -> None:
        (loss if scaler is None else scaler.scale(loss)).backward()

    def optimizer_step() -> None:
        if scaler is None:
            opt.step()
        else:
            scaler.step(opt)
            scaler.update()

    def eager() -> None:
        model.zero_grad(set_to_none=True)
        backward(loss_of_batch())
        optimizer_step()

    step = eager
    if graphed:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                eager()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        model.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            backward(loss_of_batch())
            optimizer_step()
        step = graph.replay

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    for _ in range(args.warmup):
        step()
    sync()
    rates = []
    for _ in range(args.windows):
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        sync()
        rates.append(args.batch * args.steps / (time.perf_counter() - start))
    print(json.dumps({"images_per_sec": sum(rates) / len(rates), "windows": rates}))


if __name__ == "__main__":
    main()
