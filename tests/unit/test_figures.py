"""hpcbench.figures: the efficiency panel both reports draw, and a figure saved whole."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pytest

from hpcbench import figures
from hpcbench.analysis import ConfigSummary
from tests.unit.summaries import summary

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)


def point(n: int, e: float, low: float, high: float, at: float) -> ConfigSummary:
    return summary(
        nodes=n,
        workers=n,
        runs=2,
        images_per_sec=10.0 * n * e,
        efficiency=e,
        efficiency_ci95=0.05,
        predicted_efficiency_low=low,
        predicted_efficiency_high=high,
        predicted_efficiency=at,
    )


CURVE = figures.Curve("a", "C0", [point(1, 1.0, 1.0, 1.0, 1.0), point(4, 0.6, 0.5, 0.7, 0.65)])


@pytest.mark.parametrize(
    ("point_prediction", "labels"),
    [
        (False, {"a measured", "a predicted", "ideal"}),
        (True, {"a measured", "a predicted (band shaded)", "ideal"}),
    ],
)
def test_the_panel_shows_measured_band_and_ideal(point_prediction: bool, labels: set[str]):
    fig, ax = plt.subplots()
    figures.efficiency_panel(ax, [CURVE], "workers", point_prediction=point_prediction)
    assert set(ax.get_legend_handles_labels()[1]) == labels  # the band named once
    assert ax.get_ylim() == (0, 1.15) and ax.get_ylabel() == "E(N) = X(N) / (N X(1))"
    band = ax.collections[-1]  # the shaded band: low to high at each x
    assert band.get_paths()[0].get_extents().bounds == pytest.approx((1, 0.5, 3, 0.5))
    plt.close(fig)


def test_a_figure_is_saved_as_png(tmp_path: Path):
    fig, ax = plt.subplots()
    figures.efficiency_panel(ax, [CURVE], "nodes")
    path = figures.save_png(fig, tmp_path / "e.png")
    plt.close(fig)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["e.png"]
