"""How a CPU node's workers share its CPUs (bench/cpu_share.py), and the forecast that
takes it: several workers on a node of fewer CPUs each compute at their share, so E
against the lone worker falls with it, before booking and in the report alike."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from hpcbench.campaign import campaign_file, forecast
from hpcbench.measure import analysis
from hpcbench.measure.store import Store
from tests.unit.test_campaign import write
from tests.unit.test_forecast import TWO_LOCAL, baseline, cell_of

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import cpu_share  # noqa: E402
import runtime  # noqa: E402


def test_the_workload_takes_its_threads_from_the_same_rule() -> None:
    assert runtime.auto_threads is cpu_share.auto_threads


@given(
    st.floats(0.1, 64, allow_nan=False),
    st.integers(1, 16),
    st.integers(0, 8),
)
def test_each_worker_gets_its_threads_or_its_even_share_of_the_node(q, k, t) -> None:
    each = cpu_share.cpus_each(q, k, t)
    assert 0 < each <= q / k + 1e-12  # never more than an even share of the node
    assert each <= (t or cpu_share.auto_threads(q, k))  # nor more than its threads use
    assert 1.0 - 1e-9 <= cpu_share.least_stretch(q, k, t, t) <= cpu_share.stretch(q, k, t, t) + 1e-9
    # Alone with the node's own threads, and one thread each where they fit: no stretch.
    assert cpu_share.stretch(q, 1, t, t) == pytest.approx(1.0)
    if k <= q:
        assert cpu_share.stretch(q, k, 1, 1) == pytest.approx(1.0)
    else:  # more one-thread workers than CPUs: the quota time-slices them
        assert cpu_share.stretch(q, k, 1, 1) == pytest.approx(min(1.0, q) * k / q)


def test_two_workers_on_a_node_of_one_cpu_each_compute_at_half() -> None:
    assert cpu_share.cpus_each(1.0, 2) == 0.5 and cpu_share.stretch(1.0, 2) == 2.0
    assert cpu_share.stretch(0.6, 2, 1, 1) == pytest.approx(2.0)  # the e2e nodes' quota
    assert cpu_share.stretch(4.0, 2) == pytest.approx(2.0)  # 4 threads alone, 2 each
    assert cpu_share.stretch(4.0, 2, 1, 1) == 1.0
    assert cpu_share.least_stretch(4.0, 2) == 1.0  # each still has a whole CPU
    assert cpu_share.least_stretch(1.0, 2) == 2.0  # time-sliced: no less


# ------------------------------------------------------------------ the forecast
def shared(tmp_path: Path, **settings: Any) -> campaign_file.Campaign:
    """test_forecast's 1 Gbit/s local testbed, two workers a node."""
    data = yaml.safe_load(TWO_LOCAL.format(out=tmp_path / "out"))
    data["sweep"]["gpus_per_node"] = [2]
    data["testbeds"] = data["testbeds"][1:]
    data["testbeds"][0]["settings"].update(settings)
    return campaign_file.load(write(tmp_path, yaml.safe_dump(data)))


def test_workers_sharing_a_node_are_forecast_at_their_share(tmp_path: Path) -> None:
    campaign = shared(tmp_path)
    [tb] = campaign.testbeds
    two = cell_of(forecast.testbed_forecast(campaign, tb), 2)
    # Two one-CPU shares of one CPU: each computes at half the lone worker's rate, so E
    # against the lone worker is at most a half, and the line says why.
    assert two.efficiency is not None and two.efficiency <= 0.5 + 1e-9
    assert two.efficiency_high is not None and two.efficiency_high <= 0.5 + 1e-9
    assert "2 workers share a node's 1 CPU: 0.5 each, the lone worker 1 (step x 2.00" in (
        two.link_source
    )
    # A node of two CPUs: the lone worker ran two threads, each of the pair one: its
    # step in proportion (x 2), the band up to none (the second thread bought nothing).
    (tmp_path / "roomy").mkdir()
    roomy = shared(tmp_path / "roomy", cpus_per_node=2)
    pair = cell_of(forecast.testbed_forecast(roomy, roomy.testbeds[0]), 2)
    assert pair.efficiency is not None and pair.efficiency <= 0.5 + 1e-9
    assert pair.efficiency_high is not None and pair.efficiency_high > 0.9
    assert "(step x 2.00, the band to x 1.00, bench/cpu_share.py)" in pair.link_source
    # A measured baseline's node (its monitor's CPUs) beats the setting.
    Store(campaign.testbed_out(tb)).append(
        baseline(90.0, nodes_use={"per_host": [{"host": "node1", "cpus": 0.5}]}, threads=1)
    )
    measured = cell_of(forecast.testbed_forecast(campaign, tb), 2)
    assert "a node's 0.5 CPUs: 0.25 each, the lone worker 0.5" in measured.link_source


def test_the_report_s_prediction_takes_the_same_share() -> None:
    def summary(workers: int, per_node: int, cpus: float) -> analysis.ConfigSummary:
        return analysis.ConfigSummary(
            "local",
            "resnet18",
            "horovod",
            64,
            64,
            "synthetic",
            per_node,
            1,
            workers,
            1,
            0,
            step_time_s=1.0,
            node_cpus_least=cpus,
            threads=1,
        )

    job = analysis.job_of({"model": "resnet18", "batch": 64, "fingerprint": {"device": "cpu"}})
    base = summary(1, 2, 1.0)
    assert analysis._shared_cpu_stretch(job, summary(2, 2, 1.0), base) == (2.0, 2.0)
    assert analysis._shared_cpu_stretch(job, summary(2, 1, 1.0), base) == (1.0, 1.0)
    gpu = analysis.job_of({"model": "resnet18", "batch": 64, "fingerprint": {"device": "cuda"}})
    assert analysis._shared_cpu_stretch(gpu, summary(2, 2, 1.0), base) == (1.0, 1.0)
