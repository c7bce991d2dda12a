"""The slurm role's partitions without a testbed: slurm.conf rendered by
Ansible's own template lookup with the role's defaults and vars (include_role,
public) for four nodes in an inventory; and the verify step's partition check
fed what sinfo prints. With the defaults, slurm.conf is the one-partition file
every testbed had; with partitions, each is a PartitionName line whose nodes
are all declared NodeName lines. Golden files in golden/
(HPCBENCH_UPDATE_GOLDEN=1 rewrites them after a deliberate change). `make
test` runs these, `verify` skips them (conftest.py)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from tests.infra.test_role_inputs import ANSIBLE, RENDERED, playbook

ROLE = ANSIBLE / "roles/slurm"
GOLDEN = Path(__file__).resolve().parent / "golden"
NODES = [f"node{i}" for i in range(1, 5)]
TWO = [
    {"name": "fast", "nodes": ["node1", "node2"]},
    {"name": "slow", "nodes": ["node2", "node3", "node4"]},
]


def four_nodes(tmp_path: Path) -> Path:
    """An inventory of node1..node4 (all this machine, connection local) with the
    CPUs and GPUs tasks/main.yml works out per node before it writes slurm.conf."""
    nodes = [
        {"name": n, "address": f"172.30.0.{10 + i}", "gpus": 0} for i, n in enumerate(NODES, 1)
    ]
    hosts = {
        n: {
            "ansible_connection": "local",
            "ansible_python_interpreter": sys.executable,
            "slurm_node_cpus": 2 if n == "node1" else 1,
            "slurm_node_gpus": 0,
        }
        for n in NODES
    }
    inventory = tmp_path / "inventory.yml"
    all_vars = {**RENDERED, "testbed_nodes": nodes, "testbed_head": "node1"}
    inventory.write_text(yaml.safe_dump({"all": {"vars": all_vars, "hosts": hosts}}))
    return inventory


def render_slurm_conf(tmp_path: Path, variables: dict) -> str:
    """slurm.conf as node1 of four container nodes writes it; the role's
    input checks run first, as in tasks/main.yml."""
    out = tmp_path / "slurm.conf"
    template = ROLE / "templates/slurm.conf.j2"
    tasks = [
        {
            "ansible.builtin.include_role": {
                "name": "slurm",
                "tasks_from": "validate",
                "public": True,
            }
        },
        {"ansible.builtin.include_vars": str(ROLE / "vars/Debian.yml")},
        {
            "ansible.builtin.copy": {
                "content": f"{{{{ lookup('ansible.builtin.template', '{template}') }}}}",
                "dest": str(out),
                "mode": "0600",
            },
        },
    ]
    play = {
        "name": "render slurm.conf",
        "hosts": "node1",
        "gather_facts": False,
        "vars": {"node_facts_in_container": True, **variables},
        "tasks": tasks,
    }
    result = playbook(tmp_path, [play], inventory=str(four_nodes(tmp_path)))
    assert result.returncode == 0, result.stdout[-3000:]
    return out.read_text()


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("HPCBENCH_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.is_file(), f"no golden file {path}: run with HPCBENCH_UPDATE_GOLDEN=1 once"
    assert text == path.read_text(), f"{name} changed (HPCBENCH_UPDATE_GOLDEN=1 if deliberate)"


def lines(conf: str, key: str) -> list[dict[str, str]]:
    """Every `key=...` line of slurm.conf as its Key=Value pairs."""
    return [
        dict(word.split("=", 1) for word in line.split())
        for line in conf.splitlines()
        if line.startswith(f"{key}=")
    ]


def check_partitions(conf: str, expected: list[dict]) -> None:
    """The PartitionName lines are `expected`, in order, the first the only
    default, all up; each holds only declared nodes and every node is in one."""
    declared = [n["NodeName"] for n in lines(conf, "NodeName")]
    parts = lines(conf, "PartitionName")
    got = [{"name": p["PartitionName"], "nodes": p["Nodes"].split(",")} for p in parts]
    assert got == expected, conf
    assert [p["Default"] for p in parts] == ["YES"] + ["NO"] * (len(parts) - 1), conf
    assert all(p["State"] == "UP" and p["MaxTime"] == "INFINITE" for p in parts), conf
    for p in got:
        undeclared = set(p["nodes"]) - set(declared)
        assert not undeclared, f"partition {p['name']} holds undeclared nodes {undeclared}"
    assert {n for p in got for n in p["nodes"]} == set(declared), "a node in no partition"


def test_default_is_the_one_partition_of_every_node_as_before(tmp_path: Path) -> None:
    conf = render_slurm_conf(tmp_path, {})
    # Rendered by the template before partitions existed: existing testbeds keep their
    # slurm.conf byte for byte (no restart of the daemons on the next deploy).
    golden("slurm-default.conf", conf)
    check_partitions(conf, [{"name": "testbed", "nodes": NODES}])


def test_two_partitions_sharing_a_node(tmp_path: Path) -> None:
    conf = render_slurm_conf(tmp_path, {"slurm_partitions": TWO})
    golden("slurm-two-partitions.conf", conf)
    check_partitions(conf, TWO)
    assert lines(conf, "NodeName") == lines(render_slurm_conf(tmp_path, {}), "NodeName")


def test_slurm_partition_names_the_default_partition(tmp_path: Path) -> None:
    conf = render_slurm_conf(tmp_path, {"slurm_partition": "all"})
    check_partitions(conf, [{"name": "all", "nodes": NODES}])


# What sinfo --noheader --Node --format "%P %a %N" prints for TWO, and faults.
SOUND = ["fast* up node1", "fast* up node2", "slow up node2", "slow up node3", "slow up node4"]
SINFO = {
    "sound": (SOUND, None),
    "node_missing": ([r for r in SOUND if r != "slow up node3"], "partition slow should be up"),
    "extra_node": ([*SOUND, "fast* up node3"], "partition fast* should be up"),
    "down": (
        [r.replace(" up ", " down ") if r.startswith("slow") else r for r in SOUND],
        "availability down",
    ),
    "default_elsewhere": (
        [r.replace("fast*", "fast").replace("slow", "slow*") for r in SOUND],
        "partition fast* should be up",
    ),
    "no_partitions": ([], "no such partition"),
}


@pytest.fixture(scope="module")
def verify_outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """The verify step's partition check (tasks/verify.yml, as written there) run
    once per sinfo output: case -> the failure messages (none: it passed)."""
    tmp = tmp_path_factory.mktemp("verify")
    steps = yaml.safe_load((ROLE / "tasks/verify.yml").read_text())
    check = next(
        t for t in steps if t["name"] == "Check that each partition is up and holds its nodes"
    )
    check = {k: v for k, v in check.items() if k != "run_once"}
    out = tmp / "outcomes.json"
    tasks: list[dict] = [{"ansible.builtin.set_fact": {"outcomes": {}}}]
    for case, (rows, _) in SINFO.items():
        failed = (
            "ansible_failed_result.results | selectattr('failed') | map(attribute='msg') | list"
        )
        record = "{{ outcomes | combine({'" + case + "': %s}) }}"
        tasks.append(
            {
                "name": case,
                "vars": {"slurm_partitions": TWO, "slurm_sinfo_partitions": {"stdout_lines": rows}},
                "block": [check, {"ansible.builtin.set_fact": {"outcomes": record % "[]"}}],
                "rescue": [{"ansible.builtin.set_fact": {"outcomes": record % failed}}],
            }
        )
    tasks.append(
        {
            "ansible.builtin.copy": {
                "content": "{{ outcomes | to_json }}",
                "dest": str(out),
                "mode": "0600",
            }
        }
    )
    play = {
        "name": "verify",
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "tasks": tasks,
    }
    result = playbook(tmp, [play])
    assert result.returncode == 0 and out.is_file(), result.stdout[-3000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize("case", sorted(SINFO))
def test_verify_checks_each_partition_with_sinfo(verify_outcomes, case: str) -> None:
    expect = SINFO[case][1]
    got = verify_outcomes.get(case)
    assert got is not None, "the case did not run"
    if expect is None:
        assert got == [], got
    else:
        assert got and expect in got[0], got
