"""Conventions of the real-testbed Terraform variables, checked statically:
every variable says what it is and validates its value with a message that
says what to do; credentials have no default (so a missing one stops `plan`,
and `hpcbench deploy` names it) and the password is sensitive."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TERRAFORM = Path(__file__).resolve().parents[2] / "terraform"
DIRS = [
    "envs/virtualwall",
    "envs/gpulab",
    "envs/openstack",
    "modules/virtualwall",
    "modules/gpulab",
    "modules/openstack",
    "modules/openstack/plan",
]
CREDENTIALS = {
    "envs/virtualwall": {"project", "pem_path", "pem_password"},
    "envs/gpulab": {"project", "pem_path", "pem_password", "stack_image"},
    "envs/openstack": {"cloud", "allowed_cidr", "flavor_name", "network_name"},
}


def variables(directory: str) -> dict[str, str]:
    """name -> body of every `variable` block in the directory's variables.tf."""
    text = (TERRAFORM / directory / "variables.tf").read_text()
    blocks: dict[str, str] = {}
    for match in re.finditer(r'^variable "(\w+)" \{', text, flags=re.M):
        depth, i = 0, match.end() - 1
        for i in range(match.end() - 1, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                break
        blocks[match[1]] = text[match.end() : i]
    return blocks


@pytest.mark.parametrize("directory", DIRS)
def test_every_variable_is_described_and_validated(directory: str) -> None:
    found = variables(directory)
    assert found
    for name, body in found.items():
        if re.search(r"type\s*=\s*bool", body):
            continue  # nothing to validate in a bool
        assert re.search(r'description\s*=\s*"[^"]{10,}', body), f"{directory}: {name}"
        assert "validation {" in body, f"{directory}: {name} has no validation"
        assert re.search(r'error_message\s*=\s*"[^"]{15,}', body), f"{directory}: {name}"


@pytest.mark.parametrize("directory", sorted(CREDENTIALS))
def test_credentials_have_no_default_and_say_how_to_set_them(directory: str) -> None:
    found = variables(directory)
    for name in CREDENTIALS[directory]:
        body = found[name]
        assert "default" not in body, f"{directory}: {name} must have no default"
        assert f"TF_VAR_{name}" in body, f"{directory}: {name} must say how to set it"


@pytest.mark.parametrize(
    "directory", ["envs/virtualwall", "envs/gpulab", "modules/virtualwall", "modules/gpulab"]
)
def test_pem_password_is_sensitive(directory: str) -> None:
    assert re.search(r"sensitive\s*=\s*true", variables(directory)["pem_password"])


def test_virtualwall_10g_shares_everything_but_its_rate() -> None:
    ten = TERRAFORM / "envs/virtualwall-10g"
    for name in ("main.tf", "variables.tf", "outputs.tf", "versions.tf"):
        assert (ten / name).resolve() == (TERRAFORM / "envs/virtualwall" / name).resolve()
    assert "default_link_capacity_mbps = 10000" in (ten / "env.tf").read_text()
    assert (
        "default_link_capacity_mbps = 1000\n" in (TERRAFORM / "envs/virtualwall/env.tf").read_text()
    )
