"""A campaign's sweep keys as `scale`'s options: each key turned into the argv
`scale` would take and checked alone by the very parser and spec builders `scale`
uses, so that a campaign accepts exactly what the command line accepts and an error
names the file's key. What of them makes a cell's identity: hpcbench.measure.identity."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from hpcbench.campaign import checks
from hpcbench.campaign.checks import Problem
from hpcbench.core.bench import workload_options
from hpcbench.core.errors import UsageError
from hpcbench.launchers.parse import MAX_SLOTS
from hpcbench.launchers.specs import SweepSpec, TargetSpec, WorkloadSpec
from hpcbench.measure import scale_options
from hpcbench.testbeds.kinds.localhost import Localhost

# `scale` options a campaign sets itself (where each testbed's results go, resuming)
# or that make no sense unattended.
RESERVED = ("env", "hosts", "out", "resume", "dry_run", "help")


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """scale's options by key (dest), reserved ones left out."""
    found = {}
    for action in parser._actions:
        if action.option_strings and action.dest not in RESERVED:
            found[action.dest] = action
    return found


def _argv_of(key: str, value: Any, action: argparse.Action, path: str) -> list[str]:
    flag = max(action.option_strings, key=len)
    if action.nargs == 0:  # a switch (store_true): true sets it
        return [flag] if checks.flag(value, path) else []
    if isinstance(value, bool):
        # YAML 1.1 reads on/off/yes/no as true/false: give back the word for choices that
        # take on/off (--amp on), else say to quote it.
        if action.choices and {"on", "off"} <= set(action.choices):
            return [flag, "on" if value else "off"]
        raise Problem(path, "YAML read this as true/false: write the value in quotes")
    if isinstance(value, list):
        if key == "sbatch":  # the one repeatable option; =: its values start with '-'
            return [f"{flag}={checks.text(v, path)}" for v in value]
        if not value or not all(
            isinstance(v, int | float | str) and not isinstance(v, bool) for v in value
        ):
            raise Problem(path, "a list must hold numbers or text, e.g. [32, 64, 96]")
        value = ",".join(str(v) for v in value)
    if isinstance(value, int | float | str):
        # One word with '=': a value that starts with '-' ('-x', '-1-4') is the value,
        # not an option argparse would say is missing its argument.
        return [f"{flag}={value}"]
    raise Problem(path, checks.yaml_only(value) or "must be a number, text, true/false or a list")


# The stand-ins a key is checked alone with: where it runs, and --repeats 1, so that
# max_repeats meets no default it would be below, only its own mapping's repeats; a
# testbed's sweep merged with the campaign's is checked whole (campaign/testbeds.py).
ALONE = ["--env", Localhost.name, "--out", "results", "--repeats", "1"]
# The workload's keys that must fit one another (bench/transformer_configs.py, problem:
# a transformer under ddp only, --parallel and --seq-len for the transformers, ...).
# Each is checked with those before it in this order, as its sweep gives them (the
# campaign's beneath a testbed's own), so that an error names the key that does not fit.
TOGETHER = (
    "backend",
    "model",
    "parallel",
    "shard_group",
    "seq_len",
    "image_size",
    "step",
    "fp16_allreduce",
    "bucket_cap_mb",
    "fusion_threshold_mb",
    "compile_backend",
    "tp",
    "grad_accum",
    "activation_checkpoint",
)


@dataclass(frozen=True)
class SweepArgs:
    """A sweep mapping as scale's argv, key by key (each checked), and the keys given as
    lists whose values are each a sweep part of their own (None: not given)."""

    by_key: dict[str, list[str]] = field(default_factory=dict)
    gpus: list[int] | None = None  # gpus_per_node: a node's GPUs, 1..G
    parallel: list[str] | None = None  # a transformer's parallelisms, a list given

    def argv(self, parallel: str | None = None) -> list[str]:
        """scale's argv for one part: with `parallel` (one of a list), and shard_group
        only where that is hsdp (the one parallelism that takes it)."""
        out = [a for key, argv in self.by_key.items() for a in argv]
        if parallel is None:
            return out
        if parallel != "hsdp":
            out = [a for a in out if a not in self.by_key.get("shard_group", [])]
        return [*out, f"--parallel={parallel}"]


def parse(
    argv: list[str], where: list[str] | None = None
) -> tuple[argparse.Namespace, WorkloadSpec, TargetSpec, SweepSpec]:
    """argv through `scale`'s parser and spec builders: what the command line would accept.
    `where`: the options the campaign sets itself (--env, --out, ...); a stand-in
    environment and folder while a key is checked alone."""
    fixed = where or ["--env", Localhost.name, "--out", "results"]
    args = scale_options.scale_parser().parse_args([*fixed, *argv])
    return (
        args,
        scale_options.workload_spec(args),
        scale_options.target_spec(args),
        scale_options.sweep_spec(args),
    )


def _order(raw_key: str) -> tuple[int, int]:
    """The order keys are checked in: TOGETHER's first, in its order; max_repeats last
    (it is checked against its mapping's repeats, once that is)."""
    key = _key(raw_key)
    return (key == "max_repeats", TOGETHER.index(key) if key in TOGETHER else len(TOGETHER))


def sweep_argv(sweep: dict[str, Any], path: str, under: dict[str, Any] | None = None) -> SweepArgs:
    """A sweep mapping as scale's argv, each key checked alone (so that an error names
    it; TOGETHER's with those before them), and the keys given as lists. `under`: the
    campaign's sweep that a testbed's own is merged over (checked before it)."""
    known = _options(scale_options.scale_parser())
    gpus: list[int] | None = None
    parallel: list[str] | None = None
    spelled: dict[str, str] = {}  # key -> how the mapping spells it
    checked: dict[str, list[str]] = {}  # key -> its argv, checked
    beneath = {_key(k): v for k, v in (under or {}).items()}
    for raw_key, value in sorted(sweep.items(), key=lambda kv: _order(kv[0])):
        key = _key(raw_key)
        where = f"{path}.{raw_key}"
        if key in spelled:  # max-repeats beside max_repeats: the later would win unread
            raise Problem(where, f"is {path}.{spelled[key]} written another way: give one")
        spelled[key] = raw_key
        if key == "gpus_per_node":
            gpus = checks.int_list(value, where, MAX_SLOTS)
            continue
        if key in RESERVED:
            raise Problem(
                where,
                "is set by the campaign itself (each testbed's results go "
                "to <out>/<testbed>; `campaign run --resume` resumes)",
            )
        if key not in known:
            raise Problem(
                where, "not an option of `hpcbench scale`; see `python -m hpcbench scale --help`"
            )
        if key == "parallel" and isinstance(value, list):  # a sweep part each
            parallel = checks.word_list(value, where, workload_options.PARALLEL)
            for one in parallel:
                _check([f"--parallel={one}"], _context(key, checked, beneath, known), where)
            # What the keys after it are checked with: hsdp, the one that takes a shard group.
            checked[key] = [f"--parallel={'hsdp' if 'hsdp' in parallel else parallel[0]}"]
            continue
        own = _argv_of(key, value, known[key], where)
        if key == "max_repeats":
            alone = [*ALONE, *checked.get("repeats", [])]
        else:
            alone = _context(key, checked, beneath, known)
        _check(own, alone, where)
        checked[key] = own
    if parallel is not None:
        checked.pop("parallel", None)
    return SweepArgs(checked, gpus, parallel)


def _check(argv: list[str], alone: list[str], where: str) -> None:
    try:
        parse(argv, alone)
    except UsageError as err:
        raise Problem(where, strip_prefix(str(err))) from None


def _context(
    key: str,
    checked: dict[str, list[str]],
    beneath: dict[str, Any],
    known: dict[str, argparse.Action],
) -> list[str]:
    """ALONE, and for a key of TOGETHER the ones before it as the sweep gives them: this
    mapping's (checked), else the campaign's beneath it. A list of parallelisms stands
    as hsdp where it holds it (the one that takes a shard group), else as its first."""
    if key not in TOGETHER:
        return ALONE
    argv = list(ALONE)
    for before in TOGETHER[: TOGETHER.index(key)]:
        if before in checked:
            argv += checked[before]
        elif before in beneath:
            value = beneath[before]
            if before == "parallel" and isinstance(value, list) and value:
                value = "hsdp" if "hsdp" in value else value[0]
            try:
                argv += _argv_of(before, value, known[before], before)
            except Problem:  # named where the campaign's own sweep is checked
                continue
    return argv


def _key(raw_key: str) -> str:
    """A sweep key as scale's option's dest: max-repeats and max_repeats alike."""
    return raw_key.replace("-", "_")


def strip_prefix(message: str) -> str:
    return message.removeprefix("scale: ")
