"""Parsers of the values that both the harness and the workload read.

bench/ runs on the nodes with only torch installed and never imports
hpcbench; hpcbench loads this file from bench/ (hpcbench/core/bench.py), so a size
that passes the harness's checks is the size the workload measures.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# Binary units, as nccl-tests prints sizes: 4K = 4096 bytes.
_SIZE = re.compile(r"(\d+(?:\.\d+)?)([KMG]?)(?:i?B)?", re.IGNORECASE | re.ASCII)
_SCALE = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
MIN_SIZE = 4  # one float32
MAX_SIZE = 4 * 1024**3  # one message; more would not fit a node's memory twice over


def parse_size(text: str) -> int:
    """'64M', '64MiB', '64MB', '4096' -> bytes; ValueError with one line otherwise."""
    match = _SIZE.fullmatch((text or "").strip())
    if not match:
        raise ValueError(f"{str(text)[:40]!r} is not a size like 4K, 64M or 1G")
    value = float(match.group(1)) * _SCALE[match.group(2).upper()]
    if not math.isfinite(value) or not MIN_SIZE <= value <= MAX_SIZE:
        raise ValueError(f"{str(text)[:40]!r} is out of range: use 4 bytes to 4G")
    return int(value)


# Whole numbers: ASCII digits only (int() would take '४' or '1_0'); 18 digits keep it cheap.
_WHOLE = re.compile(r"[0-9]{1,18}", re.ASCII)
_SIGNED = re.compile(r"-?[0-9]+", re.ASCII)  # a whole number, whatever its size
_REAL = re.compile(r"[0-9]{1,9}(?:\.[0-9]{1,9})?", re.ASCII)

# The bounds of every count the harness passes to the workload: the harness refuses
# what the workload would refuse, before anything is launched. (low, high) inclusive.
COUNTS: dict[str, tuple[int, int]] = {
    "batch": (1, 65536),
    "image-size": (0, 4096),  # 0: the model's own
    "seq-len": (0, 1 << 20),  # 0: the transformer's own
    "shard-group": (0, 1 << 16),  # 0: a node's workers
    "tp": (1, 1024),  # workers of one node
    "grad-accum": (1, 1 << 16),
    "threads": (0, 1024),  # 0: the node's cores shared among its workers
    "data-workers": (0, 256),
    "warmup": (0, 100_000),
    "windows": (1, 10_000),
    "steps": (1, 100_000),
    "seed": (0, 2**32 - 1),
}
# Megabytes (Horovod's fusion buffer, DDP's gradient buckets): 0 turns fusion off.
MEGABYTES: dict[str, tuple[float, float]] = {
    "fusion-threshold-mb": (0.0, 4096.0),
    "bucket-cap-mb": (0.001, 4096.0),
}


def parse_whole(text: str, low: int, high: int) -> int:
    """'8' -> 8, if low <= 8 <= high; ValueError with one line otherwise."""
    stripped = (text or "").strip() if isinstance(text, str) else str(text)
    if _SIGNED.fullmatch(stripped) and not _WHOLE.fullmatch(stripped):  # below 0, or huge
        raise ValueError(f"{stripped[:40]} is out of range: use {low} to {high}")
    if not _WHOLE.fullmatch(stripped):
        raise ValueError(f"{stripped[:40]!r} is not a whole number")
    value = int(stripped)
    if not low <= value <= high:
        raise ValueError(f"{value} is out of range: use {low} to {high}")
    return value


def parse_real(text: str, low: float, high: float) -> float:
    """'25', '2.5' -> a finite float in [low, high]; no exponents, signs, nan or inf."""
    stripped = (text or "").strip() if isinstance(text, str) else str(text)
    if not _REAL.fullmatch(stripped):
        raise ValueError(f"{stripped[:40]!r} is not a number like 25 or 2.5")
    value = float(stripped)
    if not low <= value <= high:
        raise ValueError(f"{value:g} is out of range: use {low:g} to {high:g}")
    return value


def count(name: str, text: str) -> int:
    """One of COUNTS, by its option name without dashes ('threads')."""
    return parse_whole(text, *COUNTS[name])


def megabytes(name: str, text: str) -> float:
    return parse_real(text, *MEGABYTES[name])


# Seconds a timed window lasts at the least (0: windows are --steps long, whatever it takes).
SECONDS: dict[str, tuple[float, float]] = {"min-window-s": (0.0, 3600.0)}


def seconds(name: str, text: str) -> float:
    return parse_real(text, *SECONDS[name])


def argtype(parse: Callable[[str, str], T], name: str) -> Callable[[str], T]:
    """An argparse type= that reports the parser's one-line reason."""

    def convert(text: str) -> T:
        try:
            return parse(name, text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    convert.__name__ = name
    return convert


# The collectives bench/allreduce.py probes, all-reduce first (the harness's fits read its
# records), then those FSDP2 issues.
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")


def parse_collectives(text: str) -> tuple[str, ...]:
    """'all_reduce,all_gather' -> the names; ValueError with one line unless all_reduce
    comes first and each name is one of COLLECTIVES, once."""
    names = tuple(t.strip() for t in (text or "").split(",") if t.strip())
    if (
        not names
        or names[0] != "all_reduce"
        or len(set(names)) < len(names)
        or not set(names) <= set(COLLECTIVES)
    ):
        raise ValueError(
            f"{str(text)[:60]!r}: all_reduce, then any of {', '.join(COLLECTIVES[1:])}, each once"
        )
    return names
