"""The workload's input: one synthetic batch, or an ImageNet-layout folder of images.

Real images are decoded one of two ways (train.py --decode):
- workers: PIL in DataLoader worker processes, then RandomResizedCrop, flip and
  normalise on the host, as torchvision's ImageNet reference does; the host's
  cores bound the rate (a few hundred images/s per core for ImageNet-sized JPEGs).
- device: the workers only read the files' bytes (handed over through their
  pipe, not shared memory: one object a file); torchvision.io.decode_jpeg
  decodes a whole batch on the training device (nvJPEG on CUDA; torchvision
  serialises its calls), and the crop, resize, flip and normalisation run
  there too, in DECODE_THREADS threads each on a CUDA stream of its own, a few
  batches ahead of training. A file nvJPEG refuses (PNG
  or CMYK JPEGs, a handful in ImageNet) is decoded on the host instead and
  counted. On the CPU the same code runs on the CPU.
auto is device on CUDA where decode_jpeg works there, workers otherwise; the
record says which ran and why.

Runs on the nodes: never imports hpcbench.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import queue
import random
import threading
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
# RandomResizedCrop's defaults (torchvision.transforms.RandomResizedCrop): the share of
# the image's area and the aspect ratio a crop is drawn from.
SCALE = (0.08, 1.0)
RATIO = (3 / 4, 4 / 3)
PREFETCH = 4  # batches decoded ahead of training
# Threads decoding batches: torchvision holds one lock over decode_jpeg on CUDA, so more
# threads overlap the rest (reading the workers' bytes, cropping, launching kernels);
# one thread of the run measured on an H100 fed 1667 images/s (docs/benchmarks.md).
DECODE_THREADS = 3


def device_decode_works(device: torch.device) -> str:
    """'' where torchvision.io.decode_jpeg decodes on this device, else why not."""
    try:
        from torchvision.io import decode_jpeg, encode_jpeg

        sample = encode_jpeg(torch.zeros(3, 8, 8, dtype=torch.uint8))
        decode_jpeg([sample], device=device)
        return ""
    except Exception as exc:  # any failure means: fall back, and say why
        return f"decode_jpeg on {device.type} failed: {str(exc).splitlines()[0][:200]}"


def choose_decoder(asked: str, device: torch.device) -> tuple[str, str]:
    """(decoder, note): the note says why auto chose the host, or is empty."""
    if asked == "workers":
        return "workers", ""
    why = device_decode_works(device)
    if asked == "device":
        if why:
            raise SystemExit(f"--decode device: {why}; use --decode workers")
        return "device", ""
    if device.type != "cuda":
        return "workers", "no CUDA device: decoded by the DataLoader's workers"
    return ("workers", why + "; decoded by the DataLoader's workers") if why else ("device", "")


def random_crop_box(height: int, width: int, rng: random.Random) -> tuple[int, int, int, int]:
    """(top, left, h, w) as RandomResizedCrop.get_params draws it: ten tries at a random
    area share and log-uniform aspect ratio, else the central crop at the nearest ratio."""
    area = height * width
    log_ratio = (math.log(RATIO[0]), math.log(RATIO[1]))
    for _ in range(10):
        target = area * rng.uniform(*SCALE)
        ratio = math.exp(rng.uniform(*log_ratio))
        w = round(math.sqrt(target * ratio))
        h = round(math.sqrt(target / ratio))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, height - h), rng.randint(0, width - w), h, w
    in_ratio = width / height
    if in_ratio < RATIO[0]:
        w, h = width, round(width / RATIO[0])
    elif in_ratio > RATIO[1]:
        h, w = height, round(height * RATIO[1])
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


class Batches:
    """Yields (images, labels, seconds waited for data) on the device; static() gives
    tensors of the batch's shape that stay put (a CUDA graph reads its input there)."""

    def __init__(
        self,
        args: argparse.Namespace,
        rank: int,
        size: int,
        device: torch.device,
        memory_format: torch.memory_format,
    ) -> None:
        self.device, self.memory_format = device, memory_format
        self.batch, self.image_size = args.batch, args.image_size
        self.synthetic = args.data == "synthetic"
        self.decoder, self.decode_note = "none", ""
        self.host_decoded = 0  # files the device decoder left to the host
        self._static: tuple[torch.Tensor, torch.Tensor] | None = None
        # The evaluation's batch: drawn from a seed no rank of this run trains on.
        self._held_out_seed = args.seed + size + rank
        if self.synthetic:
            # One batch made once and reused, as tf_cnn_benchmarks does: no input cost.
            gen = torch.Generator().manual_seed(args.seed + rank)
            images = torch.randn(args.batch, 3, args.image_size, args.image_size, generator=gen)
            labels = torch.randint(0, 1000, (args.batch,), generator=gen)
            self._static = (
                images.to(device).contiguous(memory_format=memory_format),
                labels.to(device),
            )
            return
        from torch.utils.data import DataLoader, DistributedSampler
        from torchvision.datasets import ImageFolder

        self.decoder, self.decode_note = choose_decoder(args.decode, device)
        root = Path(args.data)
        folder = str(root / "train" if (root / "train").is_dir() else root)
        if self.decoder == "device":
            dataset = ImageFolder(folder, loader=read_bytes)
            collate: Any = bytes_batch
        else:
            dataset = ImageFolder(folder, transform=host_transform(args.image_size))
            collate = None
        self.sampler = DistributedSampler(
            dataset, num_replicas=size, rank=rank, shuffle=True, seed=args.seed, drop_last=True
        )
        if len(self.sampler) < args.batch:
            raise SystemExit(
                f"{root}: {len(dataset)} images are too few for batch {args.batch} "
                f"on {size} workers"
            )
        self.loader = DataLoader(
            dataset,
            batch_size=args.batch,
            sampler=self.sampler,
            drop_last=True,
            num_workers=args.data_workers,
            collate_fn=collate,
            pin_memory=device.type == "cuda" and self.decoder == "workers",
            persistent_workers=args.data_workers > 0,
        )
        self.epoch = 0
        # The loader's workers (and its pin-memory thread) and the decode thread start at
        # the first batch, not here: a CUDA graph captured before (a partial capture)
        # must not see another thread's CUDA work.
        self.it: Any = None
        self.seed = args.seed * 7919 + rank
        if self.decoder == "device":
            # Made once here: a tensor from a Python list is a blocking copy to the GPU.
            self._mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1) * 255
            self._std = torch.tensor(STD, device=device).view(1, 3, 1, 1) * 255
            self._ready: queue.Queue[Any] = queue.Queue(maxsize=PREFETCH)
            self._lock = threading.Lock()  # the loader's iterator and host_decoded
            self._threads = [
                threading.Thread(target=self._produce, args=(k,), daemon=True, name=f"decode{k}")
                for k in range(DECODE_THREADS)
            ]

    def static(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._static is None:
            shape = (self.batch, 3, self.image_size, self.image_size)
            self._static = (
                torch.zeros(shape, device=self.device).contiguous(memory_format=self.memory_format),
                torch.zeros(self.batch, dtype=torch.long, device=self.device),
            )
        return self._static

    @property
    def held_out_note(self) -> str:
        if self.synthetic:
            return "one synthetic batch per worker, from a seed no worker trained on"
        return "per worker, the batch of --data after the last one trained"

    def held_out(self) -> tuple[torch.Tensor, torch.Tensor]:
        """One batch for the evaluation, none of whose samples the run trained on (with
        --data: the loader's next, as an epoch is far from over in a timed run)."""
        if not self.synthetic:
            images, labels, _ = self.next()
            return images, labels
        gen = torch.Generator().manual_seed(self._held_out_seed)
        images = torch.randn(self.batch, 3, self.image_size, self.image_size, generator=gen)
        labels = torch.randint(0, 1000, (self.batch,), generator=gen)
        return images.to(self.device).contiguous(memory_format=self.memory_format), labels.to(
            self.device
        )

    def train_samples(self, workers: int) -> int:
        """The distinct images the run trains on: one synthetic batch per worker, or the
        folder's."""
        return self.batch * workers if self.synthetic else len(self.sampler.dataset)

    def _loaded(self) -> Any:
        if self.it is None:
            self.it = iter(self.loader)
        try:
            return next(self.it)
        except StopIteration:
            self.epoch += 1
            self.sampler.set_epoch(self.epoch)
            self.it = iter(self.loader)
            return next(self.it)

    def next(self) -> tuple[torch.Tensor, torch.Tensor, float]:
        if self.synthetic:
            assert self._static is not None
            return (*self._static, 0.0)
        start = time.perf_counter()
        if self.decoder == "device":
            if self._threads[0].ident is None:
                for thread in self._threads:
                    thread.start()
            item = self._ready.get()
            if isinstance(item, BaseException):
                raise item
            images, labels, done = item
            if done is not None:  # the decode stream's work, before training reads it
                current = torch.cuda.current_stream(self.device)
                current.wait_event(done)
                images.record_stream(current)
                labels.record_stream(current)
            return images, labels, time.perf_counter() - start
        images, labels = self._loaded()
        images = images.to(self.device, non_blocking=True).contiguous(
            memory_format=self.memory_format
        )
        labels = labels.to(self.device, non_blocking=True)
        return images, labels, time.perf_counter() - start

    def _produce(self, k: int) -> None:
        """Decode thread k: batches of bytes from the workers, decoded and augmented on
        the device on a stream of its own, handed over with the event that ends them."""
        rng = random.Random(self.seed * 31 + k)
        cuda = self.device.type == "cuda"
        stream = torch.cuda.Stream(self.device) if cuda else None
        try:
            with torch.cuda.stream(stream) if cuda else contextlib.nullcontext():
                while True:
                    with self._lock:
                        encoded, labels = self._loaded()
                    images = self.decode(encoded, rng)
                    labels = labels.to(self.device, non_blocking=True)
                    done = None
                    if stream is not None:
                        done = torch.cuda.Event()
                        done.record(stream)
                    self._ready.put((images, labels, done))
        except BaseException as exc:  # training re-raises it at its next batch
            self._ready.put(exc)

    def decode(self, encoded: list[bytes], rng: random.Random) -> torch.Tensor:
        """A batch of encoded files to normalised, augmented images on the device."""
        from torchvision.io import ImageReadMode, decode_jpeg

        files = [as_tensor(data) for data in encoded]
        try:
            decoded = decode_jpeg(files, mode=ImageReadMode.RGB, device=self.device)
        except (RuntimeError, ValueError):  # one file it cannot take: decode file by file
            decoded = []
            for data in files:
                try:
                    decoded += decode_jpeg([data], mode=ImageReadMode.RGB, device=self.device)
                except (RuntimeError, ValueError):
                    with self._lock:
                        self.host_decoded += 1
                    decoded.append(host_decode(data).to(self.device))
        size, resized = self.image_size, []
        for image in decoded:
            top, left, h, w = random_crop_box(image.shape[1], image.shape[2], rng)
            crop = image[None, :, top : top + h, left : left + w].float()
            one = F.interpolate(
                crop, size=(size, size), mode="bilinear", align_corners=False, antialias=True
            )
            resized.append(one.flip(-1) if rng.random() < 0.5 else one)
        out = torch.cat(resized).sub_(self._mean).div_(self._std)
        return out.contiguous(memory_format=self.memory_format)


def host_decode(data: torch.Tensor) -> torch.Tensor:
    from torchvision.io import ImageReadMode, decode_image

    try:
        return decode_image(data, mode=ImageReadMode.RGB)
    except (RuntimeError, ValueError) as exc:
        raise RuntimeError(
            f"a file of {data.numel()} bytes in the batch is no image decode_jpeg or "
            f"decode_image reads ({str(exc).splitlines()[0][:120]}): remove it from --data"
        ) from None


def read_bytes(path: str) -> bytes:
    """A file's bytes, as the workers hand them over (pickled through their pipe)."""
    with open(path, "rb") as f:
        return f.read()


def as_tensor(data: bytes) -> torch.Tensor:
    """Bytes as the uint8 tensor decode_jpeg takes (frombuffer refuses an empty buffer;
    an empty file is the decoder's to refuse)."""
    if not data:
        return torch.empty(0, dtype=torch.uint8)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def bytes_batch(items: list[tuple[bytes, int]]) -> tuple[list[bytes], torch.Tensor]:
    """Collate files of different lengths: a list of bytes, one tensor of labels."""
    return [data for data, _ in items], torch.tensor([label for _, label in items])


def host_transform(image_size: int) -> Any:
    import torchvision.transforms as T

    return T.Compose(
        [
            T.RandomResizedCrop(image_size),
            T.RandomHorizontalFlip(),
            T.ToTensor(),
            T.Normalize(mean=MEAN, std=STD),
        ]
    )
