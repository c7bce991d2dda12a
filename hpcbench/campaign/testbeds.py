"""A testbed of the campaign file as a TestbedPlan, in three steps: its kind's keys
resolved into a Place (testbed_kinds.resolve), its sweep (the campaign's merged with
its own, parsed as `scale` would, and bounded by the nodes and GPUs the testbed has),
then its sweep parts, one per gpus_per_node, each with the cells it owes.

A cell's id hashes its resolved parameters with the testbed's fingerprint (what
identifies the testbed: environment, settings, Ansible variables; a partition; the
hosts), so a changed campaign file makes new cells and `--resume` never counts a
result measured another way."""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import operator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hpcbench.campaign import checks, cost, sweep_keys, testbed_kinds
from hpcbench.campaign.checks import NAME, Problem
from hpcbench.campaign.datatypes import Cell, Expect, Hardware, SweepPart, TestbedPlan
from hpcbench.campaign.testbed_kinds import Place
from hpcbench.core.bench import transformer_configs, units, workload_options
from hpcbench.core.errors import UsageError
from hpcbench.launchers.parse import format_int_list
from hpcbench.launchers.specs import WorkloadSpec
from hpcbench.measure.identity import cell_options
from hpcbench.measure.sweep import as_run, configurations
from hpcbench.performance.scaling_model import INTRA_NODE, LINK_EFFICIENCY

# A testbed's own keys; the key that gives its kind (env:, slurm:, hosts:, ...) besides.
TESTBED_KEYS = (
    "name",
    "title",
    "settings",
    "ansible",
    "sweep",
    "exclude",
    "keep_on_failure",
    "expect",
    "hardware",
    "price",
)
EXCLUDE_KEYS = ("batch", "nodes", "gpus_per_node", "workers", "parallel")
EXPECT_KEYS = ("images_per_s", "tokens_per_s", "deploy", "verify", "destroy")
HARDWARE_KEYS = ("accelerator", "link", "transport", "intra_node", "link_efficiency")
# An `exclude:` entry: each key's values (parallel's are words, the others counts).
Rules = list[dict[str, set[int] | set[str]]]


@dataclass(frozen=True)
class _Variant:
    """The sweep as `scale` parses it for one parallelism of a `parallel:` list (None:
    no list given, the sweep's own)."""

    parallel: str | None
    argv: list[str]  # `scale`'s options for it, less where it runs
    args: argparse.Namespace
    workload: WorkloadSpec


@dataclass(frozen=True)
class _Sweep:
    """A testbed's sweep: the campaign's merged with its own, as `scale` parses it."""

    variants: list[_Variant]  # one sweep part each on every gpus_per_node
    batches: tuple[int, ...]
    node_counts: list[int]
    gpus: list[int]  # gpus_per_node: one sweep part each


def digest(value: Any, size: int) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:size]


def testbed(
    index: int,
    raw: Any,
    path: str,
    sweep: dict[str, Any],
    keep_default: bool,
    out: Path,
    folder: Path,
) -> TestbedPlan:
    """testbeds[index - 1] of the file, checked in the order its errors are named; folder:
    the campaign file's, which a relative config.json path in a sweep is relative to."""
    raw = checks.mapping(raw, path, ("name", *testbed_kinds.by_key(), *TESTBED_KEYS[1:]))
    name = checks.text(
        raw.get("name"),
        f"{path}.name",
        NAME,
        "a label like vwall-1g (lower-case letters, digits and '-', at most 40)",
    )
    key = testbed_kinds.kind_of(raw, path)
    title = checks.text(raw.get("title", name), f"{path}.title")
    place = testbed_kinds.resolve(key, raw, path)
    keep = raw.get("keep_on_failure", keep_default)
    checks.flag(keep, f"{path}.keep_on_failure")
    own = _sweep(raw, path, sweep, place, folder)
    rules = _exclusions(raw.get("exclude"), f"{path}.exclude")
    fingerprint = digest(place.identity, 16)
    parts = _parts(name, path, own, place, rules, fingerprint, out)
    return TestbedPlan(
        index=index,
        name=name,
        env=place.env,
        title=title,
        settings=tuple(sorted(place.settings.items())),
        ansible=place.ansible,
        keep_on_failure=keep,
        expect=_expect(raw.get("expect"), f"{path}.expect", own.variants[0].workload.model),
        fingerprint=fingerprint,
        nodes_available=place.nodes_available,
        gpus_per_node=place.slots,
        parts=parts,
        kind=place.kind,
        given=place.kind.given_settings(place.env, tuple(sorted(place.settings.items()))),
        where=place.where,
        hardware=_hardware(raw.get("hardware"), f"{path}.hardware", place),
        price=cost.price(raw.get("price"), f"{path}.price"),
    )


def _sweep(
    raw: dict[str, Any], path: str, sweep: dict[str, Any], place: Place, folder: Path
) -> _Sweep:
    """The testbed's sweep: the campaign's and its own checked key by key (an error
    names the file's key), merged, parsed, and within the testbed's nodes and GPUs."""
    own = anchored(checks.mapping(raw.get("sweep"), f"{path}.sweep"), folder)
    sweep = anchored(sweep, folder)
    base = sweep_keys.sweep_argv(sweep, "sweep")
    mine = sweep_keys.sweep_argv(own, f"{path}.sweep", under=sweep)
    merged = {
        **{k.replace("-", "_"): v for k, v in sweep.items()},
        **{k.replace("-", "_"): v for k, v in own.items()},
    }
    merged.pop("gpus_per_node", None)
    whole = sweep_keys.sweep_argv(merged, f"{path}.sweep")
    variants = []
    parallels: list[str | None] = [*whole.parallel] if whole.parallel else [None]
    for parallel in parallels:
        argv = whole.argv(parallel)
        try:  # checked alone: errors name keys
            args, workload, target, spec = sweep_keys.parse(argv)
        except UsageError as err:
            raise Problem(f"{path}.sweep", sweep_keys.strip_prefix(str(err))) from None
        variants.append(_Variant(parallel, argv, args, workload))
    gpus = mine.gpus or base.gpus or [place.slots or 1]
    node_counts = list(target.node_counts)
    _fits(path, place, gpus, node_counts)
    return _Sweep(variants, spec.batches, node_counts, gpus)


def anchored(sweep: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The sweep with a `model:` that is a relative config.json path made a path from
    here through `folder`, the campaign file's: the file beside the campaign, wherever
    it is run from."""
    model = sweep.get("model")
    if not isinstance(model, str) or not transformer_configs.is_config_path(model):
        return sweep
    return sweep if Path(model).is_absolute() else {**sweep, "model": str(folder / model)}


def _fits(path: str, place: Place, gpus: list[int], node_counts: list[int]) -> None:
    """The sweep asks for no more GPUs per node and no more nodes than the testbed has,
    where its keys say."""
    slots, nodes_available = place.slots, place.nodes_available
    # 0: CPU-only nodes (the Virtual Wall's default), whose workers are processes.
    if slots and max(gpus) > slots:
        raise Problem(
            f"{path}.sweep.gpus_per_node",
            f"{max(gpus)} is more than the {slots} GPUs per node of {place.slots_said}",
        )
    # Only settings can say 0 (a partition's nodes and a host list refuse it as read): the
    # setting is at fault, not the sweep's nodes.
    if nodes_available == 0:
        key = "topology" if "topology" in place.settings else "node_count"
        raise Problem(f"{path}.settings.{key}", "gives 0 nodes: a testbed has one at least")
    if nodes_available is not None and max(node_counts) > nodes_available:
        raise Problem(
            f"{path}.sweep.nodes",
            f"{format_int_list(node_counts)} asks for {max(node_counts)} nodes but "
            f"{place.kind.gives_nodes} {nodes_available}: lower nodes or exclude "
            f"{{nodes: {nodes_available + 1}-{max(node_counts)}}}",
        )


def _parts(
    name: str,
    path: str,
    sweep: _Sweep,
    place: Place,
    rules: Rules,
    fingerprint: str,
    out: Path,
) -> tuple[SweepPart, ...]:
    """One sweep part per gpus_per_node and parallelism (of a `parallel:` list) that owes
    a cell: what `scale` would run for it (this testbed's environment and folder,
    resumed, its gpus_per_node), parsed once, here. The first part measures the
    single-worker baselines, which serve the others (hpcbench.measure.analysis)."""
    parts = []
    for nth, (per_node, variant) in enumerate((g, v) for g in sweep.gpus for v in sweep.variants):
        identity = cell_options(variant.args)
        cells = _cells(name, fingerprint, identity, sweep, variant, per_node, nth == 0, rules)
        if not cells:
            continue
        fixed = [
            *place.where_args,
            "--out",
            str(out / name),
            "--resume",
            "--gpus-per-node",
            str(per_node),
        ]
        try:
            _, workload, target, part_sweep = sweep_keys.parse(variant.argv, fixed)
        except UsageError as err:
            raise Problem(f"{path}.sweep", sweep_keys.strip_prefix(str(err))) from None
        for cell in cells:  # HSDP's and TP's groups fit each configuration's workers
            try:
                as_run(workload, cell.config)
            except ValueError as err:
                raise Problem(f"{path}.sweep", f"{err} ({cell.label})") from None
        parts.append(SweepPart(per_node, workload, target, part_sweep, tuple(cells)))
    if not parts:
        raise Problem(f"{path}.exclude", "leaves no cell to run: drop the testbed instead")
    return _one_probe(parts)


def _one_probe(parts: list[SweepPart]) -> tuple[SweepPart, ...]:
    """The parts with one probe between them: the first part's probe of a node count
    serves the others (hpcbench.measure.sweep.planned_probes), so it times what any of
    them issues: FSDP2's and HSDP's all-gather and reduce-scatter beside DDP's
    all-reduce, which their forecasts take from it."""
    asked = tuple(
        dict.fromkeys(c for p in parts if p.sweep.probe for c in p.sweep.probe.collectives)
    )
    return tuple(
        replace(p, sweep=replace(p.sweep, probe=replace(p.sweep.probe, collectives=asked)))
        if p.sweep.probe
        else p
        for p in parts
    )


def _cells(
    name: str,
    fingerprint: str,
    identity: dict[str, Any],
    sweep: _Sweep,
    variant: _Variant,
    per_node: int,
    baselines: bool,
    rules: Rules,
) -> list[Cell]:
    """A part's cells in the order its sweep runs them (hpcbench.measure.sweep.configurations),
    less those excluded. One baseline serves every gpus_per_node and parallelism of a
    batch (hpcbench.measure.analysis): the first part's (baselines)."""
    cells: list[Cell] = []
    workers = functools.partial(operator.mul, per_node)  # nodes -> nodes x per_node
    configs = configurations(sweep.batches, sweep.node_counts, workers, baselines=baselines)
    parallel = variant.workload.parallel
    # A transformer's cells name their parallelism; a CNN's are as they always were.
    shown = parallel if transformer_configs.is_transformer(variant.workload.model) else ""
    for config in configs:
        # One worker trains unwrapped whatever the parallelism (bench/lm.py: wrapped only
        # when comm.size > 1; scale never passes --wrap): the first part's measures it.
        if variant.parallel is not None and not baselines and config.workers == 1:
            continue
        values = {
            "batch": config.batch,
            "nodes": config.nodes,
            "workers": config.workers,
            "gpus_per_node": per_node,
        }
        if _excluded({**values, "parallel": parallel}, rules):
            continue
        cell_id = digest(
            {"testbed": name, "fingerprint": fingerprint, "params": identity, **values}, 12
        )
        cells.append(Cell(name, config, per_node, cell_id, shown))
    return cells


def _exclusions(value: Any, path: str) -> Rules:
    if value is None:
        return []
    if not isinstance(value, list):
        raise Problem(
            path, "must be a list of {batch:, nodes:, gpus_per_node:, workers:, parallel:}"
        )
    rules: Rules = []
    for i, entry in enumerate(value):
        where = f"{path}[{i}]"
        entry = checks.mapping(entry, where, EXCLUDE_KEYS)
        if not entry:
            raise Problem(where, f"names no cell; give some of {', '.join(EXCLUDE_KEYS)}")
        rule: dict[str, set[int] | set[str]] = {}
        for k, v in entry.items():
            if k == "parallel":
                rule[k] = set(checks.word_list(v, f"{where}.{k}", workload_options.PARALLEL))
            else:
                rule[k] = set(checks.int_list(v, f"{where}.{k}", 10**6))
        rules.append(rule)
    return rules


def _excluded(cell: dict[str, Any], rules: Rules) -> bool:
    return any(all(cell[k] in values for k, values in rule.items()) for rule in rules)


def _expect(value: Any, path: str, model: str) -> Expect:
    """The testbed's `expect:`. Its one worker's figure is in the unit of the sweep's
    `model`, the one the forecast reads (forecast.single_worker): the other is refused."""
    value = checks.mapping(value, path, EXPECT_KEYS)
    rates: dict[str, float | None] = {}
    for key, high, what in (
        ("images_per_s", 10_000_000.0, "images/s"),
        ("tokens_per_s", 1_000_000_000.0, "tokens/s"),
    ):
        rate = value.get(key)
        if rate is not None:
            try:
                rate = units.parse_real(str(rate), 0.001, high)
            except ValueError as err:
                raise Problem(f"{path}.{key}", f"{err}; one worker's {what}") from None
        rates[key] = rate
    kind, takes, other = (
        ("a transformer", "tokens_per_s", "images_per_s")
        if transformer_configs.is_transformer(model)
        else ("a CNN", "images_per_s", "tokens_per_s")
    )
    if rates[other] is not None:
        raise Problem(
            f"{path}.{other}",
            f"is unused: the sweep's model {model} is {kind}, whose one worker is expect: {takes}",
        )
    durations = {
        k: checks.duration(value[k], f"{path}.{k}") if k in value else None
        for k in ("deploy", "verify", "destroy")
    }
    return Expect(
        rates["images_per_s"],
        durations["deploy"],
        durations["verify"],
        durations["destroy"],
        rates["tokens_per_s"],
    )


def _hardware(value: Any, path: str, place: Place) -> Hardware:
    """The testbed's `hardware:`; a GPULab testbed's accelerator defaults to the first
    of its settings' gpu_models."""
    value = checks.mapping(value, path, HARDWARE_KEYS)
    accelerator = value.get("accelerator")
    if accelerator is not None:
        accelerator = checks.text(
            accelerator, f"{path}.accelerator", None, "V100 or A100-SXM4-80GB"
        )
    else:
        try:  # as checks.setting wrote it: JSON
            models = json.loads(place.settings.get("gpu_models", "[]"))
        except ValueError:
            models = []
        first = models[0] if isinstance(models, list) and models else None
        accelerator = first if isinstance(first, str) and first.strip() else None
    link = value.get("link")
    if link is not None:
        link = checks.text(link, f"{path}.link", None, "a line rate such as 100gbit")
        checks.link("link_rate", link, f"{path}.link")
    transport = value.get("transport")
    if transport is not None and (
        not isinstance(transport, str) or transport not in LINK_EFFICIENCY
    ):
        raise Problem(f"{path}.transport", f"use one of {', '.join(LINK_EFFICIENCY)}")
    intra = value.get("intra_node")
    if intra is not None and (not isinstance(intra, str) or intra not in INTRA_NODE):
        raise Problem(f"{path}.intra_node", f"use one of {', '.join(INTRA_NODE)}")
    share = value.get("link_efficiency")
    if share is not None:
        try:
            share = units.parse_real(str(share), 0.01, 1.0)
        except ValueError as err:
            raise Problem(
                f"{path}.link_efficiency", f"{err}; the share of the line rate, 0.01 to 1"
            ) from None
    return Hardware(accelerator, link, transport, intra, share)
