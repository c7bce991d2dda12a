"""Parsers of the values that both the harness and the workload read.

bench/ runs on the nodes with only torch installed and never imports
hpcbench; hpcbench loads this file from bench/ (hpcbench.specs), so a size
that passes the harness's checks is the size the workload measures.
"""

from __future__ import annotations

import math
import re

# Binary units, as nccl-tests prints sizes: 4K = 4096 bytes.
_SIZE = re.compile(r"(\d+(?:\.\d+)?)([KMG]?)(?:i?B)?", re.IGNORECASE | re.ASCII)
_SCALE = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
MIN_SIZE = 4  # one float32
MAX_SIZE = 4 * 1024**3  # one message; more would not fit a node's memory twice over


def parse_size(text: str) -> int:
    """'64M', '64MiB', '64MB', '4096' -> bytes; ValueError with one line otherwise."""
    match = _SIZE.fullmatch((text or "").strip())
    if not match:
        raise ValueError(f"{text!r} is not a size like 4K, 64M or 1G")
    value = float(match.group(1)) * _SCALE[match.group(2).upper()]
    if not math.isfinite(value) or not MIN_SIZE <= value <= MAX_SIZE:
        raise ValueError(f"{text!r} is out of range: use 4 bytes to 4G")
    return int(value)
