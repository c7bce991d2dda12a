"""campaign/before_booking.py: one worker measured on this machine before a testbed of
its cores is booked, which runs are wanted, what the record holds, and where the
forecast takes it in its order of sources."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpcbench import cli
from hpcbench.campaign import before_booking, campaign_file, forecast
from hpcbench.measure.store import Store
from hpcbench.schedulers import process
from hpcbench.schedulers.base import Outcome
from hpcbench.testbeds.here import NodeLimits
from hpcbench.testbeds.kinds.deployed import Deployed
from tests.unit.test_campaign import Fakes
from tests.unit.test_forecast import TWO_LOCAL, baseline, cell_of, two_local

ONE_CORE = NodeLimits("sha256:" + "cd" * 32, 100000, 100000, "1")
HALF = NodeLimits("sha256:" + "cd" * 32, 100000, 50000)


def made(images_per_s: float, batch: int = 64) -> Outcome:
    """What the process scheduler gives back for one worker that made images_per_s in
    two windows of two steps: its record as the workload prints it."""
    seconds = 2 * batch / images_per_s
    result = {
        "kind": "workload",
        "workers": 1,
        "steps": 2,
        "window_times": [seconds, seconds],
        "unit": "images",
        "fingerprint": {"cpu": "AMD EPYC", "node_cpus": 1.0},
    }
    return Outcome([0], [result], [], 1e9, 30.0, argv=[["docker", "run"]])


class Runs:
    """process.run_commands stood in for: each call's commands, each answered by the
    next outcome."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *outcomes: Outcome) -> None:
        self.calls: list[list[Any]] = []
        self.outcomes = list(outcomes)
        monkeypatch.setattr(process, "run_commands", self.run)

    def run(self, commands: list[Any], timeout_s: float, echo: bool = False) -> Outcome:
        self.calls.append(commands)
        return self.outcomes.pop(0)


def test_testbeds_of_the_same_limits_share_one_run_and_others_get_their_own(
    tmp_path: Path,
) -> None:
    campaign = two_local(tmp_path)
    both = before_booking.wanted(campaign, {"slow": (ONE_CORE,), "fast": (ONE_CORE,)})
    assert [(w.batch, w.testbeds, w.node) for w in both] == [(64, ("slow", "fast"), ONE_CORE)]
    apart = before_booking.wanted(campaign, {"slow": (ONE_CORE,), "fast": (HALF,)})
    assert [w.testbeds for w in apart] == [("slow",), ("fast",)]
    # A testbed whose kind gave no limits (not this machine's cores) wants nothing.
    assert [w.testbeds for w in before_booking.wanted(campaign, {"fast": (HALF,)})] == [("fast",)]
    assert before_booking.wanted(campaign, {}) == []
    # Two sweep parts of one testbed (DDP and FSDP2 of a transformer) share its lone
    # worker's run, the testbed named once.
    data = yaml.safe_load(TP_LOCAL.format(out=tmp_path / "lm"))
    data["sweep"] |= {"parallel": ["ddp", "fsdp2"], "nodes": [1, 2]}
    del data["testbeds"][0]["sweep"]
    two_parts = campaign_file.load(_write(tmp_path / "two.yaml", data))
    assert len(two_parts.testbeds[0].parts) == 2
    runs = before_booking.wanted(two_parts, {"tp": (ONE_CORE, OTHER_CORE)})
    assert [(w.testbeds, len(w.nodes)) for w in runs] == [(("tp",), 1), (("tp",), 2)]


def test_nothing_is_wanted_where_a_measured_figure_exists_or_the_data_is_a_folder(
    tmp_path: Path,
) -> None:
    campaign = two_local(tmp_path)
    slow, fast = campaign.testbeds
    # slow measured its own baseline: slow wants nothing, and fast (the same hardware,
    # later) takes slow's figure.
    Store(campaign.testbed_out(slow)).append(baseline(60.0))
    assert before_booking.wanted(campaign, {"slow": (ONE_CORE,), "fast": (ONE_CORE,)}) == []
    data = yaml.safe_load(TWO_LOCAL.format(out=tmp_path / "out2"))
    data["sweep"]["data"] = str(tmp_path)  # ImageNet-layout data: on the testbed's NFS
    other = campaign_file.load(_write(tmp_path / "data.yaml", data))
    assert before_booking.wanted(other, {"slow": (ONE_CORE,), "fast": (ONE_CORE,)}) == []


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_run_is_recorded_with_its_limits_and_comes_before_expect_not_before_a_measured_baseline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    campaign = two_local(tmp_path)
    slow, fast = campaign.testbeds
    runs = Runs(monkeypatch, made(150.0))
    said: list[str] = []
    [record] = before_booking.measure_all(
        campaign, {"slow": (ONE_CORE,), "fast": (ONE_CORE,)}, said.append
    )
    # One container of the planned limits, this checkout's bench/ in it.
    [[command]] = runs.calls
    assert command.argv[command.argv.index("--cpuset-cpus") + 1] == "1"
    assert said[0] == (
        "one worker on this machine before booking slow, fast: resnet18 at 64 px, batch 64, "
        "1 core(s) (quota 100000/100000 us), pinned to CPU set 1"
    )
    assert said[1].startswith("  150.0 ± 0.0 images/s")
    [stored] = campaign.before_booking_store().runs()
    for kept in (record, stored):
        assert kept["status"] == "ok" and kept["workers"] == 1 and kept["batch"] == 64
        assert kept["testbeds"] == ["slow", "fast"]
        assert kept["node_limits"]["cpu_quota_us"] == 100000
    # Not a testbed's own baseline: its store holds nothing, its report none of it.
    assert not campaign.testbed_store(slow).exists()
    for tb in (slow, fast):
        single = cell_of(forecast.testbed_forecast(campaign, tb), 1).single
        assert single is not None and single.per_s == pytest.approx(150.0)
        assert single.source.startswith("150.0 images/s measured on this machine before booking")
    # Measured already: a second pass wants and runs nothing.
    assert (
        before_booking.measure_all(
            campaign, {"slow": (ONE_CORE,), "fast": (ONE_CORE,)}, said.append
        )
        == []
    )
    # slow's own baseline, once measured, comes first; for fast too (the same hardware).
    Store(campaign.testbed_out(slow)).append(baseline(60.0))
    for tb in (slow, fast):
        single = cell_of(forecast.testbed_forecast(campaign, tb), 1).single
        assert single is not None and single.per_s == pytest.approx(60.0)


def test_a_failed_run_is_said_and_recorded_and_the_forecast_goes_on_from_expect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    campaign = two_local(tmp_path)
    Runs(monkeypatch, Outcome([139], [], ["Segmentation fault"], 1e9, 3.0))
    said: list[str] = []
    [record] = before_booking.measure_all(campaign, {"slow": (ONE_CORE,)}, said.append)
    assert record["status"] == "failed" and "Segmentation fault" in record["error"]
    assert said[-1] == "  no figure: exit status [139]; the forecast goes on without it"
    single = cell_of(forecast.testbed_forecast(campaign, campaign.testbeds[0]), 1).single
    assert single is not None and single.source == "90 images/s given in expect:"
    # Not measured: the next campaign run tries again.
    assert [w.testbeds for w in before_booking.wanted(campaign, {"slow": (ONE_CORE,)})] == [
        ("slow",)
    ]


def test_the_plan_journaled_before_anything_is_booked_is_made_from_the_run(
    tmp_path: Path, fakes: Fakes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`campaign run`: the booking check gives the node's limits, the run is made before
    the first deploy, and the plan each testbed's score is set against takes it."""

    def check(kind: Any, env: str, settings: Any) -> tuple[NodeLimits, ...]:
        fakes.calls.append(("check", env))
        return (ONE_CORE,)

    monkeypatch.setattr(Deployed, "check_booking", check)
    runs = Runs(monkeypatch, made(150.0))
    campaign = two_local(tmp_path)
    assert cli.main(["campaign", "run", str(campaign.path)]) == 0
    assert len(runs.calls) == 1
    assert fakes.calls[:3] == [("check", "local"), ("check", "local"), ("deploy", "slow")]
    journal = [json.loads(x) for x in (campaign.out / "results.jsonl").read_text().splitlines()]
    plans = {
        r["testbed"]: r for r in journal if r.get("kind") == "forecast" and r["made"] == "plan"
    }
    assert set(plans) == {"slow", "fast"}
    for r in plans.values():
        for c in r["cells"]:
            assert c["single_images_per_s"] == pytest.approx(150.0), c
            assert c["single_source"].startswith("150.0 images/s measured on this machine")


# ------------------------------------------------------------- a TP group
TP_LOCAL = """\
name: tp
out: {out}
sweep:
  model: gpt-tiny
  backend: ddp
  seq_len: 128
  batch: [8]
  device: cpu
  repeats: 1
testbeds:
  - name: tp
    env: local
    settings: {{node_count: 2, cpus_per_node: 1, link_rate: 1gbit}}
    sweep: {{parallel: [fsdp2], tp: 2, gpus_per_node: [2], nodes: [1, 2]}}
    expect: {{tokens_per_s: 5000}}
    hardware: {{link_efficiency: 0.93}}
"""


def tp_campaign(tmp_path: Path) -> Any:
    return campaign_file.load(
        _write(tmp_path / "tp.yaml", yaml.safe_load(TP_LOCAL.format(out=tmp_path / "out")))
    )


def lm_made(workers: int, windows: list[float], batch: int = 8, tp: int = 1) -> Outcome:
    """A transformer run of `workers` ranks whose windows of two steps took `windows`."""
    result = {
        "kind": "workload",
        "workers": workers,
        "steps": 2,
        "window_times": windows,
        "unit": "tokens",
        "model": "gpt-tiny",
        "seq_len": 128,
        "tp": tp,
        "parallel": "fsdp2" if tp > 1 else "ddp",
        "grad_accum": 1,
        "activation_checkpoint": "none",
        "tokens_per_step": batch * 128,
        "fingerprint": {"cpu": "AMD EPYC", "node_cpus": 1.0},
    }
    return Outcome([0], [result], [], 1e9, 30.0, argv=[["docker", "run"]])


def test_a_tp_part_gets_its_lone_worker_and_its_group_measured_and_forecast_from_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    campaign = tp_campaign(tmp_path)
    [tb] = campaign.testbeds
    lone, group = before_booking.wanted(campaign, {"tp": (ONE_CORE,)})
    assert (lone.workers, lone.part.workload.tp, group.workers, group.part.workload.tp) == (
        1,
        1,
        2,
        2,
    )
    # One worker: 0.2 s a step (5120 tokens/s); the pair 0.5 s, its windows 0.45, 0.5, 0.55.
    runs = Runs(monkeypatch, lm_made(1, [0.4, 0.4]), lm_made(2, [0.9, 1.0, 1.1], tp=2))
    said: list[str] = []
    before_booking.measure_all(campaign, {"tp": (ONE_CORE,)}, said.append)
    # The lone worker trains without TP; the group is two ranks under torchrun in one
    # container of the node's limits.
    first, second = (call[0].argv for call in runs.calls)
    assert "--tp" not in first or first[first.index("--tp") + 1] == "1"
    assert second[second.index("--tp") + 1] == "2" and "torchrun" in second
    assert second[second.index("--nproc-per-node") + 1] == "2"
    assert any(
        line.startswith("a TP group of 2 workers on this machine before booking tp")
        for line in said
    ), said
    stored = campaign.before_booking_store().runs()
    # Each as the sweep's records of the part have it: a node of two slots.
    assert [(r["workers"], r["gpus_per_node"], r["launcher"]) for r in stored] == [
        (1, 2, "local"),
        (2, 2, "torchrun"),
    ]
    # Nothing more is wanted once both are measured.
    assert before_booking.wanted(campaign, {"tp": (ONE_CORE,)}) == []
    cells = forecast.testbed_forecast(campaign, tb)
    one_node, two_nodes = cell_of(cells, 2), cell_of(cells, 4)
    # One node: the pair's measured step against the lone worker's, E = 0.2 / (2 x 0.5);
    # the band over the 95% interval of its mean step (t = 4.303 for 3 windows), which
    # reaches further than its fastest and slowest window.
    ci = 4.303 * 0.05 / 3**0.5
    assert one_node.efficiency == pytest.approx(0.2)
    assert one_node.efficiency_low == pytest.approx(0.2 * 0.5 / (0.5 + ci), rel=1e-3)
    assert one_node.efficiency_high == pytest.approx(0.2 * 0.5 / (0.5 - ci), rel=1e-3)
    assert "the TP group's step 0.500 ± 0.124 s measured on this machine before booking" in (
        one_node.link_source
    )
    # Two nodes: FSDP2 across them adds to the pair's step, never takes from it.
    assert two_nodes.efficiency is not None and two_nodes.efficiency < 0.2
    assert "the TP group's step" in two_nodes.link_source
    # The testbed's own one-node cell, once measured, comes first.
    # Its lone worker at 0.2 s a step (two windows of two steps of 0.2 s).
    own = {**baseline(40.0, batch=8), "model": "gpt-tiny", "image_size": 0, "seq_len": 128}
    pair = {
        **own,
        "workers": 2,
        "gpus_per_node": 2,
        "tp": 2,
        "parallel": "fsdp2",
        "window_times": [0.8, 0.8],
    }
    Store(campaign.testbed_out(tb)).append(pair)
    again = cell_of(forecast.testbed_forecast(campaign, tb), 2)
    assert "the TP group's step 0.400 ± 0.000 s measured on this testbed" in again.link_source
    assert again.efficiency == pytest.approx(0.25)


def test_a_group_step_whose_interval_reaches_zero_ends_at_its_fastest_window() -> None:
    run = {"status": "ok", "batch": 8, "steps": 2, "window_times": [0.6, 1.4]}
    step = forecast._group_step([run], 8, "here")
    assert step is not None
    # Two windows, t = 12.706: the interval's low end is below 0; the fastest window's
    # step stands there, the high end is the interval's.
    assert step.step_s == pytest.approx(0.5)
    assert step.fastest_s == pytest.approx(0.3)
    assert step.slowest_s == pytest.approx(0.5 + 12.706 * (0.2 * 2**0.5) / 2**0.5, rel=1e-3)
    # At another batch, as time per sequence.
    double = forecast._group_step([run], 16, "here")
    assert double is not None and double.step_s == pytest.approx(1.0)
    assert "at batch 8" in double.source


def test_a_tp_cells_band_takes_the_lone_workers_interval_beside_the_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """E is the lone worker's step over the group's: both measured, both intervals in
    the band (t = 4.303 for three windows)."""
    campaign = tp_campaign(tmp_path)
    [tb] = campaign.testbeds
    Runs(monkeypatch, lm_made(1, [0.38, 0.40, 0.42]), lm_made(2, [1.0, 1.0, 1.0], tp=2))
    before_booking.measure_all(campaign, {"tp": (ONE_CORE,)}, lambda _: None)
    one_node = cell_of(forecast.testbed_forecast(campaign, tb), 2)
    lone = 4.303 * 0.01 / 3**0.5 / 0.2  # the lone step's interval over the step
    assert one_node.single is not None
    assert one_node.single.spread == pytest.approx(lone, rel=1e-3)
    assert one_node.efficiency == pytest.approx(0.2)
    # The pair's windows agree: the band is the lone worker's interval alone.
    assert one_node.efficiency_low == pytest.approx(0.2 * (1 - lone), rel=1e-3)
    assert one_node.efficiency_high == pytest.approx(0.2 * (1 + lone), rel=1e-3)


# ------------------------------------------------------------- nodes at once
OTHER_CORE = NodeLimits("sha256:" + "cd" * 32, 100000, 100000, "0")


def made_at_once(*images_per_s: float, batch: int = 64) -> Outcome:
    """One worker on each node at once, each making its images_per_s in four windows of
    two steps, all timing from the same instant."""
    records = []
    for rate in images_per_s:
        seconds = 2 * batch / rate
        result = {**made(rate, batch).records[0], "window_times": [seconds] * 4}
        records.append({**result, "timeline": {"first_timed_step": 1e9 + 10}})
    argv = [["docker", "run"] for _ in images_per_s]
    return Outcome([0] * len(records), records, [], 1e9, 30.0, argv=argv)


def test_only_the_windows_every_worker_timed_at_once_are_kept_of_the_slowest() -> None:
    """Worker a times 0-4 s (four windows of 1 s), b 1.5-7.5 s (three of 2 s): together
    1.5-4 s, where a timed its last two windows and b its first; b is the slower."""
    a = {"window_times": [1.0] * 4, "timeline": {"first_timed_step": 0.0}, "who": "a"}
    b = {"window_times": [2.0] * 3, "timeline": {"first_timed_step": 1.5}, "who": "b"}
    kept = before_booking.at_once([a, b])
    assert kept is not None and kept["who"] == "b" and kept["window_times"] == [2.0]
    # c times 1.5-4.2 s in windows of 0.9 s: together 1.5-4 s again, and a, kept with
    # its last two windows, is the slower.
    c = {**b, "window_times": [0.9, 0.9, 0.9]}
    kept = before_booking.at_once([a, c])
    assert kept is not None and kept["who"] == "a" and kept["window_times"] == [1.0, 1.0]
    # b starts after a has ended: no window was timed at once.
    late = {**b, "timeline": {"first_timed_step": 5.0}}
    assert before_booking.at_once([a, late]) is None
    # A record without its first timed step or windows tells nothing.
    assert before_booking.at_once([a, {"window_times": [1.0]}]) is None
    assert before_booking.at_once([a, {**b, "window_times": []}]) is None


def test_nodes_computing_at_once_are_measured_and_slow_the_forecast_by_the_slowest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cell across both nodes gets a lone worker on each node at once, each in its
    own container and limits; the slowest one's step over the lone worker's is what
    each step of the cell is taken to cost more."""
    campaign = two_local(tmp_path)
    slow, fast = campaign.testbeds
    nodes = {"slow": (ONE_CORE, OTHER_CORE), "fast": (ONE_CORE, OTHER_CORE)}
    lone, together = before_booking.wanted(campaign, nodes)
    assert (lone.nodes, lone.testbeds) == ((ONE_CORE,), ("slow", "fast"))
    assert (together.nodes, together.testbeds) == ((ONE_CORE, OTHER_CORE), ("slow", "fast"))
    # Alone 150 images/s; at once 120 and 100: the slower holds the step up (x 1.5).
    runs = Runs(monkeypatch, made(150.0), made_at_once(120.0, 100.0))
    said: list[str] = []
    before_booking.measure_all(campaign, nodes, said.append)
    first, second = runs.calls[1]
    assert [c.argv[c.argv.index("--cpuset-cpus") + 1] for c in (first, second)] == ["1", "0"]
    assert said[2] == (
        "one worker on each of 2 nodes at once on this machine before booking slow, fast: "
        "resnet18 at 64 px, batch 64, 1 core(s) (quota 100000/100000 us), pinned to CPU set "
        "1; 1 core(s) (quota 100000/100000 us), pinned to CPU set 0"
    )
    assert said[3].startswith("  100.0 ± 0.0 images/s")
    stored = campaign.before_booking_store().runs()
    assert [(r["workers"], r.get("alongside")) for r in stored] == [(1, None), (1, 2)]
    assert stored[1]["beside_limits"][0]["cpu_set"] == "0"
    assert before_booking.wanted(campaign, nodes) == []
    for tb in (slow, fast):
        cells = forecast.testbed_forecast(campaign, tb)
        one, two = cell_of(cells, 1), cell_of(cells, 2)
        # The lone worker stays the baseline: the workers at once are not alone.
        assert one.single is not None and one.single.per_s == pytest.approx(150.0)
        assert "2 nodes' workers at once on this machine: step x 1.50" in two.link_source
        # As a worker of 100 images/s would be over the link, against the lone 150.
        slower = forecast.cell_forecast(
            tb,
            tb.parts[0],
            two.cell,
            replace(one.single, per_s=100.0),
            forecast.link_basis(forecast.gather(campaign, [tb]), tb, []),
        )
        assert slower.efficiency is not None and two.efficiency is not None
        assert two.efficiency == pytest.approx(slower.efficiency / 1.5)
        # Every window alike: the band's ends move with it by the same share.
        assert two.efficiency_low == pytest.approx((slower.efficiency_low or 0) / 1.5)


def test_a_node_without_a_figure_or_without_a_window_at_once_fails_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    campaign = two_local(tmp_path)
    nodes = {"slow": (ONE_CORE, OTHER_CORE)}
    half = made_at_once(120.0)
    both = made_at_once(120.0, 100.0)
    apart = replace(
        both,
        records=[both.records[0], {**both.records[1], "timeline": {"first_timed_step": 1e9 + 100}}],
    )
    Runs(
        monkeypatch,
        made(150.0),
        replace(half, returncodes=[0, 0], argv=half.argv * 2),
        apart,
    )
    said: list[str] = []
    _, together = before_booking.measure_all(campaign, nodes, said.append)
    assert together["status"] == "failed" and together["alongside"] == 2
    assert said[-1].startswith("  no figure:")
    # Both ran, one after the other: no window at once, said so.
    [again] = before_booking.measure_all(campaign, nodes, said.append)
    assert again["status"] == "failed" and again["error"] == before_booking.AT_ONCE_FAILED
    # Not measured: the forecast has no sharing to go on, and the next run tries again.
    two = cell_of(forecast.testbed_forecast(campaign, campaign.testbeds[0]), 2)
    assert "at once" not in two.link_source
    assert [w.nodes for w in before_booking.wanted(campaign, nodes)] == [(ONE_CORE, OTHER_CORE)]


def test_nodes_at_once_measured_faster_than_alone_cost_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sharing the machine makes no worker faster: a run at once above the lone
    worker's rate is the runs' noise, a stretch of 1 with its band from 1."""
    campaign = two_local(tmp_path)
    slow = campaign.testbeds[0]
    nodes = {"slow": (ONE_CORE, OTHER_CORE)}
    Runs(monkeypatch, made(150.0), made_at_once(160.0, 155.0))
    before_booking.measure_all(campaign, nodes, lambda _: None)
    known = forecast.gather(campaign, [slow])
    share = forecast.host_share(known, slow, slow.parts[0], 64, 2)
    assert share is not None and (share.stretch, share.least) == (1.0, 1.0)
    two = cell_of(forecast.testbed_forecast(campaign, slow), 2)
    lone = forecast.cell_forecast(
        slow, slow.parts[0], two.cell, two.single, forecast.link_basis(known, slow, [])
    )
    assert two.efficiency == pytest.approx(lone.efficiency)
    assert two.efficiency_high == pytest.approx(lone.efficiency_high)
