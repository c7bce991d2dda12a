"""A plain single-process training loop: the reference for the harness's fidelity.

No launcher, no process group, no harness code: torchvision model, SGD,
one synthetic batch, warm-up, then K windows of B steps timed with
perf_counter. On a GPU, the same choices the workload makes there: cuDNN
autotuning, fp16 autocast with a gradient scaler (--amp on), NHWC
(--channels-last on), and a device synchronisation at each window's end.
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


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet18")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--windows", type=int, default=5)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--amp", default="off", choices=["on", "off"])
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
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    images = torch.randn(args.batch, 3, args.image_size, args.image_size).to(device)
    images = images.contiguous(memory_format=fmt)
    labels = torch.randint(0, 1000, (args.batch,)).to(device)
    amp = args.amp == "on"
    scaler = torch.amp.GradScaler("cuda") if amp else None
    model.train()

    def step() -> None:
        model.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16) if amp else contextlib.nullcontext():
            out = model(images)
            if hasattr(out, "aux_logits") and out.aux_logits is not None:
                loss = F.cross_entropy(out.logits, labels) + 0.4 * F.cross_entropy(
                    out.aux_logits, labels
                )
            else:
                loss = F.cross_entropy(out, labels)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()

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
