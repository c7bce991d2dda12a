"""`hpcbench campaign report`: every testbed of a campaign in one comparison.

Written to the campaign's folder:
    report.html, report.md     the page (at a glance, charts, each system, failures)
    throughput.png             images/s or tokens/s against workers, a line per testbed, a
                               panel per workload and batch (Panel)
    efficiency.png             E(N) against workers with each testbed's point prediction and band
    systems.json               each testbed described in the style of MLPerf's system files
    configurations.json, .csv  each configuration's figures, testbed first (reports/export.py)

Every figure is the per-testbed analysis `hpcbench report` makes of that testbed's
own store (<out>/<testbed>/results.jsonl): nothing is computed a second way.
The x axis is workers (GPUs, or nodes of one worker), so that one job of ten
GPUs and ten jobs of one GPU meet on the same axis.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcbench.campaign import cost, forecast, scoring
from hpcbench.campaign.campaign_file import Campaign, TestbedPlan
from hpcbench.campaign.datatypes import Budget
from hpcbench.campaign.journal import FORECASTS, CellState, Journal
from hpcbench.core import files
from hpcbench.core.errors import UsageError, one_line
from hpcbench.core.progress import format_duration
from hpcbench.measure import analysis
from hpcbench.measure.analysis import ConfigSummary
from hpcbench.performance import allreduce_model
from hpcbench.reports import export, figures, findings, page
from hpcbench.reports.page import Block, Code, Image, Page, Paragraph, Section, Table
from hpcbench.reports.report import DATA_CSV, DATA_JSON, HOST_CORES, NODE_CPUS, fmt, fmt_band


@dataclass(frozen=True, order=True)
class Panel:
    """What one chart panel and a run of table rows hold: one workload (a model; a
    transformer's with its parallelism and sequence, analysis.workload_label) at one
    batch per worker, its throughput in `unit`."""

    workload: str
    batch: int
    unit: str

    @property
    def title(self) -> str:
        return f"{self.workload}, batch {self.batch} per worker"


@dataclass
class TestbedResults:
    tb: TestbedPlan
    runs: list[dict[str, Any]]
    probes: list[dict[str, Any]]
    summaries: list[ConfigSummary]
    points: dict[Panel, list[ConfigSummary]] = field(default_factory=dict)  # by workers

    @property
    def title(self) -> str:
        """The testbed's title as every table, heading and chart shows it: one line, a
        character no file or font can hold (a lone surrogate, a terminal escape) written
        out as its escape, so that a title can neither break a table nor stop the report."""
        return one_line(self.tb.title)

    @property
    def fingerprint(self) -> dict[str, Any]:
        ok = [r for r in self.runs if r.get("status") == "ok"]
        return (ok[-1].get("fingerprint") or {}) if ok else {}

    @property
    def _recorded_rate(self) -> str | None:
        rates = [s.link_rate for s in self.summaries if s.link_rate]
        return rates[-1] if rates else None

    @property
    def link_rate(self) -> str | None:
        """The nominal link as the runs recorded it (a shaped testbed's), else as the
        campaign gives it (settings, `hardware: link`: said so)."""
        recorded = self._recorded_rate
        if recorded:
            return recorded
        given = forecast.given_link(self.tb)
        return None if given is None else f"{given[0]} (given)"

    @property
    def nominal_bytes_per_s(self) -> float | None:
        """The nominal link's bytes/s: the runs', else the campaign's (link_rate)."""
        recorded = self._recorded_rate
        if recorded:
            return allreduce_model.nominal_bytes_per_s(recorded)
        given = forecast.given_link(self.tb)
        return None if given is None else given[1] / 8

    @property
    def node_cpus(self) -> str | None:
        """The CPUs each node may use, as its own monitor found them (analysis.node_cpus)."""
        return analysis.node_cpus(self.runs)


def panel_of(s: ConfigSummary) -> Panel:
    return Panel(analysis.workload_label(s), s.batch, s.unit)


def _points(summaries: list[ConfigSummary]) -> dict[Panel, list[ConfigSummary]]:
    """Per workload and batch, one configuration per worker count (where several series
    hold one, as each `gpus_per_node` sweep's own single-worker baseline does: the
    tightest)."""
    best: dict[tuple[Panel, int], ConfigSummary] = {}
    for s in summaries:
        if not s.throughput:
            continue
        key = (panel_of(s), s.workers)
        held = best.get(key)
        if held is None or (s.relative_ci or 1.0) < (held.relative_ci or 1.0):
            best[key] = s
    out: dict[Panel, list[ConfigSummary]] = defaultdict(list)
    for (panel, _), s in sorted(best.items()):
        out[panel].append(s)
    return dict(out)


def load(campaign: Campaign) -> list[TestbedResults]:
    found = []
    for tb in campaign.testbeds:
        store = campaign.testbed_store(tb)
        if not store.exists():
            continue
        records = list(store.records())
        runs = [r for r in records if r.get("kind") == "run"]
        probes = [r for r in records if r.get("kind") == "probe"]
        summaries = analysis.summarise(runs, probes)
        found.append(TestbedResults(tb, runs, probes, summaries, _points(summaries)))
    if not any(r.runs for r in found):
        raise UsageError(
            f"{campaign.out}: no testbed of campaign {campaign.name} has a run yet: "
            f"`python -m hpcbench campaign run {campaign.path}` first"
        )
    return found


# ------------------------------------------------------------------ figures
def busbw_line(r: TestbedResults) -> str:
    """The largest probe's bus bandwidth against the nominal link."""
    ok = [p for p in r.probes if p.get("status") == "ok" and p.get("results")]
    if not ok:
        return "-"
    widest = max(ok, key=lambda p: p["workers"])
    bus = widest["results"][-1]["busbw"]
    nominal = r.nominal_bytes_per_s
    share = f" ({bus / nominal:.0%} of {r.link_rate})" if nominal else ""
    return f"{bus / 1e9:.3f} GB/s on {widest['workers']} workers{share}"


def largest(points: list[ConfigSummary]) -> ConfigSummary | None:
    scaled = [s for s in points if s.workers > 1 and s.efficiency is not None]
    return max(scaled, key=lambda s: s.workers) if scaled else None


def verdict(s: ConfigSummary, nominal_bytes_per_s: float | None) -> str:
    """The report's flag: off the prediction with the likeliest cause, or why not."""
    off = analysis.off_prediction(s, nominal_bytes_per_s)
    if off:
        return off
    band = analysis.inside_band(s)
    if band is None and s.parallel not in (None, "ddp"):
        return f"no prediction ({s.parallel}: the report's model replays all-reduces only)"
    return {True: "as predicted", False: "outside the band", None: "no prediction (no probe)"}[band]


def where_time_went(s: ConfigSummary) -> str:
    parts = [("compute", s.compute_s), ("data", s.data_s), ("exposed comm", s.exposed_comm_s)]
    shown = [f"{name} {t * 1e3:.0f} ms" for name, t in parts if t is not None]
    return ", ".join(shown) if shown else "-"


GLANCE_HEADER = [
    "testbed",
    "nodes x workers/node",
    "nominal link",
    "measured bus bandwidth",
    "workload",
    "batch",
    "largest N",
    "throughput ± CI95",
    "E ± CI95",
    "E point",
    "E band",
    "where the time went (per step)",
    "flag: likeliest cause",
]


def figure_cells(s: ConfigSummary, nominal_bytes_per_s: float | None, alone: str) -> list[str]:
    """A configuration's figures as both tables show them: throughput, efficiency, the
    prediction's point and band, where the time went, and the verdict (`alone` for one
    worker, which has nothing to scale against)."""
    return [
        f"{fmt(s.throughput, 1, s.ci95)} {analysis.per_sec(s)}",
        fmt(s.efficiency, 3, s.efficiency_ci95),
        fmt(s.predicted_efficiency, 3),
        fmt_band(s),
        where_time_went(s),
        verdict(s, nominal_bytes_per_s) if s.workers > 1 else alone,
    ]


def with_mfu(results: list[TestbedResults]) -> bool:
    """Whether the tables add an MFU column: a transformer was measured."""
    return any(s.unit == analysis.TOKENS for r in results for s in r.summaries)


def mfu_cell(s: ConfigSummary) -> str:
    """MFU, or why it is unknown; '-' for a CNN (no FLOPs count)."""
    if s.unit != analysis.TOKENS:
        return "-"
    return f"{s.mfu:.1%}" if s.mfu is not None else f"unknown: {s.mfu_unknown or '-'}"


def glance_rows(results: list[TestbedResults]) -> list[list[str]]:
    rows = []
    mfu = with_mfu(results)
    for r in results:
        for panel, points in sorted(r.points.items()):
            top = largest(points) or (points[-1] if points else None)
            if top is None:
                continue
            rows.append(
                [
                    r.title,
                    f"{top.nodes} x {top.gpus_per_node}",
                    r.link_rate or "-",
                    busbw_line(r),
                    panel.workload,
                    str(panel.batch),
                    str(top.workers),
                    *figure_cells(top, r.nominal_bytes_per_s, alone="-"),
                    *([mfu_cell(top)] if mfu else []),
                ]
            )
    return rows


SYSTEM_KEYS = (
    "system_name",
    "where",
    "number_of_nodes",
    "accelerators_per_node",
    "accelerator_model_name",
    "host_processor_model_name",
    "host_processor_core_count",
    "node_cpus",
    "host_networking",
    "measured_bus_bandwidth",
    "gpu_busy",
    "gpu_memory_peak",
    "queue_wait_per_job",
    "framework",
    "other_software_stack",
    "hpcbench",
)

# The systems table's words where a key alone misleads (report.FINGERPRINT_LABELS).
SYSTEM_LABELS = {
    "host_processor_core_count": f"host_processor_core_count: {HOST_CORES}",
    "node_cpus": NODE_CPUS,
}


def _one(value: Any) -> str:
    if isinstance(value, list):
        unique = sorted({str(v) for v in value})
        return ", ".join(unique)
    return "-" if value is None else str(value)


def system(r: TestbedResults) -> dict[str, Any]:
    """One testbed as MLPerf's system description files name things, from what the
    runs' fingerprints recorded (the nodes' own report) and the campaign's settings."""
    fp = r.fingerprint
    ok = [s for s in r.summaries if s.throughput]
    nodes = max((s.nodes for s in ok), default=0)
    per_node = max((s.gpus_per_node for s in ok), default=0)
    device = _one(fp.get("device"))
    framework = f"PyTorch {_one(fp.get('torch'))}"
    if fp.get("horovod"):
        framework += f", Horovod {_one(fp.get('horovod'))} ({_one(fp.get('horovod_controller'))})"
    elif fp.get("torch_distributed"):
        framework += f", torch.distributed ({_one(fp.get('torch_distributed'))})"
    stack = {k: _one(fp[k]) for k in ("cuda", "nccl", "driver", "python", "torchvision") if k in fp}
    return {
        "system_name": r.title,
        "testbed": r.tb.name,
        "environment": r.tb.env,
        "kind": r.tb.kind.reported_as,
        "where": r.tb.where or f"deployed {r.tb.env}",
        "settings": dict(r.tb.settings),
        "number_of_nodes": nodes,
        "accelerators_per_node": per_node if device == "cuda" else 0,
        "accelerator_model_name": _one(fp.get("gpu")) if device == "cuda" else "none (CPU)",
        "workers_per_node": per_node,
        "host_processor_model_name": _one(fp.get("cpu")),
        "host_processor_core_count": _one(fp.get("cores")),
        "node_cpus": r.node_cpus or "-",
        "host_networking": f"{r.link_rate or 'unknown rate'}"
        + (f" over {_one(fp.get('iface'))}" if fp.get("iface") else ""),
        "measured_bus_bandwidth": busbw_line(r),
        **gpu_use(r),
        "queue_wait_per_job": queue_line(r),
        "framework": framework,
        "other_software_stack": stack,
        "hpcbench": {
            "commit": fp.get("hpcbench_commit"),
            "bench_digest": fp.get("bench_digest"),
            "launcher": fp.get("launcher"),
        },
    }


def gpu_use(r: TestbedResults) -> dict[str, str]:
    """GPU utilisation and memory over the runs, as NVML gave them (what nvitop shows):
    the mean of the runs' mean utilisation and its range, and the peak memory."""
    gpus = [run.get("gpu") or {} for run in r.runs if run.get("status") == "ok"]
    sampled = [g for g in gpus if isinstance(g, dict) and g.get("util_mean") is not None]
    if not sampled:
        return {"gpu_busy": "-", "gpu_memory_peak": "-"}
    busy = [float(g["util_mean"]) for g in sampled]
    peak = max(float(g.get("mem_used_max_mib") or 0.0) for g in sampled)
    return {
        "gpu_busy": f"{sum(busy) / len(busy):.0f}% mean over {len(busy)} runs "
        f"({min(busy):.0f}-{max(busy):.0f}%)",
        "gpu_memory_peak": f"{peak:.0f} MiB",
    }


def queue_line(r: TestbedResults) -> str:
    """A partition's queue wait per job: median and range over the jobs that ran."""
    waits = sorted(
        float(run["queue_wait_s"])
        for run in r.runs
        if isinstance(run.get("queue_wait_s"), int | float)
    )
    if not waits:
        return "-"
    median = waits[len(waits) // 2]
    return (
        f"median {format_duration(median)} over {len(waits)} jobs "
        f"({format_duration(waits[0])}-{format_duration(waits[-1])})"
    )


# ------------------------------------------------------------------- charts
def _plain(text: str) -> str:
    """Text matplotlib must show as written: a '$' would start its mathtext."""
    return text.replace("$", r"\$")


def charts(
    results: list[TestbedResults], folder: Path, made_by: str = ""
) -> list[tuple[str, Path]]:
    """The comparison's two charts; `made_by` (the command that remakes them) is
    printed under each, so that a copied picture still says where it came from."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted({p for r in results for p in r.points})
    if not panels:
        return []
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    made = []
    for name in ("throughput", "efficiency"):
        fig, axes = plt.subplots(
            1,
            len(panels),
            figsize=(5.5 * len(panels), 4.5),
            squeeze=False,
            sharey=name == "efficiency",
        )
        top = 1
        for ax, panel in zip(axes[0], panels, strict=True):
            curves = [
                figures.Curve(_plain(r.title), colors[i % len(colors)], r.points[panel])
                for i, r in enumerate(results)
                if r.points.get(panel)
            ]
            top = max([top, *(s.workers for c in curves for s in c.points)])
            if name == "efficiency":
                figures.efficiency_panel(ax, curves, "workers", point_prediction=True)
            else:
                for c in curves:
                    ax.errorbar(
                        [s.workers for s in c.points],
                        [s.throughput for s in c.points],
                        yerr=[s.ci95 or 0 for s in c.points],
                        marker="o",
                        capsize=3,
                        color=c.color,
                        label=c.label,
                    )
                ax.set(ylabel=f"{panel.unit}/s (all workers)")
            ax.set(xlabel="workers (GPUs, or nodes of one worker)", title=_plain(panel.title))
            ax.grid(alpha=0.3)
        for ax in axes[0]:
            ax.set_xticks(range(1, top + 1))
        figures.legends_outside(fig, axes[0])
        fig.suptitle("Throughput" if name == "throughput" else "Scaling efficiency")
        if made_by:
            fig.text(0.01, 0.005, _plain(made_by), fontsize=7, color="0.4")
        fig.tight_layout(rect=(0, 0.03, 1, 1) if made_by else None)
        made.append((name, figures.save_png(fig, folder / f"{name}.png")))
        plt.close(fig)
    return made


# --------------------------------------------------- an advice's measured front
@dataclass(frozen=True)
class Measured:
    """A configuration's measured time to an advice's budget, with its interval from the
    throughput's, and what it booked: GPU-hours, or node-hours where it ran on CPUs."""

    testbed: str
    summary: ConfigSummary
    hours: float
    hours_low: float
    hours_high: float | None  # None: the throughput's interval reaches 0
    per_hour: int  # what it books an hour: its GPUs, or its nodes where it ran on CPUs
    on_gpus: bool
    front: bool = False

    @property
    def booked(self) -> float:
        return self.hours * self.per_hour


def measured_front(results: list[TestbedResults], budget: Budget) -> list[Measured]:
    """Each measured configuration's time to the budget and booked hours, the ones no
    other beats (_beats) marked: the measured front."""
    out = []
    for r in results:
        on_gpus = r.fingerprint.get("device") != "cpu"
        for s in r.summaries:
            rate = s.throughput
            if not rate:
                continue
            # Samples of a transformer are its sequences; otherwise the budget's unit is
            # the throughput's (tokens, images).
            per = (s.seq_len or 1) if budget.unit == "samples" and s.unit == "tokens" else 1
            ci = s.ci95 or 0.0

            work = budget.amount * per / 3600  # the budget in the throughput's unit, per hour
            out.append(
                Measured(
                    r.tb.name,
                    s,
                    work / rate,
                    work / (rate + ci),
                    work / (rate - ci) if rate > ci else None,
                    s.workers if on_gpus else s.nodes,
                    on_gpus,
                )
            )
    return [dataclasses.replace(m, front=not any(_beats(o, m) for o in out)) for m in out]


def _beats(o: Measured, m: Measured) -> bool:
    """o beats m where it is no worse on both, time and booked hours, and better beyond
    the intervals on one: a difference inside them is not a result."""
    if o is m or o.hours > m.hours or o.booked > m.booked:
        return False
    o_high = o.hours_high if o.hours_high is not None else float("inf")
    surely_faster = o_high < m.hours_low
    surely_cheaper = o_high * o.per_hour < m.hours_low * m.per_hour
    return surely_faster or surely_cheaper


def front_chart(points: list[Measured], budget: Budget, folder: Path, made_by: str) -> Path:
    """Hours to the budget against booked hours, as measured: a colour per testbed, a
    shape per parallelism, the interval as an error bar, the measured front ringed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    names = list(dict.fromkeys(p.testbed for p in points))
    fig, ax = plt.subplots(figsize=(7.5, 5))
    for p in points:
        color = colors[names.index(p.testbed) % len(colors)]
        high = p.hours_high if p.hours_high is not None else p.hours * 10
        ax.errorbar(
            [p.booked],
            [p.hours],
            yerr=[[p.hours - p.hours_low], [high - p.hours]],
            marker=figures.PARALLEL_MARKERS.get(p.summary.parallel or "ddp", "o"),
            color=color,
            markeredgecolor="black" if p.front else color,
            markeredgewidth=1.6 if p.front else 0.8,
            capsize=2,
            linestyle="none",
        )
    for n, name in enumerate(names):
        ax.plot([], [], "o", color=colors[n % len(colors)], label=name)
    gpus = all(p.on_gpus for p in points)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="GPU-hours" if gpus else "GPU-hours (node-hours on CPU nodes)",
        ylabel="hours to the budget, measured",
        title=f"{_plain(budget.model)[-40:]}: {budget.amount:.3g} {budget.unit}, the front ringed",
    )
    ax.grid(alpha=0.3, which="both")
    figures.legends_outside(fig, [ax])
    fig.text(0.01, 0.005, _plain(made_by), fontsize=7, color="0.4")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    path = figures.save_png(fig, folder / "front.png")
    plt.close(fig)
    return path


def front_paragraph(points: list[Measured], budget: Budget) -> Paragraph:
    front = sorted((p for p in points if p.front), key=lambda p: p.hours)
    said = [
        f"{p.testbed}, {p.summary.workers} worker(s)"
        + (f", {p.summary.parallel}" if p.summary.parallel else "")
        + f": {p.hours:.3g} h ({p.hours_low:.3g}-"
        + (f"{p.hours_high:.3g}" if p.hours_high is not None else "unbounded")
        + f" h), {p.booked:.3g} {'GPU' if p.on_gpus else 'node'}-hours"
        for p in front
    ]
    return Paragraph(
        f"The measured front for the advice's budget ({budget.amount:.3g} {budget.unit} of "
        f"{one_line(budget.model)}), none of it beaten by another beyond the intervals: "
        + "; ".join(said)
        + " (front.png; the advice's own forecast: `hpcbench advise`, docs/advise.md)."
    )


# ------------------------------------------------------------------- writing
def build(campaign: Campaign) -> list[Path]:
    results = load(campaign)
    out = campaign.out
    out.mkdir(parents=True, exist_ok=True)
    journal = Journal(out, campaign.name)
    states = journal.cell_states() if journal.store.exists() else {}
    parallel_of = {
        c.id: part.workload.parallel
        for tb in campaign.testbeds
        for part in tb.parts
        for c in part.cells
    }
    forecasts = scoring.load(journal, parallel_of)
    made_by = f"hpcbench campaign report {campaign.path}, {time.strftime('%Y-%m-%d')}"
    made = charts(results, out, made_by)
    front: list[Measured] = []
    if campaign.advice is not None:
        front = measured_front(results, campaign.advice)
        if front:
            made.append(("front", front_chart(front, campaign.advice, out, made_by)))
    systems = [system(r) for r in results]
    files.write_atomic(out / "systems.json", json.dumps(systems, indent=1) + "\n")
    configurations = [
        export.configuration(
            s,
            testbed=r.tb.name,
            title=r.title,
            **forecasts.fields(r.tb.name, s),
            **cost.fields(r.tb.price, s, r.fingerprint.get("device")),
        )
        for r in results
        for s in r.summaries
    ]
    files.write_atomic(out / DATA_JSON, export.as_json(configurations, campaign=campaign.name))
    files.write_atomic(
        out / DATA_CSV,
        export.as_csv(configurations, ("testbed", "title", *scoring.FIELDS, *cost.FIELDS)),
    )
    md_path, html_path = page.write(
        campaign_page(campaign, results, states, systems, made, forecasts, front), out
    )
    return [
        html_path,
        md_path,
        *(p for _, p in made),
        out / "systems.json",
        out / DATA_JSON,
        out / DATA_CSV,
    ]


def campaign_page(
    campaign: Campaign,
    results: list[TestbedResults],
    states: dict[str, CellState],
    systems: list[dict[str, Any]],
    made: list[tuple[str, Path]],
    forecasts: scoring.Forecasts,
    front: list[Measured] | None = None,
) -> Page:
    """report.md and report.html, as one description (hpcbench.reports.page)."""
    cells = campaign.cells
    counts: dict[str, int] = defaultdict(int)
    for c in cells:
        counts[states[c.id].status if c.id in states else "pending"] += 1
    intro: list[Block] = [Paragraph(one_line(campaign.description))] if campaign.description else []
    intro += [
        Paragraph(
            f"{len(cells)} cells on {len(campaign.testbeds)} testbeds: "
            + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
            + "."
        ),
        Paragraph(
            "Made by ",
            Code(f"python -m hpcbench campaign run {campaign.path}"),
            " (",
            Code(f"campaign report {campaign.path}"),
            f" remakes this page); {time.strftime('%Y-%m-%d %H:%M')}.",
        ),
        Paragraph(
            "Each point is the mean over repeats with its 95% interval; E(N) = X(N) / (N X(1)) "
            "against the testbed's own single-worker baseline; the point prediction replays one "
            "step over the probed network, the band spans no overlap to full overlap "
            "(docs/method.md). A difference smaller than both intervals is not a result."
        ),
    ]
    mfu = with_mfu(results)
    glance: list[Block] = [Table(GLANCE_HEADER + (["MFU"] if mfu else []), glance_rows(results))]
    glance += [Image(path.name, title) for title, path in made]
    glance.append(forecast_paragraph(results, forecasts))
    glance.append(rank_paragraph(results, forecasts))
    if front and campaign.advice is not None:
        glance.append(front_paragraph(front, campaign.advice))
    glance.append(
        Paragraph(f"The numbers: {DATA_JSON} and {DATA_CSV} (one record per configuration).")
    )
    header = [""] + [s["system_name"] for s in systems]
    rows = [[SYSTEM_LABELS.get(k, k)] + [_cell(s.get(k)) for s in systems] for k in SYSTEM_KEYS]
    systems_table: list[Block] = [Table(header, rows), Paragraph("As JSON: systems.json.")]
    sections = [
        Section("", intro),
        Section("At a glance", glance),
        Section("The systems", systems_table),
    ]
    for r in results:
        rows = []
        for panel, points in sorted(r.points.items()):
            for s in points:
                rows.append(
                    [
                        panel.workload,
                        str(panel.batch),
                        str(s.nodes),
                        str(s.workers),
                        str(s.runs),
                        *figure_cells(s, r.nominal_bytes_per_s, alone="baseline"),
                        *forecast_cells(forecasts, r.tb.name, s),
                        *([mfu_cell(s)] if mfu else []),
                    ]
                )
        header = [
            "workload",
            "batch",
            "nodes",
            "workers",
            "runs",
            "throughput ± CI95",
            "E ± CI95",
            "E point",
            "E band",
            "where the time went",
            "flag",
            "E forecast: plan, booking",
            "forecast - measured",
            *(["MFU"] if mfu else []),
        ]
        more = Paragraph(
            "Full report of this testbed: ",
            Code(f"python -m hpcbench report --out {campaign.testbed_out(r.tb)}"),
            ".",
        )
        sections.append(
            Section(f"{r.title} ({r.tb.name}, env {r.tb.env})", [Table(header, rows), more])
        )
    sections += findings.campaign_sections(
        [(r.title, r.tb.price, r.runs, r.summaries) for r in results], cost.fields
    )
    failed = [
        (c, states[c.id]) for c in cells if c.id in states and states[c.id].status == "failed"
    ]
    if failed:
        rows = [[c.testbed, c.label, s.why] for c, s in failed]
        sections.append(Section("Failed cells", [Table(["testbed", "cell", "why"], rows)]))
    return Page(
        f"Campaign {campaign.name}", sections, html_title=f"hpcbench campaign {campaign.name}"
    )


def forecast_cells(forecasts: scoring.Forecasts, testbed: str, s: ConfigSummary) -> list[str]:
    """E as forecast before anything was booked and just before the testbed was, and
    each one's error against the measured E."""
    if s.workers < 2:
        return ["-", "-"]
    return [
        ", ".join(fmt(forecasts.efficiency(testbed, s, m), 3) for m in FORECASTS),
        ", ".join(_signed(forecasts.error(testbed, s, m)) for m in FORECASTS),
    ]


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.3f}"


def forecast_paragraph(results: list[TestbedResults], forecasts: scoring.Forecasts) -> Paragraph:
    """The campaign's forecast error at a glance."""
    said = []
    for made, when in (
        ("plan", "made before anything was booked"),
        ("booking", "made again just before each testbed was booked"),
    ):
        scored = scoring.median_abs(
            [forecasts.error(r.tb.name, s, made) for r in results for s in r.summaries]
        )
        if scored is not None:
            said.append(f"{scored[0]:.3f} for the forecast {when} ({scored[1]} configuration(s))")
    if not said:
        return Paragraph("No forecast of E was journaled for a configuration of several workers.")
    return Paragraph(
        "Forecast against measured E, median |forecast - measured|: "
        + "; ".join(said)
        + " (campaign plan shows each forecast's sources; docs/campaigns.md)."
    )


def _noise(interval: tuple[float, float] | None) -> str:
    if interval is None:
        return ""
    return f" ({interval[0]:.2f} to {interval[1]:.2f} with the measurements' noise, 95%)"


def rank_paragraph(results: list[TestbedResults], forecasts: scoring.Forecasts) -> Paragraph:
    """The forecast's ranking of the configurations against the measured one: what a
    choice made from the forecast (`hpcbench advise`'s front) got right."""
    measured = [
        (r.tb.name, f"{r.tb.name}, {s.workers} worker(s), batch {s.batch}", s)
        for r in results
        for s in r.summaries
    ]
    said = []
    for made, when in (("plan", "before anything was booked"), ("booking", "at booking")):
        score = scoring.ranked(forecasts, measured, made)
        if score is None:
            continue
        rho = "n/a (fewer than 3, or all tied)" if score.rho is None else f"{score.rho:.2f}"
        verdict = (
            "the measured best"
            if score.forecast_best == score.measured_best
            else (
                f"inside the measured interval of the best ({score.measured_best})"
                if score.best_held
                else f"not the best, nor inside its interval ({score.measured_best})"
            )
        )
        said.append(
            f"forecast {when}: rank correlation with the measured throughput {rho} over "
            f"{score.count} configuration(s){_noise(score.rho_interval)}; its best, "
            f"{score.forecast_best}, was {verdict}"
        )
    if not said:
        return Paragraph("No forecast throughput was journaled beside a measured one.")
    return Paragraph("Ranking: " + "; ".join(said) + ".")


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k} {v}" for k, v in value.items() if v is not None) or "-"
    return _one(value)
