"""The link-rate grammar says the same wherever it is checked. On the same generated
text (tc's units and others, any case, spaces, signs, decimals, huge numbers, other
scripts' digits, any text) Python's check (allreduce_model.is_tc_rate), every
Terraform validation of a rate as tofu evaluates it, and the link_shaping role's
check as Ansible evaluates it agree; and a rate a campaign keeps, Terraform and the
role take. One tofu and one Ansible process a batch of strings, a few batches a run."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from hpcbench.campaign import checks
from hpcbench.core.errors import UsageError
from hpcbench.performance.allreduce_model import is_tc_rate
from hpcbench.testbeds.terraform import find_binary
from tests import link_rates
from tests.infra.test_role_inputs import playbook

# tc's units (tc(8), RATES: SI and IEC, bits and bytes), a few near misses, none.
UNITS = ["bit", "kbit", "mbit", "gbit", "tbit", "bps", "kbps", "mbps", "gbps", "tbps"]
UNITS += ["kibit", "mibit", "gibit", "tibit", "kibps", "gbits", "gb", "g", "b", ""]
CASED_UNIT = st.sampled_from(UNITS).flatmap(
    lambda unit: st.lists(st.booleans(), min_size=len(unit), max_size=len(unit)).map(
        lambda caps: "".join(c.upper() if up else c for c, up in zip(unit, caps, strict=True))
    )
)
NUMBER = st.one_of(
    st.from_regex(r"[0-9]{1,30}([.][0-9]{0,4})?", fullmatch=True),
    st.sampled_from([".5", "1.", "1e9", "1E3", "0x1f", "inf", "nan", "1_000", "1,5", "0"]),
    st.text(st.characters(categories=["Nd"]), min_size=1, max_size=3),
)
AROUND = st.sampled_from(["", "", " ", "\t", "\n", "\r", "\u00a0", "\u2009", "+", "-"])
RATE_LIKE = st.builds(
    lambda before, number, gap, unit, after: before + number + gap + unit + after,
    AROUND,
    NUMBER,
    st.sampled_from(["", "", " ", "  "]),
    CASED_UNIT,
    AROUND,
)
TEXT = st.one_of(RATE_LIKE, RATE_LIKE, RATE_LIKE, st.text(max_size=12))
# In every batch, whatever Hypothesis draws: the forms that once split the checks.
KNOWN = ["", "1gbit", "10 Gbit", "1Gbit", "1.5mbit", "1tbit", "1gbit\n", "\uff11gbit"]
BATCH = 200


def python_says(text: str) -> bool:
    return text == "" or is_tc_rate(text)


def tofu_says(binary: str, folder: Path, strings: list[str]) -> dict[str, list[bool]]:
    """Each Terraform validation of a rate, by file and rate, on every string: one
    expression in one `tofu console` (no configuration, so no init; piped, it prints
    only its last expression's value)."""
    conditions = link_rates.terraform_conditions()
    assert conditions, "no Terraform validation of a rate found"
    (folder / "strings.json").write_text(json.dumps(strings))
    each = [
        f'join("", [for s in jsondecode(file("strings.json")) : ({c.over_s()}) ? "1" : "0"])'
        for c in conditions
    ]
    proc = subprocess.run(
        [binary, "console"],
        input=f'join(",", [{", ".join(each)}])\n',
        cwd=folder,
        env={"PATH": "/usr/bin:/bin", "HOME": str(folder), "CHECKPOINT_DISABLE": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    answers = json.loads(proc.stdout).split(",")  # "0110...,0110...": no escape in it
    assert [len(a) for a in answers] == [len(strings)] * len(conditions), proc.stdout[-2000:]
    return {
        f"{c.file} {c.ref}": [bit == "1" for bit in answer]
        for c, answer in zip(conditions, answers, strict=True)
    }


def ansible_says(folder: Path, strings: list[str]) -> list[bool]:
    """The role's check task itself, looped over the strings in one ansible-playbook
    run. The strings come through a lookup, so Ansible never templates them."""
    source, verdicts = folder / "strings.json", folder / "verdicts.json"
    source.write_text(json.dumps(strings))
    check = {
        **link_rates.role_check(),
        "loop": f"{{{{ lookup('ansible.builtin.file', '{source}') | from_json }}}}",
        "loop_control": {"loop_var": "link_shaping_rate", "label": "rate"},
        "vars": {
            "link_shaping_rate_pattern": link_rates.role_vars()["link_shaping_rate_pattern"],
            "link_shaping_iface_resolved": "lo",
        },
        "ignore_errors": True,
        "register": "checked",
    }
    record = {
        "ansible.builtin.copy": {
            "content": "{{ checked.results | map(attribute='msg', default='') | list | to_json }}",
            "dest": str(verdicts),
            "mode": "0600",
        }
    }
    play = {"hosts": "localhost", "connection": "local", "gather_facts": False}
    result = playbook(folder, [{**play, "tasks": [check, record]}])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    messages = json.loads(verdicts.read_text())
    assert len(messages) == len(strings)
    # A failure is the check's own message, never an error evaluating it.
    odd = [m for m in messages if m != "All assertions passed" and "link_rate must be" not in m]
    assert not odd, odd[:3]
    return [m == "All assertions passed" for m in messages]


def campaign_keeps(text: str) -> str | None:
    """The rate a campaign keeps for a testbed's link_rate setting; None if refused."""
    try:
        return checks.link("link_rate", text, "link_rate")
    except checks.Problem:
        return None


@pytest.fixture(scope="module")
def tofu() -> str:
    try:
        return find_binary()
    except UsageError as err:
        pytest.skip(str(err))


# No shrinking: a step is an Ansible run (seconds), and the failure names the strings.
# A batch is BATCH strings by design (one tofu and one Ansible run each), so even its
# smallest draw is large: the health check that says so (large_base_example, raised on
# a fresh clone's first run) is not a finding here.
@settings(
    max_examples=3,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)
@given(st.lists(TEXT, min_size=BATCH, max_size=BATCH))
def test_python_terraform_and_ansible_agree_on_every_rate(tofu, drawn):
    kept = [k for k in map(campaign_keeps, drawn) if k is not None]
    strings = list(dict.fromkeys(KNOWN + drawn + kept))
    with tempfile.TemporaryDirectory() as tmp:
        terraform = tofu_says(tofu, Path(tmp), strings)
        ansible = ansible_says(Path(tmp), strings)
    disagree = []
    for i, text in enumerate(strings):
        says = {"python": python_says(text), "ansible": ansible[i]}
        says |= {where: verdicts[i] for where, verdicts in terraform.items()}
        if len(set(says.values())) > 1:
            disagree.append((text, says))
    assert not disagree, disagree[:5]
    assert all(python_says(k) for k in kept)
