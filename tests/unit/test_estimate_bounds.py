"""The plan's upper bound is never below its own estimate, whatever the forecast says
of E and of one worker, and a testbed's lease is sized from that bound."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcbench import cli
from hpcbench.campaign import campaign_file, estimate, forecast
from hpcbench.campaign.forecast import CellForecast, Figure


@pytest.fixture(autouse=True)
def _own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))


def write(tmp: Path, testbed: dict[str, Any]) -> Path:
    doc = {
        "name": "bounds",
        "out": str(tmp / "out"),
        "sweep": {"model": "resnet18", "image_size": 32, "batch": [4], "nodes": [1, 2]},
        "testbeds": [{"name": "a", **testbed}],
    }
    path = tmp / "c.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def seconds_of(text: str) -> int:
    """format_duration's text back in seconds ('4h21m', '37m17s', '9s')."""
    match = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text)
    assert match and text, text
    h, m, s = (int(x or 0) for x in match.groups())
    return 3600 * h + 60 * m + s


def test_a_slow_link_bounds_the_plan_above_its_estimate_and_sizes_the_lease_from_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said 'about 4h21m (up to 37m17s)' and booked 77 min: the bound took E to be
    at least 0.05 where the forecast was far below."""
    path = write(
        tmp_path,
        {
            "env": "gpulab",
            "settings": {"topology": "2x1"},
            "hardware": {"link": "10mbit"},
            "expect": {"images_per_s": 10},
        },
    )
    campaign = campaign_file.load(path)
    tb = campaign.testbeds[0]
    fcs = forecast.testbed_forecast(campaign, tb)
    assert min(f.efficiency or 1.0 for f in fcs) < 0.05  # the case the floor hid
    est = estimate.testbed(campaign, tb, [], fcs)
    for cell, e in est.cells:
        assert e.upper is not None and e.seconds is not None and e.upper >= e.seconds, cell
    assert est.wall_max_s() >= est.wall_s()
    lease = estimate.lease(est)
    assert lease is not None and lease.minutes == math.ceil(
        (est.wall_max_s() * estimate.MARGIN + estimate.LEASE_SLACK_S) / 60
    )
    assert lease.minutes * 60 >= est.wall_s()
    assert cli.main(["campaign", "plan", str(path)]) == 0
    out = capsys.readouterr().out
    pairs = re.findall(r"wall about (\w+) \(up to (\w+)", out)
    assert pairs and all(seconds_of(most) >= seconds_of(about) for about, most in pairs), pairs


FRACTIONS = st.floats(1e-6, 1.0) | st.sampled_from([1e-9, 0.001, 0.05, 0.5, 1.0])


@settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    efficiency=st.none() | FRACTIONS,
    low=st.none() | st.just(0.0) | FRACTIONS,
    ips=st.floats(0.01, 1e6),
    slowest=st.none() | st.floats(0.01, 1.0),
)
def test_every_cells_bound_is_at_least_its_estimate(
    tmp_path: Path,
    efficiency: float | None,
    low: float | None,
    ips: float,
    slowest: float | None,
) -> None:
    """Whatever E's point and band's low end (above the point, zero, unknown) and
    however slow the slowest measured run."""
    path = write(tmp_path, {"hosts": ["h1:1", "h2:1"]})
    campaign = campaign_file.load(path)
    tb = campaign.testbeds[0]
    part = tb.parts[0]
    single = Figure(ips, "given", None if slowest is None else ips * slowest)
    for cell in part.cells:
        fc = CellForecast(cell, single, efficiency, low, None, "generated")
        e = estimate.one_run_seconds(campaign, tb, part, cell, fc)
        assert e.seconds is not None and e.upper is not None
        assert e.upper >= e.seconds, (cell.label, e)
