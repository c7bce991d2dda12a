"""What the reports' figures share: the efficiency panel, and how a figure is saved.

matplotlib is imported by the callers (`hpcbench report` and `campaign report`),
only when they draw: the command line starts without it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from hpcbench.core import files
from hpcbench.core.bench import workload_options
from hpcbench.measure.analysis import ConfigSummary

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class Curve:
    """One series of the efficiency panel: its points in x order, its name and colour."""

    label: str
    color: str
    points: Sequence[ConfigSummary]


# A mark per parallelism in the charts that set layouts side by side (advise --plot, a
# campaign's measured front).
PARALLEL_MARKERS = dict(zip(workload_options.PARALLEL, "os^", strict=True))


def _known(values: Iterable[float | None]) -> list[float]:
    """The figures of points chosen for having them: the same values, without None in
    their type (matplotlib's stubs take none)."""
    return [v for v in values if v is not None]


def efficiency_panel(
    ax: Axes,
    curves: Sequence[Curve],
    x: Literal["nodes", "workers"],
    point_prediction: bool = False,
) -> None:
    """E(N) against `x`: each curve's measured points with their 95% intervals, its
    predicted band shaded (and, with `point_prediction`, that point dashed), the ideal
    E = 1 dotted, on 0 to 1.15."""
    for c in curves:
        measured = [s for s in c.points if s.efficiency is not None]
        ax.errorbar(
            [getattr(s, x) for s in measured],
            _known(s.efficiency for s in measured),
            yerr=[s.efficiency_ci95 or 0 for s in measured],
            marker="o",
            capsize=3,
            color=c.color,
            label=f"{c.label} measured",
        )
        # The band is named in the legend, or, with a point prediction, by its line.
        # Both ends are set together (analysis._add_scaling).
        band = [
            s
            for s in c.points
            if s.predicted_efficiency_low is not None and s.predicted_efficiency_high is not None
        ]
        if band:
            ax.fill_between(
                [getattr(s, x) for s in band],
                _known(s.predicted_efficiency_low for s in band),
                _known(s.predicted_efficiency_high for s in band),
                color=c.color,
                alpha=0.15,
                label=None if point_prediction else f"{c.label} predicted",
            )
        on_point = [s for s in c.points if s.predicted_efficiency is not None]
        if point_prediction and on_point:
            ax.plot(
                [getattr(s, x) for s in on_point],
                _known(s.predicted_efficiency for s in on_point),
                linestyle="--",
                marker="x",
                color=c.color,
                label=f"{c.label} predicted (band shaded)",
            )
    # Dotted: the dashed line is the point prediction's.
    ax.axhline(1.0, color="black", linestyle=":", linewidth=1, label="ideal")
    ax.set(ylabel="E(N) = X(N) / (N X(1))", ylim=(0, 1.15))


def legends_outside(fig: Figure, axes: Sequence[Axes], fontsize: float = 8) -> None:
    """Each panel's legend to the right of its plot, where it can hide no point (inside,
    matplotlib's 'best' still covers some where the curves fill the panel), and the
    figure widened by the legends so that the plots keep their width. The caller's
    tight_layout then sets the panels apart: a legend outside its axes is counted in
    their tight bounding box."""
    legends = []
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            legends.append(
                ax.legend(
                    fontsize=fontsize, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0
                )
            )
    if not legends:
        return
    # get_window_extent lays a legend out with the figure's renderer: its size in pixels.
    extra = sum(legend.get_window_extent().width for legend in legends) / fig.dpi
    width, height = fig.get_size_inches()
    fig.set_size_inches(width + extra + 0.2 * len(legends), height)


def save_png(fig: Figure, path: Path, root: Path | None = None) -> Path:
    """The figure as a PNG at `path`, written whole (hpcbench.core.files), with no link
    followed below `root` (the folder the user named; None: `path`'s own)."""
    files.write_atomic(path, lambda f: fig.savefig(f, dpi=100, format="png"), root=root)
    return path
