"""Data-parallel training throughput of one configuration (runs on every rank).

    horovodrun -np 2 -H localhost:2 --gloo python bench/train.py --backend horovod
    torchrun --nproc-per-node 2 bench/train.py --backend ddp --model resnet18 --image-size 32

Timing (docs/method.md, "Measurement method"): warm-up steps are discarded; then
K windows of B steps, each started at a barrier and ended after the device
has finished; every rank's window times are gathered and the slowest rank's
time counts. Afterwards a checksum of the weights is compared across ranks.
A single worker trains without the data-parallel wrapper: the baseline X(1)
is plain single-device training, as in the published DDP and Horovod figures.
Rank 0 prints one JSON record (prefixed HPCBENCH_RESULT) and writes it to
--out if given.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpumon  # noqa: E402
import nodemon  # noqa: E402
import runtime  # noqa: E402  (a sibling module; bench/ is not a package on the nodes)
import units  # noqa: E402

MODELS = {
    k: v
    for k, v in json.loads((Path(__file__).parent / "models.json").read_text()).items()
    if not k.startswith("_")
}


def _count(name: str) -> Any:
    return units.argtype(units.count, name)  # the bounds the harness checks too


def _mb(name: str) -> Any:
    return units.argtype(units.megabytes, name)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="resnet50", choices=sorted(MODELS))
    p.add_argument(
        "--image-size", type=_count("image-size"), default=0, help="default: the model's own"
    )
    p.add_argument("--batch", type=_count("batch"), default=32, help="per worker")
    p.add_argument("--backend", default="ddp", choices=["horovod", "ddp"])
    p.add_argument("--data", default="synthetic", help="'synthetic' or an ImageNet-layout folder")
    p.add_argument(
        "--data-workers",
        type=_count("data-workers"),
        default=4,
        help="DataLoader processes per rank",
    )
    p.add_argument("--warmup", type=_count("warmup"), default=10, help="discarded steps")
    p.add_argument("--windows", type=_count("windows"), default=5, help="K timed windows")
    p.add_argument("--steps", type=_count("steps"), default=10, help="B steps per window")
    p.add_argument(
        "--min-window-s",
        type=units.argtype(units.seconds, "min-window-s"),
        default=0.0,
        help="a window lasts at least this long: B grows to fit, measured after warm-up",
    )
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument(
        "--amp",
        default="auto",
        choices=["auto", "on", "off"],
        help="fp16 autocast; auto: on with CUDA",
    )
    p.add_argument(
        "--channels-last",
        default="auto",
        choices=["auto", "on", "off"],
        help="auto: on with CUDA and AMP, where tensor cores want NHWC (DDP only: Horovod "
        "reduces contiguous tensors only)",
    )
    p.add_argument(
        "--wrap",
        default="auto",
        choices=["auto", "on"],
        help="auto: DDP/Horovod only with two or more workers; on: also with one, so that "
        "the wrapped path runs on a single GPU",
    )
    p.add_argument(
        "--dist-backend",
        default="auto",
        choices=["auto", "nccl", "gloo"],
        help="DDP's process group; auto: NCCL on CUDA, else Gloo (Gloo lets ranks share a GPU)",
    )
    p.add_argument("--fp16-allreduce", action="store_true", help="compress gradients to fp16")
    p.add_argument(
        "--fusion-threshold-mb",
        type=_mb("fusion-threshold-mb"),
        default=None,
        help="Horovod tensor fusion",
    )
    p.add_argument(
        "--bucket-cap-mb", type=_mb("bucket-cap-mb"), default=25.0, help="DDP gradient buckets"
    )
    p.add_argument(
        "--threads",
        type=_count("threads"),
        default=0,
        help="torch threads; 0: cores / local workers",
    )
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=_count("seed"), default=0)
    p.add_argument("--out", default=None, help="also write the JSON record here (rank 0)")
    args = p.parse_args(argv)
    if args.backend == "horovod" and args.channels_last == "on":
        # Horovod 0.28 broadcasts and all-reduces contiguous tensors only
        # (horovod/torch/mpi_ops.py, _check_function); NHWC weights and their gradients
        # are not contiguous, so the first broadcast_parameters fails (seen on an H100).
        p.error("--channels-last on does not work with Horovod (it needs contiguous "
                "tensors): use --backend ddp or --channels-last off")
    if min(args.batch, args.windows, args.steps) < 1 or args.warmup < 0:
        p.error("--batch, --windows and --steps must be >= 1, --warmup >= 0")
    args.image_size = args.image_size or MODELS[args.model]["image_size"]
    return args


def precision(args: argparse.Namespace, cuda: bool) -> tuple[bool, bool]:
    """(fp16 autocast, NHWC): both on by default on CUDA, NHWC only under DDP (Horovod
    reduces contiguous tensors only, and NHWC gradients are not)."""
    amp = args.amp == "on" or (args.amp == "auto" and cuda)
    channels_last = args.channels_last == "on" or (
        args.channels_last == "auto" and cuda and amp and args.backend == "ddp"
    )
    return amp, channels_last


def gradient_timeline(
    model: torch.nn.Module, step: Any, device: torch.device
) -> list[list[float]]:
    """[seconds after the step started, bytes] per parameter, in the order backward makes
    their gradients. On CUDA the moments are CUDA events recorded on the stream, so
    they say when the gradient's kernels finished, not when they were queued."""
    marks: list[tuple[Any, int]] = []

    def ready(param: torch.Tensor) -> None:
        marks.append((runtime.mark(device), param.numel() * param.element_size()))

    hooks = [p.register_post_accumulate_grad_hook(ready) for p in model.parameters()
             if p.requires_grad]  # fmt: skip
    try:
        runtime.synchronize(device)
        start = runtime.mark(device)
        step()
        runtime.synchronize(device)
    finally:
        for h in hooks:
            h.remove()
    return [[runtime.elapsed_s(start, m), b] for m, b in marks]


# Steps timed to size the windows: enough to average out one slow step.
SIZING_STEPS = 3


def window_steps(
    asked: int, min_window_s: float, step: Any, device: torch.device, comm: runtime.Comm
) -> int:
    """Steps per window: `asked`, or more so that a window lasts min_window_s (a window
    of a few short steps on a throttled CPU node measures the scheduler, not the step).
    Every rank times a few steps; the slowest rank's time sizes the windows for all, as
    the ranks must run the same number of steps."""
    if min_window_s <= 0:
        return asked
    comm.barrier()
    times = []
    for _ in range(SIZING_STEPS):
        start = time.perf_counter()
        step()
        runtime.synchronize(device)
        times.append(time.perf_counter() - start)
    # The median step: a step still paying for warm-up would size the windows too short.
    per_step = max(comm.gather(sorted(times)[SIZING_STEPS // 2]))
    return max(asked, math.ceil(min_window_s / max(per_step, 1e-6)))


def build_model(name: str) -> torch.nn.Module:
    import torchvision

    kwargs: dict[str, Any] = {"weights": None, "num_classes": 1000}
    if name == "inception_v3":
        kwargs.update(aux_logits=True, init_weights=True)
    return torchvision.models.get_model(name, **kwargs)


def loss_of(output: Any, labels: torch.Tensor) -> torch.Tensor:
    if hasattr(output, "aux_logits") and output.aux_logits is not None:  # Inception's two heads
        return F.cross_entropy(output.logits, labels) + 0.4 * F.cross_entropy(
            output.aux_logits, labels
        )
    return F.cross_entropy(output, labels)


class Batches:
    """Yields (images, labels, seconds waited for data) on the device."""

    def __init__(
        self,
        args: argparse.Namespace,
        comm: runtime.Comm,
        device: torch.device,
        memory_format: torch.memory_format,
    ) -> None:
        self.device, self.memory_format = device, memory_format
        self.synthetic = args.data == "synthetic"
        if self.synthetic:
            # One batch made once and reused, as tf_cnn_benchmarks does: no input cost.
            gen = torch.Generator().manual_seed(args.seed + comm.rank)
            images = torch.randn(args.batch, 3, args.image_size, args.image_size, generator=gen)
            labels = torch.randint(0, 1000, (args.batch,), generator=gen)
            self.fixed = (
                images.to(device).contiguous(memory_format=memory_format),
                labels.to(device),
            )
            return
        import torchvision.transforms as T
        from torch.utils.data import DataLoader, DistributedSampler
        from torchvision.datasets import ImageFolder

        transform = T.Compose(
            [
                T.RandomResizedCrop(args.image_size),
                T.RandomHorizontalFlip(),
                T.ToTensor(),
                T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
            ]
        )
        root = Path(args.data)
        dataset = ImageFolder(
            str(root / "train" if (root / "train").is_dir() else root), transform=transform
        )
        self.sampler = DistributedSampler(
            dataset,
            num_replicas=comm.size,
            rank=comm.rank,
            shuffle=True,
            seed=args.seed,
            drop_last=True,
        )
        if len(self.sampler) < args.batch:
            raise SystemExit(
                f"{root}: {len(dataset)} images are too few for batch {args.batch} "
                f"on {comm.size} workers"
            )
        self.loader = DataLoader(
            dataset,
            batch_size=args.batch,
            sampler=self.sampler,
            drop_last=True,
            num_workers=args.data_workers,
            pin_memory=device.type == "cuda",
            persistent_workers=args.data_workers > 0,
        )
        self.epoch = 0
        self.it = iter(self.loader)

    def next(self) -> tuple[torch.Tensor, torch.Tensor, float]:
        if self.synthetic:
            return (*self.fixed, 0.0)
        start = time.perf_counter()
        try:
            images, labels = next(self.it)
        except StopIteration:
            self.epoch += 1
            self.sampler.set_epoch(self.epoch)
            self.it = iter(self.loader)
            images, labels = next(self.it)
        images = images.to(self.device, non_blocking=True).contiguous(
            memory_format=self.memory_format
        )
        labels = labels.to(self.device, non_blocking=True)
        return images, labels, time.perf_counter() - start


def weights_digest(model: torch.nn.Module) -> tuple[str, float]:
    """A strict checksum (SHA-256 of the parameter bytes) and a readable sum."""
    h = hashlib.sha256()
    total = 0.0
    for p in model.parameters():
        data = p.detach().float().cpu().contiguous()
        h.update(data.numpy().tobytes())
        total += float(data.double().sum())
    return h.hexdigest(), total


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    timeline = {"process_start": runtime.process_start_time()}
    if args.backend == "horovod" and args.fusion_threshold_mb is not None:
        # Read by hvd.init(), so it must be in the environment first.
        os.environ["HOROVOD_FUSION_THRESHOLD"] = str(int(args.fusion_threshold_mb * 1024**2))
    device = runtime.pick_device(args.device)
    comm = runtime.connect(args.backend, device, args.dist_backend)
    threads = runtime.set_threads(args.threads, comm.local_size)
    timeline["initialised"] = time.time()
    cuda = device.type == "cuda"
    amp, channels_last = precision(args, cuda)
    memory_format = torch.channels_last if channels_last else torch.contiguous_format

    if cuda:
        # Fixed input shapes: let cuDNN pick its fastest kernels once, during warm-up, as
        # NVIDIA's and PyTorch's own ImageNet benchmarks do.
        torch.backends.cudnn.benchmark = True
    torch.manual_seed(args.seed)
    model = build_model(args.model).to(device, memory_format=memory_format)
    params = [p for p in model.parameters() if p.requires_grad]
    grad_bytes = sum(p.numel() * p.element_size() for p in params)
    optimizer = torch.optim.SGD(params, lr=args.lr, momentum=0.9, weight_decay=1e-4)
    # One worker has nothing to all-reduce: it trains unwrapped, so that X(1) is plain
    # single-device training and E(N) charges the framework's per-step cost to scaling.
    wrapped = comm.size > 1 or args.wrap == "on"
    train_model = model
    if wrapped and args.backend == "horovod":
        hvd = comm.hvd
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(optimizer, root_rank=0)
        compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
        optimizer = hvd.DistributedOptimizer(
            optimizer, named_parameters=model.named_parameters(), compression=compression
        )
    elif wrapped:
        from torch.nn.parallel import DistributedDataParallel as DDP

        train_model = DDP(
            model,
            device_ids=[device.index] if cuda else None,
            bucket_cap_mb=args.bucket_cap_mb,
            gradient_as_bucket_view=True,
        )
        if args.fp16_allreduce:
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            train_model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    scaler = torch.amp.GradScaler("cuda") if amp else None
    autocast = (
        (lambda: torch.autocast("cuda", dtype=torch.float16)) if amp else (contextlib.nullcontext)
    )
    batches = Batches(args, comm, device, memory_format)
    train_model.train()
    timeline["ready"] = time.time()  # model, optimizer and data built; warm-up next

    def step() -> tuple[float, float]:
        images, labels, waited = batches.next()
        model.zero_grad(set_to_none=True)  # Horovod's optimizer lacks set_to_none
        with autocast():
            loss = loss_of(train_model(images), labels)
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            if wrapped and args.backend == "horovod":
                # Horovod reduces in step(); GradScaler must see reduced gradients.
                optimizer.synchronize()
                with optimizer.skip_synchronize():
                    scaler.step(optimizer)
            else:
                scaler.step(optimizer)
            scaler.update()
        return waited, loss.detach()

    for _ in range(args.warmup):
        step()
    runtime.synchronize(device)
    steps = window_steps(args.steps, args.min_window_s, step, device, comm)
    # The single worker's backward as it happens: when each gradient is ready (one step,
    # outside the timed windows); the harness replays the all-reduces against it.
    grad_timeline = gradient_timeline(model, step, device) if comm.size == 1 else None
    monitor = gpumon.start(device)  # GPU utilisation and memory over the timed windows
    node_before = nodemon.start()  # the node's CPU and network over the same windows
    window_times: list[float] = []
    data_times: list[float] = []
    # The same windows timed by the GPU (CUDA events on the training stream): a check that
    # the host clock plus synchronize measures what the device did (docs/method.md).
    events = runtime.DeviceWindows(device)
    loss = torch.zeros(())
    for k in range(args.windows):
        comm.barrier()
        start = time.perf_counter()
        events.begin()
        if k == 0:
            timeline["first_timed_step"] = time.time()
        waited_total = 0.0
        for _ in range(steps):
            waited, loss = step()
            waited_total += waited
        events.end()
        runtime.synchronize(device)
        window_times.append(time.perf_counter() - start)
        data_times.append(waited_total)
    timeline["timed_end"] = time.time()
    gpu = monitor.stop()
    node = nodemon.stop(node_before)

    digest, weight_sum = weights_digest(model)
    gathered = comm.gather(
        {
            "window_times": window_times,
            "device_window_times": events.seconds(),
            "data_times": data_times,
            "digest": digest,
            "weight_sum": weight_sum,
            "fingerprint": runtime.fingerprint(device, comm),
            "gpu": gpu,
            "node": node,
        }
    )
    timeline["end"] = time.time()
    if comm.rank == 0:
        rank_windows = [g["window_times"] for g in gathered]
        rank_data = [g["data_times"] for g in gathered]
        slowest = runtime.slowest(rank_windows)
        sums = [g["weight_sum"] for g in gathered]
        record = {
            "kind": "workload",
            "model": args.model,
            "backend": args.backend,
            "batch": args.batch,
            "image_size": args.image_size,
            "data": "synthetic" if args.data == "synthetic" else os.path.abspath(args.data),
            "warmup": args.warmup,
            "windows": args.windows,
            "steps": steps,
            "steps_asked": args.steps,
            "min_window_s": args.min_window_s,
            "workers": comm.size,
            "local_workers": comm.local_size,
            "device": device.type,
            "amp": amp,
            "channels_last": channels_last,
            "threads": threads,
            "fp16_allreduce": args.fp16_allreduce,
            "wrapped": wrapped,
            "dist_backend": comm.dist_backend,
            "fusion_threshold_mb": args.fusion_threshold_mb,
            "bucket_cap_mb": args.bucket_cap_mb if args.backend == "ddp" else None,
            "params": sum(p.numel() for p in params),
            "grad_bytes": grad_bytes,
            "allreduce_bytes": grad_bytes // 2 if args.fp16_allreduce else grad_bytes,
            "grad_timeline": grad_timeline,
            "window_times": slowest,
            "rank_window_times": rank_windows,
            "device_window_times": runtime.slowest([g["device_window_times"] for g in gathered]),
            "rank_data_times": rank_data if args.data != "synthetic" else None,
            "data_time_fraction": (
                None
                if args.data == "synthetic"
                else sum(map(sum, rank_data)) / sum(map(sum, rank_windows))
            ),
            "weights_in_sync": len({g["digest"] for g in gathered}) == 1,
            "weight_sum_spread": (max(sums) - min(sums)) / max(abs(sums[0]), 1e-30),
            "weights_digest": digest,
            "loss": float(loss),
            "timeline": timeline,
            "fingerprint": runtime.merge_fingerprints([g["fingerprint"] for g in gathered]),
            "gpu": gpumon.merge([g["gpu"] for g in gathered]),
            "nodes_use": nodemon.merge([g["node"] for g in gathered]),
        }
        images_per_sec = comm.size * args.batch * steps * args.windows / sum(slowest)
        print(
            f"{args.model} {args.backend} x{comm.size}: {images_per_sec:.1f} images/s",
            file=sys.stderr,
        )
        runtime.emit(record, args.out)
    comm.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
