"""What `hpcbench campaign plan|run|status|report|destroy FILE` do, and their
options (`add_command`)."""

from __future__ import annotations

import argparse
import json
import signal
import time
from pathlib import Path

from hpcbench.campaign import campaign_file, comparison, cost, estimate, forecast, runner
from hpcbench.campaign.journal import Journal, left_line
from hpcbench.campaign.state import holding
from hpcbench.core import bounded
from hpcbench.core.errors import UsageError
from hpcbench.core.progress import format_duration
from hpcbench.measure import analysis
from hpcbench.schedulers.base import stop_on_signals


def _duration(seconds: float | None) -> str:
    return "unknown" if seconds is None else format_duration(seconds)


def plan_lines(campaign: campaign_file.Campaign) -> list[str]:
    journal = Journal(campaign.out, campaign.name)
    records = journal.records() if journal.store.exists() else []
    states = journal.cell_states(records)
    phase_records = journal.phases(records)
    cells = campaign.cells
    lines = [
        f"campaign {campaign.name}: {campaign.path} -> {campaign.out} "
        f"({len(campaign.testbeds)} testbeds, {len(cells)} cells)"
    ]
    total = total_max = node_h = gpu_h = 0.0
    unknown_cells = unknown_queue = False
    costs: list[tuple[cost.Price | None, float | None]] = []
    for tb in campaign.testbeds:
        forecasts = forecast.testbed_forecast(campaign, tb)
        est = estimate.testbed(campaign, tb, phase_records, forecasts)
        device = tb.parts[0].workload.device
        lines += [
            "",
            f"testbed {tb.index}/{len(campaign.testbeds)} {tb.name} ({tb.title}): "
            f"{booked_line(est, device)}",
        ]
        pieces = {**est.phases, **({"probe": est.probe} if est.probe else {})}
        if pieces:  # none where no cell runs: nothing is booked
            lines.append(
                "  "
                + " · ".join(
                    f"{name} {_duration(e.seconds)} ({e.source})" for name, e in pieces.items()
                )
            )
        if est.queue is not None:
            lines.append(
                f"  queue wait per job {_duration(est.queue.seconds)} ({est.queue.source})"
            )
        lease = estimate.lease(est)
        if lease is not None:
            lines.append(f"  lease: {lease.variable} {lease.value or '(default)'} ({lease.source})")
        lines += [f"  {line}" for line in forecast.sources(forecasts)]
        memory = est.memory.source_line() if est.memory else None
        if memory:
            lines.append(f"  {memory}")
        unit = "tokens/s" if any(f.unit == "tokens" for f in forecasts) else "images/s"
        lines.append(
            f"  {'cell':<12}  {'configuration':<40} {'status':<9} {unit:>9}  "
            f"{'E (band)':<17} estimate"
        )
        by_cell = {f.cell.id: f for f in forecasts}
        skipped = est.skipped
        for cell, e in est.cells:
            state = states.get(cell.id)
            status = state.status if state else "pending"
            config = f"{cell.label}" + (f", {cell.gpus_per_node}/node" if len(tb.parts) > 1 else "")
            fc = by_cell[cell.id]
            took = e.source if cell.id in skipped else f"{_duration(e.seconds)} ({e.source})"
            lines.append(
                f"  {cell.id:<12}  {config:<40} {status:<9} {_figure(fc.per_s):>9}  "
                f"{_band(fc):<17} {took}"
            )
            if est.memory and cell.id in est.memory.cells:
                lines.append(f"  {'':<12}  {est.memory.cells[cell.id].line()}")
        wall, most = est.wall_s(), est.wall_max_s()
        unknown_cells |= not est.known
        unknown_queue |= est.queue is not None and est.queue.seconds is None
        nodes_h, gpus_h = est.node_hours(), est.gpu_hours(device)
        gpu_text = "GPU-hours unknown" if gpus_h is None else f"{gpus_h:.1f} GPU-hours"
        budget = f" within --budget {_duration(est.budget_s)}" if est.budget_s else ""
        if len(skipped) == len(est.cells):
            lines.append("  nothing is booked: no cell of it fits")
        else:
            lines.append(
                f"  wall about {_duration(wall)} (up to {_duration(most)} if cells take "
                f"up to --max-repeats {est.most_repeats}{budget}), "
                f"{nodes_h:.1f} node-hours, {gpu_text}"
            )
        if skipped:
            n = len(skipped)
            lines.append(
                f"  `campaign run` skips {n} cell{'s' * (n > 1)} that "
                f"{'do' if n > 1 else 'does'} not fit, and books nothing for "
                f"{'them' if n > 1 else 'it'}"
            )
        priced = cost.plan_line(tb.price, nodes_h, gpus_h)
        if priced:
            lines.append(f"  {priced}")
        costs.append((tb.price, cost.booked(tb.price, nodes_h, gpus_h) if tb.price else None))
        if not est.known:
            key = "tokens_per_s" if unit == "tokens/s" else "images_per_s"
            lines.append(
                "  cells of unknown length are left out of these sums: give "
                f"`expect: {{{key}: N}}` (one worker) for this testbed"
            )
        if est.queue is not None and est.queue.seconds is None:
            lines.append("  queue waits are unknown until a job has run, and left out")
        total, total_max = total + wall, total_max + most
        node_h, gpu_h = node_h + nodes_h, gpu_h + (gpus_h or 0.0)
    lines += [
        "",
        f"total: wall about {_duration(total)} (up to {_duration(total_max)}), "
        f"{node_h:.1f} node-hours, {gpu_h:.1f} GPU-hours"
        + (" (not counting what is unknown above)" if unknown_cells else "")
        + (" (not counting queue waits: none known until a job has run)" if unknown_queue else ""),
        *filter(None, [cost.totals_line(costs)]),
        "nothing was created; `hpcbench campaign run` runs it",
    ]
    return lines


def _figure(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.1f}"


def _band(fc: forecast.CellForecast) -> str:
    if fc.efficiency is None:
        return "unknown"
    return f"{fc.efficiency:.2f} ({fc.efficiency_low or 0:.2f}-{fc.efficiency_high or 0:.2f})"


def booked_line(est: estimate.TestbedEstimate, device: str) -> str:
    """What a testbed is and books, for the plan's heading line."""
    tb = est.tb
    return tb.kind.booked_line(tb.where, tb.env, est.nodes, est.gpus(device))


def jobs_left(campaign: campaign_file.Campaign) -> list[dict[str, object]]:
    """The Slurm jobs the journal says may still be queued or running."""
    journal = Journal(campaign.out, campaign.name)
    return journal.jobs_left() if journal.store.exists() else []


def status_rows(campaign: campaign_file.Campaign) -> list[dict[str, object]]:
    journal = Journal(campaign.out, campaign.name)
    states = journal.cell_states() if journal.store.exists() else {}
    left: dict[str, list[str]] = {}
    for job in jobs_left(campaign):
        left.setdefault(str(job["testbed"]), []).append(str(job["job"]))
    rows: list[dict[str, object]] = []
    for tb, cell in campaign_file.iter_cells(campaign):
        state = states.get(cell.id)
        why = state.why if state else ""
        # What its figure counts, which names its field (images_per_s, tokens_per_s).
        unit = analysis.unit_of(next(p.workload.model for p in tb.parts if cell in p.cells))
        if tb.name in left and (not state or state.status != "measured"):
            # Not plain "pending": a job of its testbed may still run (listed below).
            jobs = ", ".join(left[tb.name])
            why = f"slurm job {jobs} may still be queued or running; {why}".rstrip("; ")
        rows.append(
            {
                "testbed": tb.name,
                "cell": cell.id,
                "batch": cell.batch,
                "nodes": cell.nodes,
                "workers": cell.workers,
                "gpus_per_node": cell.gpus_per_node,
                "status": state.status if state else "pending",
                "why": why,
                "at": state.at if state else "",
                "runs": state.runs if state else 0,
                f"{unit}_per_s": state.per_s if state else None,
                "ci95": state.ci95 if state else None,
                "unit": unit,
            }
        )
    return rows


def status_lines(campaign: campaign_file.Campaign) -> list[str]:
    rows = status_rows(campaign)
    counts: dict[str, int] = {}
    for r in rows:
        counts[str(r["status"])] = counts.get(str(r["status"]), 0) + 1
    lines = [
        f"campaign {campaign.name} ({campaign.out}): "
        + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    ]
    lines.append(f"{'testbed':<16} {'cell':<12}  {'configuration':<38} {'status':<9} result")
    for cell, r in zip(campaign.cells, rows, strict=True):
        config = cell.label
        result = str(r["why"])
        rate = r[f"{r['unit']}_per_s"]
        if r["status"] == "measured" and rate is not None:
            ci = f" ± {r['ci95']:.1f}" if r["ci95"] is not None else ""
            result = f"{rate:.1f}{ci} {r['unit']}/s over {r['runs']} run(s)"
        lines.append(f"{r['testbed']:<16} {r['cell']:<12}  {config:<38} {r['status']:<9} {result}")
    lines += [f"STILL QUEUED OR RUNNING: {left_line(job)}" for job in jobs_left(campaign)]
    running = Journal(campaign.out, campaign.name).running()
    if running is not None:
        who = f" (pid {running})" if running else ""
        lines.insert(1, f"running now{who}: `campaign run` holds {campaign.out}")
    leases = lease_ends(campaign)
    for name, what in holding(campaign).items():
        if name in leases:
            what = [*what, leases[name]]
        if running is not None:  # the run in hand destroys it, or says how
            lines.append(
                f"testbed {name} holds {', '.join(what)}, in use by the running campaign{who}"
            )
        else:
            lines.append(
                f"testbed {name} still holds {', '.join(what)}: `python -m hpcbench "
                f"campaign destroy {campaign.path} --testbed {name}` releases it"
            )
    return lines


def lease_ends(campaign: campaign_file.Campaign) -> dict[str, str]:
    """Per testbed, the lease its last deploy booked and when it ends (journal)."""
    journal = Journal(campaign.out, campaign.name)
    out = {}
    for r in journal.phases() if journal.store.exists() else []:
        lease = r.get("lease")
        if r["phase"] == "deploy" and r["status"] == "ok" and isinstance(lease, dict):
            ends = lease.get("ends_at")
            when = (
                time.strftime("%Y-%m-%d %H:%M", time.localtime(ends))
                if isinstance(ends, int | float)
                else "unknown"
            )
            out[r["testbed"]] = (
                f"a lease ({lease.get('variable')} {lease.get('value')}) ending about {when}"
            )
    return out


def _load(args: argparse.Namespace) -> campaign_file.Campaign:
    """The campaign file, with the results folders --calibrate-from adds."""
    campaign = campaign_file.load(args.file)
    if args.calibrate_from:
        campaign = campaign_file.calibrated(campaign, args.calibrate_from)
    return campaign


def plan_main(args: argparse.Namespace) -> int:
    campaign = _load(args)
    try:
        lines = plan_lines(campaign)
    except UsageError as err:  # a plan longer than a testbed's lease allows
        raise UsageError(f"{campaign.path}: {err}") from None
    print("\n".join(lines))
    return 0


def own_journal(campaign: campaign_file.Campaign) -> Journal:
    """The campaign's journal; refused where its folder holds another campaign's (what is
    left, the status and the report would be that campaign's)."""
    journal = Journal(campaign.out, campaign.name)
    if journal.store.exists():
        journal.check_owner()
    return journal


def run_main(args: argparse.Namespace) -> int:
    campaign = _load(args)
    if args.dry_run:
        own_journal(campaign)
        return runner.dry_run(campaign)
    return runner.run(campaign, args.resume)


def status_main(args: argparse.Namespace) -> int:
    campaign = campaign_file.load(args.file)
    journal = own_journal(campaign)
    if args.json:
        running = journal.running()
        print(
            json.dumps(
                {
                    "campaign": campaign.name,
                    "cells": status_rows(campaign),
                    "held": holding(campaign),
                    "jobs_left": jobs_left(campaign),
                    "running": running is not None,
                    "pid": running or None,
                },
                indent=1,
            )
        )
    else:
        print("\n".join(status_lines(campaign)))
    return 0


def report_main(args: argparse.Namespace) -> int:
    campaign = campaign_file.load(args.file)
    own_journal(campaign)  # another campaign's folder: its report stays as it is
    written = comparison.build(campaign)
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def destroy_main(args: argparse.Namespace) -> int:
    campaign = campaign_file.load(args.file)
    # SIGTERM and SIGHUP (a closed terminal) stop it as Ctrl-C does, and like Ctrl-C
    # wait until every testbed's destroy and lease cancelling are done; the handlers
    # are the caller's again after (a test calls this in its own process).
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    stop_on_signals()
    try:
        with bounded.ctrl_c_deferred():
            return runner.destroy_held(campaign, args.testbed)
    finally:
        for sig, handler in before.items():
            if handler is not None:  # None: set outside Python, left as it is
                signal.signal(sig, handler)


def add_command(sub: argparse._SubParsersAction) -> None:
    """The `campaign` command's actions, each with its handler above."""
    p = sub.add_parser(
        "campaign",
        help="several testbeds x one sweep, deployed, measured and destroyed in turn",
        description=CAMPAIGN_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, text, handler in (
        ("plan", "the cells, wall time and GPU-hours; creates nothing", plan_main),
        ("run", "deploy, verify, sweep and destroy each testbed in turn", run_main),
        ("status", "the cell table as it stands", status_main),
        ("report", "one comparison report of every testbed", report_main),
        ("destroy", "release every testbed the campaign still holds", destroy_main),
    ):
        q = actions.add_parser(name, help=text, description=text)
        q.add_argument("file", type=Path, help="the campaign file (campaigns/*.yaml)")
        q.set_defaults(func=handler)
        if name in ("plan", "run"):
            q.add_argument(
                "--calibrate-from",
                action="append",
                default=[],
                metavar="DIR",
                help="a results folder whose one-worker runs the forecast may use "
                "(repeatable; as calibrate_from: in the file)",
            )
        if name == "run":
            q.add_argument(
                "--resume",
                action="store_true",
                help="skip the cells already measured and run what is left",
            )
            q.add_argument(
                "--dry-run",
                action="store_true",
                help="print every job script and command line; create, submit and write nothing",
            )
        if name == "status":
            q.add_argument("--json", action="store_true", help="the table as JSON")
        if name == "destroy":
            q.add_argument(
                "--testbed",
                action="append",
                default=[],
                metavar="NAME",
                help="only this testbed (repeatable)",
            )


CAMPAIGN_HELP = """\
`hpcbench campaign plan|run|status|report|destroy FILE` (docs/campaigns.md):

    plan     the cells in order, each testbed's wall time and GPU-hours; creates nothing
    run      per testbed: deploy, verify, probe and sweep, destroy (--resume: what is left)
    status   the cell table as it stands (--json: for programs)
    report   the comparison report of every testbed (HTML, Markdown, PNG, JSON, CSV)
    destroy  release every testbed the campaign still holds (after a failed destroy)
"""
