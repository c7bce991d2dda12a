"""What the reports add from the runs' own records: energy per sample with its source,
the fabric NCCL used between nodes (and a flag where it fell back to sockets beside an
RDMA port), each rank's and node's step times, and a campaign's cost.

`hpcbench report` appends report_sections(); `campaign report` appends
campaign_sections(). Every figure comes from the records or the analysis's summaries
(hpcbench.measure.analysis, hpcbench.measure.energy_use); nothing is computed a second way.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from hpcbench.measure.analysis import ConfigSummary
from hpcbench.measure.store import config_key
from hpcbench.reports.page import Block, Bullets, Paragraph, Section, Table

# The per-rank table lists every rank up to this many; beyond, the slowest ones.
RANKS_SHOWN = 32
SLOWEST_SHOWN = 8


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f}"


def _label(record: dict[str, Any] | ConfigSummary) -> str:
    get = record.get if isinstance(record, dict) else lambda k: getattr(record, k, None)
    return (
        f"{get('model')} {get('backend')} batch {get('batch')}, "
        f"{get('nodes')} node(s), {get('workers')} worker(s)"
    )


def _unit(s: ConfigSummary) -> str:
    return {"image": "images", "token": "tokens"}.get(s.energy_unit or "image", "samples")


# ------------------------------------------------------------------- energy
def energy_value(s: ConfigSummary) -> str:
    if s.joules_per_sample is None:
        return "unknown"
    per = s.energy_unit or "sample"
    value = s.joules_per_sample
    return f"{value:.3g} J/{per}" if value >= 0.01 else f"{value * 1e3:.3g} mJ/{per}"


def energy_section(summaries: list[ConfigSummary]) -> Section | None:
    rows = [
        [_label(s), energy_value(s), s.energy_source or "-"]
        for s in summaries
        if s.runs and s.energy_source
    ]
    if not rows:
        return None
    return Section(
        "Energy per sample",
        [
            Table(["configuration", "energy", "source"], rows),
            Paragraph(
                "Over the timed windows only: NVML's energy counter of the GPUs (GPU runs), "
                "RAPL's CPU packages and DRAM of the hosts (CPU runs), else Slurm's "
                "ConsumedEnergy of the job prorated to the windows; 'unknown' says why none "
                "could be read (docs/report.md)."
            ),
        ],
    )


# ------------------------------------------------------------------- fabric
def _rdma_ports(per_host: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(host, port) of every InfiniBand or RoCE port the hosts listed in sysfs."""
    found = []
    for host in per_host:
        for port in host.get("rdma") or []:
            if isinstance(port, dict) and port.get("link_layer") in ("InfiniBand", "Ethernet"):
                found.append((str(host.get("host")), port))
    return found


def _port_text(host: str, port: dict[str, Any]) -> str:
    layer = "InfiniBand" if port.get("link_layer") == "InfiniBand" else "RoCE"
    return f"{host} has {port.get('device')} port {port.get('port')} ({layer}, {port.get('state')})"


def fabric_flag(run: dict[str, Any]) -> str | None:
    """Why a run between nodes is suspect: NCCL used TCP sockets although a node has an
    InfiniBand or RoCE port; None otherwise."""
    fabric = run.get("fabric") if isinstance(run.get("fabric"), dict) else None
    if not fabric or (run.get("nodes") or 1) < 2:
        return None
    transport = str(fabric.get("transport") or "")
    if "Socket" not in transport:
        return None
    ports = _rdma_ports(fabric.get("per_host") or [])
    if not ports:
        return None
    active = [p for p in ports if "ACTIVE" in str(p[1].get("state", ""))] or ports
    return (
        f"NCCL fell back to TCP sockets between nodes although {_port_text(*active[0])}"
        + (f" (and {len(ports) - 1} more RDMA port(s) on the nodes)" if len(ports) > 1 else "")
        + ": a container without /dev/infiniband, or a missing verbs library, does this"
    )


def fabric_section(runs: list[dict[str, Any]]) -> Section | None:
    between = [
        r
        for r in runs
        if r.get("status") == "ok"
        and (r.get("nodes") or 1) > 1
        and isinstance(r.get("fabric"), dict)
    ]
    if not between:
        return None
    rows = []
    for r in between:
        f = r["fabric"]
        gdr = {True: "yes", False: "no", None: "-"}.get(f.get("gdr"), "-")
        rows.append(
            [
                f"{_label(r)}, repeat {r.get('repeat')}",
                str(f.get("transport") or f.get("skipped") or "-"),
                gdr,
                ", ".join(f.get("nics") or []) or "-",
                fabric_flag(r) or "-",
            ]
        )
    flagged = sum(1 for r in between if fabric_flag(r))
    blocks: list[Block] = [
        Table(["run", "transport", "GPUDirect RDMA", "NICs", "flag"], rows),
        Paragraph(
            "From NCCL's own INFO lines (NCCL_DEBUG=INFO, subsystems INIT and NET) on each "
            "node, and the RDMA ports sysfs lists there (docs/report.md)."
            + (f" {flagged} run(s) fell back to sockets beside an RDMA port." if flagged else "")
        ),
    ]
    return Section("Fabric between nodes", blocks)


# -------------------------------------------------------------------- ranks
def rank_step_times(runs: list[dict[str, Any]]) -> dict[int, list[float]]:
    """Per rank that the runs list, its step times over the configuration's ok runs
    (each window's time over its steps): none for a rank that recorded no window (an
    empty list), as many as its windows where the ranks' counts differ."""
    per_rank: dict[int, list[float]] = defaultdict(list)
    for r in runs:
        ranks = r.get("rank_window_times")
        steps = r.get("steps")
        if not isinstance(ranks, list) or not isinstance(steps, int) or steps < 1:
            continue
        for rank, windows in enumerate(ranks):
            per_rank[rank].extend(t / steps for t in windows if isinstance(t, int | float))
    return per_rank


def _timed(per_rank: dict[int, list[float]]) -> dict[int, list[float]]:
    return {rank: times for rank, times in per_rank.items() if times}


def _hosts(runs: list[dict[str, Any]]) -> list[str]:
    for r in reversed(runs):
        hosts = (r.get("fingerprint") or {}).get("hosts")
        if isinstance(hosts, list):
            return [str(h) for h in hosts]
    return []


def _stats(times: list[float]) -> tuple[float, float, float]:
    return min(times), statistics.median(times), max(times)


def rank_rows(runs: list[dict[str, Any]]) -> list[list[str]]:
    """One row per node, then per rank (the slowest where there are many): min, median
    and max step time, and how far the median is from all ranks' median."""
    per_rank = _timed(rank_step_times(runs))
    if len(per_rank) < 2:
        return []
    hosts = _hosts(runs)
    overall = statistics.median([t for times in per_rank.values() for t in times])
    by_node: dict[str, list[float]] = defaultdict(list)
    for rank, times in per_rank.items():
        by_node[hosts[rank] if rank < len(hosts) else "?"].extend(times)

    def row(who: str, node: str, times: list[float]) -> list[str]:
        low, mid, high = _stats(times)
        lead = f"{(mid - overall) / overall:+.0%}" if overall > 0 else "-"
        return [who, node, _ms(low), _ms(mid), _ms(high), lead]

    rows = [row("node", node, times) for node, times in sorted(by_node.items())]
    ranks = sorted(per_rank)
    if len(ranks) > RANKS_SHOWN:
        ranks = sorted(ranks, key=lambda k: statistics.median(per_rank[k]), reverse=True)
        ranks = sorted(ranks[:SLOWEST_SHOWN])
    rows += [row(f"rank {k}", hosts[k] if k < len(hosts) else "?", per_rank[k]) for k in ranks]
    return rows


def rank_section(runs: list[dict[str, Any]]) -> Section | None:
    configs: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        if r.get("status") == "ok" and (r.get("workers") or 1) > 1:
            configs[config_key(r)].append(r)
    blocks: list[Block] = []
    for _, group in sorted(configs.items(), key=lambda kv: str(kv[0])):
        per_rank = rank_step_times(group)
        rows = rank_rows(group)
        if rows:
            shown = len(_timed(per_rank))
            note = "" if shown <= RANKS_SHOWN else f" (the {SLOWEST_SHOWN} slowest of {shown})"
            blocks.append(Paragraph(f"{_label(group[0])}, {len(group)} run(s){note}:"))
            header = ["who", "node", "min ms", "median ms", "max ms", "median vs all"]
            blocks.append(Table(header, rows))
        untimed = sorted(rank for rank, times in per_rank.items() if not times)
        if untimed:  # an empty list of window times: nothing to set beside the others
            who = ("rank " if len(untimed) == 1 else "ranks ") + ", ".join(map(str, untimed))
            said = f"{_label(group[0])}: {who} recorded no window time in any run: left out."
            blocks.append(Paragraph(said))
    if not blocks:
        return None
    blocks.append(
        Paragraph(
            "Step time = a window's time on that rank over its steps, over every window of "
            "every run; 'median vs all' is its median against all ranks' (a straggler leads)."
        )
    )
    return Section("Step times per rank and node", blocks)


def report_sections(runs: list[dict[str, Any]], summaries: list[ConfigSummary]) -> list[Section]:
    """`hpcbench report`'s sections from the runs' own records."""
    found = [energy_section(summaries), fabric_section(runs), rank_section(runs)]
    return [s for s in found if s is not None]


# ------------------------------------------------------------------ campaign
# A configuration's cost columns from its testbed's price (None: no price given), its
# summary and its device: the campaign's pricing (campaign/cost.py), handed down.
CostFields = Callable[[Any, ConfigSummary, str | None], dict[str, Any]]


def campaign_sections(
    testbeds: list[tuple[str, Any, list[dict[str, Any]], list[ConfigSummary]]],
    cost_fields: CostFields,
) -> list[Section]:
    """The campaign report's energy and cost per configuration, and its fabric flags.
    testbeds: (title, price, runs, summaries) of each."""
    rows = []
    priced = False
    for title, price, runs, summaries in testbeds:
        ok = [r for r in runs if r.get("status") == "ok"]
        device = ok[-1].get("device") if ok else None
        for s in summaries:
            if not s.throughput:
                continue
            cost = cost_fields(price, s, device)
            priced |= price is not None
            per_hour, per_million = cost["cost_per_hour"], cost["cost_per_million_samples"]
            currency = cost["currency"] or ""
            rows.append(
                [
                    title,
                    str(s.batch),
                    str(s.workers),
                    f"{s.throughput:.1f} {_unit(s)}/s",
                    energy_value(s),
                    s.energy_source or "-",
                    "no price given" if price is None else str(price),
                    "-" if per_hour is None else f"{per_hour:,.2f} {currency}",
                    "-" if per_million is None else f"{per_million:,.4g} {currency}",
                ]
            )
    sections = []
    if rows:
        header = [
            "testbed",
            "batch",
            "workers",
            "throughput",
            "energy",
            "energy source",
            "price",
            "cost per hour",
            "cost per million samples",
        ]
        note = (
            "Cost per hour prices the configuration's nodes (per node-hour) or one GPU per "
            "worker (per GPU-hour); per million samples divides it by the throughput."
            if priced
            else "No testbed has a `price:`; no cost is assumed (docs/campaigns.md)."
        )
        sections.append(Section("Energy and cost", [Table(header, rows), Paragraph(note)]))
    flags = [
        f"{title}: {_label(r)}, repeat {r.get('repeat')}: {fabric_flag(r)}"
        for title, _, runs, _ in testbeds
        for r in runs
        if r.get("status") == "ok" and fabric_flag(r)
    ]
    if flags:
        sections.append(Section("Fabric flags", [Bullets(flags)]))
    return sections
