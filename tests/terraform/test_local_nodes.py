"""ENV=local with nodes that differ: a link rate of their own (node_link_rates)
and Slurm partitions over them (slurm_partitions). environments/local/tests
shows that good values reach the inventory. Here, with Docker mocked the same
way: bad values, and values naming nodes the testbed does not have, stop the
plan with one message saying what to set (a `terraform test` run cannot
expect a child module's output to fail, so each refusal is a run expected to
fail, in a directory of its own); and the rendered inventory, read with the
environments' group_vars as the checks read it (tests/infra: ansible-inventory),
gives each node its own link_rate."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from hpcbench.testbeds.terraform import summarize_error
from tests.infra import conftest as infra
from tests.terraform.conftest import ENVIRONMENTS

SUITE = ENVIRONMENTS / "local" / "tests" / "env.tftest.hcl"

# case -> (variables block of its run, the message a plan must stop with)
REFUSALS = {
    "rate_for_a_node_it_does_not_have": (
        'node_count = 3\n    node_link_rates = { node4 = "200mbit" }',
        "node_link_rates names node4, which this testbed does not have: "
        "name its nodes (node1, node2, node3).",
    ),
    "node_named_by_its_container": (
        'node_link_rates = { "hpcbench-local-node3" = "200mbit" }',
        "node_link_rates must name nodes as the inventory does, node1 (the head) to nodeN, "
        "not by container name",
    ),
    "rate_not_a_tc_rate": (
        'node_link_rates = { node3 = "200M" }',
        "node_link_rates must map node names to tc rates such as 100mbit, 1gbit or 10gbit",
    ),
    "partition_of_a_node_it_does_not_have": (
        "node_count = 2\n    "
        'slurm_partitions = [{ name = "all", nodes = ["node1", "node2", "node3"] }]',
        "slurm_partitions names node3, which this testbed does not have: list its nodes "
        "(node1, node2).",
    ),
    "node_in_no_partition": (
        'slurm_partitions = [{ name = "fast", nodes = ["node1", "node2"] }]',
        "slurm_partitions leaves node3, node4 in no partition: add each node to at least one",
    ),
    "partition_named_default": (
        'slurm_partitions = [{ name = "DEFAULT", nodes = ["node1", "node2", "node3", "node4"] }]',
        "slurm_partitions must be a list of {",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_bad_values_stop_the_plan_with_one_message(tf, tf_tree: Path, case: str) -> None:
    """Each case a test directory of its own: terraform prints the runs on stdout and
    their errors on stderr, so one directory per case keeps each error with its case."""
    variables, message = REFUSALS[case]
    header = SUITE.read_text().split('\nrun "')[0]  # the suite's mocks and variables
    folder = tf_tree / "environments" / "local" / f"refusal-{case}"
    folder.mkdir(exist_ok=True)
    run = f'run "{case}" {{\n  command = plan\n  variables {{\n    {variables}\n  }}\n}}\n'
    (folder / "refusal.tftest.hcl").write_text(header + "\n" + run)
    result = tf("environments/local")("test", f"-test-directory={folder.name}")
    assert result.rc != 0, result.out
    assert f'run "{case}"... fail' in result.out, result.out
    assert len(re.findall(r"^Error: ", result.out, flags=re.M)) == 1, result.out
    assert message in " ".join(result.out.split()), result.out
    # The line `hpcbench deploy` prints for it.
    assert message in summarize_error(result.out), summarize_error(result.out)


def test_each_node_gets_its_own_rate_as_the_checks_read_it(
    tf, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The inventory module's YAML, planned (not written), read through the
    common and local group_vars with ansible-inventory: testbed.var("link_rate",
    node) is what tests/infra/test_link_shaping.py compares each node with."""
    nodes = [
        {
            "name": f"node{i}",
            "address": f"172.30.0.{10 + i}",
            "ssh_host": "127.0.0.1",
            "ssh_port": 22200 + i,
            "ssh_user": "root",
            "role": "head" if i == 1 else "worker",
            "gpus": 0,
            "kind": "container",
        }
        for i in range(1, 5)
    ]
    partitions = [
        {"name": "fast", "nodes": ["node1", "node2"]},
        {"name": "slow", "nodes": ["node3", "node4"]},
    ]
    tfvars = tmp_path / "vars.tfvars.json"
    tfvars.write_text(
        json.dumps(
            {
                "env": "local",
                "ssh_private_key_file": "/nonexistent/id_ed25519",
                "nodes": nodes,
                "node_link_rates": {"node3": "200mbit", "node4": "200mbit"},
                "deploy_vars": {
                    "hpcbench_state_dir": str(tmp_path / "state"),
                    "stack_image": "hpcbench/stack:latest",
                    "hpcbench_iface": "eth0",
                    "link_rate": "1gbit",
                    "enable_slurm": True,
                    "slurm_partitions": partitions,
                },
            }
        )
    )
    runner = tf("terraform/modules/inventory")
    plan = tmp_path / "plan"
    result = runner("plan", "-input=false", "-lock=false", f"-var-file={tfvars}", f"-out={plan}")
    assert result.rc == 0, result.out
    shown = runner("show", "-json", str(plan))
    assert shown.rc == 0, shown.out
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(json.loads(shown.out)["planned_values"]["outputs"]["yaml"]["value"])

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    testbed = infra.Testbed(str(inventory))
    rates = {n: testbed.var("link_rate", n) for n in testbed.hosts}
    assert rates == {"node1": "1gbit", "node2": "1gbit", "node3": "200mbit", "node4": "200mbit"}
    assert all(testbed.var("enable_link_shaping", n) is True for n in testbed.hosts)
    assert testbed.var("slurm_partitions") == partitions
