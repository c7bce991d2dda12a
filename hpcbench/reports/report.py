"""`hpcbench report` and `hpcbench compare`: tables and plots from the results store.

Everything is recomputed from the raw window times in results.jsonl, so a
report made after more repeats (or --resume) reflects all of them.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from hpcbench.core import files
from hpcbench.core.errors import UsageError
from hpcbench.launchers.parse import check_path
from hpcbench.measure import analysis, identity
from hpcbench.measure.analysis import ConfigSummary
from hpcbench.measure.store import Store
from hpcbench.performance import allreduce_model
from hpcbench.reports import export, figures, findings, page
from hpcbench.reports.page import Block, Bullets, Image, Page, Paragraph, Section, Table

# Context lines from published measurements (docs/method.md, "Reference numbers"); shown
# for the models they concern.
REFERENCES = {
    "resnet50": [
        "PyTorch DDP benchmark, ResNet-50, batch 32, V100: 329 img/s per GPU alone, "
        "306 per GPU on 16 GPUs over 100 Gbit/s InfiniBand (E about 0.93).",
        "NVIDIA ResNet-50 v1.5 (PyTorch): A100-80GB AMP 2470 img/s on 1 GPU, 16621 on 8 "
        "(E about 0.84); V100-16GB FP32 367 on 1 GPU.",
        "ResNet-50 has about 25.6 M parameters (about 102 MB of fp32 gradients); a 10-node "
        "1 Gbit/s ring all-reduces them in about 1.5 s, 10 Gbit/s in about 0.15 s.",
    ],
    "resnet101": [
        "Horovod paper (128 servers x 4 Pascal GPUs, 25 Gbit/s RoCE): 90% scaling "
        "efficiency for ResNet-101 at 512 GPUs."
    ],
    "inception_v3": [
        "Horovod paper (128 servers x 4 Pascal GPUs, 25 Gbit/s RoCE): 90% scaling "
        "efficiency for Inception V3 at 512 GPUs."
    ],
    "vgg16": [
        "Horovod paper (128 servers x 4 Pascal GPUs, 25 Gbit/s RoCE): 68% scaling "
        "efficiency for VGG-16 at 512 GPUs."
    ],
}

FINGERPRINT_KEYS = (
    "env",
    "link_rate",
    "launcher",
    "torch",
    "torchvision",
    "horovod",
    "horovod_controller",
    "horovod_nccl",
    "torch_distributed",
    "nccl",
    "cuda",
    "gpu",
    "driver",
    "cpu",
    "cores",
    "node_cpus",  # not a fingerprint's: analysis.node_cpus
    "threads",
    "hosts",
    "hpcbench_commit",
    "bench_digest",
)


def fmt(value: float | None, digits: int = 1, ci: float | None = None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    text = f"{value:.{digits}f}"
    return f"{text} ± {ci:.{digits}f}" if ci else text


def fmt_band(s: ConfigSummary) -> str:
    if s.predicted_efficiency_low is None:
        return "-"
    return f"{s.predicted_efficiency_low:.2f}-{s.predicted_efficiency_high:.2f}"


def load(directory: str) -> tuple[Store, list[dict], list[dict], list[dict]]:
    """The store, its runs, its probes and its sweeps' convergence records."""
    check_path(directory, "results directory")
    store = Store(directory)
    if not store.exists():
        raise UsageError(
            f"{store.path} not found: run `python -m hpcbench scale --out "
            f"{directory}` first, or give the directory that holds it"
        )
    records = list(store.records())  # one read: damaged lines are named once
    runs = [r for r in records if r.get("kind") == "run"]
    probes = [r for r in records if r.get("kind") == "probe"]
    if not runs and not probes:
        if store.skipped:  # lines there were, none usable: say how many and why
            whys = sorted({why for _, why in store.skipped})
            raise UsageError(
                f"{store.path} holds no usable run: {len(store.skipped)} line(s) skipped "
                f"({'; '.join(whys[:3])}{'; ...' if len(whys) > 3 else ''}); the lines "
                "above name the first of them"
            )
        raise UsageError(f"{store.path} holds no runs yet")
    convergence = [r for r in records if r.get("kind") == "convergence"]
    return store, runs, probes, convergence


# Where a key alone misleads: in a container, os.cpu_count (`cores`) counts the host's
# cores, while the node may use only its quota.
HOST_CORES = "cores of the machine the node runs on"
NODE_CPUS = "CPUs a node may use (its quota, else the CPUs it may run on)"
FINGERPRINT_LABELS = {"cores": f"cores: {HOST_CORES}", "node_cpus": NODE_CPUS}


def environment(runs: list[dict], env: str | None = None) -> dict[str, str]:
    """The environment table, label -> value: the latest ok run's fingerprint (for one
    env if given), and the CPUs its nodes may use beside the machine's cores."""
    fp = dict(fingerprint_of(runs, env))
    cpus = analysis.node_cpus([r for r in runs if env is None or r.get("env") == env])
    if cpus:
        fp["node_cpus"] = cpus
    return {FINGERPRINT_LABELS.get(k, k): _fp_value(fp[k]) for k in FINGERPRINT_KEYS if k in fp}


def fingerprint_of(runs: list[dict], env: str | None = None) -> dict[str, Any]:
    """The latest successful run's fingerprint (for one env if given)."""
    ok = [r for r in runs if r.get("status") == "ok" and (env is None or r.get("env") == env)]
    return (ok[-1].get("fingerprint") or {}) if ok else {}


def _fp_value(value: Any) -> str:
    if isinstance(value, list):
        unique = sorted({str(v) for v in value})
        return (
            ", ".join(unique) if len(unique) <= 4 else f"{len(value)}: {', '.join(unique[:4])}, ..."
        )
    return "-" if value is None else str(value)


SERIES_HEADER = [
    "nodes",
    "workers",
    "runs",
    "{unit}/s ± CI95",
    "CI from",
    "outlier windows",
    "per worker",
    "jitter",
    "speedup",
    "E ± CI95",
    "inter-node E",
    "predicted E",
    "busbw GB/s",
    "data time",
    "weights in sync",
]
MFU_HEADER = "MFU"


def series_header(s: ConfigSummary) -> list[str]:
    """SERIES_HEADER in the series' unit, with MFU for a transformer."""
    header = [h.format(unit=s.unit) for h in SERIES_HEADER]
    return header + [MFU_HEADER] if s.unit == analysis.TOKENS else header


def fmt_mfu(s: ConfigSummary) -> str:
    """A transformer's MFU as a percentage, or 'unknown' (its reason is said below the
    table: mfu_lines)."""
    return "unknown" if s.mfu is None else f"{s.mfu:.1%}"


def mfu_lines(series: list[ConfigSummary]) -> list[str]:
    """Why MFU is unknown where it is, each reason once, with the configurations it
    concerns."""
    reasons: dict[str, list[str]] = defaultdict(list)
    for s in series:
        if s.unit == analysis.TOKENS and s.runs and s.mfu is None:
            reasons[s.mfu_unknown or "unknown"].append(f"{s.workers} worker(s)")
    return [f"MFU unknown ({', '.join(at)}): {why}" for why, at in reasons.items()]


def series_rows(series: list[ConfigSummary]) -> list[list[str]]:
    rows = []
    for s in series:
        runs = f"{s.runs}" + (f" (+{s.failed} failed)" if s.failed else "")
        mfu = [fmt_mfu(s)] if s.unit == analysis.TOKENS else []
        rows.append(
            [
                str(s.nodes),
                str(s.workers),
                runs,
                fmt(s.throughput, 1, s.ci95),
                s.ci_method or "-",
                str(s.outlier_windows),
                fmt(s.throughput_per_worker),
                fmt(s.jitter),
                fmt(s.speedup, 2),
                fmt(s.efficiency, 3, s.efficiency_ci95),
                fmt(s.internode_efficiency, 3),
                fmt_band(s),
                fmt(s.busbw / 1e9 if s.busbw else None, 3),
                f"{s.data_fraction:.0%}" if s.data_fraction is not None else "-",
                {True: "yes", False: "NO", None: "-"}[s.weights_in_sync],
                *mfu,
            ]
        )
    return rows


BREAKDOWN_HEADER = [
    "nodes",
    "workers",
    "E measured",
    "E predicted (point)",
    "step ms",
    "compute ms",
    "data ms",
    "exposed comm ms",
    "overlapped comm ms",
    "straggler lead (host)",
    "node CPU use",
    "busiest link (of nominal)",
    "off the prediction: likeliest cause",
]


def breakdown_rows(series: list[ConfigSummary]) -> list[list[str]]:
    """Where each configuration's step went, and how its nodes and link were used."""
    rows = []
    for s in series:
        lead = "-" if s.straggler_lead is None else f"{s.straggler_lead:.0%} ({s.straggler})"
        nominal = allreduce_model.nominal_bytes_per_s(s.link_rate)
        link = "-"
        if s.net_bytes_per_s is not None:
            link = f"{s.net_bytes_per_s / 1e6:.1f} MB/s"
            link += f" ({s.net_bytes_per_s / nominal:.0%})" if nominal else ""
        cpu = "-" if s.cpu_util is None else f"{s.cpu_util:.0%}"
        times = [s.step_time_s, s.compute_s, s.data_s, s.exposed_comm_s, s.overlap_s]
        rows.append(
            [
                str(s.nodes),
                str(s.workers),
                fmt(s.efficiency, 3, s.efficiency_ci95),
                fmt(s.predicted_efficiency, 3),
                *(fmt(t * 1e3 if t is not None else None) for t in times),
                lead,
                cpu,
                link,
                analysis.off_prediction(s, nominal) or "-",
            ]
        )
    return rows


def group_series(summaries: list[ConfigSummary]) -> dict[tuple, list[ConfigSummary]]:
    groups: dict[tuple, list[ConfigSummary]] = defaultdict(list)
    for s in summaries:
        groups[s.series].append(s)
    return groups


def series_title(s: ConfigSummary) -> str:
    data = "synthetic data" if s.data == "synthetic" else f"data {s.data}"
    if s.unit == analysis.TOKENS:  # the parallelism and the sequence: what sets the tokens
        workload = (
            f"{s.model}, {s.parallel}, seq {s.seq_len}, batch {s.batch} sequences/worker "
            f"({s.batch * (s.seq_len or 0)} tokens)"
        )
    else:
        workload = f"{s.model}, {s.backend}, batch {s.batch}/worker, {s.image_size} px"
    return f"{workload}, {data}, env {s.env}, {s.gpus_per_node} worker(s)/node" + (
        f"; {s.method}" if s.method else ""
    )


def noise_line(series: list[ConfigSummary]) -> str:
    floor = analysis.noise_floor(series)
    if floor is None:
        return "Noise floor: unknown (no single-worker baseline with an interval)."
    return (
        f"Noise floor: the single-worker throughput is known to ±{floor:.1%} (95% CI); "
        "an efficiency difference smaller than that is not a result."
    )


def plot_groups(summaries: list[ConfigSummary]) -> dict[tuple, list[ConfigSummary]]:
    """Series that share a plot: all batch sizes of one env/model/backend/input."""
    groups: dict[tuple, list[ConfigSummary]] = defaultdict(list)
    for s in summaries:
        groups[(s.env, s.model, s.backend, s.image_size, s.data, s.gpus_per_node, s.method)].append(
            s
        )
    return groups


def _full_nodes(series: list[ConfigSummary]) -> list[ConfigSummary]:
    """Points with every worker slot of their nodes used (the single-worker baseline of a
    multi-GPU node is a reference, not a node count)."""
    return [s for s in series if s.workers == s.nodes * s.gpus_per_node and s.throughput]


def _breakdown_plot(
    plt: Any, by_batch: dict[int, list[ConfigSummary]], path: Path, root: Path | None
) -> Path | None:
    """Stacked bars per node count: compute, data and exposed communication make up the
    step; the overlapped communication is hatched over the compute it hid behind."""
    batches = [
        b
        for b in sorted(by_batch)
        if any(s.compute_s is not None for s in _full_nodes(by_batch[b]))
    ]
    if not batches:
        return None
    fig, axes = plt.subplots(1, len(batches), figsize=(5 * len(batches), 4), squeeze=False)
    for ax, batch in zip(axes[0], batches, strict=True):
        points = sorted(
            (s for s in _full_nodes(by_batch[batch]) if s.compute_s is not None),
            key=lambda s: s.nodes,
        )
        x = [str(s.nodes) for s in points]
        compute = [(s.compute_s or 0) * 1e3 for s in points]
        data = [(s.data_s or 0) * 1e3 for s in points]
        exposed = [(s.exposed_comm_s or 0) * 1e3 for s in points]
        ax.bar(x, compute, label="compute")
        ax.bar(x, data, bottom=compute, label="data")
        ax.bar(
            x,
            exposed,
            bottom=[c + d for c, d in zip(compute, data, strict=True)],
            label="exposed communication",
        )
        ax.bar(
            x,
            [(s.overlap_s or 0) * 1e3 for s in points],
            fill=False,
            hatch="//",
            label="overlapped communication",
        )
        ax.set(xlabel="nodes", ylabel="ms per step", title=f"batch {batch}")
    figures.legends_outside(fig, axes[0][-1:])  # every panel's is the same
    fig.tight_layout()
    figures.save_png(fig, path, root)
    plt.close(fig)
    return path


def file_stem(text: str, most_bytes: int = 200) -> str:
    """A plot's file name from a record's values: no folder separator, no control
    character (NUL), and short enough for NAME_MAX with the suffixes added."""
    safe = "".join(c if c.isprintable() and c not in "/\\" else "_" for c in text)
    return safe.encode()[:most_bytes].decode(errors="ignore")


def make_plots(
    summaries: list[ConfigSummary], plot_dir: Path, root: Path | None = None
) -> list[tuple[str, Path]]:
    """The report's figures in `plot_dir` (made if missing), with no link followed
    below `root` (the results folder; None: `plot_dir` itself)."""
    import matplotlib

    matplotlib.use("Agg")
    # Names from the records are shown as written, never parsed as mathtext ($\foo$).
    with matplotlib.rc_context({"text.usetex": False, "text.parse_math": False}):
        return _make_plots(summaries, plot_dir, root)


def _make_plots(
    summaries: list[ConfigSummary], plot_dir: Path, root: Path | None
) -> list[tuple[str, Path]]:
    import matplotlib.pyplot as plt

    files.make_folder(plot_dir, root)
    made = []
    for index, (key, group) in enumerate(
        sorted(plot_groups(summaries).items(), key=lambda kv: str(kv[0]))
    ):
        env, model, backend, image_size, _, _, _ = key
        first = group[0]
        what = analysis.workload_label(first)
        stem = file_stem(f"{index:02d}-{env}-{what.replace(',', '').replace(' ', '-')}-{backend}")
        by_batch = defaultdict(list)
        for s in group:
            by_batch[s.batch].append(s)
        fig, (ax_x, ax_e) = plt.subplots(1, 2, figsize=(12, 4.5))
        max_nodes = 1
        curves = []
        for batch in sorted(by_batch):
            points = sorted(_full_nodes(by_batch[batch]), key=lambda s: s.nodes)
            if not points:
                continue
            nodes = [s.nodes for s in points]
            max_nodes = max(max_nodes, *nodes)
            line = ax_x.errorbar(
                nodes,
                [s.throughput for s in points],
                yerr=[s.ci95 or 0 for s in points],
                marker="o",
                capsize=3,
                label=f"batch {batch}",
            )
            curves.append(figures.Curve(f"batch {batch}", line[0].get_color(), points))
        figures.efficiency_panel(ax_e, curves, "nodes")
        ax_x.set(xlabel="nodes", ylabel=f"{analysis.per_sec(first)} (total)", title="Throughput")
        ax_e.set(xlabel="nodes", title="Scaling efficiency")
        for ax in (ax_x, ax_e):
            ax.set_xticks(range(1, max_nodes + 1))
            ax.grid(alpha=0.3)
        figures.legends_outside(fig, (ax_x, ax_e))
        shape = f"seq {first.seq_len}" if first.unit == analysis.TOKENS else f"{image_size} px"
        how = first.parallel if first.unit == analysis.TOKENS else backend
        fig.suptitle(f"{model} ({how}, {shape}) on {env}")
        fig.tight_layout()
        path = figures.save_png(fig, plot_dir / f"{stem}.png", root)
        plt.close(fig)
        made.append((f"{model}, {how}, {shape} on {env}", path))
        breakdown = _breakdown_plot(plt, by_batch, plot_dir / f"{stem}-time.png", root)
        if breakdown:
            made.append((f"where the time went: {model}, {how} on {env}", breakdown))
    return made


def probe_rows(probes: list[dict]) -> list[list[str]]:
    rows = []
    for p in probes:
        if p.get("status") != "ok":
            rows.append(
                [
                    p.get("env", "-"),
                    str(p.get("nodes")),
                    str(p.get("workers")),
                    p.get("backend", "-"),
                    "FAILED",
                    "-",
                    "-",
                ]
            )
            continue
        small, large = p["results"][0], p["results"][-1]
        rows.append(
            [
                p["env"],
                str(p["nodes"]),
                str(p["workers"]),
                p["backend"],
                f"{small['time_s'] * 1e6:.0f} us @ {small['bytes']} B",
                f"{large['bytes'] / 2**20:.0f} MiB",
                f"{large['busbw'] / 1e9:.3f}",
            ]
        )
    return rows


# Every configuration's figures as data, beside report.html (hpcbench.reports.export).
DATA_JSON, DATA_CSV = "configurations.json", "configurations.csv"
PROBE_HEADER = ["env", "nodes", "workers", "backend", "smallest message", "largest", "busbw GB/s"]


def data_texts(store: Store, summaries: list[ConfigSummary]) -> dict[str, str]:
    """Every configuration's figures as JSON and as CSV (hpcbench.reports.export)."""
    data = [export.configuration(s) for s in summaries]
    return {"json": export.as_json(data, store=str(store.path)), "csv": export.as_csv(data)}


def build_report(directory: str) -> tuple[Path, Path]:
    store, runs, probes, convergence = load(directory)
    summaries = analysis.summarise(runs, probes)
    out = store.dir
    data = data_texts(store, summaries)
    files.write_atomic(out / DATA_JSON, data["json"])
    files.write_atomic(out / DATA_CSV, data["csv"])
    plots = make_plots(summaries, out / "plots", out)  # a link at plots/ is refused
    return page.write(report_page(store, runs, probes, convergence, summaries, plots), out)


def report_page(
    store: Store,
    runs: list[dict],
    probes: list[dict],
    convergence: list[dict],
    summaries: list[ConfigSummary],
    plots: list[tuple[str, Path]],
) -> Page:
    """report.md and report.html, as one description (hpcbench.reports.page)."""
    out = store.dir
    failed = [r for r in runs if r.get("status") != "ok"]
    intro = (
        f"{len(runs)} runs ({len(failed)} failed) and {len(probes)} all-reduce probes. "
        "Throughput is the mean over repeats of each run's windows (slowest rank per "
        "window); CI95 is over repeats (over windows for a single run) and propagates "
        "into E; jitter is 1.4826 x the median absolute deviation of window throughputs. "
        "Predicted E is the ring all-reduce band: no overlap to full overlap of "
        "T_ar = 2(N-1)a + 2(N-1)/N S/B with the probe's a and B."
    )
    if store.skipped:
        lines = ", ".join(str(n) for n, _ in store.skipped[:10])
        intro += (
            f" {len(store.skipped)} damaged lines of {store.path.name} were skipped "
            f"(line {lines}{', ...' if len(store.skipped) > 10 else ''})."
        )
    opening: list[Block] = [Paragraph(intro)]
    if convergence:  # the last sweep's word on its repeats
        wide = analysis.convergence_lines(convergence[-1])
        target = convergence[-1]["target_ci"]
        head = (
            f"Every configuration's 95% interval is within --target-ci {target:.1%}."
            if not wide
            else f"Intervals wider than --target-ci {target:.1%} (the difference between two "
            "such figures may be noise):"
        )
        opening.append(Paragraph(head))
        if wide:
            opening.append(Bullets(wide))
    sections = [Section("", opening)]

    envs = sorted({r["env"] for r in runs if r.get("env")})
    for env in envs:
        rows = [[k, v] for k, v in environment(runs, env).items()]
        sections.append(Section(f"Environment {env}", [Table(["", "value"], rows)]))

    sections.append(Section("Results", []))
    for _, series in sorted(group_series(summaries).items(), key=lambda kv: str(kv[0])):
        limits = sorted({s.cpu_limit for s in series if s.cpu_limit})
        note = (
            "Where the time went, per step: compute (and data) is the single worker's step; "
            "exposed communication is what N workers take beyond it; overlapped is the "
            "predicted all-reduce time hidden behind the backward pass. Node CPU limit: "
            + ("; ".join(limits) if limits else "not recorded")
            + "."
        )
        mfu = mfu_lines(series)
        sections.append(
            Section(
                series_title(series[0]),
                [
                    Table(series_header(series[0]), series_rows(series)),
                    *([Bullets(mfu)] if mfu else []),
                    Paragraph(noise_line(series)),
                    Table(BREAKDOWN_HEADER, breakdown_rows(series)),
                    Paragraph(note),
                ],
                level=3,
            )
        )
    images: list[Block] = [Image(str(path.relative_to(out)), title) for title, path in plots]
    sections.append(Section("", images))  # under the last series
    sections += findings.report_sections(runs, summaries)  # energy, fabric, ranks
    if probes:
        sections.append(Section("All-reduce probes", [Table(PROBE_HEADER, probe_rows(probes))]))
    if failed:
        rows = [
            [
                f"{r.get('model')} batch {r.get('batch')} x{r.get('workers')} "
                f"repeat {r.get('repeat')}",
                (r.get("error") or "").splitlines()[0][:200],
            ]
            for r in failed
        ]
        sections.append(Section("Failed runs", [Table(["run", "error"], rows)]))
    context = [line for m in sorted({s.model for s in summaries}) for line in REFERENCES.get(m, [])]
    if context:
        sections.append(Section("Context", [Bullets(context)]))
    return Page(f"Scaling report: {out}", sections, html_title="hpcbench report")


def report_main(args: argparse.Namespace) -> int:
    if args.format in ("json", "csv"):  # for programs: the data on stdout, nothing written
        store, runs, probes, _ = load(args.out)
        sys.stdout.write(data_texts(store, analysis.summarise(runs, probes))[args.format])
        return 0
    md_path, html_path = build_report(args.out)
    print(f"wrote {md_path} and {html_path}, with the numbers in {DATA_JSON} and {DATA_CSV}")
    return 0


def comparison(dir_a: str, dir_b: str) -> str:
    """Two result sets side by side: environments, then configurations both hold."""
    sides = []
    for directory in (dir_a, dir_b):
        _, runs, probes, _ = load(directory)
        sides.append((runs, {_match_key(s): s for s in analysis.summarise(runs, probes)}))
    (runs_a, a), (runs_b, b) = sides
    name_a, name_b = f"A: {dir_a}", f"B: {dir_b}"
    env_a, env_b = environment(runs_a), environment(runs_b)
    env_rows = [[k, env_a.get(k, "-"), env_b.get(k, "-")] for k in {**env_a, **env_b}]
    environments = Section("Environments", [Table(["", name_a, name_b], env_rows)])
    header = [
        "model",
        "backend",
        "batch",
        "nodes",
        "workers",
        "A throughput",
        "B throughput",
        "B/A",
        "beyond noise",
        "A E",
        "B E",
        "A predicted",
        "B predicted",
    ]
    rows = []
    for key in sorted(set(a) & set(b), key=str):
        sa, sb = a[key], b[key]
        ratio = sb.throughput / sa.throughput if sa.throughput and sb.throughput else None
        rows.append(
            [
                analysis.workload_label(sa),
                sa.backend,
                str(sa.batch),
                str(sa.nodes),
                str(sa.workers),
                f"{fmt(sa.throughput, 1, sa.ci95)} {analysis.per_sec(sa)}",
                f"{fmt(sb.throughput, 1, sb.ci95)} {analysis.per_sec(sb)}",
                fmt(ratio, 2),
                beyond_noise(sa, sb, ratio),
                fmt(sa.efficiency, 3, sa.efficiency_ci95),
                fmt(sb.efficiency, 3, sb.efficiency_ci95),
                fmt_band(sa),
                fmt_band(sb),
            ]
        )
    both: list[Block] = [Table(header, rows) if rows else Paragraph("(none in common)")]
    only = len(set(a) ^ set(b))
    if only:
        both.append(Paragraph(f"{only} configuration(s) appear on one side only."))
    differ = _method_differences(set(a) - set(b), set(b) - set(a))
    if differ:
        both.append(
            Paragraph(
                "Not compared, the same configuration measured another way on each side: "
                + "; ".join(differ)
            )
        )
    sections = [environments, Section("Configurations in both", both)]
    return page.to_markdown(Page("Comparison", sections))


def beyond_noise(sa: ConfigSummary, sb: ConfigSummary, ratio: float | None) -> str:
    """Whether B/A differs from 1 by more than both sides' intervals together."""
    ra, rb = sa.relative_ci, sb.relative_ci
    if ratio is None or ra is None or rb is None:
        return "-"
    return "yes" if abs(ratio - 1) > math.hypot(ra, rb) else "no (within noise)"


def _method_differences(only_a: set[tuple], only_b: set[tuple]) -> list[str]:
    """How each configuration of one side only was measured otherwise than the same
    configuration of the other (their method labels' fields that differ: A's, B's)."""
    out = []
    for ka in sorted(only_a, key=str):
        for kb in sorted(only_b, key=str):
            if ka[:-1] != kb[:-1] or ka[-1] is None or kb[-1] is None:
                continue
            fa, fb = dict(ka[-1]), dict(kb[-1])
            fields = sorted(k for k in {*fa, *fb} if fa.get(k) != fb.get(k))
            said = ", ".join(f"{k} {fa.get(k, '-')} / {fb.get(k, '-')}" for k in fields)
            out.append(f"{ka[0]} batch {ka[4]} x {ka[9]} workers ({said})")
    return out


def _match_key(s: ConfigSummary) -> tuple:
    """Configurations match across testbeds: the same configuration, measured the same
    way, whatever testbed it ran on (its env, link, launcher and partition:
    identity.PLACE)."""
    return (
        s.model,
        s.backend,
        s.parallel,
        s.seq_len,
        s.batch,
        s.image_size,
        s.data,
        s.gpus_per_node,
        s.nodes,
        s.workers,
        identity.comparable(s.method),
    )


def compare_main(args: argparse.Namespace) -> int:
    if args.output is not None:
        check_path(args.output, "--output")
    text = comparison(args.dir_a, args.dir_b)
    if args.output:
        try:
            # Whole or not at all; the user's link, FIFO or device at the name is refused,
            # never written through, waited on or replaced.
            files.write_atomic(Path(args.output), text, only_over_a_file=True)
        except OSError as err:
            raise UsageError(f"--output {args.output[:60]}: {err.strerror}") from None
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
