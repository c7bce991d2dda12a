"""`hpcbench advise`: where to book, in which layout and on how many nodes, before
anything is booked (docs/advise.md). The options and their front are
hpcbench.campaign.advice's; here the command, its text, JSON and chart, and the file
--out writes (advice_file.py)."""

from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap
from pathlib import Path
from typing import Any

from hpcbench.campaign.advice import (
    DEFAULT_MAX_NODES,
    Advice,
    Option,
    Request,
    amount,
    check_fits_somewhere,
    model_kind,
    search,
)
from hpcbench.campaign.advice_file import campaign_text, chosen_groups
from hpcbench.core import files
from hpcbench.core.bench import transformer_configs
from hpcbench.core.errors import UsageError
from hpcbench.core.progress import format_duration
from hpcbench.launchers.parse import check_path, count_type
from hpcbench.reports import figures


# ------------------------------------------------------------------ output
def _amount_text(value: float) -> str:
    """A count as a person reads it: 8.03B, 124M, 3.2k."""
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:g}"


def _count(value: float | None) -> str:
    """Hours or kWh as read: whole ones from 10 up, else two figures."""
    if value is None:
        return "unknown"
    return f"{value:,.0f}" if value >= 10 else f"{value:.2g}"


def _span(hours: float | None) -> str:
    return "unknown" if hours is None else format_duration(hours * 3600)


def option_line(o: Option, unit: str) -> list[str]:
    head = f"#{o.number:<4} {o.testbed}: {o.shape()}"
    if o.hours is None:
        return [head, f"        {o.verdict}"]
    rate = f"{o.per_s:,.0f} {unit}/s" if o.per_s else "unknown"
    band = (
        f"E {o.efficiency:.2f} ({o.efficiency_low or 0:.2f}-{o.efficiency_high or 0:.2f})"
        if o.efficiency is not None
        else "E unknown"
    )
    lines = [
        head,
        f"        {_span(o.hours)} ({_span(o.hours_low)} to {_span(o.hours_high)}), "
        + (f"{_count(o.gpu_hours)} GPU-hours, " if o.gpu_hours is not None else "no GPU, ")
        + f"{_count(o.node_hours)} node-hours"
        + (f", {o.cost:,.0f} {o.currency}" if o.cost is not None else "")
        + (f", at most {_count(o.energy_kwh)} kWh" if o.energy_kwh is not None else ""),
        f"        {rate}, {band}" + (f"; {o.memory_line}" if o.memory_line else ""),
        f"        why: {o.verdict}",
    ]
    lines += [f"        {s}" for s in o.sources]
    if o.energy_source:
        lines.append(f"        energy: {o.energy_source}")
    if o.queue:
        lines.append(f"        queue wait per job: {o.queue}")
    return lines


def lines(advice: Advice) -> list[str]:
    r = advice.request
    unit = "tokens" if advice.params else "images"
    model = f"{advice.name} ({r.model})" if advice.name and advice.name != r.model else r.model
    shape = ""
    if advice.params:
        shape = (
            f", {_amount_text(advice.params)} parameters, "
            f"{advice.flops_per_token:.3g} FLOPs per token"
        )
    fitting = sum(1 for o in advice.options if o.fits)
    out = [
        f"advice for {model}{shape}: {r.budget:.3g} {r.unit}"
        + (f", global batch {r.global_batch}" if r.global_batch else ", no global batch fixed"),
        f"searched {len({(o.file, o.testbed) for o in advice.options})} testbeds of "
        f"{', '.join(str(p) for p in r.files)}: {len(advice.options)} options, {fitting} fit",
        *[f"  {s}" for s in advice.said],
        "",
        "the front (none of these is slower, in more GPU-hours and dearer than another):",
    ]
    for o in sorted(advice.front, key=lambda o: o.hours or 0):
        out += [f"  {line}" for line in option_line(o, unit)]
    out += ["", "fell out (--json gives each option with its reason):"]
    for o in advice.options:
        if not o.front and o.fits and o.hours is not None:
            out.append(f"  #{o.number:<4} {o.testbed}: {o.shape()}: {o.verdict}")
    out += _grouped(advice.options)
    out += [
        "",
        "times are the runs to the budget (its band from E's); queue waits and set-up apart",
    ]
    return out


def _grouped(options: list[Option]) -> list[str]:
    """Per testbed, the options that do not fit (the least memory any of them needs) and
    those with no forecast (each reason once)."""
    out = []
    for testbed in dict.fromkeys(o.testbed for o in options):
        mine = [o for o in options if o.testbed == testbed]
        unfit = [o for o in mine if not o.fits]
        if unfit:
            least = min(unfit, key=lambda o: o.memory_need or math.inf)
            out.append(
                f"  {testbed}: {len(unfit)} option{'s' * (len(unfit) > 1)} do not fit; the "
                f"least memory of them: #{least.number} ({least.shape()}), {least.memory_line}"
            )
        unknown = [o for o in mine if o.fits and o.hours is None]
        for reason in dict.fromkeys(o.verdict for o in unknown):
            numbers = [f"#{o.number}" for o in unknown if o.verdict == reason]
            out.append(f"  {testbed}: {', '.join(numbers)}: {reason}")
    return out


def as_json(advice: Advice) -> dict[str, Any]:
    r = advice.request
    return {
        "model": r.model,
        "budget": r.budget,
        "unit": r.unit,
        "global_batch": r.global_batch,
        "files": [str(p) for p in r.files],
        "parameters": advice.params,
        "flops_per_token": advice.flops_per_token,
        "said": advice.said,
        "front": [o.number for o in advice.front],
        "best": {
            word: (None if (b := advice.best(key)) is None else b.number)
            for key, word in (("hours", "time"), ("gpu_hours", "gpu_hours"), ("cost", "cost"))
        },
        "options": [o.record() for o in advice.options],
    }


def plot(advice: Advice, path: Path, made_by: str) -> Path:
    """Time to the budget against GPU-hours, a mark per option that fits (colour: its
    testbed; shape: its parallelism, hollow under TP), its time band as an error bar,
    the front ringed and numbered."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [o for o in advice.options if o.fits and o.hours is not None]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    testbeds = list(dict.fromkeys(o.testbed for o in shown))
    fig, ax = plt.subplots(figsize=(7.5, 5))
    for o in shown:
        color = colors[testbeds.index(o.testbed) % len(colors)]
        # CPU nodes book no GPU: their node-hours stand on the same axis.
        hours, gpu_hours = o.hours or 0.0, (o.gpu_hours or o.node_hours or 0.0)
        low, high = o.hours_low or hours, o.hours_high or hours
        ax.errorbar(
            [gpu_hours],
            [hours],
            yerr=[[hours - low], [high - hours]],
            marker=figures.PARALLEL_MARKERS.get(o.layout.parallel, "o"),
            markerfacecolor="none" if o.layout.tp > 1 else color,
            markeredgecolor="black" if o.front else color,
            markeredgewidth=1.6 if o.front else 0.8,
            color=color,
            capsize=2,
            linestyle="none",
        )
        if o.front:
            ax.annotate(
                f"#{o.number}",
                (gpu_hours, hours),
                fontsize=7,
                xytext=(4, 4),
                textcoords="offset points",
            )
    for n, name in enumerate(testbeds):
        ax.plot([], [], "o", color=colors[n % len(colors)], label=name)
    for parallel, marker in figures.PARALLEL_MARKERS.items():
        ax.plot([], [], marker, color="0.4", label=parallel)
    ax.plot([], [], "s", markerfacecolor="none", color="0.4", label="hollow: with TP")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="GPU-hours (node-hours where the nodes have none)",
        ylabel="hours to the budget",
        title=f"Where to book: {advice.request.budget:.3g} {advice.request.unit}, the front ringed",
    )
    ax.grid(alpha=0.3, which="both")
    figures.legends_outside(fig, [ax])
    # The whole command that draws it, on as many lines as it takes.
    lines = textwrap.wrap(made_by, 130) or [""]
    fig.text(0.01, 0.005, "\n".join(lines), fontsize=7, color="0.4")
    fig.tight_layout(rect=(0, 0.03 * len(lines), 1, 1))
    figures.save_png(fig, path)
    plt.close(fig)
    return path


# ------------------------------------------------------------------ the command
def _check_writable(flag: str, given: str) -> None:
    """A file advise may write: a path (check_path), not a folder, in a folder that is
    there; else one UsageError line."""
    check_path(given, flag)
    path = Path(given)
    if path.is_dir():
        raise UsageError(f"{flag} {given}: a folder: give a file to write")
    if not path.absolute().parent.is_dir():
        raise UsageError(f"{flag} {given}: its folder {path.parent} does not exist")


def main(args: argparse.Namespace) -> int:
    if (args.tokens is None) == (args.samples is None):
        raise UsageError("give one of --tokens (a transformer's budget) or --samples (images)")
    budget = amount(args.tokens or args.samples, "--tokens" if args.tokens else "--samples")
    model = args.model
    if transformer_configs.is_config_path(model):
        model = str(Path(model).resolve())
    transformer = model_kind(model)
    if args.tokens and not transformer:
        raise UsageError(f"--tokens: {args.model} is a CNN, whose budget is --samples (images)")
    request = Request(
        model=model,
        budget=budget,
        unit="tokens" if args.tokens else ("samples" if transformer else "images"),
        files=tuple(args.campaign),
        global_batch=args.global_batch,
        seq_len=args.seq_len or 0,
        testbeds=tuple(args.testbed),
        max_nodes=args.max_nodes,
    )
    for flag, given in (("--out", args.out), ("--plot", args.plot)):
        if given is not None:
            _check_writable(flag, given)
    if args.out is None:
        for flag, given in (("--results", args.results is not None), ("--all", args.all)):
            if given:
                raise UsageError(f"{flag} is for the campaign file --out writes: give --out FILE")
    if args.results is not None:
        check_path(args.results, "--results")
    out = None if args.out is None else Path(args.out)
    advice = search(request)
    check_fits_somewhere(advice)
    scored = [o for o in advice.options if o.fits and o.hours is not None]
    chosen = scored if args.all else advice.front
    groups = chosen_groups(chosen)  # names each chosen option by its testbed of --out
    if args.json:
        print(json.dumps(as_json(advice), indent=1))
    else:
        print("\n".join(lines(advice)))
    if args.plot is not None:
        plot(advice, Path(args.plot), f"hpcbench {' '.join(sys.argv[1:])}")
        if not args.json:
            print(f"drawn: {args.plot}")
    if out is not None:
        text = campaign_text(advice, chosen, out, sys.argv[1:], args.results)
        files.write_atomic(out, text, 0o644)
        if not args.json:
            print(
                f"written: {args.out} ({len(chosen)} option(s) in {len(groups)} testbed(s)); "
                f"python -m hpcbench campaign run {args.out}"
            )
    return 0


def add_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "advise",
        help="where to book, in which layout and on how many nodes: the front before booking",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", required=True, help="a model name or a Hugging Face config.json")
    p.add_argument("--tokens", default=None, help="a transformer's budget: 20B, 1.5e12")
    p.add_argument("--samples", default=None, help="the budget in samples (a CNN's images)")
    p.add_argument(
        "--campaign",
        action="append",
        type=Path,
        required=True,
        metavar="FILE",
        help="a campaign file whose testbeds are searched (repeatable)",
    )
    p.add_argument(
        "--global-batch",
        type=count_type("global-batch"),
        default=None,
        help="samples per optimizer step, kept by every layout (sequences for a "
        "transformer); default: each GPU at the file's batch",
    )
    p.add_argument(
        "--seq-len",
        type=count_type("seq-len"),
        default=None,
        help="a transformer's sequence length (default: its own)",
    )
    p.add_argument(
        "--testbed",
        action="append",
        default=[],
        metavar="NAME",
        help="only this testbed of the files (repeatable)",
    )
    p.add_argument(
        "--max-nodes",
        type=count_type("max-nodes"),
        default=DEFAULT_MAX_NODES,
        help=f"nodes searched where a file gives none (default {DEFAULT_MAX_NODES})",
    )
    p.add_argument(
        "--out",
        default=None,
        metavar="FILE",
        help="write the front as a campaign file `campaign run` takes",
    )
    p.add_argument(
        "--plot", default=None, metavar="PNG", help="draw the options and the front (a PNG)"
    )
    p.add_argument(
        "--results",
        default=None,
        metavar="DIR",
        help="the results folder of the campaign --out writes (its out:; default "
        "results/advice-MODEL)",
    )
    p.add_argument(
        "--all",
        action="store_true",
        help="--out writes every option that fits, not only the front: a campaign whose "
        "report scores the forecast's ranking",
    )
    p.add_argument("--json", action="store_true", help="the advice as JSON")
    p.set_defaults(func=main)
