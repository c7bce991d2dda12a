"""The plan's bound on a testbed's all-reduce probes: with sweep.probe_budget, each
probe the sweeps start takes at most its budget plus the grace after which the
harness kills it (probe.GRACE_S); without it, the stated default."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpcbench.campaign import campaign_file, estimate
from hpcbench.measure import probe, sweep
from hpcbench.measure.store import Store
from hpcbench.schedulers.base import Outcome
from hpcbench.testbeds.target import Target

PROBE_RESULT = {
    "results": [{"bytes": 4096, "time_s": 1e-3, "algbw": 4e6, "busbw": 4e6, "cpu_s": 1e-4}],
    "device": "cpu",
    "stopped_early": False,
    "fingerprint": {},
}


@pytest.fixture(autouse=True)
def _own_state(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))


def _campaign(tmp_path: Path, **sweep_keys: Any) -> campaign_file.Campaign:
    """Two gpus_per_node on hosts: worker counts 2 (1 and 2 per node) and 4 probed."""
    doc = {
        "name": "probes",
        "out": str(tmp_path / "out"),
        "sweep": {
            "model": "resnet18",
            "batch": [8],
            "nodes": [1, 2],
            "gpus_per_node": [1, 2],
            "backend": "ddp",
            "repeats": 1,
            **sweep_keys,
        },
        "testbeds": [{"name": "mine", "hosts": ["h0:2", "h1:2"], "expect": {"images_per_s": 10}}],
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(doc))
    return campaign_file.load(path)


def _probes_the_sweeps_run(
    tb: campaign_file.TestbedPlan, monkeypatch: pytest.MonkeyPatch
) -> list[dict]:
    """Each part's sweep over its cells as a campaign runs it, the runs faked: the
    probes in the testbed's store."""

    def run(self, spec, timeout_s, echo=False):
        if spec.script == "allreduce.py":
            return Outcome([0], [PROBE_RESULT], [], launched_at=0.0, duration_s=1.0)
        record = {"workers": spec.workers, "window_times": [1.0] * 3, "steps": 20}
        return Outcome([0], [{**record, "fingerprint": {}}], [], launched_at=0.0, duration_s=0.01)

    monkeypatch.setattr(Target, "run", run)
    monkeypatch.setattr(Target, "prepare", lambda self: None)
    monkeypatch.setattr(Target, "unreachable", lambda self, spec: {})
    for part in tb.parts:
        only = frozenset(c.config.key for c in part.cells)
        sweep.run(part.workload, part.target, dataclasses.replace(part.sweep, only=only))
    return Store(tb.parts[0].sweep.out).probes()


def test_a_probe_budget_bounds_each_probe_the_sweeps_start(tmp_path, monkeypatch):
    campaign = _campaign(tmp_path, probe_budget="3m")
    [tb] = campaign.testbeds
    planned = estimate.probe_seconds(campaign, tb)
    assert planned is not None and planned.seconds == estimate.DEFAULT_PROBE_S
    probes = _probes_the_sweeps_run(tb, monkeypatch)
    assert sorted(p["workers"] for p in probes) == [2, 4]  # 2 workers probed once
    assert planned.most == len(probes) * (180 + probe.GRACE_S)
    assert f"probe_budget + {probe.GRACE_S} s" in planned.source


def test_without_a_probe_budget_the_bound_is_the_stated_default(tmp_path):
    campaign = _campaign(tmp_path)
    planned = estimate.probe_seconds(campaign, campaign.testbeds[0])
    assert planned == estimate.Estimate(
        estimate.DEFAULT_PROBE_S, "assumed", estimate.DEFAULT_PROBE_MOST_S
    )
    unprobed = _campaign(tmp_path, no_probe=True, probe_budget="3m")
    assert estimate.probe_seconds(unprobed, unprobed.testbeds[0]) is None
