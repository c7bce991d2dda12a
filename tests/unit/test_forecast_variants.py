"""evaluation/forecast_variants.py: the machine variants' campaign files are campaigns
hpcbench accepts, apart from each other; the cells are scored as the benchmark's text
says; the background load ends by its bound."""

from __future__ import annotations

import itertools
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcbench.campaign import campaign_file


@pytest.fixture
def fv(evaluation):
    return evaluation("forecast_variants")


def test_every_variant_is_a_campaign_of_two_rates_apart_from_the_others(fv, tmp_path) -> None:
    every = list(itertools.product(fv.VARIANTS, fv.WORKLOADS))
    seen: dict[str, set] = {"name": set(), "subnet": set(), "ssh_port_base": set()}
    for index, (variant, workload) in enumerate(every):
        path = tmp_path / f"{variant}-{workload}.yaml"
        path.write_text(fv.campaign_text(variant, workload, tmp_path, index))
        campaign = campaign_file.load(path)
        v = fv.VARIANTS[variant]
        assert [tb.name for tb in campaign.testbeds] == [f"{variant}-{r}" for r in fv.RATES]
        for tb, rate in zip(campaign.testbeds, fv.RATES, strict=True):
            given = tb.given
            assert given["link_rate"] == rate
            assert float(given["cpus_per_node"]) == v.cpus
            # modules/docker_testbed pins whole-core quotas unless host_cpus is 0
            assert ("host_cpus" in given) == (not v.pinned)
            for key, values in seen.items():
                assert given[key] not in values, (variant, workload, key)
                values.add(given[key])
        parts = {part.workload.parallel for part in campaign.testbeds[0].parts}
        assert parts == ({"ddp", "fsdp2"} if workload == "lm" else {"ddp"})
        assert {c.nodes for part in campaign.testbeds[0].parts for c in part.cells} == {1, 2}


def _score(fv, measured: float, plan: float, low: float, high: float, again: float):
    return fv.Score("half", "lm", "half-1gbit", "ddp", 2, measured, 0.01, plan, low, high, again)


def test_a_cell_is_scored_against_its_measured_efficiency(fv) -> None:
    cell = _score(fv, 0.50, 0.56, 0.52, 0.60, 0.52)
    assert cell.plan_error == pytest.approx(0.06)
    assert cell.reforecast_error == pytest.approx(0.02)
    assert cell.inside is False  # 0.50 below a band of 0.52-0.60
    shares = fv.summary([cell, _score(fv, 0.50, 0.49, 0.45, 0.55, 0.48)])
    assert (shares["plan within 0.05"].hits, shares["plan within 0.05"].n) == (1, 2)
    assert (shares["re-forecast within 0.03"].hits, shares["re-forecast within 0.03"].n) == (2, 2)
    # +0.06, +0.02 of the first, -0.01, -0.02 of the second
    assert (
        shares["optimistic (forecast above)"].hits,
        shares["optimistic (forecast above)"].n,
    ) == (
        2,
        4,
    )
    assert (shares["inside the plan's band"].hits, shares["inside the plan's band"].n) == (1, 2)
    lines = fv.table([cell])
    assert lines[-1].endswith("| +0.060 | +0.020 | NO |")


# The fixture imports the script once; nothing of it changes between examples.
@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.integers(0, 60), st.integers(0, 60))
def test_the_share_s_interval_holds_the_share_inside_0_1(fv, hits: int, more: int) -> None:
    n = hits + more
    low, high = fv.wilson(hits, n)
    assert 0.0 <= low <= high <= 1.0
    if n:
        assert low - 1e-12 <= hits / n <= high + 1e-12
        assert str(fv.Share(hits, n)).startswith(f"{hits}/{n} = ")


def test_names_the_benchmark_does_not_know_are_refused_in_one_line(fv, capsys) -> None:
    assert fv.main(["--variants", "half,quarter"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "forecast_variants: --variants: quarter: give some of pinned, shared, half, loaded"
    ]


def test_the_background_load_ends_by_its_bound(fv) -> None:
    start = time.monotonic()
    fv.busy(0.5, start + 0.3)
    assert time.monotonic() - start < 5.0  # bounded: a loaded machine may be slow


def test_score_only_names_the_campaigns_not_run_and_runs_nothing(fv, tmp_path, capsys) -> None:
    """--score-only over variants of which none has run: each said not run, nothing
    started (a campaign run here would need Docker), exit status 0."""
    assert (
        fv.main(
            [
                "--variants",
                "pinned,half",
                "--workloads",
                "cnn",
                "--score-only",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["pinned x cnn: not run", "half x cnn: not run"]
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]


def test_a_replay_makes_each_forecast_from_what_it_had_before_its_booking(fv, tmp_path) -> None:
    # What the forecasts said when they were made: the plans before anything ran, the
    # 1 Gbit/s testbed's re-forecast after the 200 Mbit/s one was measured; then that
    # testbed measures too. The replay, with every store full, says the same.
    from hpcbench.campaign import forecast
    from hpcbench.measure.store import Store
    from tests.unit.test_forecast import baseline, probe

    path = tmp_path / "pinned-cnn.yaml"
    path.write_text(fv.campaign_text("pinned", "cnn", tmp_path, 0))
    campaign = campaign_file.load(path)
    slow, fast = campaign.testbeds

    def said(tb) -> dict:
        return {f.cell.id: f.record() for f in forecast.testbed_forecast(campaign, tb)}

    plans = {tb.name: said(tb) for tb in (slow, fast)}
    Store(campaign.testbed_out(slow)).append(baseline(150.0))
    Store(campaign.testbed_out(slow)).append(probe(2, 0.95 * 200e6 / 8))
    booking = said(fast)
    Store(campaign.testbed_out(fast)).append(baseline(80.0))
    Store(campaign.testbed_out(fast)).append(probe(2, 0.5 * 1e9 / 8))
    assert said(fast) != booking  # its own records move its forecast now

    again = fv.replayed(campaign)
    for tb in (slow, fast):
        for part in tb.parts:
            for c in part.cells:
                key = (
                    tb.name,
                    part.workload.parallel or "ddp",
                    c.batch,
                    c.workers,
                    c.gpus_per_node,
                )
                assert again[(*key, "plan")] == plans[tb.name][c.id]
                expected = booking[c.id] if tb is fast else plans[tb.name][c.id]
                assert again[(*key, "booking")] == expected
