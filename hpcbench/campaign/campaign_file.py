"""The campaign file: testbeds x one sweep, validated before anything is created.

    name: slices                  # optional; default: the file's name
    out: results/slices           # optional; default: results/<name>
    keep_on_failure: false        # keep a failed testbed for debugging (default: destroy)
    sweep:                        # `hpcbench scale`'s options, by name
      model: resnet50
      batch: [32, 64, 96]
      nodes: 1-10
    testbeds:
      - name: vwall-1g            # a label: lower-case letters, digits, '-'
        env: virtualwall          # `hpcbench envs` lists them
        title: Virtual Wall, 1 Gbit/s
        settings: {node_count: 10}        # Terraform variables (`deploy --var`)
        ansible: {stack_mode: image}      # group_vars for this testbed's hosts
        sweep: {gpus_per_node: 1}         # overrides of the campaign's sweep
        exclude: [{nodes: 10, batch: 96}] # cells not to run
        expect: {images_per_s: 300}       # for `campaign plan` before any result

Every error is one line naming the key path and what to write instead
(UsageError, exit status 2). The sweep's keys are the `scale` options and are
checked by the very parser and spec builders `scale` uses, so a campaign
accepts exactly what the command line accepts; `gpus_per_node` alone may be a
list or range, each value its own sweep on the testbed (a node's GPUs 1..G).

A cell is one configuration on one testbed (batch, nodes, workers); its id
hashes its resolved parameters with the testbed's fingerprint (environment,
settings, Ansible variables), so a changed campaign file makes new cells and
`--resume` never counts a result measured another way.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import operator
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from hpcbench import paths, scale_options
from hpcbench.errors import UsageError, one_line
from hpcbench.scaling_model import parse_link
from hpcbench.specs import (
    MAX_SLOTS,
    SweepSpec,
    TargetSpec,
    TestbedKind,
    WorkloadSpec,
    check_path,
    duration_s,
    format_int_list,
    parse_hosts,
    parse_int_list,
    parse_login,
    units,
)
from hpcbench.sweep import Config, configurations
from hpcbench.terraform import looks_secret

NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,39}", re.ASCII)
VARIABLE = re.compile(r"[a-z_][a-z0-9_]{0,63}", re.ASCII)
TOPOLOGY = re.compile(r"([1-9][0-9]*)x([1-9][0-9]*)", re.ASCII)
MAX_TESTBEDS = 64
MAX_CELLS = 10_000  # a typo such as nodes: 1-4000, before any work is planned
SETTING_MAX = 4096  # as `deploy --var`
TOP_KEYS = ("name", "description", "out", "keep_on_failure", "sweep", "testbeds")
TESTBED_KEYS = (
    "name",
    "env",
    "slurm",
    "hosts",
    "title",
    "settings",
    "ansible",
    "sweep",
    "exclude",
    "keep_on_failure",
    "expect",
)
# A Slurm partition's keys, and the `scale` option each becomes (--env slurm).
SLURM_KEYS = {
    "partition": "--partition",
    "account": "--account",
    "qos": "--qos",
    "gpus_per_node": "--slurm-gpus",
    "time": "--slurm-time",
    "sbatch": "--sbatch",
    "login": "--slurm-login",
    "ssh_key": "--slurm-ssh-key",
    "known_hosts": "--slurm-known-hosts",
    "container_image": "--container-image",
    "container_mounts": "--container-mounts",
    "container_python": "--container-python",
    "python": "--slurm-python",
    "bench_dir": "--slurm-bench-dir",
    "job_dir": "--slurm-job-dir",
    "setup": "--slurm-setup",
    "queue_wait": "--slurm-queue-wait",
    "cpus_per_task": "--slurm-cpus-per-task",
    "container_import": "--container-import-time",
    "nodes": None,
}
# Who says how many nodes a testbed has, for the message when the sweep asks for more.
GIVES = {
    TestbedKind.DEPLOYED: "the settings give",
    TestbedKind.SLURM: "slurm: nodes gives",
    TestbedKind.HOSTS: "hosts: gives",
}
# Slurm keys that bound how long, not what is measured: not part of the identity.
SLURM_OPERATIONAL = (
    "time",
    "queue_wait",
    "container_import",
    "job_dir",
    "ssh_key",
    "known_hosts",
)
EXCLUDE_KEYS = ("batch", "nodes", "gpus_per_node", "workers")
EXPECT_KEYS = ("images_per_s", "deploy", "verify", "destroy")
# `scale` options a campaign sets itself (where each testbed's results go, resuming)
# or that make no sense unattended.
RESERVED = ("env", "hosts", "out", "resume", "dry_run", "help")
# Options that bound how long a sweep may take, not what it measures: not part of a
# cell's identity, so that raising a timeout does not make finished cells new.
OPERATIONAL = (
    "timeout",
    "budget",
    "probe_budget",
    "verbose",
    "slurm_queue_wait",
    "slurm_time",
    "slurm_job_dir",
    "container_import_time",
)


@dataclass(frozen=True)
class Cell:
    """One configuration on one testbed: what `status` lists and `--resume` skips."""

    testbed: str
    config: Config  # batch, nodes, workers: its label and key are the sweep's
    gpus_per_node: int  # the sweep it belongs to (a baseline is one worker of such a sweep)
    id: str

    @property
    def batch(self) -> int:
        return self.config.batch

    @property
    def nodes(self) -> int:
        return self.config.nodes

    @property
    def workers(self) -> int:
        return self.config.workers

    @property
    def label(self) -> str:
        return self.config.label


@dataclass(frozen=True)
class SweepPart:
    """One `scale` sweep on a testbed, as `scale` resolves its options (this testbed's
    environment, its results folder, resumed, its gpus_per_node), and its cells."""

    gpus_per_node: int
    workload: WorkloadSpec
    target: TargetSpec
    sweep: SweepSpec
    cells: tuple[Cell, ...]


@dataclass(frozen=True)
class Expect:
    """What `campaign plan` assumes before any result exists (None: not given)."""

    images_per_s: float | None = None
    deploy_s: int | None = None
    verify_s: int | None = None
    destroy_s: int | None = None


@dataclass(frozen=True)
class TestbedPlan:
    index: int  # 1-based, in the file's order
    name: str
    env: str  # the environment deployed, or the kind's own name (slurm, hosts)
    title: str
    settings: tuple[tuple[str, str], ...]  # Terraform variables, as `deploy --var` takes them
    ansible: dict[str, Any]  # group_vars written beside the rendered inventory
    keep_on_failure: bool
    expect: Expect
    fingerprint: str
    nodes_available: int | None  # from the settings, where they say (node_count, topology)
    gpus_per_node: int | None  # per node, where the settings say (topology)
    parts: tuple[SweepPart, ...]
    kind: TestbedKind = TestbedKind.DEPLOYED  # or SLURM (a partition), HOSTS (machines)
    where: str = ""  # the partition and login node, or the hosts: what the plan shows

    @property
    def cells(self) -> list[Cell]:
        return [c for part in self.parts for c in part.cells]

    @property
    def deployed(self) -> bool:
        """A testbed hpcbench deploys and destroys (the others are only measured)."""
        return self.kind is TestbedKind.DEPLOYED


@dataclass(frozen=True)
class Campaign:
    path: Path
    name: str
    description: str
    out: Path
    testbeds: tuple[TestbedPlan, ...]
    sweep: dict[str, Any] = field(default_factory=dict)  # the campaign-wide sweep, as given

    @property
    def cells(self) -> list[Cell]:
        return [c for tb in self.testbeds for c in tb.cells]

    def testbed(self, name: str) -> TestbedPlan:
        for tb in self.testbeds:
            if tb.name == name:
                return tb
        raise UsageError(
            f"{self.path}: no testbed {name!r}: choose one of "
            f"{', '.join(t.name for t in self.testbeds)}"
        )

    def testbed_out(self, tb: TestbedPlan) -> Path:
        """Each testbed's own results store (a `scale --out` folder)."""
        return self.out / tb.name


class _Problem(Exception):
    """A bad value at a key path; load() turns it into one UsageError line."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def _digest(value: Any, size: int) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:size]


# ---------------------------------------------------------------- reading YAML
class _UniqueKeyLoader(yaml.SafeLoader):
    """safe_load, but a key given twice in one mapping is an error (YAML keeps the last
    silently, so `nodes:` written twice would run what the user did not read)."""


def _unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: its keys may be overridden
            continue
        key = loader.construct_object(key_node, deep=deep)
        if isinstance(key, str | int | float | bool) and key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} is given twice", key_node.start_mark
            )
        seen.add(key) if isinstance(key, str | int | float | bool) else None
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _unique_mapping,
)


class _TooLong:
    """A whole number of more digits than Python converts from text
    (sys.get_int_max_str_digits; PyYAML's int() of it raises ValueError): kept as
    this, so that the check of the file names its key."""

    def __init__(self, digits: int) -> None:
        self.digits = digits

    def __repr__(self) -> str:
        return f"<a number of {self.digits} digits>"


def _int_or_too_long(loader: _UniqueKeyLoader, node: yaml.ScalarNode) -> Any:
    try:
        return loader.construct_yaml_int(node)
    except ValueError:
        return _TooLong(len(node.value))


_UniqueKeyLoader.add_constructor(
    "tag:yaml.org,2002:int",
    _int_or_too_long,
)


def read_yaml(path: Path) -> Any:
    check_path(str(path), "campaign file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such campaign file (campaigns/ holds examples)") from None
    except (OSError, UnicodeDecodeError) as err:
        why = getattr(err, "strerror", None) or type(err).__name__
        raise UsageError(f"{path}: cannot read it ({why})") from None
    if len(text) > 1_000_000:
        raise UsageError(f"{path}: over 1 MB; a campaign file is a page of YAML")
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise UsageError(f"{path}: not valid YAML ({where}{problem})") from None
    except RecursionError:
        raise UsageError(f"{path}: nested more than YAML can read") from None
    except ValueError as err:  # a value YAML's own types refuse: a date such as 2026-13-40
        raise UsageError(f"{path}: not valid YAML ({one_line(str(err), 200)})") from None
    if _too_big(data):
        raise UsageError(
            f"{path}: its aliases refer to themselves or expand to over "
            f"{MAX_NODES} values: write the campaign out plainly"
        )
    return data


MAX_NODES = 100_000  # values in a campaign file once its aliases are expanded


def _too_big(data: Any) -> bool:
    """Whether a document expands to more than MAX_NODES values or nests deeper than
    64 (a self-referring alias does both): json.dumps of such a thing never ends."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    seen = 0
    while stack:
        node, depth = stack.pop()
        seen += 1
        if seen > MAX_NODES or depth > 64:
            return True
        if isinstance(node, dict):
            stack += [(v, depth + 1) for v in node.values()]
            stack += [(k, depth + 1) for k in node]
        elif isinstance(node, list):
            stack += [(v, depth + 1) for v in node]
    return False


# ------------------------------------------------------------------ checkers
def _no_number_too_long(node: Any, path: str = "") -> None:
    """A number too long for Python to convert, named by its key path."""
    if isinstance(node, _TooLong):
        raise _Problem(
            path,
            f"a number of {node.digits} digits, over the {sys.get_int_max_str_digits()} "
            "Python reads, and far over any count or size here",
        )
    if isinstance(node, dict):
        for key, value in node.items():
            where = f"{path}.{key}" if path else str(key)
            _no_number_too_long(key, path)
            _no_number_too_long(value, where)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _no_number_too_long(value, f"{path}[{i}]")


def _encodable(value: str, path: str) -> None:
    """Text that files, pages and terminals can hold: UTF-8, so no lone surrogate
    (YAML's "\\uDCFF" escape makes one)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _Problem(path, "holds a lone surrogate (\\uD800-\\uDFFF): not text") from None


def _mapping(value: Any, path: str, keys: tuple[str, ...] | None = None) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Problem(path, "must be a mapping of key: value")
    for key in value:
        if not isinstance(key, str):
            raise _Problem(path, f"key {key!r} is not text")
        if keys is not None and key not in keys:
            raise _Problem(
                f"{path}.{key}" if path else key, f"unknown key; use one of {', '.join(keys)}"
            )
    return value


def _text(value: Any, path: str, pattern: re.Pattern[str] | None = None, example: str = "") -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Problem(path, f"must be text{f' like {example}' if example else ''}")
    if any(ord(c) < 32 and c not in "\t" for c in value) or len(value) > SETTING_MAX:
        raise _Problem(path, f"must be one line of at most {SETTING_MAX} characters")
    _encodable(value, path)
    if pattern is not None and not pattern.fullmatch(value):
        raise _Problem(path, f"{value[:40]!r} is not {example}")
    return value


def _flag(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise _Problem(path, "must be true or false")
    return value


def _int_list(value: Any, path: str, maximum: int) -> list[int]:
    """A number, a list of numbers, or text like '1-4,8'."""
    if isinstance(value, bool):
        raise _Problem(path, "must be a number, a list of numbers or a range like 1-4")
    if isinstance(value, int):
        text = str(value)
    elif (
        isinstance(value, list)
        and value
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        text = ",".join(str(v) for v in value)
    elif isinstance(value, str):
        text = value
    else:
        raise _Problem(path, "must be a number, a list of numbers or a range like 1-4")
    try:
        return parse_int_list(text, path, maximum)
    except UsageError as err:
        raise _Problem(path, str(err).removeprefix(f"{path}: ")) from None


def _setting(value: Any, path: str) -> str:
    """A Terraform variable's value as `deploy --var` takes it (lists and maps as JSON)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and abs(value) < 10**18:
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return str(value)
    if isinstance(value, list | dict):
        try:  # JSON as Terraform reads it: no NaN, no infinity, no number past 18 digits
            text = json.dumps(value, separators=(",", ":"), allow_nan=False)
        except (ValueError, TypeError):
            raise _Problem(path, "must hold finite numbers, text and true/false") from None
        if len(text) <= SETTING_MAX and not _huge_int(value):
            return text
    if isinstance(value, str) and "\x00" not in value and len(value) <= SETTING_MAX:
        _encodable(value, path)
        return value
    raise _Problem(
        path,
        f"must be text, a number of at most 18 digits, true/false or a list "
        f"(at most {SETTING_MAX} characters)",
    )


def _link(key: str, text: str, where: str) -> None:
    """A testbed's nominal link in its settings, as the plan reads it
    (estimate.link_rate_bits): a line rate above zero and finite; an empty link_rate
    leaves a local testbed unshaped."""
    if key == "link_rate" and text:
        try:
            parse_link(text)
        except UsageError:
            raise _Problem(
                where, f"{text[:40]!r} is not a line rate above 0 such as 100mbit or 1gbit"
            ) from None
    elif key == "link_capacity_mbps":
        try:
            mbps = float(text)
        except ValueError:
            mbps = math.nan
        if not (math.isfinite(mbps) and mbps > 0):
            raise _Problem(where, f"{text[:40]!r} is not a finite number of Mbit/s above 0")


def _huge_int(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_huge_int(v) for v in value.values())
    if isinstance(value, list):
        return any(_huge_int(v) for v in value)
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**18


def _duration(value: Any, path: str) -> int:
    if not isinstance(value, int | str) or isinstance(value, bool):
        raise _Problem(path, "must be a duration such as 90s, 10m or 1h")
    try:
        return duration_s(str(value))
    except ValueError as err:
        raise _Problem(path, f"{err}: write a duration such as 90s, 10m or 1h") from None


# --------------------------------------------------------------- the sweep
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
        return [flag] if _flag(value, path) else []
    if isinstance(value, bool):
        # YAML 1.1 reads on/off/yes/no as true/false: give back the word for choices that
        # take on/off (--amp on), else say to quote it.
        if action.choices and {"on", "off"} <= set(action.choices):
            return [flag, "on" if value else "off"]
        raise _Problem(path, "YAML read this as true/false: write the value in quotes")
    if isinstance(value, list):
        if key == "sbatch":  # the one repeatable option; =: its values start with '-'
            return [f"{flag}={_text(v, path)}" for v in value]
        if not value or not all(
            isinstance(v, int | float | str) and not isinstance(v, bool) for v in value
        ):
            raise _Problem(path, "a list must hold numbers or text, e.g. [32, 64, 96]")
        return [flag, ",".join(str(v) for v in value)]
    if isinstance(value, int | float | str):
        return [flag, str(value)]
    raise _Problem(path, "must be a number, text, true/false or a list")


def _parse(
    argv: list[str], where: list[str] | None = None
) -> tuple[argparse.Namespace, WorkloadSpec, TargetSpec, SweepSpec]:
    """argv through `scale`'s parser and spec builders: what the command line would accept.
    `where`: the options the campaign sets itself (--env, --out, ...); a stand-in
    environment and folder while a key is checked alone."""
    fixed = where or ["--env", "localhost", "--out", "results"]
    args = scale_options.scale_parser().parse_args([*fixed, *argv])
    return (
        args,
        scale_options.workload_spec(args),
        scale_options.target_spec(args),
        scale_options.sweep_spec(args),
    )


def _sweep_argv(sweep: dict[str, Any], path: str) -> tuple[list[str], list[int] | None]:
    """A sweep mapping as scale's argv (each key checked alone, so that an error names
    it), and its gpus_per_node list (None: not given)."""
    known = _options(scale_options.scale_parser())
    argv: list[str] = []
    gpus: list[int] | None = None
    for raw_key, value in sweep.items():
        key = raw_key.replace("-", "_")
        where = f"{path}.{raw_key}"
        if key == "gpus_per_node":
            gpus = _int_list(value, where, MAX_SLOTS)
            continue
        if key in RESERVED:
            raise _Problem(
                where,
                "is set by the campaign itself (each testbed's results go "
                "to <out>/<testbed>; `campaign run --resume` resumes)",
            )
        if key not in known:
            raise _Problem(
                where, "not an option of `hpcbench scale`; see `python -m hpcbench scale --help`"
            )
        own = _argv_of(key, value, known[key], where)
        try:
            _parse(own)
        except UsageError as err:
            raise _Problem(where, _strip_prefix(str(err))) from None
        argv += own
    return argv, gpus


def _strip_prefix(message: str) -> str:
    return message.removeprefix("scale: ")


# `scale` options added after campaigns existed, with the value every earlier cell was
# measured with: left out of a cell's identity at that value, so that a campaign's
# journal from before them still names the same cells (and --resume still holds).
ADDED_LATER = {
    "step": "eager",
    "decode": "auto",
    "slurm_login": "",
    "slurm_ssh_key": "",
    "slurm_known_hosts": "",
    "slurm_python": "",
    "slurm_bench_dir": "",
    "slurm_setup": "",
    "slurm_cpus_per_task": 0,
}


def _resolved(args: argparse.Namespace) -> dict[str, Any]:
    """The parsed options that define what a cell measures (identity), JSON-ready."""
    skip = {*RESERVED, *OPERATIONAL, "func", "command", "nodes", "batch", "gpus_per_node"}
    out: dict[str, Any] = {}
    for key, value in sorted(vars(args).items()):
        if key in skip or (key in ADDED_LATER and value == ADDED_LATER[key]):
            continue
        if isinstance(value, str | int | float | bool | type(None)):
            out[key] = value
        elif isinstance(value, list | tuple):
            out[key] = [str(v) for v in value]
    return out


# -------------------------------------------------------------- the testbeds
def _shape(settings: dict[str, str]) -> tuple[int | None, int | None]:
    """Nodes and GPUs per node where the settings say: `node_count` and `gpus_per_node`
    (local, Virtual Wall, OpenStack) or a GPULab `topology` <jobs>x<GPUs per job>."""
    topology = settings.get("topology")
    if topology is not None:
        match = TOPOLOGY.fullmatch(topology)
        if match:
            return int(match[1]), int(match[2])
    count, gpus = settings.get("node_count", ""), settings.get("gpus_per_node", "")
    return (int(count) if count.isdigit() else None), (int(gpus) if gpus.isdigit() else None)


def _exclusions(value: Any, path: str) -> list[dict[str, set[int]]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Problem(path, "must be a list of {batch:, nodes:, gpus_per_node:, workers:}")
    rules = []
    for i, entry in enumerate(value):
        where = f"{path}[{i}]"
        entry = _mapping(entry, where, EXCLUDE_KEYS)
        if not entry:
            raise _Problem(where, f"names no cell; give some of {', '.join(EXCLUDE_KEYS)}")
        rules.append({k: set(_int_list(v, f"{where}.{k}", 10**6)) for k, v in entry.items()})
    return rules


def _excluded(cell: dict[str, int], rules: list[dict[str, set[int]]]) -> bool:
    return any(all(cell[k] in values for k, values in rule.items()) for rule in rules)


def _expect(value: Any, path: str) -> Expect:
    value = _mapping(value, path, EXPECT_KEYS)
    ips = value.get("images_per_s")
    if ips is not None:
        try:
            ips = units.parse_real(str(ips), 0.001, 10_000_000.0)
        except ValueError as err:
            raise _Problem(f"{path}.images_per_s", f"{err}; one worker's images/s") from None
    durations = {
        k: _duration(value[k], f"{path}.{k}") if k in value else None
        for k in ("deploy", "verify", "destroy")
    }
    return Expect(ips, durations["deploy"], durations["verify"], durations["destroy"])


def _testbed(
    index: int, raw: Any, path: str, sweep: dict[str, Any], keep_default: bool, out: Path
) -> TestbedPlan:
    raw = _mapping(raw, path, TESTBED_KEYS)
    name = _text(
        raw.get("name"),
        f"{path}.name",
        NAME,
        "a label like vwall-1g (lower-case letters, digits and '-', at most 40)",
    )
    given = [k for k in ("env", "slurm", "hosts") if k in raw]
    if len(given) != 1:
        raise _Problem(
            path,
            "give one of env: (a testbed hpcbench deploys), slurm: (a "
            "partition of a cluster you use) or hosts: (machines you have)",
        )
    kind = {"env": TestbedKind.DEPLOYED, "slurm": TestbedKind.SLURM, "hosts": TestbedKind.HOSTS}[
        given[0]
    ]
    if kind is not TestbedKind.DEPLOYED:
        for key in ("settings", "ansible"):
            if key in raw:
                raise _Problem(
                    f"{path}.{key}", f"is for testbeds hpcbench deploys (env:), not {given[0]}:"
                )
    title = _text(raw.get("title", name), f"{path}.title")
    settings: dict[str, str] = {}
    ansible: dict[str, Any] = {}
    if kind is TestbedKind.DEPLOYED:
        env = _text(raw.get("env"), f"{path}.env", None, "an environment")
        try:
            paths.env_layout(env)
        except UsageError as err:
            raise _Problem(f"{path}.env", str(err)) from None
        settings, ansible = _deployed(raw, path)
        where_args, where = ["--env", env], ""
        identity_of_testbed: dict[str, Any] = {"env": env, "settings": settings, "ansible": ansible}
        nodes_available, slots = _shape(settings)
    elif kind is TestbedKind.SLURM:
        env = TestbedKind.SLURM.value
        where_args, identity_of_testbed, nodes_available, slots, where = _slurm(
            raw["slurm"], f"{path}.slurm"
        )
    else:
        env = TestbedKind.HOSTS.value
        where_args, identity_of_testbed, nodes_available, slots, where = _hosts(
            raw["hosts"], f"{path}.hosts"
        )
    keep = raw.get("keep_on_failure", keep_default)
    _flag(keep, f"{path}.keep_on_failure")
    own = _mapping(raw.get("sweep"), f"{path}.sweep")
    # Each side checked key by key (an error names the file's key), then the merge.
    _, base_gpus = _sweep_argv(sweep, "sweep")
    _, own_gpus = _sweep_argv(own, f"{path}.sweep")
    merged = {
        **{k.replace("-", "_"): v for k, v in sweep.items()},
        **{k.replace("-", "_"): v for k, v in own.items()},
    }
    merged.pop("gpus_per_node", None)
    argv, _ = _sweep_argv(merged, f"{path}.sweep")
    try:
        args, _workload, target, sweep_spec = _parse(argv)  # checked alone: the errors name keys
    except UsageError as err:
        raise _Problem(f"{path}.sweep", _strip_prefix(str(err))) from None
    gpus = own_gpus or base_gpus or [slots or 1]
    if slots is not None and max(gpus) > slots:
        said = (
            f"topology {settings['topology']}"
            if "topology" in settings
            else f"{given[0]}: gpus_per_node"
        )
        raise _Problem(
            f"{path}.sweep.gpus_per_node",
            f"{max(gpus)} is more than the {slots} GPUs per node of {said}",
        )
    node_counts = list(target.node_counts)
    if nodes_available is not None and max(node_counts) > nodes_available:
        raise _Problem(
            f"{path}.sweep.nodes",
            f"{format_int_list(node_counts)} asks for {max(node_counts)} nodes but "
            f"{GIVES[kind]} {nodes_available}: lower nodes or exclude "
            f"{{nodes: {nodes_available + 1}-{max(node_counts)}}}",
        )
    rules = _exclusions(raw.get("exclude"), f"{path}.exclude")
    fingerprint = _digest(identity_of_testbed, 16)
    identity = _resolved(args)
    parts = []
    for nth, per_node in enumerate(gpus):
        cells: list[Cell] = []
        # What the part's sweep runs, in its order (hpcbench.sweep.configurations). One
        # baseline serves every gpus_per_node of a batch (hpcbench.analysis): the first
        # part's.
        workers = functools.partial(operator.mul, per_node)  # nodes -> nodes x per_node
        configs = configurations(sweep_spec.batches, node_counts, workers, baselines=nth == 0)
        for config in configs:
            values = {
                "batch": config.batch,
                "nodes": config.nodes,
                "workers": config.workers,
                "gpus_per_node": per_node,
            }
            if _excluded(values, rules):
                continue
            cell_id = _digest(
                {"testbed": name, "fingerprint": fingerprint, "params": identity, **values}, 12
            )
            cells.append(Cell(name, config, per_node, cell_id))
        if cells:
            # What `scale` would run for this part: this testbed's environment and
            # folder, resumed, its gpus_per_node; parsed once, here.
            fixed = [
                *where_args,
                "--out",
                str(out / name),
                "--resume",
                "--gpus-per-node",
                str(per_node),
            ]
            try:
                _, workload, target_spec, part_sweep = _parse(argv, fixed)
            except UsageError as err:
                raise _Problem(f"{path}.sweep", _strip_prefix(str(err))) from None
            parts.append(SweepPart(per_node, workload, target_spec, part_sweep, tuple(cells)))
    if not parts:
        raise _Problem(f"{path}.exclude", "leaves no cell to run: drop the testbed instead")
    return TestbedPlan(
        index=index,
        name=name,
        env=env,
        title=title,
        settings=tuple(sorted(settings.items())),
        ansible=ansible,
        keep_on_failure=keep,
        expect=_expect(raw.get("expect"), f"{path}.expect"),
        fingerprint=fingerprint,
        nodes_available=nodes_available,
        gpus_per_node=slots,
        parts=tuple(parts),
        kind=kind,
        where=where,
    )


def _deployed(raw: dict[str, Any], path: str) -> tuple[dict[str, str], dict[str, Any]]:
    """A deployed testbed's Terraform settings and Ansible variables, checked."""
    settings: dict[str, str] = {}
    for key, value in _mapping(raw.get("settings"), f"{path}.settings").items():
        where = f"{path}.settings.{key}"
        if not VARIABLE.fullmatch(key):
            raise _Problem(where, "a Terraform variable name: lower-case letters, digits, _")
        if looks_secret(key):
            raise _Problem(
                where,
                "looks like a secret, which never goes in a file: export it "
                "as its module documents (docs/testbeds.md)",
            )
        settings[key] = _setting(value, where)
        _link(key, settings[key], where)
    ansible = _mapping(raw.get("ansible"), f"{path}.ansible")
    for key, value in ansible.items():
        where = f"{path}.ansible.{key}"
        if not VARIABLE.fullmatch(key):
            raise _Problem(where, "an Ansible variable name: lower-case letters, digits, _")
        if looks_secret(key):
            raise _Problem(where, "looks like a secret, which never goes in a file")
        try:
            yaml.safe_dump(value)
        except yaml.YAMLError:
            raise _Problem(where, "must be plain YAML data") from None
    return settings, ansible


def _slurm(value: Any, path: str) -> tuple[list[str], dict[str, Any], int | None, int | None, str]:
    """A Slurm partition: `scale --env slurm`'s options for it (each key checked by the
    very parser `scale` uses, its error naming the key), what identifies it, its nodes
    and GPUs per node where given, and a line for the plan."""
    given = _mapping(value, path, tuple(SLURM_KEYS))
    if "partition" not in given:
        raise _Problem(f"{path}.partition", "name the partition (sinfo -s lists them)")
    argv: list[str] = []
    for key, raw_value in given.items():
        flag, where = SLURM_KEYS[key], f"{path}.{key}"
        if flag is None:  # nodes: the most the partition gives; bounds the sweep
            continue
        if key == "time":
            own = [flag, str(max(1, -(-_duration(raw_value, where) // 60)))]
        elif key in ("sbatch", "container_mounts") and isinstance(raw_value, list):
            texts = [_text(v, where) for v in raw_value]
            own = [f"{flag}={t}" for t in texts] if key == "sbatch" else [flag, ",".join(texts)]
        elif key in ("queue_wait", "container_import"):
            own = [flag, str(_duration(raw_value, where))]
        else:
            text = _text(
                str(raw_value)
                if isinstance(raw_value, int) and not isinstance(raw_value, bool)
                else raw_value,
                where,
            )
            own = [f"{flag}={text}"]  # =: a value may start with '-' (sbatch's --exclusive)
        try:
            if key == "login":  # alone it lacks --slurm-python: its own syntax only
                parse_login(own[0].partition("=")[2])
            elif key in ("ssh_key", "known_hosts"):  # alone they lack the login they are for
                check_path(own[0].partition("=")[2], flag)
            elif key == "job_dir" and "login" in given:  # its ~ is the login's: checked
                pass  # with the keys together, below
            else:
                _parse(own, ["--env", "slurm", "--out", "results"])
        except UsageError as err:
            raise _Problem(where, _strip_prefix(str(err))) from None
        argv += own
    try:
        _parse([], ["--env", "slurm", "--out", "results", *argv])  # the keys together
    except UsageError as err:
        raise _Problem(path, _strip_prefix(str(err))) from None
    nodes = _int_list(given["nodes"], f"{path}.nodes", 100_000)[-1] if "nodes" in given else None
    gpus = given.get("gpus_per_node")
    slots = int(gpus) if isinstance(gpus, int) and not isinstance(gpus, bool) and gpus else None
    identity = {k: v for k, v in given.items() if k not in SLURM_OPERATIONAL}
    login = given.get("login")
    where = f"partition {given['partition']}" + (f" via {login}" if login else "")
    return ["--env", "slurm", *argv], {"slurm": identity}, nodes, slots, where


def _hosts(value: Any, path: str) -> tuple[list[str], dict[str, Any], int | None, int | None, str]:
    """Machines you have, as `scale --hosts` takes them: host:slots (workers)."""
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        text = ",".join(value)
    elif isinstance(value, str):
        text = value
    else:
        raise _Problem(path, "must be a list of host:slots such as [node1:4, node2:4]")
    try:
        hosts = parse_hosts(text)
    except UsageError as err:
        raise _Problem(path, str(err).removeprefix("--hosts: ")) from None
    listed = ",".join(f"{h.name}:{h.slots}" for h in hosts)
    slots = min(h.slots for h in hosts)
    return ["--hosts", listed], {"hosts": listed}, len(hosts), slots, f"hosts {listed}"


def out_digest(out: Path) -> str:
    """What tells two campaigns of one name apart, their out folders: part of their
    state folder's name (campaign/state.py) and of a local testbed's Docker names."""
    return hashlib.sha256(str(resolved(out)).encode()).hexdigest()[:8]


def resolved(out: Path) -> Path:
    """The out folder, links resolved; a link loop (refused where the folder is
    written) as it is given, not a traceback."""
    try:
        return out.resolve()
    except RuntimeError:
        return out.absolute()


def _local_name(tb: TestbedPlan, campaign: str, out: Path) -> TestbedPlan:
    """A local testbed's Docker objects (Terraform's `name`, the prefix of its network,
    volume and containers) of its own, as its state folder is: two campaigns, or a
    testbed kept on failure and the next, never meet. A name in `settings:` stays;
    added after the fingerprint, so cells keep their ids."""
    if not tb.deployed or paths.env_dir(tb.env).name != "local" or "name" in dict(tb.settings):
        return tb
    folder = f"{campaign}-{out_digest(out)}/{tb.name}"
    digest = hashlib.sha256(folder.encode()).hexdigest()[:8]
    # environments/local checks ^[a-z][a-z0-9-]{1,30}$: at most 22 + 1 + 8 characters.
    prefix = f"hpcbench-{campaign}"[:22].rstrip("-")
    return replace(tb, settings=tuple(sorted((*tb.settings, ("name", f"{prefix}-{digest}")))))


def _campaign(path: Path, data: Any) -> Campaign:
    _no_number_too_long(data)
    top = _mapping(data, "", TOP_KEYS)
    if not top:
        raise _Problem("testbeds", "the file is empty: give at least a sweep and testbeds")
    name = _text(
        top.get("name", path.stem.lower()),
        "name",
        NAME,
        "a label (lower-case letters, digits, '-')",
    )
    description = _text(top["description"], "description") if "description" in top else ""
    out_text = top.get("out", f"results/{name}")
    out_text = _text(out_text, "out", None, "a folder such as results/slices")
    try:
        check_path(out_text, "out")
    except UsageError as err:
        raise _Problem("out", str(err).removeprefix("out: ")) from None
    if Path(out_text).exists() and not Path(out_text).is_dir():
        raise _Problem("out", f"{out_text} is a file: give the campaign a folder of its own")
    keep = top.get("keep_on_failure", False)
    _flag(keep, "keep_on_failure")
    sweep = _mapping(top.get("sweep"), "sweep")
    raw_testbeds = top.get("testbeds")
    if not isinstance(raw_testbeds, list) or not raw_testbeds:
        raise _Problem("testbeds", "must be a list of testbeds (name, env, settings, ...)")
    if len(raw_testbeds) > MAX_TESTBEDS:
        raise _Problem("testbeds", f"{len(raw_testbeds)} testbeds; at most {MAX_TESTBEDS}")
    testbeds: list[TestbedPlan] = []
    for i, raw in enumerate(raw_testbeds):
        tb = _testbed(i + 1, raw, f"testbeds[{i}]", sweep, keep, Path(out_text))
        tb = _local_name(tb, name, Path(out_text))
        if any(t.name == tb.name for t in testbeds):
            raise _Problem(
                f"testbeds[{i}].name",
                f"{tb.name!r} is used twice; names are the testbeds' result folders",
            )
        testbeds.append(tb)
    total = sum(len(t.cells) for t in testbeds)
    if total > MAX_CELLS:
        raise _Problem("sweep", f"{total} cells; at most {MAX_CELLS}: fewer nodes or batches")
    return Campaign(path, name, description, Path(out_text), tuple(testbeds), dict(sweep))


def load(path: Path | str) -> Campaign:
    """The campaign of a file, fully checked; one UsageError line otherwise."""
    path = Path(path)
    data = read_yaml(path)
    try:
        return _campaign(path, data)
    except _Problem as problem:
        where = f"{problem.path}: " if problem.path else ""
        raise UsageError(f"{path}: {where}{problem.message}") from None


def iter_cells(campaign: Campaign) -> Iterator[tuple[TestbedPlan, Cell]]:
    for tb in campaign.testbeds:
        for cell in tb.cells:
            yield tb, cell


def settings_dict(tb: TestbedPlan) -> Mapping[str, str]:
    return dict(tb.settings)
