"""A transformer campaign end to end, as `hpcbench advise` writes it: the small
transformer (gpt-tiny) under DDP and FSDP2 at 1 and 2 nodes on the e2e testbed's two
Slurm partitions, `fast` (1 Gbit/s) and `slow` (node3 shaped to 200 Mbit/s,
conftest.E2E_VARS), every option advise finds (--all), into one report that counts
tokens/s and scores the advice: the forecast's ranking beside the measured one.

It shares the deployed testbed with test_campaign_slurm.py (the `deployed` fixture
deploys it when this module runs alone). Kept short: one repeat, two windows of two
steps, 32 tokens a sequence, one probe (fast's) up to 1 MiB; each run is a Slurm job.
"""

from __future__ import annotations

import csv
import json
import re
import time
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import TINY_SWEEP, DeployedTestbed, campaign_run, partition

pytestmark = [pytest.mark.e2e, pytest.mark.stage("lm campaign")]

SWEEP = {
    **{k: v for k, v in TINY_SWEEP.items() if k not in ("model", "image_size", "batch")},
    "model": "gpt-tiny",
    "backend": "ddp",
    "parallel": ["ddp", "fsdp2"],
    "seq_len": 32,
    "batch": [2],
    "nodes": [1, 2],
    "probe_max_bytes": "1M",
    # One thread a rank, as the CNN campaign's partitions (the nodes' quota is 0.6 CPU).
    "threads": 1,
}


def test_a_transformer_campaign_over_two_links_scores_its_forecast_in_tokens(
    deployed: DeployedTestbed, tmp_path: Path
) -> None:
    testbeds = []
    for name, link in (("fast", "1gbit"), ("slow", "200mbit")):
        # Planning figures for the forecast the report scores (not measurements): one
        # worker's tokens/s, and the partition's link (conftest.E2E_VARS).
        testbeds.append(
            {
                **partition(deployed, name),
                "expect": {"tokens_per_s": 1000},
                "hardware": {"link": link, "link_efficiency": 0.9},
            }
        )
    # One probe (all-reduce, all-gather, reduce-scatter): each is a job of a minute or so.
    testbeds[1]["sweep"] = {"no_probe": True}
    # The places and what is assumed of them, as a user writes them; advise writes the
    # campaign that is run.
    source = tmp_path / "places.yaml"
    out = tmp_path / "results"
    source.write_text(
        yaml.safe_dump(
            {"name": "lm", "out": str(tmp_path / "places"), "sweep": SWEEP, "testbeds": testbeds}
        )
    )
    path = tmp_path / "lm.yaml"
    advice = deployed.hpcbench(
        "advise",
        "--model",
        "gpt-tiny",
        "--tokens",
        "1M",
        "--campaign",
        str(source),
        "--all",
        "--out",
        str(path),
        "--results",
        str(out),
        timeout=300,
    )
    assert advice.returncode == 0, advice.stdout[-3000:] + advice.stderr[-3000:]
    assert "the front" in advice.stdout and f"written: {path}" in advice.stdout
    plan = deployed.hpcbench("campaign", "plan", str(path), timeout=300)
    assert plan.returncode == 0, plan.stdout[-3000:] + plan.stderr[-3000:]
    assert "tokens/s" in plan.stdout and "FSDP2" in plan.stdout, plan.stdout

    log = tmp_path / "run.out"
    started = time.monotonic()
    rc = campaign_run(path, (), deployed.environ, log, lambda: False)
    took = time.monotonic() - started
    text = log.read_text()
    assert rc == 0, text[-6000:]
    print(f"transformer campaign: {took:.0f} s")

    journal = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    cells = {r["cell"]: r for r in journal if r.get("kind") == "cell"}
    assert {r["status"] for r in cells.values()} == {"measured"}, cells
    for name in ("fast", "slow"):
        lines = (out / name / "results.jsonl").read_text().splitlines()
        runs = [json.loads(x) for x in lines if '"kind": "run"' in x]
        ok = {(r["workers"], r.get("parallel")) for r in runs if r["status"] == "ok"}
        # One worker trains unwrapped under either: measured once, the baseline of both.
        assert ok == {(1, "ddp"), (2, "ddp"), (2, "fsdp2")}, (name, ok)
        assert all(r["tokens_per_sec"] > 0 for r in runs if r["status"] == "ok")

    report = (out / "report.md").read_text()
    assert "tokens/s" in report and "images/s" not in report, report[:3000]
    # The forecast scored: the plan's and the booking's E beside the measured one.
    assert "E forecast: plan, booking" in report
    with (out / "configurations.csv").open() as f:
        rows = list(csv.DictReader(f))
    two = [r for r in rows if r["workers"] == "2"]
    assert {(r["testbed"], r["parallel"]) for r in two} == {
        (t, p) for t in ("fast", "slow") for p in ("ddp", "fsdp2")
    }, two
    for r in two:
        assert r["unit"] == "tokens" and float(r["tokens_per_sec"]) > 0 and not r["images_per_sec"]
        assert r["forecast_plan_error"] and r["forecast_plan_tokens_per_s"], r
        # On CPU the peak is a GEMM measured on the node: MFU is known, or the record says why.
        assert r["mfu"] or r["mfu_unknown"], r
    # The advice scored: its forecast orders the six configurations as they measured,
    # and its fastest was the measured fastest or inside its interval.
    ranking = re.search(
        r"forecast before anything was booked: rank correlation with the measured "
        r"throughput (\S+) over (\d+) configuration\(s\)(?: \(\S+ to \S+ [^)]*\))?; "
        r"its best, ([^,]+, [^,]+, [^,]+), "
        r"was (the measured best|inside the measured interval)",
        report,
    )
    assert ranking, report[:4000]
    assert float(ranking[1]) >= 0.8 and int(ranking[2]) == 6, ranking[0]
    # And the measured front for the advice's budget, drawn.
    assert "The measured front for the advice's budget (1e+06 tokens" in report
    assert (out / "front.png").is_file()
