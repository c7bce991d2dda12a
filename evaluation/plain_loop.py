"""A plain single-process training loop: the reference for the harness's fidelity.

No launcher, no process group, no harness code: torchvision model, SGD,
one synthetic batch, warm-up, then K windows of B steps timed with
perf_counter. Prints images/s (mean over windows) as JSON.
"""

from __future__ import annotations

import argparse
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
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = torchvision.models.get_model(args.model, weights=None, num_classes=1000)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    images = torch.randn(args.batch, 3, args.image_size, args.image_size)
    labels = torch.randint(0, 1000, (args.batch,))
    model.train()

    def step() -> None:
        model.zero_grad(set_to_none=True)
        F.cross_entropy(model(images), labels).backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    rates = []
    for _ in range(args.windows):
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        rates.append(args.batch * args.steps / (time.perf_counter() - start))
    print(json.dumps({"images_per_sec": sum(rates) / len(rates), "windows": rates}))


if __name__ == "__main__":
    main()
