"""A ConfigSummary for a test: one configuration of a made-up sweep, with only the
figures the test is about set."""

from __future__ import annotations

from typing import Any

from hpcbench.measure.analysis import ConfigSummary

# What a test that is not about them leaves as they are.
PLAIN = {
    "env": "e",
    "model": "m",
    "backend": "ddp",
    "batch": 8,
    "image_size": 32,
    "data": "synthetic",
    "gpus_per_node": 1,
    "nodes": 1,
    "workers": 1,
    "runs": 1,
    "failed": 0,
}


def summary(**fields: Any) -> ConfigSummary:
    return ConfigSummary(**{**PLAIN, **fields})
