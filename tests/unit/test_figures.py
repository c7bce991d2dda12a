"""hpcbench.reports.figures: the efficiency panel both reports draw, and a figure saved whole."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import matplotlib
import pytest
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

from hpcbench.campaign import comparison
from hpcbench.measure.analysis import ConfigSummary
from hpcbench.reports import figures, report
from tests.unit.summaries import summary

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)


def point(n: int, e: float, low: float, high: float, at: float) -> ConfigSummary:
    return summary(
        nodes=n,
        workers=n,
        runs=2,
        throughput=10.0 * n * e,
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


def hiding(fig: Figure) -> list[str]:
    """What each legend of a drawn figure covers: a curve (its points and the lines
    between them), a band, an error bar, or another panel; and a legend cut off by the
    figure's edge. Empty: every legend hides nothing and shows whole."""
    fig.canvas.draw()
    found = []
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None:
            continue
        box = legend.get_window_extent()
        if not (fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1 and fig.bbox.y0 <= box.y0):
            found.append(f"{ax.get_title()}: legend cut off")
        for other in fig.axes:
            if other is not ax and box.overlaps(other.get_window_extent()):
                found.append(f"{ax.get_title()}: legend over {other.get_title()}")
            # In display coordinates: a line's path crossing the box, or a filled one
            # (a band, a bar) under any part of it.
            drawn = [(line.get_transform(), line.get_path(), False) for line in other.get_lines()]
            drawn += [
                (c.get_transform(), p, not isinstance(c, LineCollection))
                for c in other.collections
                for p in c.get_paths()
            ]
            drawn += [(p.get_transform(), p.get_path(), True) for p in other.patches]
            for transform, path, filled in drawn:
                if transform.transform_path(path).intersects_bbox(box, filled=filled):
                    found.append(f"{ax.get_title()}: legend over data of {other.get_title()}")
    return found


def drawn(monkeypatch: pytest.MonkeyPatch, draw: Callable[[], object]) -> list[Figure]:
    """The figures `draw` saves, kept open for a look."""
    saved: list[Figure] = []
    save = figures.save_png

    def keep(fig: Figure, path: Path, root: Path | None = None) -> Path:
        saved.append(fig)
        return save(fig, path, root)

    monkeypatch.setattr(figures, "save_png", keep)
    monkeypatch.setattr(plt, "close", lambda fig=None: None)
    draw()
    return saved


def nearly_ideal(workers: int, e: float) -> ConfigSummary:
    """A point where a 2-worker campaign's lie: near E = 1, under the ideal line."""
    return point(workers, e, e - 0.05, min(1.0, e + 0.05), e)


def test_the_campaign_charts_legends_hide_no_point(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Testbeds of one and two workers, as a 2-node campaign's: the curves and bands fill
    # the panel from E = 1 down, where an inside legend has no free corner.
    results = []
    for i, e in enumerate((0.95, 0.75, 0.55, 0.35)):
        tb = SimpleNamespace(title=f"testbed {i}, a partition of the local testbed", name=f"t{i}")
        points = {
            comparison.Panel("resnet18", 8, "images"): [nearly_ideal(1, 1.0), nearly_ideal(2, e)]
        }
        results.append(comparison.TestbedResults(tb, [], [], [], points))  # type: ignore[arg-type]
    saved = drawn(monkeypatch, lambda: comparison.charts(results, tmp_path, "made by"))
    assert len(saved) == 2 and [hiding(fig) for fig in saved] == [[], []]


def test_the_reports_legends_hide_no_point(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    summaries = [
        summary(
            **{**vars(nearly_ideal(n, e)), "batch": b, "compute_s": 0.1, "exposed_comm_s": 0.01}
        )
        for b in (8, 16, 32)
        for n, e in ((1, 1.0), (2, 0.96), (3, 0.93), (4, 0.9))
    ]
    saved = drawn(monkeypatch, lambda: report.make_plots(summaries, tmp_path))
    assert saved and [hiding(fig) for fig in saved] == [[]] * len(saved)
