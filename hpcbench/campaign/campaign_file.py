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

What reads it, a module an idea: yaml_loader.py (the text as YAML data), checks.py
(one value at its key path), testbeds.py (a testbed: its kind, testbed_kinds.py; its
sweep, sweep_keys.py; its parts and cells); the data it gives, datatypes.py. Here:
the file's top keys, and load().
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from hpcbench.campaign import checks
from hpcbench.campaign.checks import NAME, Problem
from hpcbench.campaign.datatypes import (
    Budget,
    Campaign,
    Cell,
    Expect,
    SweepPart,
    TestbedPlan,
    iter_cells,
)
from hpcbench.campaign.testbeds import testbed
from hpcbench.campaign.yaml_loader import read_yaml
from hpcbench.core.errors import UsageError
from hpcbench.launchers.parse import check_path
from hpcbench.measure.store import Store

# What the rest of hpcbench takes from here: load(), and the types it gives.
__all__ = [
    "NAME",
    "Campaign",
    "Cell",
    "Expect",
    "SweepPart",
    "TestbedPlan",
    "iter_cells",
    "load",
    "out_digest",
    "read_yaml",
    "resolved",
]

MAX_TESTBEDS = 64
MAX_CELLS = 10_000  # a typo such as nodes: 1-4000, before any work is planned
TOP_KEYS = (
    "name",
    "description",
    "out",
    "keep_on_failure",
    "sweep",
    "testbeds",
    "calibrate_from",
    "advice",
)
ADVICE_KEYS = ("model", "budget", "unit")
BUDGET_UNITS = ("tokens", "samples", "images")


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
    """A testbed whose objects share a machine with others' (the local testbed's Docker
    network, volume and containers, prefixed by its `name`) gets names of its own, as
    its state folder is: two campaigns, or a testbed kept on failure and the next,
    never meet. A name in `settings:` stays; added after the fingerprint, so cells keep
    their ids."""
    setting = tb.kind.named_by
    if not setting or setting in dict(tb.settings):
        return tb
    folder = f"{campaign}-{out_digest(out)}/{tb.name}"
    digest = hashlib.sha256(folder.encode()).hexdigest()[:8]
    # environments/local checks ^[a-z][a-z0-9-]{1,30}$: at most 22 + 1 + 8 characters.
    prefix = f"hpcbench-{campaign}"[:22].rstrip("-")
    return replace(tb, settings=tuple(sorted((*tb.settings, (setting, f"{prefix}-{digest}")))))


def _campaign(path: Path, data: Any) -> Campaign:
    checks.no_number_too_long(data)
    top = checks.mapping(data, "", TOP_KEYS)
    if not top:
        raise Problem("testbeds", "the file is empty: give at least a sweep and testbeds")
    name = checks.text(
        top.get("name", path.stem.lower()),
        "name",
        NAME,
        "a label (lower-case letters, digits, '-')",
    )
    description = checks.text(top["description"], "description") if "description" in top else ""
    out_text = top.get("out", f"results/{name}")
    out_text = checks.text(out_text, "out", None, "a folder such as results/slices")
    try:
        check_path(out_text, "out")
    except UsageError as err:
        raise Problem("out", str(err).removeprefix("out: ")) from None
    if Path(out_text).exists() and not Path(out_text).is_dir():
        raise Problem("out", f"{out_text} is a file: give the campaign a folder of its own")
    keep = top.get("keep_on_failure", False)
    checks.flag(keep, "keep_on_failure")
    sweep = checks.mapping(top.get("sweep"), "sweep")
    raw_testbeds = top.get("testbeds")
    if not isinstance(raw_testbeds, list) or not raw_testbeds:
        raise Problem("testbeds", "must be a list of testbeds (name, env, settings, ...)")
    if len(raw_testbeds) > MAX_TESTBEDS:
        raise Problem("testbeds", f"{len(raw_testbeds)} testbeds; at most {MAX_TESTBEDS}")
    testbeds: list[TestbedPlan] = []
    for i, raw in enumerate(raw_testbeds):
        tb = testbed(i + 1, raw, f"testbeds[{i}]", sweep, keep, Path(out_text), path.parent)
        tb = _local_name(tb, name, Path(out_text))
        if any(t.name == tb.name for t in testbeds):
            raise Problem(
                f"testbeds[{i}].name",
                f"{tb.name!r} is used twice; names are the testbeds' result folders",
            )
        testbeds.append(tb)
    total = sum(len(t.cells) for t in testbeds)
    if total > MAX_CELLS:
        raise Problem("sweep", f"{total} cells; at most {MAX_CELLS}: fewer nodes or batches")
    calibrate = _folders(top.get("calibrate_from"), "calibrate_from")
    return Campaign(
        path,
        name,
        description,
        Path(out_text),
        tuple(testbeds),
        dict(sweep),
        calibrate,
        _advice(top.get("advice")),
    )


def _advice(value: Any) -> Budget | None:
    """`advice:` as `hpcbench advise` writes it: the model and budget it advised for."""
    if value is None:
        return None
    given = checks.mapping(value, "advice", ADVICE_KEYS)
    for key in ADVICE_KEYS:
        if key not in given:
            raise Problem(f"advice.{key}", "missing: advise writes model, budget and unit")
    return Budget(
        checks.text(given["model"], "advice.model"),
        checks.budget(given["budget"], "advice.budget"),
        checks.text(
            given["unit"],
            "advice.unit",
            re.compile("|".join(BUDGET_UNITS)),
            " or ".join(BUDGET_UNITS),
        ),
    )


def _folders(value: Any, path: str) -> tuple[Path, ...]:
    """Results folders (`scale --out` folders) as a list of paths; one that does not
    exist is named, as `--calibrate-from` names it."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise Problem(path, "must be a list of results folders, e.g. [results/earlier]")
    folders = []
    for i, entry in enumerate(value):
        where = f"{path}[{i}]"
        entry = checks.text(entry, where, None, "a results folder such as results/earlier")
        try:
            check_path(entry, where)
        except UsageError as err:
            raise Problem(where, str(err).removeprefix(f"{where}: ")) from None
        store = Store(entry)
        if not store.exists():
            raise Problem(
                where, f"{entry[:80]} holds no results.jsonl: give a `scale --out` folder"
            )
        store.check_readable()  # a link, a FIFO or an oversized file there: named now
        folders.append(Path(entry))
    return tuple(folders)


def calibrated(campaign: Campaign, folders: list[str]) -> Campaign:
    """The campaign with more results folders for its forecast (`--calibrate-from`),
    each checked as `calibrate_from:` is; one UsageError line otherwise."""
    try:
        more = _folders(folders, "--calibrate-from")
    except Problem as problem:
        raise UsageError(f"{problem.path}: {problem.message}") from None
    return replace(campaign, calibrate_from=campaign.calibrate_from + more)


def load(path: Path | str) -> Campaign:
    """The campaign of a file, fully checked; one UsageError line otherwise."""
    path = Path(path)
    data = read_yaml(path)
    try:
        return _campaign(path, data)
    except Problem as problem:
        where = f"{problem.path}: " if problem.path else ""
        raise UsageError(f"{path}: {where}{problem.message}") from None
