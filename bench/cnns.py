"""The CNNs the workload trains (bench/models.json): each one's default image size and
its torchvision constructor's arguments as the workload trains it, stated once.

Runs on the nodes and in the harness: no torch, no hpcbench (the harness loads this file
from bench/, hpcbench/core/bench.py, to build the same models on the meta device)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_DATA = json.loads((Path(__file__).parent / "models.json").read_text())
MODELS: dict[str, dict[str, Any]] = {k: v for k, v in _DATA.items() if not k.startswith("_")}
NUM_CLASSES = int(_DATA["_num_classes"])


def constructor_kwargs(name: str) -> dict[str, Any]:
    """torchvision's arguments for `name` as the workload builds it (no weights): its
    classes, and what models.json names (Inception v3's auxiliary head, which its loss
    trains: bench/steps.py)."""
    return {"weights": None, "num_classes": NUM_CLASSES, **MODELS.get(name, {}).get("kwargs", {})}
