"""The forecast of each campaign cell (hpcbench.campaign.forecast): where one worker's
figure and E come from, in their order; the re-forecast before each testbed is booked,
journaled with its lease; and the forecast scored in the campaign's report."""

from __future__ import annotations

import builtins
import io
import json
import math
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcbench import cli
from hpcbench.campaign import campaign_file, comparison, forecast, scoring
from hpcbench.campaign.datatypes import Hardware
from hpcbench.campaign.journal import Journal
from hpcbench.core.errors import UsageError
from hpcbench.measure.store import Store
from hpcbench.performance import allreduce_model, published_figures
from tests.unit.test_allreduce_model import HIDDEN, RESOLVED, cpu_work_record
from tests.unit.test_campaign import SHIPPED, Fakes, fake_run, write

TWO_LOCAL = """\
name: f
out: {out}
sweep:
  model: resnet18
  image_size: 64
  batch: [64]
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
    expect: {{images_per_s: 90}}
"""


def two_local(tmp_path: Path, **extra: Any) -> campaign_file.Campaign:
    data = yaml.safe_load(TWO_LOCAL.format(out=tmp_path / "out"))
    data.update(extra)
    return campaign_file.load(write(tmp_path, yaml.safe_dump(data)))


def baseline(images_per_s: float, batch: int = 64, **fields: Any) -> dict[str, Any]:
    """An ok one-worker run that made images_per_s (two windows of `steps` steps)."""
    seconds = 2 * batch / images_per_s
    return {
        **fake_run("local", batch, 1, 1, 1),
        "model": "resnet18",
        "image_size": 64,
        "window_times": [seconds, seconds],
        **fields,
    }


def probe(workers: int, busbw_bytes: float, **fields: Any) -> dict[str, Any]:
    """A probe whose sizes fit a link of busbw_bytes and 50 us per step exactly."""
    results = []
    for size in (2**16, 2**20, 2**24):
        t = 2 * (workers - 1) * 50e-6 + allreduce_model.ring_factor(workers) * size / busbw_bytes
        results.append(
            {"bytes": size, "time_s": t, "busbw": allreduce_model.busbw(size, t, workers)}
        )
    return {
        "kind": "probe",
        "env": "local",
        "backend": "horovod",
        "nodes": workers,
        "workers": workers,
        "status": "ok",
        "results": results,
        **fields,
    }


def cell_of(forecasts: list[forecast.CellForecast], workers: int) -> forecast.CellForecast:
    return next(f for f in forecasts if f.cell.workers == workers)


# ------------------------------------------------------------- one worker's figure
def test_one_workers_figure_comes_from_the_best_source_there_is(tmp_path: Path) -> None:
    campaign = two_local(tmp_path)
    slow, fast = campaign.testbeds
    first = forecast.testbed_forecast(campaign, fast)
    assert cell_of(first, 1).single.source == "90 images/s given in expect:"  # type: ignore[union-attr]
    # The earlier testbed of the same hardware measured it: that beats expect:.
    Store(campaign.testbed_out(slow)).append(baseline(60.0))
    again = forecast.testbed_forecast(campaign, fast)
    single = cell_of(again, 1).single
    assert single is not None and single.per_s == pytest.approx(60.0)
    assert "measured on slow, the same hardware," in single.source
    # Not the same hardware (half a core a node): expect: again.
    other = campaign_file.load(
        write(
            tmp_path,
            TWO_LOCAL.format(out=tmp_path / "out").replace(
                "cpus_per_node: 1, link_rate: 1gbit", "cpus_per_node: 0.5, link_rate: 1gbit"
            ),
            "half.yaml",
        )
    )
    half = forecast.testbed_forecast(other, other.testbeds[1])
    assert "expect:" in cell_of(half, 1).single.source  # type: ignore[union-attr]
    # Its own baseline beats both.
    Store(campaign.testbed_out(fast)).append(baseline(75.0))
    own = cell_of(forecast.testbed_forecast(campaign, fast), 1).single
    assert own is not None and own.per_s == pytest.approx(75.0)
    assert "on this testbed" in own.source and own.slowest == pytest.approx(75.0)


def test_a_measured_figure_of_another_batch_stands_in_as_time_per_image_and_says_so(
    tmp_path: Path,
) -> None:
    campaign = two_local(tmp_path)
    slow, fast = campaign.testbeds
    Store(campaign.testbed_out(slow)).append(baseline(50.0, batch=32))
    single = cell_of(forecast.testbed_forecast(campaign, fast), 1).single
    assert single is not None and single.per_s == pytest.approx(50.0)
    assert "at batch 32" in single.source


GPU_CAMPAIGN = """\
name: g
out: {out}
{calibrate}
sweep:
  model: resnet50
  batch: [32]
  nodes: [1, 2]
  repeats: 1
testbeds:
  - name: part
    slurm: {{partition: gpu, gpus_per_node: 4, nodes: 2, time: 30m}}
    sweep: {{gpus_per_node: [1, 4]}}
    hardware: {{accelerator: A100, link: 200gbit, transport: rdma, intra_node: nvlink3}}
"""


def gpu_campaign(tmp_path: Path, calibrate: str = "") -> campaign_file.Campaign:
    text = GPU_CAMPAIGN.format(out=tmp_path / "out", calibrate=calibrate)
    return campaign_file.load(write(tmp_path, text, "g.yaml"))


def test_without_expect_a_named_store_of_the_same_accelerator_then_the_published_table(
    tmp_path: Path,
) -> None:
    campaign = gpu_campaign(tmp_path)
    (tb,) = campaign.testbeds
    single = cell_of(forecast.testbed_forecast(campaign, tb), 1).single
    assert single is not None and single.source.startswith("published: ")
    row = published_figures.lookup("A100", "resnet50", 224, 32, ("amp",))
    assert row is not None and single.per_s == row.images_per_s
    assert row.url in single.source and row.precision == "amp"
    # Runs of the same model on an A100 in a folder the campaign names come first; a
    # V100's beside them, and an FP32 one, are not taken.
    earlier = tmp_path / "earlier"
    store = Store(earlier)
    run = {**fake_run("slurm", 32, 1, 1, 1), "model": "resnet50", "image_size": 224, "amp": True}
    a100 = {"gpu": "NVIDIA A100-SXM4-40GB", "device": "cuda"}
    store.append({**run, "window_times": [0.04, 0.04], "fingerprint": a100})
    store.append({**run, "window_times": [0.01, 0.01], "fingerprint": {"gpu": "Tesla V100"}})
    store.append({**run, "window_times": [0.01, 0.01], "fingerprint": a100, "amp": False})
    named = gpu_campaign(tmp_path, f"calibrate_from: [{earlier}]")
    single = cell_of(forecast.testbed_forecast(named, named.testbeds[0]), 1).single
    # Two steps a window: 64 images in 0.04 s.
    assert single is not None and single.per_s == pytest.approx(2 * 32 / 0.04)
    assert f"in {earlier} on A100" in single.source


def test_a_calibrate_from_folder_without_a_store_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(UsageError, match=r"calibrate_from\[0\]: .* holds no results.jsonl"):
        gpu_campaign(tmp_path, f"calibrate_from: [{tmp_path / 'nothing'}]")
    path = gpu_campaign(tmp_path).path
    assert cli.main(["campaign", "plan", str(path), "--calibrate-from", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--calibrate-from[0]: " in err
    # A folder that holds a store: its runs stand for one worker, the plan says so.
    store = Store(tmp_path / "earlier")
    run = {**fake_run("slurm", 32, 1, 1, 1), "model": "resnet50", "image_size": 224}
    store.append({**run, "amp": True, "fingerprint": {"gpu": "NVIDIA A100-PCIE-40GB"}})
    argv = ["campaign", "plan", str(path), "--calibrate-from", str(tmp_path / "earlier")]
    assert cli.main(argv) == 0
    assert f"measured in {tmp_path / 'earlier'} on A100" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("sweep", "missing"),
    [
        # The runs use the CPU: no published figure (all are GPUs') stands for them,
        # whatever the model; the GPU named is not asked for again.
        ("model: resnet50, device: cpu", "the runs use the CPU, no published figure"),
        ("model: resnet18, image_size: 32, device: cpu", "the runs use the CPU"),
        # A GPU named, but the table has no row of the model.
        ("model: resnet18, image_size: 32", "no published amp figure of resnet18 at 32 px on V100"),
    ],
)
def test_an_unknown_single_worker_says_what_is_missing_not_what_is_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sweep: str, missing: str
) -> None:
    text = GPU_CAMPAIGN.format(out=tmp_path / "out", calibrate="").replace(
        "sweep:\n  model: resnet50\n", f"sweep:\n  {sweep.replace(', ', chr(10) + '  ')}\n"
    )
    text = text.replace("{accelerator: A100,", "{accelerator: V100,")
    path = write(tmp_path, text, "g.yaml")
    assert cli.main(["campaign", "plan", str(path)]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "one worker at batch" in x]
    assert "unknown: " in line and missing in line, line
    assert "hardware: {accelerator" not in line, line
    assert "`expect: {images_per_s: N}`" in line and "`calibrate_from:`" in line, line
    assert "V100" in line


def test_with_no_accelerator_an_unknown_single_worker_asks_for_one(tmp_path: Path) -> None:
    campaign = gpu_campaign(tmp_path)
    text = campaign.path.read_text().replace("accelerator: A100, ", "")
    bare = campaign_file.load(write(tmp_path, text, "bare.yaml"))
    (line, *_) = forecast.sources(forecast.testbed_forecast(bare, bare.testbeds[0]))
    assert "`hardware: {accelerator: ...}`" in line and "`expect: {images_per_s: N}`" in line


HARDWARE_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["100gbit", "rdma", "nvlink3", "0.93", "0", "1e400", "V100"]),
    st.lists(st.text(max_size=3), max_size=2),
)


@settings(max_examples=150, deadline=None)
@given(
    key=st.sampled_from(
        ["accelerator", "link", "transport", "intra_node", "link_efficiency", "wifi"]
    ),
    value=HARDWARE_VALUES,
)
def test_any_hardware_value_is_taken_or_refused_in_one_line_naming_the_key(
    key: str, value: Any
) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        text = GPU_CAMPAIGN.format(out=Path(folder) / "out", calibrate="")
        data = yaml.safe_load(text)
        data["testbeds"][0]["hardware"] = {key: value}
        try:
            campaign = campaign_file.load(write(Path(folder), yaml.safe_dump(data), "h.yaml"))
        except UsageError as err:
            assert f"testbeds[0].hardware.{key}" in str(err) and "\n" not in str(err)
            return
        hw = campaign.testbeds[0].hardware
        if value is None:  # not given
            assert hw == Hardware()
        elif key == "link_efficiency":
            assert hw.link_efficiency is not None and 0.01 <= hw.link_efficiency <= 1
        elif key == "link":
            assert forecast.link_rate_bits(campaign.testbeds[0]) is not None
        forecast.testbed_forecast(campaign, campaign.testbeds[0])  # never raises


# --------------------------------------------------------------------------- E
def test_e_over_the_link_the_settings_or_hardware_give_and_inside_a_node(
    tmp_path: Path,
) -> None:
    campaign = gpu_campaign(tmp_path)
    cells = forecast.testbed_forecast(campaign, campaign.testbeds[0])
    by = {(f.cell.nodes, f.cell.workers): f for f in cells}
    inside = by[1, 4]
    assert inside.link_source == "nvlink3 inside a node"
    across = by[2, 8]
    assert "200 Gbit/s x 0.92 (rdma's default)" in across.link_source
    for f in (inside, across):
        assert f.efficiency is not None and 0 < f.efficiency_low <= f.efficiency  # type: ignore[operator]
        assert f.efficiency <= f.efficiency_high <= 1.0  # type: ignore[operator]
        assert f.per_s == pytest.approx(
            f.cell.workers * f.single.per_s * f.efficiency  # type: ignore[union-attr]
        )
    # No rate anywhere: E across nodes is unknown and says what to give.
    text = GPU_CAMPAIGN.format(out=tmp_path / "out", calibrate="").replace("link: 200gbit, ", "")
    bare = campaign_file.load(write(tmp_path, text, "bare.yaml"))
    unknown = cell_of(forecast.testbed_forecast(bare, bare.testbeds[0]), 8)
    assert unknown.efficiency is None and "give hardware: {link: ...}" in unknown.link_source


def test_the_next_testbed_takes_the_link_share_and_cpu_work_probed_on_the_earlier_one(
    tmp_path: Path,
) -> None:
    campaign = two_local(tmp_path)
    slow, fast = campaign.testbeds
    before = cell_of(forecast.testbed_forecast(campaign, fast), 2)
    assert before.link_source == "1 Gbit/s x 0.64 (tcp's default)"
    Store(campaign.testbed_out(slow)).append(probe(2, 0.9 * 200e6 / 8, cpu_work=RESOLVED))
    after = cell_of(forecast.testbed_forecast(campaign, fast), 2)
    assert after.link_source == (
        "1 Gbit/s x 0.90, the share probed on slow; background share 0.13 and overlap "
        "stretch 1.00 probed on slow; CPU work 1.20 ns per byte probed on slow"
    )
    # The probe's CPU work stands in for interference, and slows the step.
    basis = forecast.link_basis(forecast.gather(campaign, [slow, fast]), fast, [slow])
    assert basis.interference == 0.0 and basis.cpu.background_share == pytest.approx(0.13)
    assert basis.cpu.s_per_byte == pytest.approx(1.2e-9) and basis.cpu_up_to is None
    assert basis.busbw == pytest.approx(0.9 * 1e9 / 8)
    # The testbed's own probe beats it.
    Store(campaign.testbed_out(fast)).append(probe(2, 100e6))
    own = forecast.link_basis(forecast.gather(campaign, [slow, fast]), fast, [slow])
    assert own.busbw == pytest.approx(100e6, rel=1e-6) and "probed on this testbed" in own.source


def test_a_share_probed_on_throttled_nodes_is_carried_through_their_stops(
    tmp_path: Path,
) -> None:
    """Half-core nodes whose Horovod probe polled its whole quota at 200 Mbit/s: the
    1 Gbit/s testbed takes the share those stops leave at its rate, and says so."""
    campaign = two_local(tmp_path)
    slow, fast = campaign.testbeds
    polled = probe(2, 0.655 * 200e6 / 8, cpus=0.5)
    for r in polled["results"]:
        r["cpu_s"] = 0.5 * r["time_s"]
    Store(campaign.testbed_out(slow)).append(polled)
    basis = forecast.link_basis(forecast.gather(campaign, [slow, fast]), fast, [slow])
    assert basis.busbw == pytest.approx(0.531 * 1e9 / 8, rel=0.002)
    assert basis.source.startswith(
        "1 Gbit/s x 0.53, the share probed on slow (0.66 of 200 Mbit/s, the nodes' quota"
        " stopping them 50 of each 100 ms)"
    )


def test_a_forecast_reads_its_inputs_first_and_computes_with_no_file_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gather reads the stores; forecast_from computes from what it gathered alone: with
    every way of opening a file refused, it gives testbed_forecast's very cells."""
    campaign = two_local(tmp_path)
    slow, fast = campaign.testbeds
    Store(campaign.testbed_out(slow)).append(probe(2, 0.9 * 200e6 / 8, cpu_work=RESOLVED))
    Store(campaign.testbed_out(fast)).append(baseline(500.0))
    expected = forecast.testbed_forecast(campaign, fast)
    known = forecast.gather(campaign, [slow, fast])

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a forecast opened a file: {args[:1]}")

    def guarded(compute: Any) -> Any:
        with monkeypatch.context() as m:
            for where, name in [
                (builtins, "open"),
                (io, "open"),
                (os, "open"),
                (os, "scandir"),
                (os, "listdir"),
                (os, "stat"),
            ]:
                m.setattr(where, name, refused)
            return compute()

    got = guarded(lambda: forecast.forecast_from(known, campaign, fast, [slow]))
    assert got == expected
    assert cell_of(expected, 2).efficiency is not None and cell_of(expected, 1).per_s == 500.0
    with pytest.raises(AssertionError, match="opened a file"):  # the guard can fail
        guarded(lambda: forecast.testbed_forecast(campaign, fast))


def _with_cpu_work(basis: forecast.LinkBasis, s_per_byte: float) -> forecast.LinkBasis:
    """The link basis as though its CPU work per byte were known to be s_per_byte."""
    return replace(basis, cpu=replace(basis.cpu, s_per_byte=s_per_byte), cpu_up_to=None)


def test_cpu_work_hidden_behind_the_earlier_link_is_unknown_and_widens_the_band(
    tmp_path: Path,
) -> None:
    """The slow link hid the CPU work (its figure within its noise): the next testbed
    says so and where, takes E at the probe's own figure (0 where noise put it below),
    and its band holds none and the most the probe allows."""
    campaign = two_local(tmp_path)
    slow, fast = campaign.testbeds
    Store(campaign.testbed_out(slow)).append(probe(2, 0.93 * 200e6 / 8, cpu_work=HIDDEN))
    seen = allreduce_model.cpu_work_seen({"cpu_work": HIDDEN})
    assert seen is not None and seen.largest is not None and seen.largest > 0
    basis = forecast.link_basis(forecast.gather(campaign, [slow, fast]), fast, [slow])
    assert basis.cpu.s_per_byte == 0.0 and basis.cpu_up_to == pytest.approx(seen.largest)
    assert "CPU work per byte hidden behind slow's link (-1.90 ± 1.36 ns)" in (basis.source)
    assert f"E at 0.00 ns, the band over 0-{seen.largest * 1e9:.2f} ns" in basis.source
    part = fast.parts[0]
    (two,) = [c for c in part.cells if c.workers == 2]
    single = forecast.Figure(90.0, "given")
    f = forecast.cell_forecast(fast, part, two, single, basis)
    none = forecast.cell_forecast(fast, part, two, single, _with_cpu_work(basis, 0.0))
    most = forecast.cell_forecast(fast, part, two, single, _with_cpu_work(basis, seen.largest))
    assert most.efficiency < none.efficiency  # type: ignore[operator]
    assert f.efficiency == pytest.approx(none.efficiency)
    assert f.efficiency_low <= min(most.efficiency, most.efficiency_low)  # type: ignore[operator,type-var]
    assert f.efficiency_high >= max(none.efficiency, none.efficiency_high)  # type: ignore[operator,type-var]
    assert f.link_source == basis.source
    # The journal keeps where each figure came from.
    assert f.record()["link_source"] == basis.source
    # A figure above 0 but within its noise (the ranks disagree): E at that figure,
    # between none and the most; the band over both still.
    within = cpu_work_record([-0.5e-9, 2.5e-9])
    Store(campaign.testbed_out(slow)).append(probe(2, 0.93 * 200e6 / 8, cpu_work=within))
    seen = allreduce_model.cpu_work_seen({"cpu_work": within})
    assert seen is not None and not seen.resolved and seen.largest is not None
    basis = forecast.link_basis(forecast.gather(campaign, [slow, fast]), fast, [slow])
    assert basis.cpu.s_per_byte == pytest.approx(1e-9)
    f = forecast.cell_forecast(fast, part, two, single, basis)
    at = forecast.cell_forecast(fast, part, two, single, _with_cpu_work(basis, 1e-9))
    most = forecast.cell_forecast(fast, part, two, single, _with_cpu_work(basis, seen.largest))
    assert f.efficiency == pytest.approx(at.efficiency)
    assert most.efficiency < f.efficiency < none.efficiency  # type: ignore[operator]
    assert f.efficiency_low <= most.efficiency <= none.efficiency <= f.efficiency_high  # type: ignore[operator]


def test_cpu_work_a_record_cannot_tell_from_noise_is_unknown_and_not_charged(
    tmp_path: Path,
) -> None:
    campaign = two_local(tmp_path)
    slow, fast = campaign.testbeds
    work = {"lost_s_per_byte": 1e-9, "background_share": 0.13}  # no per-rank figures
    Store(campaign.testbed_out(slow)).append(probe(2, 0.9 * 200e6 / 8, cpu_work=work))
    basis = forecast.link_basis(forecast.gather(campaign, [slow, fast]), fast, [slow])
    assert basis.cpu.s_per_byte == 0.0 and basis.cpu_up_to is None
    assert basis.source.endswith(
        "; CPU work per byte unknown: not told from noise on slow; none charged"
    )


def test_cpu_work_comes_from_the_testbed_whose_link_resolved_it(tmp_path: Path) -> None:
    """Three testbeds: the first (1 Gbit/s) resolved the CPU work, the second (200
    Mbit/s) hid it. The third takes the second's link share and background, and the
    first's CPU work, each named."""
    data = yaml.safe_load(TWO_LOCAL.format(out=tmp_path / "out"))
    fast, slow = data["testbeds"][1], data["testbeds"][0]
    third = {**fast, "name": "third", "settings": {**fast["settings"], "link_rate": "500mbit"}}
    data["testbeds"] = [{**fast, "name": "first"}, {**slow, "name": "second"}, third]
    campaign = campaign_file.load(write(tmp_path, yaml.safe_dump(data), "three.yaml"))
    first, second, last = campaign.testbeds
    Store(campaign.testbed_out(first)).append(probe(2, 0.95 * 1e9 / 8, cpu_work=RESOLVED))
    hidden = {**HIDDEN, "background_share": 0.2}
    Store(campaign.testbed_out(second)).append(probe(2, 0.93 * 200e6 / 8, cpu_work=hidden))
    basis = forecast.link_basis(
        forecast.gather(campaign, [first, second, last]), last, [first, second]
    )
    assert basis.cpu.s_per_byte == pytest.approx(1.2e-9) and basis.cpu_up_to is None
    assert basis.cpu.background_share == pytest.approx(0.2)
    assert basis.source == (
        "500 Mbit/s x 0.93, the share probed on second; background share 0.20 and overlap "
        "stretch 1.00 probed on second; CPU work 1.20 ns per byte probed on first"
    )
    # Of two that hid it, the tighter bound.
    loose = cpu_work_record([-1e-9, 1e-9], alone=(10_000.0, 20_000.0), allreduces=1)
    Store(campaign.testbed_out(first)).append(probe(2, 0.95 * 1e9 / 8, cpu_work=loose))
    basis = forecast.link_basis(
        forecast.gather(campaign, [first, second, last]), last, [first, second]
    )
    tight = allreduce_model.cpu_work_seen({"cpu_work": HIDDEN})
    assert tight is not None and basis.cpu_up_to == pytest.approx(tight.largest)
    assert "hidden behind second's link" in basis.source


# -------------------------------------------------------------- the shipped ones
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_campaign_forecasts_every_cell_and_sizes_every_lease(
    path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # no results of an earlier run here
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))
    campaign = campaign_file.load(path)
    for tb in campaign.testbeds:
        for f in forecast.testbed_forecast(campaign, tb):
            assert f.single is not None, (tb.name, f.cell.label)
            assert f.efficiency is not None and f.per_s is not None, (tb.name, f.link_source)
    assert cli.main(["campaign", "plan", str(path)]) == 0
    out = capsys.readouterr().out
    # Every cell's line and every source line (a partition's queue wait, and the GPUs
    # a Virtual Wall node has, stay unknown until a job or a deploy tells).
    told = [
        line
        for line in out.splitlines()
        if re.match(r"  [0-9a-f]{12}  ", line) or line.startswith(("  one worker", "  E across"))
    ]
    assert len(told) > len(campaign.cells)
    assert not [line for line in told if "unknown" in line] and "(default)" not in out
    assert out.count("one worker at batch") == sum(
        len({c.batch for c in tb.cells}) for tb in campaign.testbeds
    )


# ------------------------------------------------------ journaled and scored
def test_run_journals_the_plans_forecast_then_each_booking_one_and_the_report_scores_them(
    tmp_path: Path, fakes: Fakes, capfd: pytest.CaptureFixture[str]
) -> None:
    campaign = two_local(tmp_path)
    path = campaign.path
    assert cli.main(["campaign", "run", str(path)]) == 0
    err = capfd.readouterr().err
    assert err.count("forecast before booking, from what is measured so far:") == 2
    # The fake sweep's baseline made 64 / 1.05 s images/s: the second testbed's figure.
    assert "measured on slow, the same hardware," in err
    journal = Journal(campaign.out, campaign.name)
    made = [(r["testbed"], r["made"]) for r in journal.forecasts()]
    assert made == [("slow", "plan"), ("fast", "plan"), ("slow", "booking"), ("fast", "booking")]
    # A resumed run keeps the plan's first forecast; the report scores both.
    assert cli.main(["campaign", "run", "--resume", str(path)]) == 0
    assert [r["made"] for r in journal.forecasts()].count("plan") == 2
    comparison.build(campaign)
    data = json.loads((campaign.out / "configurations.json").read_text())
    two = [c for c in data["configurations"] if c["workers"] == 2]
    assert len(two) == 2
    for c in two:
        assert c["forecast_plan_efficiency"] is not None
        assert c["forecast_booking_error"] == pytest.approx(
            c["forecast_booking_efficiency"] - c["efficiency"]
        )
    fast = next(c for c in two if c["testbed"] == "fast")
    assert fast["forecast_booking_efficiency"] != fast["forecast_plan_efficiency"]
    page = (campaign.out / "report.md").read_text()
    assert "median |forecast - measured|" in page and "E forecast: plan, booking" in page
    # The ranking, as the configurations' own forecast and measured throughput give it.
    both = [
        (c["forecast_plan_images_per_s"], c["images_per_sec"])
        for c in data["configurations"]
        if c["forecast_plan_images_per_s"] is not None and c["images_per_sec"] is not None
    ]
    rho = scoring.spearman([f for f, _ in both], [m for _, m in both])
    said = "n/a" if rho is None else f"{rho:.2f}"
    assert f"rank correlation with the measured throughput {said} over {len(both)} " in page
    header = (campaign.out / "configurations.csv").read_text().splitlines()[0]
    assert all(name in header for name in scoring.FIELDS)


FORECAST_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.lists(st.integers(), max_size=2),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    key=st.sampled_from(
        ["efficiency", "images_per_s", "batch", "workers", "cell", "single_source", "made"]
    ),
    value=FORECAST_VALUES,
)
def test_a_crafted_forecast_record_is_skipped_or_read_never_a_crash(
    tmp_path: Path, key: str, value: Any
) -> None:
    folder = tmp_path / f"j{abs(hash((key, repr(value))))}"
    journal = Journal(folder, "c")
    cell = {
        "cell": "x",
        "batch": 64,
        "nodes": 2,
        "workers": 2,
        "gpus_per_node": 1,
        "efficiency": 0.5,
        "images_per_s": 10.0,
        "single_source": "s",
        "link_source": "l",
    }
    record: dict[str, Any] = {"kind": "forecast", "campaign": "c", "testbed": "t", "made": "plan"}
    if key == "made":
        record["made"] = value
    else:
        cell[key] = value
    record["cells"] = [cell]
    folder.mkdir()
    text = json.dumps(record, allow_nan=True)
    (folder / "results.jsonl").write_text(text + "\n")
    for r in journal.forecasts():
        for c in r["cells"]:
            e = c.get("efficiency")
            assert e is None or (isinstance(e, int | float) and math.isfinite(e))
            assert isinstance(c["batch"], int) and "\x1b" not in c["single_source"]
    scoring.load(journal)


# ------------------------------------------------------------------ ranks
@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=3, max_size=30, unique=True))
def test_spearman_without_ties_is_the_textbook_formula(xs: list[float]) -> None:
    ys = xs[1:] + xs[:1]  # the same values in another order: no ties
    n = len(xs)
    rx = {x: i + 1 for i, x in enumerate(sorted(xs))}
    ry = {y: i + 1 for i, y in enumerate(sorted(ys))}
    d2 = sum((rx[x] - ry[y]) ** 2 for x, y in zip(xs, ys, strict=True))
    assert scoring.spearman(xs, ys) == pytest.approx(1 - 6 * d2 / (n * (n * n - 1)))
    assert scoring.spearman(xs, xs) == pytest.approx(1.0)
    assert scoring.spearman(xs, [-x for x in xs]) == pytest.approx(-1.0)


def test_the_correlation_s_interval_is_the_noise_the_measurements_leave() -> None:
    forecast = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    measured = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0]
    # Exact measurements: the interval is the point.
    assert scoring.spearman_interval(forecast, measured, [0.0] * 6) == (1.0, 1.0)
    # Intervals far apart: every draw keeps the order.
    assert scoring.spearman_interval(forecast, measured, [1.0] * 6) == (1.0, 1.0)
    # Each interval overlapping its neighbours': orders swap, the interval opens below 1,
    # and it holds the point (the measured means' own correlation, 1).
    low, high = scoring.spearman_interval(forecast, measured, [15.0] * 6) or (9, 9)
    assert low < 0.9 and high == 1.0
    # Noise that drowns the order: the interval reaches below 0.
    wide = scoring.spearman_interval(forecast, measured, [500.0] * 6)
    assert wide is not None and wide[0] < 0 < wide[1]
    # The same inputs, the same interval (a fixed seed); too few to rank: none.
    assert scoring.spearman_interval(forecast, measured, [15.0] * 6) == (low, high)
    assert scoring.spearman_interval([1.0, 2.0], [1.0, 2.0], [0.0, 0.0]) is None


def test_a_forecast_best_inside_the_measured_best_s_interval_is_held() -> None:
    from hpcbench.measure.analysis import ConfigSummary

    def summary(workers: int, rate: float, ci: float) -> ConfigSummary:
        return ConfigSummary(
            "e", "m", "ddp", 8, 32, "synthetic", 1, workers, workers, 3, 0, throughput=rate, ci95=ci
        )

    def cells(rates: dict[int, float]) -> scoring.Forecasts:
        made = {w: {"images_per_s": r, "unit": "images"} for w, r in rates.items()}
        keyed = {("t", "ddp", 8, w, 1): c for w, c in made.items()}
        return scoring.Forecasts({"plan": keyed, "booking": {}})

    measured = [
        ("t", f"{w} workers", summary(w, rate, 5.0)) for w, rate in ((1, 100), (2, 180), (4, 300))
    ]
    # The forecast ranks 2 workers best; measured 4 are, 300 +- 5 against 180 +- 5: missed.
    missed = scoring.ranked(cells({1: 100, 2: 400, 4: 350}), measured, "plan")
    assert missed is not None and not missed.best_held and missed.forecast_best == "2 workers"
    # Within the interval: 4 workers measured 300 +- 5, 2 workers 296 +- 5.
    close = [(t, label, s) for t, label, s in measured[:1]] + [
        ("t", "2 workers", summary(2, 296, 5.0)),
        ("t", "4 workers", summary(4, 300, 5.0)),
    ]
    held = scoring.ranked(cells({1: 100, 2: 400, 4: 350}), close, "plan")
    assert held is not None and held.best_held and held.measured_best == "4 workers"
    assert scoring.ranked(cells({}), measured, "plan") is None


# ------------------------------------------------- an advice's measured front
def test_an_advised_campaigns_report_draws_the_measured_front_for_its_budget(
    tmp_path: Path, fakes: Fakes
) -> None:
    """`advice:` (what advise writes): the report adds front.png and a paragraph naming
    the configurations no other beats on time to the budget and booked hours, each time
    the budget over its measured throughput."""
    campaign = two_local(tmp_path, advice={"model": "resnet18", "budget": 1e7, "unit": "images"})
    assert campaign.advice is not None and campaign.advice.amount == 1e7
    assert cli.main(["campaign", "run", str(campaign.path)]) == 0
    comparison.build(campaign)
    assert (campaign.out / "front.png").read_bytes()[:4] == b"\x89PNG"
    data = json.loads((campaign.out / "configurations.json").read_text())
    work = 1e7 / 3600
    # CPU nodes: what they book is node-hours; each time with the throughput's interval.
    points = {}
    for c in data["configurations"]:
        rate, ci = c["images_per_sec"], c["ci95"] or 0.0
        if rate:
            high = work / (rate - ci) if rate > ci else math.inf
            points[c["testbed"], c["workers"]] = (work / rate, work / (rate + ci), high, c["nodes"])

    def beats(o: tuple, m: tuple) -> bool:
        (h_o, _, high_o, k_o), (h_m, low_m, _, k_m) = o, m
        if o is m or h_o > h_m or h_o * k_o > h_m * k_m:
            return False
        return high_o < low_m or high_o * k_o < low_m * k_m

    front = {k for k, m in points.items() if not any(beats(o, m) for o in points.values())}
    hours = points
    page = (campaign.out / "report.md").read_text()
    said = page.split("The measured front for the advice's budget")[1].split("(front.png")[0]
    for t, w in hours:
        assert (f"{t}, {w} worker(s):" in said) == ((t, w) in front), (t, w, said)


@pytest.mark.parametrize(
    "advice, says",
    [
        ({"model": "m", "budget": 0, "unit": "tokens"}, "advice.budget: must be a number above 0"),
        ({"model": "m", "budget": 1e9, "unit": "bytes"}, "advice.unit: 'bytes' is not"),
        ({"model": "m", "budget": 1e9}, "advice.unit: missing"),
        ({"model": "m", "budget": True, "unit": "tokens"}, "advice.budget: must be a number"),
        ({"model": "m", "budget": 1e9, "unit": "tokens", "x": 1}, "advice.x: unknown key"),
    ],
)
def test_a_bad_advice_key_is_named_by_its_path(tmp_path: Path, advice: dict, says: str) -> None:
    with pytest.raises(UsageError, match=re.escape(says)):
        two_local(tmp_path, advice=advice)
