"""Campaign files and journals as hostile input, generated (Hypothesis): every file
gives `campaign plan` and `campaign status` exit status 0 with their result, or 2
with one line naming the file, never a traceback, and nothing is created."""

from __future__ import annotations

import copy
import datetime
import functools
import json
import operator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcbench import cli
from hpcbench.campaign import sweep_keys
from hpcbench.campaign.testbeds import HARDWARE_KEYS
from hpcbench.measure import scale_options
from hpcbench.testbeds.kinds.slurm import Slurm

BASE: dict[str, Any] = {
    "name": "fuzz",
    "sweep": {
        "model": "resnet18",
        "image_size": 32,
        "batch": [4, 8],
        "nodes": [1, 2],
        "repeats": 1,
        "budget": "10m",
    },
    "testbeds": [
        {
            "name": "a",
            "env": "local",
            "settings": {"node_count": 2, "link_rate": "1gbit", "link_capacity_mbps": 1000},
            "expect": {"images_per_s": 10, "deploy": "1m"},
            "exclude": [{"batch": 8}],
            "ansible": {"stack_mode": "image", "extra": {"list": [1, "a", None, True, 2.5]}},
            "hardware": {
                "accelerator": "V100",
                "link": "1gbit",
                "transport": "tcp",
                "intra_node": "pcie3",
                "link_efficiency": 0.5,
            },
        },
        {
            "name": "b",
            "slurm": {
                "partition": "p",
                "account": "acct",
                "qos": "normal",
                "nodes": 2,
                "gpus_per_node": 1,
                "cpus_per_task": 2,
                "time": "10m",
                "queue_wait": "1h",
                "sbatch": ["--exclusive"],
                "setup": "module load x",
                "container_image": "nvcr.io#nvidia/pytorch:24.05-py3",
                "container_mounts": ["/dss/data:/data"],
            },
        },
        {"name": "c", "hosts": ["h1:1", "h2:1"]},
    ],
}
# A whole number longer than Python converts from text (over 4300 digits): no YAML
# dumper writes one, so the document holds this word, and dump() writes the digits.
HUGE = "HUGE_NUMBER"
HUGE_DIGITS = "9" * 4301
SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
# Link rates that are zero or not finite, as a testbed's settings may give them.
NO_RATE = st.sampled_from(
    [0, 0.0, -1, "0", "-0", "inf", "-inf", "nan", "1e400", "0gbit", "0.0mbit", "infgbit"]
)
# Values a file may hold in any place: the YAML types at their extremes.
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e308, -1e308, 5e-324, 0.0, -0.0, 2**63, -(2**63) - 1]),
    st.text(max_size=40),
    st.sampled_from(["", " ", "-x", "1-0", "a\nb", "\x00", "ü" * 300]),
    st.just(HUGE),
    st.builds("".join, st.lists(st.text(max_size=4) | SURROGATES, min_size=1, max_size=4)),
    NO_RATE,
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def paths_of(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path of a document (dict keys, list indexes)."""
    found = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            found += paths_of(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            found += paths_of(v, (*prefix, i))
    return found


def put(doc: Any, where: tuple, value: Any) -> Any:
    if not where:
        return value
    node = doc
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    return doc


@st.composite
def mutated(draw: st.DrawFn) -> Any:
    doc = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 3))):
        spots = paths_of(doc)
        where = draw(st.sampled_from(spots))
        doc = put(doc, where, draw(VALUES))
        if not isinstance(doc, dict):
            break
    return doc


def dump(doc: Any) -> str:
    """The document as YAML, HUGE written as its digits."""
    return yaml.safe_dump(doc, allow_unicode=True).replace(HUGE, HUGE_DIGITS)


def outcome(tmp: Path, text: str, capsys: pytest.CaptureFixture[str]) -> None:
    """plan and status on the file: 0 with a result, or 2 with one line naming it."""
    path = tmp / "c.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    for action in ("plan", "status"):
        code = cli.main(["campaign", action, str(path)])
        out = capsys.readouterr()
        assert code in (0, 2), (code, text[:300], out.err[-500:])
        if code == 2:
            lines = out.err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith(f"hpcbench: error: {path}"), lines
        else:
            assert out.out.strip()


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(mutated())
def test_a_generated_campaign_file_gives_a_plan_or_one_line(tmp_path, capsys, monkeypatch, doc):
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))
    if isinstance(doc, dict):
        doc["out"] = str(tmp_path / "out")
    outcome(tmp_path, dump(doc), capsys)
    assert not (tmp_path / "out").exists() and not (tmp_path / "state").exists()


# Where each kind of value is refused, by the key path the error names.
NUMBER_KEYS = [
    ("sweep", "batch"),
    ("sweep", "nodes"),
    ("sweep", "repeats"),
    ("testbeds", 0, "exclude", 0, "batch"),
    ("testbeds", 0, "settings", "node_count"),
    ("testbeds", 1, "slurm", "nodes"),
    ("testbeds", 1, "slurm", "gpus_per_node"),
]
TEXT_KEYS = [("description",), ("testbeds", 0, "title"), ("testbeds", 0, "settings", "zone")]
RATE_KEYS = [
    ("testbeds", 0, "settings", "link_rate"),
    ("testbeds", 0, "settings", "link_capacity_mbps"),
]


def key_path(where: tuple) -> str:
    """('testbeds', 0, 'exclude', 0, 'batch') as the file's errors name it."""
    text = ""
    for part in where:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    st.one_of(
        st.tuples(st.sampled_from(NUMBER_KEYS), st.just(HUGE)),
        st.tuples(
            st.sampled_from(NUMBER_KEYS),
            st.lists(st.integers(1, 4) | st.just(HUGE), min_size=1, max_size=3).filter(
                lambda v: HUGE in v
            ),
        ),
        st.tuples(
            st.sampled_from(TEXT_KEYS),
            st.builds(
                lambda a, s, b: a + s + b, st.text(max_size=8), SURROGATES, st.text(max_size=8)
            ),
        ),
        st.tuples(st.sampled_from(RATE_KEYS), NO_RATE),
    )
)
def test_a_value_no_check_can_read_is_refused_naming_its_key(tmp_path, capsys, monkeypatch, case):
    """A number past Python's 4300 digits, text with a lone surrogate (YAML's "\\uDCFF"
    escape), a link rate of zero or not finite: one line naming the key."""
    where, value = case
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))
    doc = put(copy.deepcopy(BASE), where, value)
    doc["out"] = str(tmp_path / "out")
    path = tmp_path / "c.yaml"
    path.write_text(dump(doc), encoding="utf-8")
    assert cli.main(["campaign", "plan", str(path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"hpcbench: error: {path}: {key_path(where)}")


@pytest.mark.parametrize(
    "text",
    [
        # Recursive: a list that holds itself.
        "name: x\nsweep: &s {model: resnet18, x: *s}\ntestbeds: [{name: a, env: local}]\n",
        "name: x\ntestbeds: &t [{name: a, env: local, settings: {node_count: *t}}]\n",
        # Exponential (a "billion laughs"): 9^12 strings behind a few aliases.
        "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
        "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
        "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
        "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
        "name: x\nsweep: {model: resnet18}\ntestbeds: [{name: a, env: local, settings: {v: *g}}]\n",
        "\xff\xfe not utf-8",
        "name: x\ntestbeds: [{name: a, env: local}]\n" + "sweep: {}\n" * 2,
        "!!python/object/apply:os.system ['touch PWNED']\n",
        "[" * 5000 + "]" * 5000,
        # A date YAML's own type refuses; a key past Python's 4300 digits.
        "name: x\ntestbeds: [{name: a, env: local, title: 2026-13-40}]\n",
        "name: x\nsweep:\n  ? " + "9" * 4301 + "\n  : 1\ntestbeds: [{name: a, env: local}]\n",
    ],
)
def test_hostile_yaml_is_one_line(tmp_path, capsys, monkeypatch, text):
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))
    outcome(tmp_path, text, capsys)
    assert not (tmp_path / "PWNED").exists() and not Path("PWNED").exists()


RECORD = st.fixed_dictionaries(
    {},
    optional={
        "kind": st.sampled_from(["cell", "phase", "forecast", "run", "x"]) | VALUES,
        "campaign": st.just("fuzz") | VALUES,
        "testbed": st.sampled_from(["a", "b"]) | VALUES,
        "cell": VALUES,
        "batch": VALUES,
        "nodes": VALUES,
        "workers": VALUES,
        "status": st.sampled_from(["pending", "measured", "failed", "ok"]) | VALUES,
        "phase": st.sampled_from(["deploy", "verify", "sweep"]) | VALUES,
        "seconds": VALUES,
        "why": VALUES,
        "images_per_s": VALUES,
        "ci95": VALUES,
        "runs": VALUES,
        "lease": VALUES,
        "gpus_per_node": VALUES,
        "env": VALUES,
        "fingerprint": VALUES,
        "at": VALUES,
        "made": st.sampled_from(["plan", "booking"]) | VALUES,
        "cells": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    k: VALUES
                    for k in ("cell", "batch", "nodes", "workers", "gpus_per_node", "efficiency")
                },
            ),
            max_size=2,
        )
        | VALUES,
    },
)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.lists(RECORD, max_size=6), st.lists(st.binary(max_size=60), max_size=2))
def test_a_generated_journal_gives_a_status_or_one_line(
    tmp_path, capsys, monkeypatch, records, junk
):
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))
    doc = copy.deepcopy(BASE)
    doc["out"] = str(tmp_path / "out")
    (tmp_path / "out").mkdir(exist_ok=True)
    lines = [json.dumps(r, default=str).encode() for r in records] + junk
    (tmp_path / "out" / "results.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    outcome(tmp_path, yaml.safe_dump(doc), capsys)


# ------------------------------------------- YAML's types beyond JSON's, by hand
def with_fragment(doc: dict[str, Any], where: tuple, fragment: str) -> str:
    """The document as YAML, `fragment` (YAML text: a date, a tag, an alias that
    yaml.safe_dump never writes) at `where`."""
    return dump(put(doc, where, FRAGMENT)).replace(FRAGMENT, fragment)


FRAGMENT = "YAML_FRAGMENT"
CIRCULAR = "an alias refers to the collection that holds it"


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """BASE to change, its out and state folders in the test's own."""
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))
    return {**copy.deepcopy(BASE), "out": str(tmp_path / "out")}


def plan(tmp: Path, capsys: pytest.CaptureFixture[str], text: str) -> tuple[int, str, Path]:
    """`campaign plan` of the text as a file: its exit status, its stderr, the file."""
    path = tmp / "c.yaml"
    path.write_text(text)
    rc = cli.main(["campaign", "plan", str(path)])
    return rc, capsys.readouterr().err.strip(), path


def refused(rc: int, err: str, path: Path, said: str | None) -> bool:
    """0 and nothing said where said is None, else 2 and the one line naming it."""
    return (rc, err) == ((0, "") if said is None else (2, f"hpcbench: error: {path}: {said}"))


@pytest.mark.parametrize(
    "fragment, said",
    [
        ("2026-01-31", "testbeds[0].ansible.v: is a date"),
        ("2026-01-31 10:00:00", "testbeds[0].ansible.v: is a date"),
        ("!!set {a, b}", "testbeds[0].ansible.v: is a set (!!set)"),
        ("!!binary aGVsbG8=", "testbeds[0].ansible.v: is binary (!!binary)"),
        ("[1, {x: !!binary aGVsbG8=}]", "testbeds[0].ansible.v[1].x: is binary"),
        ("!!omap [{a: 1}]", "testbeds[0].ansible.v: is an ordered map"),
        ("{1: a, b: c}", "testbeds[0].ansible.v: key 1 is not text"),
        ("{2026-01-31: a}", "testbeds[0].ansible.v: key datetime.date(2026, 1, 31) is not text"),
        (".nan", "testbeds[0].ansible.v: nan is not a finite number"),
        ("&x [*x]", CIRCULAR),
        ("&x {a: *x}", "not valid YAML (line 15: found unconstructable recursive node)"),
        ("&x !!omap [{a: *x}]", CIRCULAR),
        ("&x !!pairs [{a: [*x]}]", CIRCULAR),
    ],
)
def test_an_ansible_value_json_cannot_hold_is_one_line_naming_it(
    tmp_path, capsys, fresh, fragment, said
):
    """Each crashed `campaign plan` with a traceback (json.dumps of the fingerprint)."""
    text = with_fragment(fresh, ("testbeds", 0, "ansible"), "{v: " + fragment + "}")
    rc, err, path = plan(tmp_path, capsys, text)
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"hpcbench: error: {path}: {said}"), err


def test_plain_ansible_values_still_plan(tmp_path, capsys, fresh):
    fresh["testbeds"][0]["ansible"] = {"v": [1, 2.5, None, True, "a", {"k": "2026-01-31"}]}
    assert refused(*plan(tmp_path, capsys, dump(fresh)), None)


def test_seventy_nested_maps_are_named_as_deep_not_as_aliases(tmp_path, capsys, fresh):
    nested = "{a: " * 70 + "1" + "}" * 70
    text = f"name: x\nsweep: {nested}\ntestbeds: [{{name: a, env: local}}]\n"
    said = "nested deeper than 64 levels: write the campaign out plainly"
    assert refused(*plan(tmp_path, capsys, text), said)


@pytest.mark.parametrize(
    "mbps", [5e-324, 1e308, 0.5, 1.5, 100_001, 0, -1000, "1e400", "nan", "fast", True]
)
def test_a_link_capacity_outside_what_the_module_takes_is_one_line(tmp_path, capsys, fresh, mbps):
    """5e-324 crashed the plan (ZeroDivisionError), 1e308 printed 'inf Gbit/s'."""
    fresh["testbeds"][0]["settings"]["link_capacity_mbps"] = mbps
    shown = repr(str(mbps) if not isinstance(mbps, bool) else "true")
    said = (
        f"testbeds[0].settings.link_capacity_mbps: {shown} is not a whole number of Mbit/s "
        "from 1 to 100000 (1000 is 1 Gbit/s)"
    )
    assert refused(*plan(tmp_path, capsys, dump(fresh)), said)


@pytest.mark.parametrize(
    "mbps, shown", [(1, "1 Mbit/s"), (100_000, "100 Gbit/s"), ("1e3", "1 Gbit/s")]
)
def test_a_link_capacity_within_range_is_planned_over(tmp_path, capsys, fresh, mbps, shown):
    fresh["testbeds"][0]["settings"]["link_capacity_mbps"] = mbps
    path = tmp_path / "c.yaml"
    path.write_text(dump(fresh))
    assert cli.main(["campaign", "plan", str(path)]) == 0
    assert f"E across workers: {shown} x" in capsys.readouterr().out


@pytest.mark.parametrize(
    "where, first, second",
    [
        (("sweep",), "max-repeats", "max_repeats"),
        (("sweep",), "max_repeats", "max-repeats"),
        (("sweep",), "gpus_per_node", "gpus-per-node"),
        (("testbeds", 0, "sweep"), "target-ci", "target_ci"),
    ],
)
def test_two_spellings_of_one_sweep_key_are_refused_naming_both(
    tmp_path, capsys, fresh, where, first, second
):
    """`max-repeats: 4` beside `max_repeats: 5` ran 5 silently."""
    values = {"max_repeats": (4, 5), "gpus_per_node": (1, 1), "target_ci": ("5%", "10%")}
    one, two = values[first.replace("-", "_")]
    given = f"{first}: {one}, {second}: {two}"
    if where == ("sweep",):  # in the file's order (a dump would sort the keys)
        given = "model: resnet18, image_size: 32, batch: [4, 8], nodes: [1, 2], " + given
    name = key_path(where)
    said = f"{name}.{second}: is {name}.{first} written another way: give one"
    assert refused(*plan(tmp_path, capsys, with_fragment(fresh, where, "{" + given + "}")), said)


DATE = "is a date (YAML reads 2026-01-31 as one): quote it"


@pytest.mark.parametrize(
    "where, value, said",
    [
        # max_repeats alone was checked against --repeats' default 3, whatever repeats said.
        (("sweep",), {"repeats": 1, "max_repeats": 2}, None),
        (
            ("sweep",),
            {"max_repeats": 2, "repeats": 3},
            "sweep.max_repeats: --max-repeats 2 is below --repeats 3: raise it or drop it",
        ),
        # Across the campaign's sweep and a testbed's: the testbed's, merged.
        (
            ("testbeds", 0),
            {"sweep": {"max_repeats": 2, "repeats": 3}},
            "testbeds[0].sweep.max_repeats: --max-repeats 2 is below --repeats 3: raise it or "
            "drop it",
        ),
        (
            ("sweep",),
            {"batch": -1},
            "sweep.batch: --batch: '-1' is not a number from 1 to 65536 or a range like 1-4",
        ),
        (
            ("sweep",),
            {"nodes": "2-"},
            "sweep.nodes: --nodes: '2-' is not a number from 1 to 4096 or a range like 1-4",
        ),
        (
            ("sweep",),
            {"repeats": -1},
            "sweep.repeats: argument --repeats: -1 is out of range: use 1 to 1000",
        ),
        (("sweep",), {"data": "-x"}, "sweep.data: --data: '-x' is not a path; write ./-x"),
        # Blamed on the sweep's nodes ("asks for 2 nodes but the settings give 0").
        (
            ("testbeds", 0, "settings"),
            {"node_count": 0},
            "testbeds[0].settings.node_count: gives 0 nodes: a testbed has one at least",
        ),
        # Planned, then refused by the sweep once the testbed was deployed.
        (
            ("sweep",),
            {"launcher": "srunn"},
            "sweep.launcher: argument --launcher: invalid choice: 'srunn' (choose from 'auto', "
            "'horovodrun', 'local', 'slurm', 'torchrun')",
        ),
        (
            ("testbeds", 1, "slurm"),
            {"cpus_per_task": 1.5},
            "testbeds[1].slurm.cpus_per_task: argument --slurm-cpus-per-task: '1.5' is not a "
            "whole number",
        ),
        (
            ("testbeds", 1, "slurm"),
            {"gpus_per_node": 1.5},
            "testbeds[1].slurm.gpus_per_node: argument --slurm-gpus: '1.5' is not a whole number",
        ),
        # Read as the partition 'True' and the account '1000.0', silently.
        (
            ("testbeds", 1, "slurm"),
            {"partition": True},
            "testbeds[1].slurm.partition: YAML read this as true/false: write the value in quotes",
        ),
        (
            ("testbeds", 1, "slurm"),
            {"account": 1e3},
            "testbeds[1].slurm.account: YAML read this as the number 1000.0: write it in quotes",
        ),
        # A sweep's one sbatch option, not in a list: 'expected one argument'.
        (("sweep",), {"sbatch": "--exclusive"}, None),
        # A date where text goes: 'must be text' (or 'a number, text, ...').
        *[
            (where, {key: datetime.date(2026, 1, 31)}, f"{name}.{key}: {DATE}")
            for where, key, name in (
                (("testbeds", 0), "title", "testbeds[0]"),
                (("testbeds", 0, "settings"), "zone", "testbeds[0].settings"),
                (("testbeds", 1, "slurm"), "partition", "testbeds[1].slurm"),
                (("sweep",), "slurm_setup", "sweep"),
            )
        ],
    ],
)
def test_a_bad_value_is_named_by_its_real_problem_and_key(
    tmp_path, capsys, fresh, where, value, said
):
    functools.reduce(operator.getitem, where, fresh).update(value)
    assert refused(*plan(tmp_path, capsys, dump(fresh)), said)


# ------------------------- the ansible:, slurm: and hardware: values, generated
# Every spot under them, by the key: each key a testbed of its kind may give (known or
# not), and the mapping itself.
KIND_SPOTS = {
    "ansible": [
        ("testbeds", 0, "ansible"),
        ("testbeds", 0, "ansible", "stack_mode"),
        ("testbeds", 0, "ansible", "extra"),
        ("testbeds", 0, "ansible", "extra", "list"),
        ("testbeds", 0, "ansible", "new_variable"),
        ("testbeds", 0, "ansible", "Not-A-Name"),
    ],
    "hardware": [
        ("testbeds", 0, "hardware"),
        *[("testbeds", 0, "hardware", k) for k in (*HARDWARE_KEYS, "colour")],
    ],
    "slurm": [
        ("testbeds", 1, "slurm"),
        *[("testbeds", 1, "slurm", k) for k in (*Slurm.campaign_options, "colour")],
    ],
}
# YAML that yaml.safe_dump never writes: tags, YAML 1.1's dates and words, anchors
# and aliases (undefined ones and ones inside what they name), keys of every type.
_TAGGED = st.sampled_from(
    [
        "2026-01-31",
        "2026-13-40",
        "2026-01-31T10:00:00Z",
        "!!set {a, b}",
        "!!binary aGVsbG8=",
        "!!binary '!!'",
        "!!omap [{a: 1}, {b: 2}]",
        "!!pairs [{a: 1}, {a: 2}]",
        "!!timestamp 2001-12-14",
        "!!timestamp xyz",
        "!!int ''",
        "!!int x",
        "!!bool maybe",
        "!!map [1]",
        "!!seq {a: 1}",
        "!!str 1",
        "!!int '7'",
        "!!float '1.5'",
        "!!bool yes",
        "!!null ''",
        "!custom x",
        "!!python/name:os.system",
        ".nan",
        ".inf",
        "-.inf",
        "~",
        "yes",
        "off",
        "0x1F",
        "0o17",
        "1_000",
        "1.5",
        "-1",
        "1e400",
        "'-x'",
        '"\\udcff"',
        '"\\x00"',
        '""',
        "*a",
        "*nowhere",
        HUGE_DIGITS,
    ]
)
_KEYS = st.sampled_from(
    ["a", "x_y", "1", "2026-01-31", "null", "true", ".nan", "'x y'", "[1]", "*a", "&a k", "<<"]
)


def _flow(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.lists(st.tuples(_KEYS, inner), max_size=3).map(
            lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}"
        ),
        inner.map(lambda x: f"&a {x}"),
        inner.map(lambda x: f"!!set {x}" if x.startswith("{") else x),
    )


FRAGMENTS = st.recursive(_TAGGED | SCALARS.map(json.dumps), _flow, max_leaves=8)


# The generated cases below: each example runs plan and status.
GENERATED = settings(
    max_examples=50,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def test_the_base_campaign_plans(tmp_path, capsys, fresh):
    """What the generated cases change: a plan as it stands, so that each refusal below
    is the generated value's."""
    assert refused(*plan(tmp_path, capsys, dump(fresh)), None)


@pytest.mark.parametrize("key", sorted(KIND_SPOTS))
@GENERATED
@given(data=st.data())
def test_any_ansible_slurm_or_hardware_value_gives_a_plan_or_one_line(
    tmp_path, capsys, fresh, key, data
):
    """Any value at any spot under a testbed's ansible:, slurm: or hardware: (as YAML's
    own text where safe_dump cannot write it, half the time): `campaign plan` and
    `status` exit 0 with their result or 2 with one line, and create nothing."""
    where = data.draw(st.sampled_from(KIND_SPOTS[key]), "where")
    doc = copy.deepcopy(fresh)  # one fixture for every example
    if data.draw(st.booleans(), "as YAML text"):
        text = with_fragment(doc, where, data.draw(FRAGMENTS, "fragment"))
    else:
        text = dump(put(doc, where, data.draw(VALUES, "value")))
    outcome(tmp_path, text, capsys)
    assert not (tmp_path / "out").exists() and not (tmp_path / "state").exists()


@pytest.mark.parametrize(
    "settings, sweep_gpus, said",
    [
        # str.isdigit took it; int() raised ValueError: a traceback.
        ({"node_count": "\u00b2"}, [1], None),
        # CPU-only nodes (the Virtual Wall's default 0): one or more processes each.
        ({"node_count": 2, "gpus_per_node": 0}, [1, 2], None),
        # It named 'env: gpus_per_node', a key no file has.
        (
            {"node_count": 2, "gpus_per_node": 1},
            [1, 2],
            "testbeds[0].sweep.gpus_per_node: 2 is more than the 1 GPUs per node of "
            "settings.gpus_per_node",
        ),
    ],
)
def test_a_deployed_testbeds_shape_is_read_from_its_settings(
    tmp_path, capsys, fresh, settings, sweep_gpus, said
):
    fresh["testbeds"] = [{"name": "a", "env": "virtualwall", "settings": settings}]
    fresh["sweep"]["gpus_per_node"] = sweep_gpus
    assert refused(*plan(tmp_path, capsys, dump(fresh)), said)


def test_max_repeats_below_the_campaigns_repeats_names_the_testbeds_sweep(tmp_path, capsys, fresh):
    fresh["sweep"]["repeats"] = 3
    fresh["testbeds"][2]["sweep"] = {"max_repeats": 2}
    said = (
        "testbeds[2].sweep.max_repeats: --max-repeats 2 is below --repeats 3: raise it or drop it"
    )
    assert refused(*plan(tmp_path, capsys, dump(fresh)), said)


@pytest.mark.parametrize(
    "value, said",
    [
        # Each a traceback: IndexError, KeyError, TypeError, AttributeError.
        ("!!int ''", "'' is no int"),
        ("!!bool maybe", "'maybe' is no bool"),
        ("!!map [1]", "sequence is no map"),
        ("!!timestamp xyz", "'xyz' is no timestamp"),
        # Read as a number too long for Python, of 1 digit.
        ("!!int x", "'x' is no int (invalid literal for int() with base 10: 'x')"),
        ("2026-13-40", "'2026-13-40' is no timestamp (month must be in 1..12)"),
    ],
)
def test_a_value_its_yaml_tag_cannot_hold_is_one_line_at_its_line(
    tmp_path, capsys, fresh, value, said
):
    text = f"name: x\nsweep: {{repeats: {value}}}\ntestbeds: [{{name: a, env: local}}]\n"
    assert refused(*plan(tmp_path, capsys, text), f"not valid YAML (line 2: {said})")


def test_a_count_past_what_the_option_takes_is_out_of_range_not_no_number(tmp_path, capsys, fresh):
    """'9999999999999999999999' was 'not a whole number'."""
    fresh["sweep"]["repeats"] = 10**21
    said = (
        "sweep.repeats: argument --repeats: 1000000000000000000000 is out of range: use 1 to 1000"
    )
    assert refused(*plan(tmp_path, capsys, dump(fresh)), said)


@GENERATED
@given(data=st.data())
def test_yaml_text_at_any_spot_of_the_file_gives_a_plan_or_one_line(tmp_path, capsys, fresh, data):
    """YAML's own text (tags, dates, anchors and aliases) at any key path of the file."""
    doc = copy.deepcopy(fresh)
    where = data.draw(st.sampled_from([p for p in paths_of(doc) if p != ("out",)]), "where")
    outcome(tmp_path, with_fragment(doc, where, data.draw(FRAGMENTS, "fragment")), capsys)
    assert not (tmp_path / "out").exists() and not (tmp_path / "state").exists()


# ------------------------------------------------- '--' where a key takes one value
def _value_options() -> list[str]:
    """scale's options a sweep may give that take a value, as sweep keys."""
    return [
        action.dest
        for action in scale_options.scale_parser()._actions
        if action.option_strings and action.nargs != 0 and action.dest not in sweep_keys.RESERVED
    ]


# Every key a campaign file turns into a `scale` option: the sweep's and a partition's.
DASH_KEYS = [
    *[("sweep", key) for key in _value_options()],
    *[("slurm", key) for key, flag in Slurm.campaign_options.items() if flag],
]


@pytest.mark.parametrize(("under", "key"), DASH_KEYS)
@settings(GENERATED, max_examples=2)
@given(data=st.data())
def test_a_lone_double_dash_as_a_keys_value_is_refused_naming_the_key(
    tmp_path, capsys, fresh, under, key, data
):
    """`partition: "--"` became `--partition=--`, which argparse (CPython 3.11) reads
    as []: the partition, account, qos, image and setup were left out of the job
    scripts unsaid. A sweep key in the campaign's sweep or in a testbed's own."""
    if under == "slurm":
        where: tuple = ("testbeds", 1, "slurm", key)
    else:
        where = (*data.draw(st.sampled_from([("sweep",), ("testbeds", 2, "sweep")])), key)
    value = data.draw(st.sampled_from(["--", ["--"]]), "value")
    doc = copy.deepcopy(fresh)
    doc["testbeds"][2]["sweep"] = {}  # the hosts' testbed's own sweep, empty
    doc = put(doc, where, value)
    rc, err, path = plan(tmp_path, capsys, dump(doc))
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"hpcbench: error: {path}: {key_path(where)}: "), err
    assert not (tmp_path / "out").exists() and not (tmp_path / "state").exists()


def test_a_partitions_keys_reach_every_job_script(tmp_path, capsys, fresh):
    """What the refusal above protects: each of a partition's keys, given, in every
    sbatch script of a dry run."""
    fresh["testbeds"] = [fresh["testbeds"][1]]
    path = tmp_path / "c.yaml"
    path.write_text(dump(fresh))
    assert cli.main(["campaign", "run", "--dry-run", str(path)]) == 0
    scripts = capsys.readouterr().out.split("#!/bin/bash\n")[1:]
    assert scripts
    for script in scripts:
        lines = script.splitlines()
        for sbatch in ("--partition=p", "--account=acct", "--qos=normal", "--exclusive"):
            assert f"#SBATCH {sbatch}" in lines, script
        assert "--container-image=nvcr.io#nvidia/pytorch:24.05-py3" in script, script
        assert "module load x" in lines, script
    assert not (tmp_path / "out").exists() and not (tmp_path / "state").exists()
