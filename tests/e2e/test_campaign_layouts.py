"""The transformer in a layout beyond data parallelism, end to end on a local testbed
the campaign deploys: TP 2 inside a node (two workers a node) with two micro-batches
a step under FSDP2, on 1 and 2 nodes, forecast before booking from what this machine
measured first (campaign/before_booking.py: the lone worker and the TP pair, each in
a container of a node's planned limits, and a lone worker in both nodes' at once),
then measured, and scored in the report.

Its testbed has a name, subnet and ports of its own (no other e2e testbed uses them),
is lean (no NFS, no JupyterLab: test_local_testbed.py checks those) and is destroyed
by the campaign. Kept short: one repeat, three windows of two steps, 64 tokens a
sequence, one probe up to 1 MiB.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import REPO, TINY_SWEEP, campaign_run, containers, lean_local

# It holds forecasts made from this machine's speed to what the same machine then
# measures: `make test` runs it with the other tests that time the CPU, nothing beside
# it (a load that changes between the run before booking and the cells moves E by
# more than the targets: 0.185 and 0.134 forecast, 0.139 and 0.047 measured, beside
# tests/e2e/test_campaign_lm.py).
pytestmark = [pytest.mark.e2e, pytest.mark.solo]

SETTINGS = {
    "name": "hpcbench-e2elm",
    "subnet": "172.30.39.0/24",
    "ssh_port_base": 22990,
    "jupyter_port": 28990,
    "node_count": 2,
    "cpus_per_node": 1,
    "link_rate": "1gbit",
}
SWEEP = {
    **{k: v for k, v in TINY_SWEEP.items() if k not in ("model", "image_size", "batch")},
    "model": "gpt-tiny",
    "backend": "ddp",
    "parallel": ["fsdp2"],
    "tp": 2,
    "grad_accum": 2,
    "gpus_per_node": [2],
    "seq_len": 64,
    "batch": [4],
    "nodes": [1, 2],
    "windows": 3,
    "probe_max_bytes": "1M",
    "threads": 1,
}
# The forecasts against the measured E of every cell, the targets on a machine of this
# kind: the plan (made before anything is booked) within 0.1, the re-forecast (made just
# before the testbed is booked) within 0.05, and the measured E inside the plan's band
# as the report tells it (analysis.inside_band: the E's interval touching the band; a
# TP pair on one core ran 1339 tokens/s before booking and 1730 on the testbed, a
# spread between runs that one run's windows do not show).
PLAN_WITHIN = 0.1
BOOKING_WITHIN = 0.05


def test_tp_and_accumulation_cells_are_forecast_from_this_machine_then_measured(
    tmp_path: Path,
) -> None:
    out = tmp_path / "results"
    path = tmp_path / "layouts.yaml"
    testbed = lean_local(
        "tp",
        "local, TP 2 x FSDP2, 2 micro-batches a step",
        SETTINGS,
        hardware={"link_efficiency": 0.93},
    )
    path.write_text(
        yaml.safe_dump({"name": "layouts", "out": str(out), "sweep": SWEEP, "testbeds": [testbed]})
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TF_VAR_")}
    environ = {
        **env,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]]),
        "HPCBENCH_STATE": str(tmp_path / "state"),
    }
    log = tmp_path / "run.out"
    started = time.monotonic()
    try:
        rc = campaign_run(path, (), environ, log, lambda: False)
    finally:
        if containers(SETTINGS["name"]):  # a failed run's testbed: not left for the next
            subprocess.run(
                [sys.executable, "-m", "hpcbench", "campaign", "destroy", str(path)],
                cwd=REPO,
                env=environ,
                capture_output=True,
                timeout=900,
            )
    text = log.read_text()
    assert rc == 0, text[-6000:]
    print(f"layouts campaign: {time.monotonic() - started:.0f} s")
    assert containers(SETTINGS["name"]) == []  # deployed, measured, destroyed

    # Before booking: the lone worker (no TP) and the TP pair, each in one container of
    # the first node's planned limits, then a lone worker in each node's at once,
    # recorded for the testbed.
    lines = (out / "before_booking" / "results.jsonl").read_text().splitlines()
    here = [json.loads(x) for x in lines]
    assert [(r["status"], r["workers"], r.get("tp"), r.get("alongside")) for r in here] == [
        ("ok", 1, 1, None),
        ("ok", 2, 2, None),
        ("ok", 1, 1, 2),
    ], [r.get("error") for r in here]
    assert all(r["testbeds"] == ["tp"] and r["grad_accum"] == 2 for r in here)
    assert "a TP group of 2 workers on this machine before booking tp" in text
    assert "one worker on each of 2 nodes at once on this machine before booking tp" in text

    journal = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    [plan] = [r for r in journal if r.get("kind") == "forecast" and r["made"] == "plan"]
    [booking] = [r for r in journal if r.get("kind") == "forecast" and r["made"] == "booking"]
    forecast = {c["workers"]: c for c in plan["cells"] if c["workers"] > 1}
    reforecast = {c["workers"]: c for c in booking["cells"] if c["workers"] > 1}
    assert set(forecast) == set(reforecast) == {2, 4}, plan["cells"]
    for c in forecast.values():
        assert "the TP group's step" in c["link_source"], c
        assert "measured on this machine before booking" in c["link_source"], c
    assert "2 nodes' workers at once on this machine" in forecast[4]["link_source"]

    with (out / "configurations.csv").open() as f:
        rows = {int(r["workers"]): r for r in csv.DictReader(f)}
    assert set(rows) == {1, 2, 4}, rows
    for workers in (2, 4):
        row, c, again = rows[workers], forecast[workers], reforecast[workers]
        assert row["tp"] == "2" and row["grad_accum"] == "2", row
        measured, ci = float(row["efficiency"]), float(row["efficiency_ci95"] or 0)
        said = (
            f"{workers} workers: measured E {measured:.3f} ± {ci:.3f}, plan {c['efficiency']:.3f} "
            f"({c['efficiency_low']:.3f}-{c['efficiency_high']:.3f}), "
            f"re-forecast {again['efficiency']:.3f}"
        )
        print(said)
        assert abs(c["efficiency"] - measured) <= PLAN_WITHIN, said
        assert abs(again["efficiency"] - measured) <= BOOKING_WITHIN, said
        assert c["efficiency_low"] <= measured + ci and measured - ci <= c["efficiency_high"], said
        assert float(row["forecast_plan_error"]) == pytest.approx(
            c["efficiency"] - measured, abs=1e-3
        ), row
