"""One link-rate grammar: Python states it (allreduce_model.TC_RATE), Terraform's
validations and the link_shaping role hold the very same pattern, and a campaign
keeps a rate in that spelling, so a rate the campaign takes is one the testbed
takes. (tests/infra/test_link_rate_agreement.py has tofu and Ansible evaluate
the patterns on generated text.)"""

from __future__ import annotations

import json
import re

import pytest

from hpcbench import cli
from hpcbench.campaign import campaign_file
from hpcbench.performance.allreduce_model import (
    RATE_UNITS,
    TC_RATE,
    is_tc_rate,
    nominal_bytes_per_s,
    tc_rate,
)
from tests import link_rates


def test_every_terraform_validation_of_a_rate_holds_the_grammar():
    conditions = link_rates.terraform_conditions()
    assert {(c.file, c.ref) for c in conditions} >= {
        ("environments/local/variables.tf", "var.link_rate"),
        ("environments/local/variables.tf", "values(var.node_link_rates)"),
        ("terraform/modules/inventory/variables.tf", "var.deploy_vars.link_rate"),
        ("terraform/modules/inventory/variables.tf", "values(var.node_link_rates)"),
    }
    for condition in conditions:
        # regex() searches: anchored, and RE2's "$" is the end of the text (no m flag).
        assert condition.patterns() == [f"^{TC_RATE}$"], condition
    # Nor does any other place (a condition over lines, a local) spell a rate otherwise.
    for path in link_rates.terraform_files():
        for pattern in re.findall(r'"(\^[^"]*bit[^"]*)"', path.read_text()):
            assert pattern == f"^{TC_RATE}$", path


def test_the_link_shaping_role_holds_the_grammar():
    values = link_rates.role_vars()
    assert values["link_shaping_rate_pattern"] == rf"^{TC_RATE}\Z"
    assert values["link_shaping_units"] == RATE_UNITS
    # The check and the arithmetic read that pattern, and the role spells no other.
    (check,) = [c for c in link_rates.role_check()["ansible.builtin.assert"]["that"] if "rate" in c]
    assert "link_shaping_rate is match(link_shaping_rate_pattern)" in check
    assert "regex_search(link_shaping_rate_pattern," in values["link_shaping_rate_parts"]
    for path in link_rates.ROLE.rglob("*"):
        if path.is_file():
            literals = re.findall(r"(?:match|search)\(\s*['\"]([^'\"]*)", path.read_text())
            assert not [p for p in literals if "bit" in p], path


@pytest.mark.parametrize(
    ("text", "bytes_per_s"),
    [("1gbit", 1.25e8), ("10gbit", 1.25e9), ("2.5mbit", 312_500), ("100kbit", 12_500)]
    + [("1tbit", 1.25e11), ("8bit", 1)],
)
def test_tc_s_spelling_is_a_rate_and_kept_as_it_is(text, bytes_per_s):
    assert is_tc_rate(text) and tc_rate(text) == text
    assert nominal_bytes_per_s(text) == bytes_per_s


@pytest.mark.parametrize(
    ("written", "kept"),
    [(" 10 Gbit ", "10gbit"), ("2.5 MBIT", "2.5mbit"), ("1Tbit", "1tbit"), ("1gbit\n", "1gbit")],
)
def test_a_person_s_spelling_is_read_and_kept_in_tc_s(written, kept):
    assert not is_tc_rate(written) and tc_rate(written) == kept
    assert nominal_bytes_per_s(written) is None  # a record holds tc's spelling


@pytest.mark.parametrize(
    "text",
    # strtod's forms, IEC and byte units, a bare number, half a decimal, other digits.
    ["1e9bit", "+1gbit", "-1gbit", "0x10gbit", "infgbit", "1kibit", "1mbps", "1000"]
    + ["1.gbit", ".5gbit", "1,5gbit", "1 0gbit", "\uff11gbit", "1\u212abit", "1gbits", ""],
)
def test_what_tc_may_take_but_nobody_means_is_no_rate(text):
    assert not is_tc_rate(text) and tc_rate(text) is None


CAMPAIGN = """name: rates
sweep: {{model: resnet18, image_size: 32, batch: 4, nodes: [1, 2], repeats: 1}}
testbeds:
  - name: a
    env: local
    settings: {{node_count: 4, link_rate: {rate}, node_link_rates: {nodes}}}
"""


def test_a_campaign_keeps_its_rates_as_the_testbed_takes_them(tmp_path):
    """'10 Gbit' passed the load and stopped `tofu plan`; now it is kept as 10gbit."""
    path = tmp_path / "c.yaml"
    path.write_text(
        CAMPAIGN.format(rate='"10 Gbit"', nodes='{node3: "200 Mbit", node4: ""}'),
        encoding="utf-8",
    )
    (testbed,) = campaign_file.load(path).testbeds
    settings = dict(testbed.settings)
    assert settings["link_rate"] == "10gbit"
    assert json.loads(settings["node_link_rates"]) == {"node3": "200mbit", "node4": ""}
    for rate in (settings["link_rate"], *json.loads(settings["node_link_rates"]).values()):
        assert rate == "" or is_tc_rate(rate)


@pytest.mark.parametrize(
    ("rate", "nodes", "where", "said"),
    [
        ('"1 kibit"', "{}", "settings.link_rate", "is not a line rate"),
        ("1gbit", '{node3: "200M"}', "settings.node_link_rates['node3']", "is not a line rate"),
        ("1gbit", "{node3: 200}", "settings.node_link_rates['node3']", "must be a line rate"),
        ("1gbit", "node3=200mbit", "settings.node_link_rates", "must map node names"),
    ],
)
def test_a_rate_no_testbed_takes_is_one_line(
    tmp_path, capsys, monkeypatch, rate, nodes, where, said
):
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))
    path = tmp_path / "c.yaml"
    path.write_text(CAMPAIGN.format(rate=rate, nodes=nodes), encoding="utf-8")
    assert cli.main(["campaign", "plan", str(path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"hpcbench: error: {path}: testbeds[0].{where}: ") and said in line
    assert not (tmp_path / "state").exists()
