"""Every sub-command, every option, hostile values: each is refused with exit
status 2 and exactly one line on stderr, no traceback, nothing launched and
nothing written.

The commands run in-process (hpcbench.cli.main). Each starts from a command
line that would otherwise get going (a dry run, a probe on this machine, a
comparison of two stores, a deploy) and gets one option set to a hostile
value. Launching is caught where every launch goes: subprocess.Popen is
replaced by a recorder that refuses to start anything, and PATH holds fake
horovodrun, torchrun, ssh, sbatch, srun, terraform, tofu and ansible-playbook
that would log a call. "Nothing written": the working folder, the state
folder and the stores are the same before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcbench import cli
from tests.unit.test_campaign_inputs import GENERATED

# Refused by every option that takes a value.
PATH_HOSTILE = [
    "",
    " ",
    "a\nb",  # a line break: a second line in a batch script, a log, a message
    "\x1b[31mred",
    "n" * 300,  # one name longer than NAME_MAX
    "d/" * 2100,  # longer than PATH_MAX
]
SHELL = ["$(touch PWNED)", "`touch PWNED`;|&><*?", "' OR 1=1; --", "a b"]
HOSTILE = [
    *PATH_HOSTILE,
    *SHELL,
    "-1",
    "-Fevil",  # an ssh option where a host name should be
    "--x",
    "9" * 40,
    "1e309",
    "nan",
    "-inf",
    "üñí४🙂",
    "../../../etc",
]
# Names and paths that go into batch scripts and command lines: plain words of any
# length (a partition called 'nan' is a partition; '' leaves the option unset).
NAME_OPTIONS = {
    "--partition",
    "--account",
    "--qos",
    "--slurm-mpi",
    "--container-image",
    "--container-mounts",
    "--container-python",
    "--slurm-job-dir",
    "--slurm-login",
    "--slurm-ssh-key",
    "--slurm-known-hosts",
    "--slurm-python",
    "--slurm-bench-dir",
}
NAME_HOSTILE = [" ", "a\nb", "\x1b[31mred", *SHELL, "-1", "-Fevil", "--x", "üñí४🙂", "d/" * 2100]
# Options that take any file name: only what no path may hold is refused there
# (a folder called '$(x)' or '-1' is a folder; no shell ever sees it).
PATH_OPTIONS = {
    ("scale", "--out"),
    ("probe", "--out"),
    ("compare", "--output"),
    ("export", "--mlperf"),
    ("export", "--out"),
    ("advise", "--out"),
    ("advise", "--plot"),
    ("advise", "--results"),
    ("advise", "--campaign"),
}
# Values that are valid for an option, hostile as they look elsewhere.
ACCEPTED = {
    "--sbatch": {"--x", "-inf"},  # #SBATCH options sbatch reads (-inf: --input=nf)
    "--hosts": {"9" * 40, "1e309", "nan"},  # host names
    # The user's own shell line on their cluster: anything on one line.
    "--slurm-setup": {
        "",
        " ",
        "n" * 300,
        *SHELL,
        "-1",
        "-Fevil",
        "--x",
        "9" * 40,
        "1e309",
        "nan",
        "-inf",
        "üñí४🙂",
        "../../../etc",
    },
}

FAKE_TOOLS = [
    "horovodrun",
    "torchrun",
    "ssh",
    "sbatch",
    "srun",
    "scancel",
    "squeue",
    "terraform",
    "tofu",
    "ansible-playbook",
    "docker",
    "mpirun",
]

RUN = {
    "kind": "run",
    "env": "local",
    "model": "resnet18",
    "backend": "ddp",
    "batch": 8,
    "image_size": 32,
    "data": "synthetic",
    "nodes": 1,
    "workers": 1,
    "gpus_per_node": 1,
    "repeat": 0,
    "status": "ok",
    "steps": 2,
    "window_times": [1.0, 1.1],
}


# A campaign of one local testbed: `campaign plan` on it creates nothing.
CAMPAIGN = {
    "name": "fuzz",
    "sweep": {"model": "resnet18", "batch": [8], "nodes": [1, 2]},
    "testbeds": [
        {
            "name": "one",
            "env": "local",
            "settings": {"node_count": 2},
            "expect": {"images_per_s": 10},  # advise's forecast of its one node
        }
    ],
}


def baselines(tmp: Path) -> dict[str, list[str]]:
    """Per sub-command, a command line that would get going if nothing stopped it."""
    stores = []
    for name in ("a", "b"):
        store = tmp / name
        store.mkdir()
        (store / "results.jsonl").write_text(json.dumps(RUN) + "\n")
        stores.append(str(store))
    campaign = tmp / "campaign.yaml"
    campaign.write_text(json.dumps({**CAMPAIGN, "out": str(tmp / "campaign-out")}))
    return {
        **{
            f"campaign {action}": [str(campaign)]
            for action in ("plan", "run", "status", "report", "destroy")
        },
        "scale": [
            "--env",
            "localhost",
            "--nodes",
            "1",
            "--model",
            "resnet18",
            "--no-probe",
            "--dry-run",
            "--out",
            str(tmp / "out"),
        ],
        "probe": ["--env", "localhost", "--nodes", "2", "--out", str(tmp / "out")],
        "report": ["--out", stores[0]],
        "export": ["--mlperf", str(tmp / "package"), "--out", stores[0]],
        "compare": [*stores],
        "predict": ["--model", "resnet18", "--step-time", "0.1", "--link", "1gbit"],
        "deploy": ["--env", "local"],
        "verify": ["--env", "local"],
        "destroy": ["--env", "local"],
        "envs": [],
        "advise": ["--model", "resnet18", "--samples", "1M", "--campaign", str(campaign)],
    }


def subcommands() -> dict[str, argparse.ArgumentParser]:
    """Every command's parser by its words ('scale', 'campaign run'): a command with
    actions of its own (campaign) is fuzzed through each action."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, words: list[str]) -> None:
        nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not nested and words:
            found[" ".join(words)] = parser
        for action in nested:
            for name, child in action.choices.items():
                walk(child, [*words, name])

    walk(cli.build_parser(), [])
    return found


def cases() -> list[tuple[str, str, str]]:
    """(sub-command, option or positional's dest, value)."""
    out = []
    for command, parser in subcommands().items():
        actions = [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]
        if not actions:  # no options at all: a stray argument
            out += [(command, "<extra>", v) for v in HOSTILE]
        for action in actions:
            name = action.option_strings[-1] if action.option_strings else action.dest
            if isinstance(action, argparse._StoreTrueAction):
                values = ["$(touch PWNED)", "-1", "x"]  # a flag followed by a stray value
            elif (command, name) in PATH_OPTIONS:
                values = PATH_HOSTILE
            elif name in NAME_OPTIONS:
                values = NAME_HOSTILE
            else:
                values = [v for v in HOSTILE if v not in ACCEPTED.get(name, set())]
            out += [(command, name, v) for v in values]
    return out


def command_line(base: dict[str, list[str]], command: str, name: str, value: str) -> list[str]:
    argv = list(base[command])
    words = command.split()
    if name == "<extra>":
        return [*words, *argv, value]
    if not name.startswith("-"):  # a positional: replace the baseline's
        parser = subcommands()[command]
        positionals = [a.dest for a in parser._actions if not a.option_strings]
        if name == "pytest_args":
            return [*words, *argv, "--", value]
        argv[positionals.index(name)] = value
        return [*words, *argv]
    for exclusive in ("--env", "--hosts"):  # one of them; the tested one replaces the other
        if name in ("--env", "--hosts") and exclusive in argv:
            i = argv.index(exclusive)
            del argv[i : i + 2]
    if name in (
        "--resume",
        "--no-probe",
        "--dry-run",
        "--verbose",
        "--fp16-allreduce",
        "--skip-ansible",
        "--json",
    ):
        return [*words, *argv, name, value]
    return [*words, *argv, f"{name}={value}"]


def snapshot(*roots: Path) -> dict[str, float]:
    files = {str(root): float(root.exists()) for root in roots}
    for root in roots:
        for path in root.rglob("*"):
            files[str(path)] = path.stat().st_mtime if path.is_file() else 0.0
    return files


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz")
    fake_bin = tmp / "bin"
    fake_bin.mkdir()
    calls = tmp / "calls.log"
    for tool in FAKE_TOOLS:
        path = fake_bin / tool
        path.write_text(f'#!/bin/sh\necho "{tool} $*" >> {calls}\nexit 0\n')
        path.chmod(0o755)
    work = tmp / "work"
    work.mkdir()
    return tmp, fake_bin, calls, work, baselines(work)


@pytest.fixture
def guarded(sandbox, monkeypatch):
    """Nothing can be launched; every attempt is recorded."""
    tmp, fake_bin, calls, work, base = sandbox
    # torch's first import asks ldconfig where libdl is (ctypes.util.find_library, from
    # cuda.pathfinder): not hpcbench launching anything, so it happens before the guard.
    import torch  # noqa: F401

    launched: list[list[str]] = []

    class Refused(subprocess.Popen):
        def __init__(self, args, *a, **kw):  # noqa: ANN001
            launched.append(list(args) if not isinstance(args, str) else [args])
            raise OSError("launching is refused in this test")

    monkeypatch.setattr(subprocess, "Popen", Refused)
    monkeypatch.setenv("PATH", f"{fake_bin}:{os.environ['PATH']}")
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp / "state"))
    monkeypatch.setenv("HPCBENCH_CACHE", str(tmp / "cache"))
    monkeypatch.delenv("HPCBENCH_ENV", raising=False)
    monkeypatch.chdir(work)
    return launched, calls, work, base


def test_the_baselines_would_get_going(guarded, capsys):
    """The fuzz means something only if the unmodified command lines pass the checks."""
    launched, calls, work, base = guarded
    assert cli.main(["scale", *base["scale"]]) == 0  # a dry run prints the launch
    assert "leash.py" in capsys.readouterr().out
    assert cli.main(["predict", *base["predict"]]) == 0
    assert cli.main(["advise", *base["advise"]]) == 0
    assert "the front" in capsys.readouterr().out
    assert cli.main(["compare", *base["compare"]]) == 0
    assert cli.main(["campaign", "plan", *base["campaign plan"]]) == 0
    assert "1 testbeds, 2 cells" in capsys.readouterr().out
    cli.main(["probe", *base["probe"]])  # launches (refused here): reaches the launch
    assert launched, "the probe baseline did not get as far as launching"


def refused_in_one_line(guarded, capsys, argv: list[str]) -> str:  # noqa: ANN001
    """cli.main(argv) exits 2 with one line on stderr, no traceback, nothing launched,
    written or run; the line."""
    launched, calls, work, base = guarded
    written = (work, work.parent / "state", work.parent / "cache")
    before = snapshot(*written)
    try:
        status = cli.main(argv)
    except SystemExit as exit_:  # argparse's own exits would land here
        status = exit_.code
    except Exception as err:  # noqa: BLE001  (a traceback is the failure this test looks for)
        pytest.fail(f"{argv!r:.300} raised {type(err).__name__}: {err}")
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert status == 2, f"exit {status} for {argv!r:.300}: {err[-500:]}"
    assert len(lines) == 1 and lines[0].startswith("hpcbench"), f"{argv!r:.300}: {err[-800:]}"
    assert "Traceback" not in err
    assert launched == [], f"{argv!r:.300} launched {launched}"
    assert not calls.exists(), calls.read_text()
    assert snapshot(*written) == before, f"{argv!r:.300} wrote files"
    assert not (work / "PWNED").exists()
    return lines[0]


@pytest.mark.parametrize(("command", "name", "value"), cases())
def test_hostile_value_is_refused_in_one_line(guarded, capsys, command, name, value):
    argv = command_line(guarded[3], command, name, value)
    refused_in_one_line(guarded, capsys, argv)


def value_options() -> list[tuple[str, str]]:
    """(sub-command, option) for every option of every command that takes a value."""
    return [
        (command, action.option_strings[-1])
        for command, parser in subcommands().items()
        for action in parser._actions
        if action.option_strings and action.nargs != 0
    ]


def spellings(command: str, name: str) -> list[str]:
    """The option as argparse takes it: its name (which wins over a longer option it
    starts: --data beside --data-workers), or any prefix of it no other option of the
    command starts with (allow_abbrev, on by default)."""
    others = [
        spelled
        for action in subcommands()[command]._actions
        if name not in action.option_strings
        for spelled in action.option_strings
    ]
    prefixes = (name[:n] for n in range(3, len(name) + 1))
    return [p for p in prefixes if p == name or not any(o.startswith(p) for o in others)]


@pytest.mark.parametrize(("command", "name"), value_options())
@settings(GENERATED, max_examples=3)
@given(data=st.data())
def test_a_lone_double_dash_as_an_options_value_is_refused_naming_the_option(
    guarded, capsys, command, name, data
):
    """`--partition=--`: CPython 3.11's argparse drops the '--' from an option's own
    values before converting them and stores [] where one value belongs (3.13 keeps
    '--'). Given as `NAME=--` and as `NAME --`, the option spelled in full or cut
    short."""
    spelled = data.draw(st.sampled_from(spellings(command, name)), label="spelled")
    argv = command_line(guarded[3], command, name, "--")
    assert argv[-1] == f"{name}=--", argv  # the option goes last: no later one overrides it
    line = refused_in_one_line(guarded, capsys, [*argv[:-1], f"{spelled}=--"])
    assert f"argument {name}" in line and "'--' is no value" in line, line
    line = refused_in_one_line(guarded, capsys, [*argv[:-1], spelled, "--"])
    assert f"argument {name}" in line, line  # argparse's own: expected one argument
