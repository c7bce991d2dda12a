"""The workload's own modules (bench/), which the nodes run without hpcbench, loaded
from their files: the facts both sides share (the options train.py takes, the
transformers and their rules, the CNNs as the workload builds them, units, token files,
peak FLOPS, the MLPerf log's names, the record's fields), read by every layer above."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from hpcbench.core import paths


def _load(name: str) -> ModuleType:
    """A module of bench/, loaded from its file (it imports nothing of bench/ itself)."""
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", paths.BENCH_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


units = _load("units")
workload_options = _load("workload_options")  # the options train.py takes
transformer_configs = _load("transformer_configs")  # the transformers and their checks
tokens = _load("tokens")  # token files' headers
peak_flops = _load("peak_flops")  # accelerators' peak FLOPS, each with its source
mllog = _load("mllog")  # the MLPerf log's benchmark names, division, ruleset
workload_record = _load("workload_record")  # the fields of train.py's record
cnns = _load("cnns")  # the CNNs the workload trains, as it builds each
cpu_share = _load("cpu_share")  # how a CPU node's workers share its CPUs
