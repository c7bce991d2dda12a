"""The docs' local-testbed examples use what a default deploy really gives,
read from the Terraform and Ansible defaults, so that they cannot drift."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.unit.test_testbed_variables import variables

REPO = Path(__file__).resolve().parents[2]


def default(directory: str, name: str) -> str:
    """A Terraform variable's `default` in the directory's .tf files."""
    match = re.search(r"^\s*default\s*=\s*(\S+)", variables(directory)[name], flags=re.M)
    assert match, f"{directory}: {name} has no default"
    return match[1]


def deployed_defaults() -> tuple[int, str]:
    """(node1's published SSH port, the Slurm partition) of
    `make deploy ENV=local SLURM=true` with nothing else set."""
    # The environment leaves ssh_port_base unset (null): the module's default
    # applies, and node i is published on ssh_port_base + i.
    assert default("environments/local", "ssh_port_base") == "null"
    port = int(default("terraform/modules/docker_testbed", "ssh_port_base")) + 1
    # The environment passes no partitions (null): the role's one partition.
    roles = yaml.safe_load((REPO / "ansible/roles/slurm/defaults/main.yml").read_text())
    return port, roles["slurm_partition"]


def slurm_examples(doc: str) -> list[dict]:
    """Every testbed's `slurm:` mapping in the document's yaml blocks."""
    found = []
    for block in re.findall(r"```yaml\n(.*?)```", (REPO / doc).read_text(), flags=re.S):
        for testbed in yaml.safe_load(block):
            if isinstance(testbed, dict) and "slurm" in testbed:
                found.append(testbed["slurm"])
    return found


def test_slurm_doc_local_example_matches_a_default_deploy() -> None:
    port, partition = deployed_defaults()
    examples = slurm_examples("docs/slurm.md")
    assert examples, "docs/slurm.md has no local slurm: example"
    for slurm in examples:
        assert slurm["partition"] == partition, slurm
        assert slurm["login"] == f"hpcbench@127.0.0.1:{port}", slurm
