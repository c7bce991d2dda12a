"""What a run measures, and so which runs are repeats of one another: one table of
`scale`'s options, read by the store, `--resume`, the report's pooling, a campaign
cell's id and `compare`.

Every option of `scale` decides what a run measures unless NOT_IDENTITY names it, with
why: an option added later is part of every run's identity until someone says
otherwise. Of those that decide it,
- the configuration fields (CONFIG_FIELDS) are fields of each run record of their own;
- the testbed's (PLACE: env, its link, its launcher, a partition's job options) say
  where a run ran: a campaign cell's id holds them through its testbed, and a run's
  record through its env and the label's link and launcher;
- SWEEP's say how many runs of each configuration and in which order: a campaign cell's
  identity (what `--resume` owes it), not one run's;
- every other one is named in the run's method label (method_label): how it was
  measured. The label is part of a run's key (store.run_key), so runs that differ in
  any of them are never repeats of one another.
`compare` pairs configurations across testbeds by all of that less PLACE. The label and
the cell's id keep the forms stores and journals were written in (ADDED_LATER,
LATER_FIELDS), so that those read and resume as they always did.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Mapping
from typing import Any

from hpcbench.core.bench import workload_options
from hpcbench.testbeds import kinds

# Fields of a run record that name its configuration; the method label is one of them,
# and a repeat index completes a run's key (store.run_key).
CONFIG_FIELDS = (
    "env",
    "model",
    "backend",
    "batch",
    "image_size",
    "data",
    "nodes",
    "workers",
    "gpus_per_node",
    "method",
)

# The method label's first fields, always named, in this order: the testbed's link and
# the launcher as resolved, then the workload's timing and device as asked.
METHOD_FIELDS = (
    "link_rate",
    "launcher",
    "warmup",
    "windows",
    "steps",
    "min_window_s",
    "device",
    "amp",
    "threads",
)

# Options added after runs were recorded and campaigns journalled, with the value every
# earlier run was measured with. At that value an option is left out of a run's method
# label and of a campaign cell's identity, so that the labels and cell ids of the
# stores and journals written before it stay as they are and --resume still finds them.
ADDED_LATER: dict[str, str | int] = {
    "step": "eager",
    "decode": "auto",
    "slurm_login": "",
    "slurm_ssh_key": "",
    "slurm_known_hosts": "",
    "slurm_python": "",
    "slurm_bench_dir": "",
    "slurm_setup": "",
    "slurm_cpus_per_task": 0,
    "parallel": "ddp",
    "seq_len": 0,
    "shard_group": 0,
    "tp": 1,
    "grad_accum": 1,
    "activation_checkpoint": "none",
    "compile_backend": "inductor",
}
# The later fields the label named first, in the order it names them (the workload's
# resolved values: a transformer's seq_len is its configuration's where none was asked).
# Every other option the label names follows them, each only where it differs from its
# default, which is what every run had before the label named it.
LATER_FIELDS = ("step", "decode", "parallel", "seq_len", "shard_group")

# Options that do not change what a run measures, and why.
NOT_IDENTITY: dict[str, str] = {
    "help": "prints the help",
    "out": "where the results go",
    "resume": "whether runs already held are skipped",
    "dry_run": "prints the runs, runs nothing",
    "verbose": "echoes the workers' output",
    "timeout": "how long a run may take before it is killed, not how it runs",
    "budget": "how long extra repeats may go on, not how a run runs",
    "probe_budget": "how long the probe may take",
    "hosts": "the testbed itself, as env is: each run's fingerprint names its hosts",
    # A kind's operational keys: a partition's time limit and queue wait, its job
    # folder, how its login node is reached (Kind.operational).
    **{
        flag.removeprefix("--").replace("-", "_"): f"{kind.name}: how long or how it is reached"
        for kind in kinds.registered().values()
        for key, flag in kind.campaign_options.items()
        if key in kind.operational and flag
    },
}

# A sweep's own options: how many runs of each configuration and in which order, and
# the probe before them. They decide what a campaign cell owes, not what a run measures.
SWEEP: dict[str, str] = {
    "repeats": "runs of each configuration",
    "target_ci": "when a configuration has had runs enough",
    "max_repeats": "the most runs of a configuration",
    "seed": "the order the runs go in",
    "no_probe": "whether the probe runs first",
    "probe_max_bytes": "the probe's largest message",
}

# What a campaign cell's own fields give, and its testbed's fingerprint: not among the
# options hashed into its id.
CELL_FIELDS = ("env", "nodes", "batch", "gpus_per_node")

# The options a kind's campaign keys become (a Slurm partition's job options): the
# testbed, as env is. A campaign keeps each partition's runs in a store of its own and
# hashes them into its cells' ids; a run's label leaves them out, so that the labels of
# the runs measured on partitions before stay as they are.
TESTBED_OPTIONS = tuple(
    dict.fromkeys(
        flag.removeprefix("--").replace("-", "_")
        for kind in kinds.registered().values()
        for flag in kind.campaign_options.values()
        if flag and flag.removeprefix("--").replace("-", "_") not in NOT_IDENTITY
    )
)

# Where a run ran rather than how: `compare` pairs runs of two testbeds that differ in
# these alone.
PLACE = ("env", "hosts", "link_rate", "launcher", *TESTBED_OPTIONS)

# The workload's options with the defaults train.py has (bench/workload_options.py).
_WORKLOAD_DEFAULTS = {o.dest: o.default for o in workload_options.OPTIONS}
# The label's fields after METHOD_FIELDS and LATER_FIELDS that the workload's options give.
_WORKLOAD_LATER = tuple(
    d
    for d in _WORKLOAD_DEFAULTS
    if d not in (*CONFIG_FIELDS, *METHOD_FIELDS, *LATER_FIELDS, *NOT_IDENTITY, *SWEEP)
)


def decides(dest: str) -> bool:
    """Whether an option (by dest) is part of what a run measures."""
    return dest not in NOT_IDENTITY and dest not in SWEEP


def target_given(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict[str, Any]:
    """The options of the target (not the workload's, not the configuration's own
    fields, not the testbed's: PLACE) that decide how a run measures, where given other
    than their default: the label names them after the workload's. As parsed; a list as
    its values joined."""
    skip = {*CONFIG_FIELDS, *METHOD_FIELDS, *_WORKLOAD_DEFAULTS, *PLACE, "nodes"}
    given: dict[str, Any] = {}
    for action in parser._actions:
        dest = action.dest
        if not action.option_strings or dest in skip or not decides(dest):
            continue
        value = getattr(args, dest, action.default)
        if value != action.default:
            given[dest] = ",".join(str(v) for v in value) if isinstance(value, list) else value
    return given


def method_label(values: Mapping[str, Any], target: Mapping[str, Any] | None = None) -> str:
    """A run's method label (part of its store key, and a report's line): METHOD_FIELDS
    always, then LATER_FIELDS and the workload's other options where not at their
    default, then the target's options given (target_given), as 'name=value' words. A
    value of a space, a quote or '=' is written as a JSON string (label_fields reads it)."""
    words = [f"{f}={values.get(f)}" for f in METHOD_FIELDS]
    later = {
        **{f: ADDED_LATER[f] for f in LATER_FIELDS},
        **{f: _WORKLOAD_DEFAULTS[f] for f in _WORKLOAD_LATER},
    }
    for field, default in later.items():
        value = values.get(field, default)
        if value != default:
            words.append(f"{field}={_word(value)}")
    words += [f"{field}={_word(value)}" for field, value in (target or {}).items()]
    return " ".join(words)


_PLAIN = re.compile(r'[^\s"=]*')
_LABEL_WORD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^\s"=]*)(?:\s+|$)')


def _word(value: Any) -> str:
    text = str(value)
    return text if _PLAIN.fullmatch(text) else json.dumps(text)


def label_fields(label: str) -> dict[str, str]:
    """A method label's fields, as method_label wrote them (a quoted value unquoted);
    words that are no field of one are left out."""
    fields = {}
    for match in _LABEL_WORD.finditer(label):
        name, value = match.groups()
        fields[name] = json.loads(value) if value.startswith('"') else value
    return fields


def comparable(label: str | None) -> tuple[tuple[str, str], ...] | None:
    """A method label less where the run ran (PLACE): what `compare` pairs runs of two
    testbeds by (None: a store from before the label)."""
    if label is None:
        return None
    return tuple((k, v) for k, v in label_fields(label).items() if k not in PLACE)


def cell_options(args: argparse.Namespace) -> dict[str, Any]:
    """The parsed options that decide what a campaign cell measures, JSON-ready: every
    one but NOT_IDENTITY's and the cell's own fields (CELL_FIELDS); SWEEP's among them.
    An option added after campaigns existed is left out at the value every earlier cell
    was measured with (ADDED_LATER), so that a journal from before it names the same
    cells."""
    skip = {*NOT_IDENTITY, *CELL_FIELDS, "func", "command"}
    out: dict[str, Any] = {}
    for key, value in sorted(vars(args).items()):
        if key in skip or (key in ADDED_LATER and value == ADDED_LATER[key]):
            continue
        if isinstance(value, str | int | float | bool | type(None)):
            out[key] = value
        elif isinstance(value, list | tuple):
            out[key] = [str(v) for v in value]
    return out
