"""Hostile input, tried as a user would give it: `python -m hpcbench` once a case, each
in a folder of its own with a state folder of its own (HPCBENCH_STATE), bounded by a
timeout, with stand-ins first on PATH for every tool that would create or launch
something (terraform, tofu, ansible-playbook, docker, ssh, sbatch, srun, horovodrun,
torchrun, ...): each notes that it ran and fails.

A case expects one of two things: `refused`, exit status 2 with one line on stderr that
names what to fix (the key, option or file the case names), or `taken`, exit status 0.
What came back is counted as:

    refused, taken   as the case expected
    wrong message    refused in one line, but naming something else
    traceback        "Traceback" in the output, or an exit status other than 0 and 2
    hang             the case's timeout passed
    silent           exit status 0 where a refusal was expected; or a stand-in ran, or
                     a file outside the case's folder changed

The groups: every campaign key with values no check may take (`campaign plan`), hostile
YAML documents, command options, files planted in a results and a state folder, and
every field of a campaign's journal and a testbed's store made wrong. The planted files
and fields start from a real campaign that ran on this machine (`env: localhost`, one
tiny run). Lost terminals and Ctrl-C with Slurm jobs in flight are not tried here: they
need a terminal and a cluster, and are the tests of tests/integration/test_lost_terminal.py,
tests/integration/test_signals.py and tests/e2e/test_slurm_cleanup.py.

    python evaluation/hostile.py [--group NAME] [--show bad|all] [--keep DIR]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hpcbench.campaign import sweep_keys  # noqa: E402
from hpcbench.campaign.testbeds import EXPECT_KEYS, HARDWARE_KEYS  # noqa: E402
from hpcbench.measure import scale_options  # noqa: E402
from hpcbench.testbeds.kinds.slurm import Slurm  # noqa: E402

TIMEOUT_S = 60  # a case that takes longer hangs (a plan takes about a second)
STANDINS = (
    "terraform",
    "tofu",
    "ansible-playbook",
    "ansible",
    "docker",
    "ssh",
    "scp",
    "rsync",
    "sbatch",
    "srun",
    "salloc",
    "squeue",
    "scancel",
    "sinfo",
    "scontrol",
    "sacct",
    "horovodrun",
    "torchrun",
    "mpirun",
    "enroot",
)
REFUSED, TAKEN = "refused", "taken"
EITHER = "refused or taken"  # both are right: the case holds no hang, traceback or leak
WARNED = "taken, saying so"  # exit status 0 with a line naming the file, or refused


@dataclass
class Case:
    group: str
    name: str
    argv: list[str]  # hpcbench's arguments; "{dir}" is the case's folder
    expect: str  # REFUSED or TAKEN
    names: tuple[str, ...] = ()  # a refusal's line holds one of these
    setup: Callable[[Path], None] | None = None  # makes the case's files in its folder
    # A file whose bytes must be the same after the case (a link's target, say).
    unchanged: tuple[str, ...] = ()
    # What a case taken must have made of its folder and said on stdout: why not (a
    # wrong result reported as right counts as silent), or None.
    check: Callable[[Path, str], str | None] | None = None
    # A folder of the case's put first on PATH, before the stand-ins (a cluster's own).
    path_first: str = ""
    outcome: str = ""
    line: str = ""


# --- a campaign file and the values no check may take --------------------------------

BASE: dict[str, Any] = {
    "name": "hostile",
    "sweep": {"model": "resnet18", "image_size": 32, "batch": [4, 8], "nodes": [1, 2]},
    "testbeds": [
        {
            "name": "built",
            "env": "local",
            "settings": {"node_count": 2, "link_rate": "1gbit", "cpus_per_node": 0.5},
            "expect": {"images_per_s": 10, "deploy": "2m"},
            "hardware": {"link": "1gbit", "transport": "tcp", "link_efficiency": 0.5},
        },
        {
            "name": "part",
            "slurm": {
                "partition": "gpu",
                "nodes": 2,
                "gpus_per_node": 1,
                "time": "10m",
                "container_image": "nvcr.io#nvidia/pytorch:24.05-py3",
            },
        },
        {"name": "mine", "hosts": ["h1:1", "h2:1"]},
    ],
}


class Raw(str):
    """A YAML value written as it stands (a tag, an alias, a date)."""


def raw_representer(dumper: yaml.SafeDumper, data: Raw) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", f"@@RAW@@{data}@@")


class Dumper(yaml.SafeDumper):
    pass


Dumper.add_representer(Raw, raw_representer)


def dump(doc: dict) -> str:
    text = yaml.dump(doc, Dumper=Dumper, sort_keys=False, width=10_000)
    while "'@@RAW@@" in text:
        start = text.index("'@@RAW@@")
        end = text.index("@@'", start)
        text = text[:start] + text[start + 8 : end] + text[end + 3 :]
    return text


# Values no key of a campaign may hold: a map where a value goes, a list of lists,
# bytes, a set, a date (YAML reads it as one), control characters, a circular alias.
ANY_KEY_BAD = {
    "a map": {"x": 1},
    "a list of lists": [[1, 2]],
    "bytes": Raw("!!binary aGk="),
    "a set": Raw("!!set {a: null}"),
    "a date": Raw("2024-01-01"),
    "a newline": "a\nb",
    "an escape": "\x1b[31mred",
    "a NUL": "a\x00b",
}
COUNT_BAD = {"zero or less": -1, "a fraction": 1.5, "a word": "many", "NaN": float("nan")}
DURATION_BAD = {"negative": "-5m", "a word": "soon", "no unit": "5 parsecs"}
NUMBER_BAD = {"NaN": float("nan"), "infinity": float("inf"), "negative": -1, "a word": "x"}
RATE_BAD = {"zero": "0gbit", "a word": "fast", "negative": "-1gbit"}
CHOICE_BAD = {"no such choice": "nosuch"}


def sweep_key_values() -> dict[str, dict[str, Any]]:
    """Every key `scale` takes in a campaign's sweep, with what it may not hold."""
    out: dict[str, dict[str, Any]] = {}
    for action in scale_options.scale_parser()._actions:
        key = action.dest
        if not action.option_strings or key in sweep_keys.RESERVED:
            continue
        bad = dict(ANY_KEY_BAD)
        kind = getattr(action.type, "__name__", "")
        if action.choices:
            bad |= CHOICE_BAD
        elif action.nargs == 0:
            bad |= {"a word": "perhaps", "a number": 2}
        elif key in ("nodes", "batch"):
            bad |= {"zero": 0, "negative": -2, "a word": "all", "a backward range": "4-2"}
        elif kind in ("timeout", "slurm-time", "slurm-queue-wait", "budget", "probe-budget"):
            bad |= DURATION_BAD
        elif kind in ("min-window-s", "target-ci", "fusion-threshold-mb", "bucket-cap-mb"):
            bad |= NUMBER_BAD
        elif kind in (
            "gpus-per-node",
            "image-size",
            "seq-len",
            "shard-group",
            "data-workers",
            "warmup",
            "windows",
            "steps",
            "threads",
            "repeats",
            "max-repeats",
            "slurm-gpus",
            "slurm-cpus-per-task",
        ):
            bad |= COUNT_BAD
        out[key] = bad
    return out


# A setting is a Terraform variable: `campaign run` asks Terraform (tofu plan) before it
# creates anything. Fewer values each: a plan takes seconds.
SOME_BAD = {k: ANY_KEY_BAD[k] for k in ("a map", "a newline", "a NUL", "a date")}
SETTINGS_BAD = {
    "node_count": {**SOME_BAD, **COUNT_BAD, "too many": 17, "none": 0},
    "link_rate": {**SOME_BAD, **RATE_BAD},
    "cpus_per_node": {**SOME_BAD, "a word": "x", "negative": -1, "none": 0},
    "link_capacity_mbps": {"NaN": float("nan"), "none": 0, "the least": 5e-324},
}
# Ansible variables are any data group_vars hold (text over lines, lists of lists):
# only what JSON cannot hold is refused.
ANSIBLE_BAD = {k: ANY_KEY_BAD[k] for k in ("bytes", "a set", "a date")}
SLURM_COUNTS = ("gpus_per_node", "cpus_per_task", "nodes")
SLURM_DURATIONS = ("time", "queue_wait", "container_import")
HARDWARE_BAD = {
    "link": {**ANY_KEY_BAD, **RATE_BAD},
    "transport": {**ANY_KEY_BAD, **CHOICE_BAD},
    "intra_node": {**ANY_KEY_BAD, **CHOICE_BAD},
    "link_efficiency": {**ANY_KEY_BAD, **NUMBER_BAD, "above one": 1.5, "none": 0},
    "accelerator": dict(ANY_KEY_BAD),  # a name: the report's, and the forecast's match
}
EXPECT_BAD = {
    "images_per_s": {**ANY_KEY_BAD, **NUMBER_BAD, "none": 0},
    "tokens_per_s": {**ANY_KEY_BAD, **NUMBER_BAD, "none": 0},
    "deploy": {**ANY_KEY_BAD, **DURATION_BAD},
    "verify": {**ANY_KEY_BAD, **DURATION_BAD},
    "destroy": {**ANY_KEY_BAD, **DURATION_BAD},
}


def with_value(path: tuple[Any, ...], value: Any) -> dict:
    doc = copy.deepcopy(BASE)
    here: Any = doc
    for step in path[:-1]:
        here = here.setdefault(step, {}) if isinstance(step, str) else here[step]
    here[path[-1]] = value
    return doc


def plan_case(
    group: str, name: str, doc: dict | str, expect: str, *names: str, action: str = "plan"
) -> Case:
    """`campaign plan` of the document; `campaign run` where the check is the run's own
    (a deployed testbed's settings: Terraform's validations, in the plan `deploy` makes
    before anything is created)."""
    text = doc if isinstance(doc, str) else dump(doc)

    def setup(folder: Path) -> None:
        (folder / "c.yaml").write_text(text)

    return Case(group, name, ["campaign", action, "{dir}/c.yaml"], expect, names, setup)


def campaign_key_cases() -> list[Case]:
    cases = [plan_case("campaign keys", "the file as it stands", BASE, TAKEN)]
    for key, bad in sweep_key_values().items():
        for what, value in bad.items():
            doc = with_value(("sweep", key), value)
            cases.append(plan_case("campaign keys", f"sweep.{key}: {what}", doc, REFUSED, key))
    for key, bad in SETTINGS_BAD.items():
        for what, value in bad.items():
            doc = with_value(("testbeds", 0, "settings", key), value)
            cases.append(
                plan_case(
                    "campaign keys", f"settings.{key}: {what}", doc, REFUSED, key, action="run"
                )
            )
    for key in Slurm.campaign_options:
        bad = dict(ANY_KEY_BAD)
        if key in SLURM_COUNTS:
            bad |= COUNT_BAD
        if key in SLURM_DURATIONS:
            bad |= DURATION_BAD
        for what, value in bad.items():
            if key in ("sbatch", "container_mounts") and what == "a list of lists":
                continue  # a list is what they take: its items are checked below
            doc = with_value(("testbeds", 1, "slurm", key), value)
            cases.append(plan_case("campaign keys", f"slurm.{key}: {what}", doc, REFUSED, key))
    # argparse reads `--x=--` as no value at all (an empty list where one text goes):
    # every key that becomes an option is refused with '--', naming the key.
    for key in sweep_key_values():
        doc = with_value(("sweep", key), "--")
        cases.append(plan_case("campaign keys", f"sweep.{key}: --", doc, REFUSED, key))
    for key, flag in Slurm.campaign_options.items():
        if flag:
            doc = with_value(("testbeds", 1, "slurm", key), "--")
            cases.append(plan_case("campaign keys", f"slurm.{key}: --", doc, REFUSED, key))
    for flag in ("--job-name=mine", "--deadline=now+1000days", "--output=x", "--parsable"):
        doc = with_value(("testbeds", 1, "slurm", "sbatch"), [flag])
        cases.append(plan_case("campaign keys", f"slurm.sbatch: {flag}", doc, REFUSED, "sbatch"))
    assert set(HARDWARE_BAD) == set(HARDWARE_KEYS), "a hardware key without its cases"
    for key, bad in HARDWARE_BAD.items():
        for what, value in bad.items():
            doc = with_value(("testbeds", 0, "hardware", key), value)
            cases.append(plan_case("campaign keys", f"hardware.{key}: {what}", doc, REFUSED, key))
    assert set(EXPECT_BAD) == set(EXPECT_KEYS), "an expect key without its cases"
    for key, bad in EXPECT_BAD.items():
        for what, value in bad.items():
            doc = with_value(("testbeds", 0, "expect", key), value)
            cases.append(plan_case("campaign keys", f"expect.{key}: {what}", doc, REFUSED, key))
    for what, value in ANSIBLE_BAD.items():
        doc = with_value(("testbeds", 0, "ansible"), {"stack_mode": value})
        cases.append(plan_case("campaign keys", f"ansible value: {what}", doc, REFUSED, "ansible"))
    for key in ("name", "title"):
        for what, value in ANY_KEY_BAD.items():
            doc = with_value(("testbeds", 0, key), value)
            cases.append(plan_case("campaign keys", f"testbed {key}: {what}", doc, REFUSED, key))
    for what, value in {**ANY_KEY_BAD, "empty": ""}.items():
        doc = with_value(("name",), value)
        cases.append(plan_case("campaign keys", f"campaign name: {what}", doc, REFUSED, "name"))
    doc = copy.deepcopy(BASE)
    doc["sweep"]["max-repeats"], doc["sweep"]["max_repeats"] = 4, 5
    cases.append(plan_case("campaign keys", "two spellings of one key", doc, REFUSED, "max"))
    doc = copy.deepcopy(BASE)
    del doc["testbeds"][1]["slurm"]["container_image"]
    doc["testbeds"][1]["slurm"]["container_mounts"] = ["/a:/b"]
    cases.append(plan_case("campaign keys", "mounts without an image", doc, REFUSED, "mount"))
    doc = with_value(("nosuch",), 1)
    cases.append(plan_case("campaign keys", "an unknown top-level key", doc, REFUSED, "nosuch"))
    doc = with_value(("testbeds", 2, "nosuch"), 1)
    cases.append(plan_case("campaign keys", "an unknown testbed key", doc, REFUSED, "nosuch"))
    doc = copy.deepcopy(BASE)
    doc["testbeds"][1]["name"] = "built"
    cases.append(plan_case("campaign keys", "two testbeds of one name", doc, REFUSED, "built"))
    return cases


# --- hostile YAML documents -------------------------------------------------------------


def yaml_cases() -> list[Case]:
    good = dump(BASE)
    texts = {
        "an empty file": "",
        "a list, not a map": "- 1\n- 2\n",
        "a tab in the indentation": good.replace("\n  model:", "\n\tmodel:", 1),
        "a key twice": good + "name: again\n",
        "a circular alias": "a: &x [*x]\n" + good,
        "an alias bomb": "a: &a [x, x, x, x, x, x, x, x, x]\n"
        + "".join(
            f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n"
            for p, c in zip("abcdefgh", "bcdefghi", strict=True)
        )
        + good,
        "seventy nested maps": "x: " + "{a: " * 70 + "1" + "}" * 70 + "\n" + good,
        "a python tag": "x: !!python/object/apply:os.system ['touch PWNED']\n" + good,
        "an unclosed quote": good + 'x: "open\n',
    }
    cases = [plan_case("yaml", name, text, REFUSED, "c.yaml") for name, text in texts.items()]

    def planted(kind: str) -> Callable[[Path], None]:
        def setup(folder: Path) -> None:
            target = folder / "c.yaml"
            if kind == "fifo":
                os.mkfifo(target)
            elif kind == "folder":
                target.mkdir()
            elif kind == "link loop":
                target.symlink_to(target)
            elif kind == "bytes":
                target.write_bytes(b"\xff\xfe\x00name: x\n" * 10)
            elif kind == "2 MB":
                target.write_text(good + "# " + "x" * 2_000_000 + "\n")
            elif kind == "/dev/zero":
                target.symlink_to("/dev/zero")

        return setup

    for kind in ("fifo", "folder", "link loop", "bytes", "2 MB", "/dev/zero"):
        argv = ["campaign", "plan", "{dir}/c.yaml"]
        cases.append(Case("yaml", f"the file is {kind}", argv, REFUSED, ("c.yaml",), planted(kind)))
    return cases


# --- command options --------------------------------------------------------------------


def option_cases() -> list[Case]:
    def c(name: str, argv: list[str], *names: str, setup=None, unchanged=()) -> Case:
        return Case("options", name, argv, REFUSED, names, setup, unchanged)

    dry = ["scale", "--env", "localhost", "--dry-run", "--out", "{dir}/out", "--nodes", "1"]
    plan = ["predict", "--model", "resnet50", "--batch", "32", "--workers", "1-8"]
    plan += ["--gpus-per-node", "4", "--single-worker-ips", "400", "--link", "10gbit"]
    cases = [
        Case("options", "a plain dry run", [*dry, "--batch", "4"], TAKEN),
        Case("options", "a plain prediction", plan, TAKEN),
        c("--nodes 0", [*dry, "--nodes", "0"], "--nodes"),
        c("--nodes 4-2", [*dry, "--nodes", "4-2"], "--nodes"),
        c("--nodes 1-100000", [*dry, "--nodes", "1-100000"], "--nodes"),
        c("--batch -4", [*dry, "--batch=-4"], "--batch"),
        c("--batch x", [*dry, "--batch", "x"], "--batch"),
        c("--repeats 0", [*dry, "--repeats", "0"], "--repeats"),
        c("--max-repeats below --repeats", [*dry, "--repeats", "3", "--max-repeats", "2"], "max"),
        c("--timeout -1", [*dry, "--timeout=-1"], "--timeout"),
        c("--budget soon", [*dry, "--budget", "soon"], "--budget"),
        c("--target-ci nan", [*dry, "--target-ci", "nan"], "--target-ci"),
        c("--image-size 1e309", [*dry, "--image-size", "1e309"], "--image-size"),
        c("--data -x", [*dry, "--data=-x"], "--data"),
        c("--data missing", [*dry, "--data", "{dir}/missing"], "--data"),
        c("--model nosuch", [*dry, "--model", "nosuch"], "model"),
        c("--sbatch --job-name", [*dry, "--sbatch=--job-name=mine"], "--sbatch"),
        c("--sbatch --deadline", [*dry, "--sbatch=--deadline=now+1000days"], "--sbatch"),
        c("--env nosuch", ["scale", "--env", "nosuch", "--dry-run"], "nosuch"),
        c("--out a FIFO", [*dry, "--out", "{dir}/fifo"], "fifo", setup=_fifo("fifo")),
        c("--out a file", [*dry, "--out", "{dir}/file"], "file", setup=_file("file")),
        c("predict --workers 0", [*plan, "--workers", "0"], "--workers"),
        c("predict --link 0gbit", [*plan, "--link", "0gbit"], "--link"),
        c("predict --link fast", [*plan, "--link", "fast"], "--link"),
        c("predict --single-worker-ips nan", [*plan, "--single-worker-ips", "nan"], "ips"),
        c("predict --link-efficiency 2", [*plan, "--link-efficiency", "2"], "efficiency"),
        c("predict --model nosuch", [*plan, "--model", "nosuch"], "model"),
        c("deploy --env nosuch", ["deploy", "--env", "nosuch"], "nosuch"),
        c("deploy node_count=17", ["deploy", "--env", "local", "--var", "node_count=17"], "node"),
        c("deploy link_rate=fast", ["deploy", "--env", "local", "--var", "link_rate=fast"], "link"),
        c("deploy --var x", ["deploy", "--env", "local", "--var", "x"], "--var"),
        c("report of nothing", ["report", "--out", "{dir}/none"], "none"),
        c("report of a FIFO", ["report", "--out", "{dir}/fifo"], "fifo", setup=_fifo("fifo")),
        c("compare of nothing", ["compare", "{dir}/a", "{dir}/b"], "{dir}/a"),
        c("export of nothing", ["export", "--mlperf", "{dir}/pkg", "--out", "{dir}/none"], "none"),
        c("campaign plan of nothing", ["campaign", "plan", "{dir}/none.yaml"], "none.yaml"),
        c("campaign status of nothing", ["campaign", "status", "{dir}/none.yaml"], "none.yaml"),
        c("campaign destroy of nothing", ["campaign", "destroy", "{dir}/none.yaml"], "none.yaml"),
        c("an unknown command", ["nosuch"], "nosuch"),
        c("an unknown option", ["scale", "--nosuch"], "--nosuch"),
    ]
    return cases


def dash_cases() -> list[Case]:
    """Every option of every command that takes a value, given `--` as it (`--x=--`,
    which argparse would read as no value): refused, naming the option."""
    from hpcbench import cli

    cases = []

    def walk(parser: argparse.ArgumentParser, words: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk(child, [*words, name])
            elif action.option_strings and action.nargs != 0 and action.dest != "help":
                flag = max(action.option_strings, key=len)
                name = f"{' '.join(words)} {flag}=--"
                cases.append(Case("options", name, [*words, f"{flag}=--"], REFUSED, (flag,)))

    walk(cli.build_parser(), [])
    return cases


def _fifo(name: str) -> Callable[[Path], None]:
    return lambda folder: os.mkfifo(folder / name)


def _file(name: str) -> Callable[[Path], None]:
    return lambda folder: (folder / name).write_text("not a folder\n")


# --- files planted in a campaign's results and state folders ----------------------------

RUN_SWEEP = {
    "model": "resnet18",
    "image_size": 32,
    "batch": [4],
    "nodes": [1],
    "repeats": 1,
    "warmup": 1,
    "windows": 2,
    "steps": 2,
    "data_workers": 0,
    "device": "cpu",
    "threads": 1,
    "no_probe": True,
    "timeout": 300,
}


def ran_campaign(work: Path) -> Path:
    """A campaign folder that a real run made on this machine: out/, state/, c.yaml."""
    seed = work / "seed"
    seed.mkdir()
    doc = {"name": "ran", "out": "out", "sweep": RUN_SWEEP}
    doc["testbeds"] = [{"name": "here", "env": "localhost"}]
    (seed / "c.yaml").write_text(yaml.safe_dump(doc))
    proc = subprocess.run(
        [sys.executable, "-m", "hpcbench", "campaign", "run", "c.yaml"],
        cwd=seed,
        env=environ(seed, with_standins=False),
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0 or not (seed / "out" / "here" / "results.jsonl").is_file():
        raise SystemExit(f"the seed campaign did not run:\n{proc.stdout[-2000:]}{proc.stderr}")
    return seed


def plant(kind: str, where: str) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        path = folder / where
        if kind in ("a FIFO", "a folder", "a link out", "a link to /dev/zero"):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
        if kind == "a FIFO":
            os.mkfifo(path)
        elif kind == "a folder":
            path.mkdir()
        elif kind == "a link out":
            outside = folder / "outside"
            outside.mkdir(exist_ok=True)
            (outside / "keep").write_text("the user's\n")
            path.symlink_to(outside / "keep" if where.endswith(".jsonl") else outside)
        elif kind == "a link to /dev/zero":
            path.symlink_to("/dev/zero")
        elif kind == "bytes":
            path.write_bytes(b"\xff\x00\xfe garbage \x1b[2J\n" * 50)
        elif kind == "a 2 MB line":
            with path.open("a") as f:
                f.write('{"kind": "run", "x": "' + "y" * 2_000_000 + '"}\n')
        elif kind == "a torn last line":
            with path.open("a") as f:
                f.write('{"kind": "run", "status": "o')
        elif kind == "another campaign's":
            lines = path.read_text().splitlines()
            swapped = [json.dumps({**json.loads(x), "campaign": "someone-else"}) for x in lines]
            path.write_text("\n".join(swapped) + "\n")

    return setup


COMMANDS: dict[str, list[str]] = {
    "campaign status": ["campaign", "status", "{dir}/c.yaml"],
    "campaign report": ["campaign", "report", "{dir}/c.yaml"],
    "campaign run --resume": ["campaign", "run", "{dir}/c.yaml", "--resume", "--dry-run"],
    "report": ["report", "--out", "{dir}/out/here"],
}


def planted_cases() -> list[Case]:
    cases: list[Case] = []
    for name, argv in COMMANDS.items():
        cases.append(Case("planted files", f"{name}: as the run left it", argv, TAKEN))
    journal, store = "out/results.jsonl", "out/here/results.jsonl"
    # Not a file to read: refused. Lines that are not records (bytes, a record without
    # its fields): each skipped, saying so, as a torn line after a crash is.
    kinds = {
        "a FIFO": REFUSED,
        "a folder": REFUSED,
        "a link out": REFUSED,
        "a link to /dev/zero": REFUSED,
        "bytes": WARNED,
        "a 2 MB line": WARNED,
    }
    for where in (journal, store):
        for kind, expect in kinds.items():
            for name, argv in COMMANDS.items():
                if where == journal and name == "report":
                    continue  # `report` reads the testbed's store alone
                if where == store and name == "campaign status":
                    expect = EITHER  # the status is the journal's; it reads no store
                cases.append(
                    Case(
                        "planted files",
                        f"{name}: {where} is {kind}",
                        argv,
                        expect,
                        ("results.jsonl",),
                        plant(kind, where),
                        unchanged=("outside/keep",) if kind == "a link out" else (),
                    )
                )
        for name, argv in COMMANDS.items():
            if where == journal and name == "report":
                continue
            # A crash mid-append leaves a torn last line: read past, as the append was.
            cases.append(
                Case(
                    "planted files",
                    f"{name}: {where} ends in a torn line",
                    argv,
                    TAKEN,
                    setup=plant("a torn last line", where),
                )
            )
    for name in ("campaign status", "campaign report", "campaign run --resume"):
        cases.append(
            Case(
                "planted files",
                f"{name}: the journal is another campaign's",
                COMMANDS[name],
                REFUSED,
                ("results.jsonl", "campaign"),
                plant("another campaign's", journal),
            )
        )
    # Refused, or written around: never through (nothing lands outside).
    for where, name in (("out/logs", "campaign run --resume"), ("out/plots", "report")):
        argv = COMMANDS[name] if name != "campaign run --resume" else COMMANDS[name][:-1]
        cases.append(
            Case(
                "planted files",
                f"{name}: {where} is a link out",
                argv,
                EITHER,
                (where.split("/")[-1],),
                plant("a link out", where),
                unchanged=("outside",),
            )
        )
    compare = ["compare", "{dir}/out/here", "{dir}/out/here", "--output", "{dir}/link.md"]

    def link_md(folder: Path) -> None:
        (folder / "mine.md").write_text("the user's\n")
        (folder / "link.md").symlink_to(folder / "mine.md")

    cases.append(
        Case(
            "planted files",
            "compare --output a link",
            compare,
            REFUSED,
            ("link.md",),
            link_md,
            ("mine.md",),
        )
    )
    compare_fifo = [*compare[:-1], "{dir}/fifo.md"]
    cases.append(
        Case(
            "planted files",
            "compare --output a FIFO",
            compare_fifo,
            REFUSED,
            ("fifo",),
            _fifo("fifo.md"),
        )
    )
    # One run, exported once however its folder is named or copied: an MLPerf package of
    # duplicates would meet a run count with runs that are not there.
    here = "{dir}/out/here"
    spellings = [here, f"{here}/", "{dir}/out/../out/here", "{dir}/here-link", "{dir}/copy"]

    def named_twice(folder: Path) -> None:
        (folder / "here-link").symlink_to(folder / "out" / "here")
        shutil.copytree(folder / "out" / "here", folder / "copy")

    def exported_once(folder: Path, _out: str) -> str | None:
        runs = [json.loads(x) for x in (folder / "out/here/results.jsonl").read_text().splitlines()]
        held = sum(1 for r in runs if r.get("kind") == "run" and r.get("status") == "ok")
        made = sorted(p.name for p in (folder / "pkg").rglob("result_*.txt"))
        return None if len(made) == held else f"{len(made)} result files of {held} run(s)"

    argv = ["export", "--mlperf", "{dir}/pkg", *(a for d in spellings for a in ("--out", d))]
    cases.append(
        Case(
            "planted files",
            "export --mlperf: one folder named five ways",
            argv,
            TAKEN,
            setup=named_twice,
            check=exported_once,
        )
    )
    # This machine's testbed books no lease: a file at a lease's place is no lease of
    # its; refused, or left alone (the leased kinds' own: tests/unit/test_planted_files.py).
    for kind in ("a FIFO", "bytes", "a folder"):
        for name in ("campaign status", "campaign destroy"):
            argv = ["campaign", name.split()[1], "{dir}/c.yaml"]
            cases.append(
                Case(
                    "planted files",
                    f"{name}: a lease is {kind}",
                    argv,
                    EITHER,
                    ("x.json", "lease"),
                    plant_lease(kind),
                )
            )
    return cases


def plant_lease(kind: str) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        campaigns = folder / "state" / "campaigns"
        held = next(campaigns.iterdir())
        leases = held / "here" / "leases"
        leases.mkdir(parents=True, exist_ok=True)
        plant(kind, str((leases / "x.json").relative_to(folder)))(folder)

    return setup


# --- every field of the journal and the store made wrong --------------------------------

FIELD_BAD = {"a list": [1, 2], "a map": {"a": 1}, "text": "x", "negative": -7, "NaN": "NaN"}


def field_cases(seed: Path) -> list[Case]:
    cases: list[Case] = []
    for where in ("out/results.jsonl", "out/here/results.jsonl"):
        records = [json.loads(x) for x in (seed / where).read_text().splitlines()]
        keys = sorted({(r.get("kind", ""), k) for r in records for k in r})
        for kind, key in keys:
            for what, value in FIELD_BAD.items():

                def setup(folder: Path, where=where, kind=kind, key=key, value=value) -> None:
                    path = folder / where
                    lines = [json.loads(x) for x in path.read_text().splitlines()]
                    for r in lines:
                        if r.get("kind", "") == kind and key in r:
                            r[key] = value
                    text = "\n".join(json.dumps(r) for r in lines) + "\n"
                    path.write_text(text.replace('"NaN"', "NaN"))

                for name, argv in COMMANDS.items():
                    if where.startswith("out/results") and name == "report":
                        continue
                    cases.append(
                        Case(
                            "journal and store fields",
                            f"{name}: {where} {kind or '-'}.{key} is {what}",
                            argv,
                            EITHER,
                            setup=setup,
                        )
                    )
    return cases


# --- a campaign killed with a Slurm job in the queue -----------------------------------

KILLED_CAMPAIGN = """\
name: jobs
out: {folder}/out
sweep: {{model: resnet18, image_size: 32, batch: [4], nodes: [1, 2], repeats: 1,
         backend: ddp, device: cpu, timeout: 60}}
testbeds:
  - name: part
    slurm: {{partition: p, nodes: 2, job_dir: {folder}/jobdir, time: 10m, queue_wait: 10m}}
"""


def killed_with_a_job(trigger: str) -> Callable[[Path], None]:
    """`campaign run` on a stood-in cluster (tests/standins/slurm.py) whose next job
    waits in the queue, sent SIGKILL by the cluster at `trigger`: as squeue first polls
    the job (kill-on-poll), or once sbatch queued it, before its id came back
    (kill-in-sbatch). The job stays PENDING in the cluster's folder, slurm/."""

    def setup(folder: Path) -> None:
        from tests.standins import slurm as standin

        fake = folder / "slurm"
        fake.mkdir()
        bin_dir = standin.install(fake)
        (folder / "c.yaml").write_text(KILLED_CAMPAIGN.format(folder=folder))
        (fake / "queue").touch()
        (fake / "kill-signal").write_text("KILL")
        env = environ(folder, with_standins=False)
        env["PATH"] = f"{bin_dir}:{env['PATH']}"
        line = f'echo $$ > {fake / trigger}; exec "$@"'
        argv = [sys.executable, "-m", "hpcbench", "campaign", "run", str(folder / "c.yaml")]
        subprocess.run(
            ["bash", "-c", line, "bash", *argv],
            cwd=folder,
            env=env,
            capture_output=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
        if (fake / trigger).exists():
            raise SystemExit(f"the stood-in cluster never sent its SIGKILL ({trigger})")

    return setup


def _jobs(folder: Path) -> dict[str, str]:
    jobs = folder / "slurm" / "jobs"
    return {p.name: (p / "state").read_text().strip() for p in jobs.iterdir()}


def queued_job_cases() -> list[Case]:
    """SIGKILL (or the OOM killer, a login node's reboot) while a job waits in the queue:
    `campaign status` names the job, `campaign destroy` cancels it, confirmed."""

    def named(folder: Path, out: str) -> str | None:
        # By its id, or by its name where sbatch's answer never came back.
        pending = [j for j, state in _jobs(folder).items() if state == "PENDING"]
        names = {j: (folder / "slurm" / "jobs" / j / "name").read_text().strip() for j in pending}
        missing = [j for j in pending if f"slurm job {j} " not in out and names[j] not in out]
        return f"status names no job {missing}" if missing or not pending else None

    def cancelled(folder: Path, _out: str) -> str | None:
        left = [j for j, state in _jobs(folder).items() if state in ("PENDING", "RUNNING")]
        return f"jobs {left} still in the queue" if left else None

    cases = []
    for trigger in ("kill-on-poll", "kill-in-sbatch"):
        status = ["campaign", "status", "{dir}/c.yaml"]
        destroy = ["campaign", "destroy", "{dir}/c.yaml"]
        for what, argv, check in (("status", status, named), ("destroy", destroy, cancelled)):
            cases.append(
                Case(
                    "slurm jobs",
                    f"campaign {what} after a SIGKILL ({trigger})",
                    argv,
                    TAKEN,
                    setup=killed_with_a_job(trigger),
                    check=check,
                    path_first="slurm/bin",
                )
            )
    return cases


# --- running a case ---------------------------------------------------------------------


def environ(folder: Path, with_standins: bool = True, first: str = "") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HPCBENCH_")}
    env["HPCBENCH_STATE"] = str(folder / "state")
    env["PYTHONPATH"] = str(REPO)
    env["COLUMNS"] = "200"
    # The providers' mirror `make tools` built, as make sets it (Makefile, TF_CLI_CONFIG_FILE).
    tofurc = Path.home() / ".cache" / "hpcbench" / "tools" / "tofurc"
    if tofurc.is_file():
        env.setdefault("TF_CLI_CONFIG_FILE", str(tofurc))
    if with_standins:
        bin_dir = folder.parent / "standins"
        env["PATH"] = f"{bin_dir}:{env['PATH']}"
        env["HOSTILE_RAN"] = str(folder / ".ran")
    if first:
        env["PATH"] = f"{folder / first}:{env['PATH']}"
    return env


# What only reads or plans: the real tool answers (a deploy's settings are checked by
# Terraform's own validations, in `tofu plan`). Anything else is a launch.
READ_ONLY = {
    "tofu": "init plan validate version output show providers",
    "terraform": "init plan validate version output show providers",
    "docker": "info version ps images inspect network",
    "sbatch": "--test-only",
}


def make_standins(work: Path) -> None:
    bin_dir = work / "standins"
    bin_dir.mkdir(exist_ok=True)
    for name in STANDINS:
        real = shutil.which(name) or ""
        if name == "tofu" and not real:
            continue  # hpcbench takes terraform where no tofu is installed
        allowed = READ_ONLY.get(name, "")
        passes = "".join(f'  {word}) exec "{real}" "$@" ;;\n' for word in allowed.split() if real)
        script = (
            f'#!/bin/sh\ncase "$1" in\n{passes}esac\necho "{name} $*" >> "$HOSTILE_RAN"\nexit 1\n'
        )
        path = bin_dir / name
        path.write_text(script)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)


def snapshot(root: Path, skip: Path) -> dict[str, tuple[int, float]]:
    """Every file under root (not under skip) by its size and change time."""
    seen: dict[str, tuple[int, float]] = {}
    for dirpath, dirs, files in os.walk(root):
        if Path(dirpath) == skip or skip in Path(dirpath).parents:
            dirs[:] = []
            continue
        for name in files:
            path = Path(dirpath) / name
            try:
                st = path.lstat()
            except OSError:
                continue
            seen[str(path)] = (st.st_size, st.st_mtime)
    return seen


def run_case(case: Case, work: Path, number: int, seed: Path | None) -> None:
    folder = work / f"case-{number:04d}"
    if seed is not None:
        shutil.copytree(seed, folder, symlinks=True)
    else:
        folder.mkdir()
    if case.setup:
        case.setup(folder)
    keep = {
        p: (folder / p).read_bytes() if (folder / p).is_file() else None for p in case.unchanged
    }
    kept_dirs = {p: sorted(os.listdir(folder / p)) for p in case.unchanged if (folder / p).is_dir()}
    argv = [a.replace("{dir}", str(folder)) for a in case.argv]
    before = snapshot(work.parent, work)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "hpcbench", *argv],
            cwd=folder,
            env=environ(folder, first=case.path_first),
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            errors="replace",
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        case.outcome, case.line = "hang", f"no end within {TIMEOUT_S} s"
        return
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    tail = proc.stdout.strip().splitlines()[-1:] or [""]
    case.line = (lines[0] if lines else tail[0])[:300]
    ran = (folder / ".ran").read_text().strip() if (folder / ".ran").exists() else ""
    changed = [
        p
        for p, v in keep.items()
        if ((folder / p).read_bytes() if (folder / p).is_file() else None) != v
    ]
    changed += [p for p, v in kept_dirs.items() if sorted(os.listdir(folder / p)) != v]
    outside = sorted(set(snapshot(work.parent, work).items()) - set(before.items()))
    if "Traceback" in proc.stderr or "Traceback" in proc.stdout or proc.returncode not in (0, 2):
        case.outcome = "traceback"
        case.line = f"exit {proc.returncode}: " + (lines[-1] if lines else "")[:300]
    elif ran or changed or outside:
        case.outcome = "silent"
        case.line = f"ran {ran!r}" if ran else f"changed {changed or outside[:3]}"
    elif proc.returncode == 0 and case.expect == WARNED:
        said = any(n in x for n in case.names for x in lines)
        case.outcome = TAKEN if said else "silent"
    elif proc.returncode == 0:
        case.outcome = TAKEN if case.expect in (TAKEN, EITHER) else "silent"
        wrong = case.check(folder, proc.stdout) if case.check and case.outcome == TAKEN else None
        if wrong:
            case.outcome, case.line = "silent", f"taken, but {wrong}"
    else:
        # One error line; lines before it may say what was skipped on the way.
        errors = [x for x in lines if x.startswith("hpcbench: error:")]
        case.line = (errors or lines or [""])[-1][:300]
        # Named in the error line, or in the lines before it that say what was skipped.
        named = not case.names or any(
            n.replace("{dir}", str(folder)).lower() in x.lower()
            or n.replace("_", "-").lower() in x.lower()
            for n in case.names
            for x in (lines if errors and lines[-1] == errors[0] else [])
        )
        if len(errors) != 1 or lines[-1] != errors[0]:
            case.outcome = "wrong message"
            case.line = f"{len(lines)} lines: " + " | ".join(lines[-3:])[:300]
        elif case.expect == TAKEN or not named:
            case.outcome = "wrong message"
        else:
            case.outcome = REFUSED


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--group", help="only the cases of this group (a word of its name)")
    parser.add_argument("--show", choices=("bad", "all"), default="bad")
    parser.add_argument("--keep", type=Path, help="keep the cases' folders here")
    args = parser.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="hpcbench-hostile-")).resolve() / "cases"
    work.mkdir(parents=True, exist_ok=True)
    make_standins(work)
    started = time.monotonic()
    seed = None
    if args.group in (None, "planted", "fields", "journal"):
        print("a campaign on this machine to plant files in (one tiny run) ...", flush=True)
        seed = ran_campaign(work)
    groups: list[tuple[list[Case], Path | None]] = [
        (campaign_key_cases(), None),
        (yaml_cases(), None),
        (option_cases(), None),
        (dash_cases(), None),
        (queued_job_cases(), None),
    ]
    if seed is not None:
        groups += [(planted_cases(), seed), (field_cases(seed), seed)]
    cases = [(c, s) for cs, s in groups for c in cs if not args.group or args.group in c.group]
    for n, (case, case_seed) in enumerate(cases, 1):
        run_case(case, work, n, case_seed)
        if n % 50 == 0:
            print(f"  {n} of {len(cases)} cases, {time.monotonic() - started:.0f} s", flush=True)
        if args.show == "all" or case.outcome not in (REFUSED, TAKEN):
            print(f"[{case.outcome}] {case.group}: {case.name}: {case.line}", flush=True)
    if not args.keep:
        shutil.rmtree(work.parent, ignore_errors=True)
    tally = Counter(c.outcome for c, _ in cases)
    by_group = Counter(c.group for c, _ in cases)
    print(
        f"{len(cases)} hostile cases in {time.monotonic() - started:.0f} s: "
        + ", ".join(
            f"{k} {tally[k]}"
            for k in (REFUSED, TAKEN, "wrong message", "traceback", "hang", "silent")
        )
        + " (python evaluation/hostile.py)"
    )
    print("  by group: " + ", ".join(f"{g} {n}" for g, n in by_group.items()))
    return 0 if not tally["traceback"] + tally["hang"] + tally["silent"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
