"""An ImageNet-layout folder of JPEG files, for measuring the real-data path without
ImageNet (its licence keeps it off this repository and off most test machines).

    python evaluation/jpeg_folder.py OUT [--classes 100 --per-class 20]

OUT/train/nNNNNNNNN/*.JPEG as ImageNet's training set is laid out. Each image has a
size drawn around ImageNet's typical 500x375 (both orientations), smooth content
(random colours at low resolution, upsampled, with a little noise) so that it
compresses like a photograph rather than like noise, and JPEG quality 90: about
50-90 KB a file, as ImageNet's files average about 110 KB.
"""

from __future__ import annotations

import argparse
import os
import random
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


def one_image(path: str, seed: int) -> None:
    import numpy as np
    from PIL import Image

    rng = random.Random(seed)
    long_side, short_side = rng.randint(400, 640), rng.randint(300, 480)
    width, height = (long_side, short_side) if rng.random() < 0.75 else (short_side, long_side)
    gen = np.random.default_rng(seed)
    coarse = gen.integers(0, 256, size=(rng.randint(4, 12), rng.randint(4, 12), 3), dtype=np.uint8)
    image = Image.fromarray(coarse).resize((width, height), Image.Resampling.BICUBIC)
    pixels = np.asarray(image, dtype=np.int16) + gen.integers(-6, 7, size=(height, width, 3))
    Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(path, "JPEG", quality=90)


def make(out: Path, classes: int, per_class: int, seed: int = 0) -> Path:
    """Write the folder (files already there are kept); returns its train/ folder."""
    jobs = []
    for c in range(classes):
        folder = out / "train" / f"n{c:08d}"
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            path = folder / f"n{c:08d}_{i}.JPEG"
            if not path.exists():
                jobs.append((str(path), seed * 1_000_003 + c * per_class + i))
    if jobs:
        with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            list(pool.map(one_image, *zip(*jobs, strict=True), chunksize=16))
    return out / "train"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--classes", type=int, default=100)
    p.add_argument("--per-class", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.classes < 1 or args.per_class < 1:
        p.error("--classes and --per-class must be at least 1")
    train = make(Path(args.out), args.classes, args.per_class, args.seed)
    files = list(train.rglob("*.JPEG"))
    size = sum(f.stat().st_size for f in files)
    print(f"{train}: {len(files)} JPEG files, {size / len(files) / 1024:.0f} KB on average")


if __name__ == "__main__":
    main()
