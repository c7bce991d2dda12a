"""The campaign's forecast of a transformer sweep (hpcbench.campaign.forecast): one
worker's tokens/s from the same chain as the CNNs' images/s, E from the sharded model
with each figure's source named, the probe's all-gather and reduce-scatter, the unit
in the journal's record, and the plan's run lengths in tokens."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpcbench import cli
from hpcbench.campaign import campaign_file, estimate, forecast
from hpcbench.campaign.datatypes import Campaign
from hpcbench.campaign.journal import Journal
from hpcbench.core.bench import transformer_configs as tc
from hpcbench.measure.store import Store
from hpcbench.performance import published_figures, sharded_model
from hpcbench.performance.sharded_model import Hop, Ring
from tests.unit.test_campaign import fake_run, write
from tests.unit.test_forecast import probe

LOCAL = """\
name: lm
out: {out}
sweep:
  model: resnet18
  image_size: 64
  batch: [4]
  nodes: [1, 2]
  repeats: 1
  device: cpu
testbeds:
  - name: slow
    env: local
    settings: {{node_count: 2, cpus_per_node: 1, link_rate: 200mbit}}
    expect: {{images_per_s: 90}}
  - name: fast
    env: local
    settings: {{node_count: 2, cpus_per_node: 1, link_rate: 1gbit}}
  - name: gpu
    slurm: {{partition: gpu, gpus_per_node: 4, nodes: 2, time: 30m}}
    sweep: {{gpus_per_node: [4], device: cuda, batch: [8]}}
    hardware: {{accelerator: H100, link: 200gbit, transport: rdma, intra_node: nvlink4}}
"""


def as_transformer(campaign: Campaign, parallel: str = "fsdp2", **workload: Any) -> Campaign:
    """The campaign's sweeps as a transformer's: gpt-tiny at 64 tokens on the local
    testbeds, gpt2-small at 1024 on the GPUs (the keys a campaign file gives `scale`),
    and 3000 tokens/s in the local testbeds' expect:."""
    testbeds = []
    for tb in campaign.testbeds:
        model, seq = ("gpt2-small", 1024) if tb.name == "gpu" else ("gpt-tiny", 64)
        parts = []
        for part in tb.parts:
            w = dataclasses.replace(
                part.workload,
                model=model,
                image_size=0,
                seq_len=seq,
                parallel=parallel,
                **workload,
            )
            t = dataclasses.replace(part.target, backend="ddp")
            parts.append(dataclasses.replace(part, workload=w, target=t))
        expect = (
            tb.expect if tb.name == "gpu" else dataclasses.replace(tb.expect, tokens_per_s=3000.0)
        )
        testbeds.append(dataclasses.replace(tb, parts=tuple(parts), expect=expect))
    return dataclasses.replace(campaign, testbeds=tuple(testbeds))


def local(tmp_path: Path, parallel: str = "fsdp2") -> Campaign:
    data = yaml.safe_load(LOCAL.format(out=tmp_path / "out"))
    return as_transformer(campaign_file.load(write(tmp_path, yaml.safe_dump(data))), parallel)


def cell_of(forecasts: list[forecast.CellForecast], workers: int) -> forecast.CellForecast:
    return next(f for f in forecasts if f.cell.workers == workers)


def lm_baseline(tokens_per_s: float, batch: int = 4, seq_len: int = 64) -> dict[str, Any]:
    """An ok one-worker gpt-tiny run that made tokens_per_s (two windows of 2 steps)."""
    seconds = 2 * batch * seq_len / tokens_per_s
    return {
        **fake_run("local", batch, 1, 1, 1),
        "model": "gpt-tiny",
        "backend": "ddp",
        "image_size": 0,
        "seq_len": seq_len,
        "parallel": "fsdp2",
        "window_times": [seconds, seconds],
    }


def test_expect_tokens_per_s_is_a_transformers_one_worker_and_the_unit_is_tokens(tmp_path):
    campaign = local(tmp_path)
    slow = campaign.testbeds[0]
    fcs = forecast.testbed_forecast(campaign, slow)
    one, two = cell_of(fcs, 1), cell_of(fcs, 2)
    assert one.single is not None and one.single.per_s == 3000  # not the 90 images/s
    assert one.single.source == "3000 tokens/s given in expect:"
    assert two.unit == "tokens" and two.efficiency is not None
    assert two.per_s == pytest.approx(2 * 3000 * two.efficiency)
    record = two.record()
    assert record["unit"] == "tokens" and record["single_tokens_per_s"] == 3000
    # On CPU nodes Gloo's collectives block: the point is no overlap, and the band's low
    # end adds FSDP2's own work at the most measured (sharded_model.GLOO_OWN_WORK_UP_TO).
    step = 1 / two.efficiency  # in one worker's steps
    own = sharded_model.GLOO_OWN_WORK_UP_TO
    assert two.efficiency_low == pytest.approx(1 / (step + own))
    assert "blocking (Gloo)" in two.link_source
    assert "reduce-scatter as an all-reduce (Gloo)" in two.link_source
    assert any("tokens/s" in line for line in forecast.cell_lines(fcs))
    # The CNNs' forecast records keep their unit too.
    cnn = campaign_file.load(write(tmp_path, LOCAL.format(out=tmp_path / "cnn"), "cnn.yaml"))
    first = forecast.testbed_forecast(cnn, cnn.testbeds[0])
    assert cell_of(first, 2).record()["unit"] == "images"


def test_a_measured_baseline_in_tokens_and_the_same_hardware_before_expect(tmp_path):
    campaign = local(tmp_path)
    slow, fast, _ = campaign.testbeds
    Store(campaign.testbed_out(slow)).append(lm_baseline(2000.0))
    # A CNN's baseline of the same batch is not the transformer's.
    Store(campaign.testbed_out(slow)).append({**fake_run("local", 4, 1, 1, 1), "image_size": 64})
    single = cell_of(forecast.testbed_forecast(campaign, fast), 1).single
    assert single is not None and single.unit == "tokens"
    assert single.per_s == pytest.approx(2000.0)
    assert single.source.startswith("2000.0 tokens/s measured on slow, the same hardware,")
    assert single.step_s(4) == pytest.approx(4 * 64 / 2000.0)
    # Another sequence length is another workload.
    Store(campaign.testbed_out(fast)).append(lm_baseline(2500.0, seq_len=128))
    again = cell_of(forecast.testbed_forecast(campaign, fast), 1).single
    assert again is not None and again.per_s == pytest.approx(2000.0)


def test_an_accelerator_without_a_figure_is_assumed_from_its_peak_and_says_so(tmp_path):
    campaign = local(tmp_path, parallel="hsdp")
    gpu = campaign.testbeds[2]
    fcs = forecast.testbed_forecast(campaign, gpu)
    single = cell_of(fcs, 8).single
    assert single is not None and single.source.startswith("assumed: ")
    peak = 989.5e12  # bench/peak_flops.py, H100 SXM bf16
    flops = tc.flops_per_token(tc.CONFIGS["gpt2-small"], 1024)
    assert single.per_s == pytest.approx(peak * published_figures.DEFAULT_MFU / flops)
    across = cell_of(fcs, 8)
    assert "HSDP" in across.link_source and "200 Gbit/s x 0.92" in across.link_source
    assert across.efficiency is not None
    assert across.efficiency_low <= across.efficiency <= across.efficiency_high  # type: ignore[operator]
    # A GPU the peak table does not know: nothing to go on, and the plan says what to give.
    unknown = dataclasses.replace(
        gpu, hardware=dataclasses.replace(gpu.hardware, accelerator="Gaudi3")
    )
    assert forecast.testbed_forecast(campaign, unknown)[0].single is None
    said = forecast.sources(forecast.testbed_forecast(campaign, unknown))
    assert "`expect: {tokens_per_s: N}`" in said[0]


def fsdp_probe(workers: int, gather_busbw: float, scatter_busbw: float) -> dict[str, Any]:
    """The all-reduce probe of tests/unit/test_forecast.py with all-gather and
    reduce-scatter records of the given bus bandwidths."""
    out = probe(workers, 20e6)
    for name, busbw in (("all_gather", gather_busbw), ("reduce_scatter", scatter_busbw)):
        ring = Ring(workers, Hop(50e-6, busbw))
        out[name] = [
            {"bytes": s, "time_s": ring.gather(s), "busbw": 1.0} for s in (2**16, 2**20, 2**24)
        ]
    return out


def test_the_probes_gather_and_scatter_decide_over_the_all_reduces_link(tmp_path):
    campaign = local(tmp_path)
    slow, fast, _ = campaign.testbeds
    before = cell_of(forecast.testbed_forecast(campaign, slow), 2)
    Store(campaign.testbed_out(slow)).append(fsdp_probe(2, 20e6, 10e6))
    own = cell_of(forecast.testbed_forecast(campaign, slow), 2)
    assert "(and its all-gather and reduce-scatter)" in own.link_source
    assert "the probe's reduce-scatter" in own.link_source
    assert own.efficiency != before.efficiency
    # The next testbed of the environment: its line rate x the share probed on slow.
    later = cell_of(forecast.testbed_forecast(campaign, fast), 2)
    assert "the share probed on slow (and its all-gather and reduce-scatter)" in (later.link_source)
    assert later.efficiency > own.efficiency  # type: ignore[operator]


def test_the_plan_sizes_a_transformers_runs_from_tokens(tmp_path):
    campaign = local(tmp_path)
    slow = campaign.testbeds[0]
    fcs = forecast.testbed_forecast(campaign, slow)
    part = slow.parts[0]
    one = cell_of(fcs, 1)
    est = estimate.one_run_seconds(campaign, slow, part, one.cell, one)
    step = 4 * 64 / 3000  # sequences x tokens / tokens/s
    assert est.seconds == pytest.approx(
        estimate.run_seconds(part.workload, step, estimate.DEFAULT_OVERHEAD_S)
    )


def test_the_journal_keeps_the_unit_and_skips_one_it_does_not_know(tmp_path):
    campaign = local(tmp_path)
    slow = campaign.testbeds[0]
    journal = Journal(campaign.out, campaign.name)
    cells = [f.record() for f in forecast.testbed_forecast(campaign, slow)]
    journal.forecast(slow, "plan", cells)
    journal.forecast(slow, "booking", [{**cells[-1], "unit": "bananas"}])
    kept = journal.forecasts()
    assert [r["made"] for r in kept] == ["plan"]
    assert {c["unit"] for c in kept[0]["cells"]} == {"tokens"}


def test_expect_tokens_per_s_out_of_range_is_one_line(tmp_path, capsys):
    text = LOCAL.format(out=tmp_path / "out").replace("{images_per_s: 90}", "{tokens_per_s: -5}")
    path = write(tmp_path, text)
    assert cli.main(["campaign", "plan", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "expect.tokens_per_s" in err and "one worker's tokens/s" in err and "\n" not in err


def test_a_transformers_figures_are_journaled_as_tokens_and_read_back_from_before(tmp_path):
    # The journal names each figure by its unit; a journal written before kept a
    # transformer's tokens/s under images_per_s, which reads back as the same figure.
    from hpcbench.campaign.journal import per_s

    campaign = local(tmp_path)
    slow = campaign.testbeds[0]
    [record] = [f.record() for f in forecast.testbed_forecast(campaign, slow) if f.cell.workers > 1]
    assert record["unit"] == "tokens" and "images_per_s" not in record
    assert record["tokens_per_s"] is not None and record["single_tokens_per_s"] == 3000
    before = {"unit": "tokens", "images_per_s": 12.5, "single_images_per_s": 3000}
    assert per_s(before) == 12.5 and per_s(before, single=True) == 3000
    assert per_s(record) == record["tokens_per_s"]
