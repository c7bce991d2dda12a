"""Conventions of the real-testbed Terraform variables, checked statically:
every variable says what it is and validates its value with a message that
says what to do; credentials have no default (so a missing one stops `plan`,
and `hpcbench deploy` names it). The PEM password is no variable at all: a
saved plan holds every variable in clear, so the module scripts read it from
HPCBENCH_PEM_PASSWORD. An environment declares a module's setting only to
pass it on (null: the module's default), never with a copy of its
description or checks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from hpcbench.core.secrets import looks_secret

REPO = Path(__file__).resolve().parents[2]
# Each environment and the module that declares its settings.
ENV_MODULE = {
    "environments/virtualwall": "terraform/modules/virtualwall",
    "environments/gpulab": "terraform/modules/gpulab",
    "environments/openstack": "terraform/modules/openstack",
    "environments/local": "terraform/modules/docker_testbed",
}
DIRS = [
    *ENV_MODULE,
    "terraform/modules/virtualwall",
    "terraform/modules/gpulab",
    "terraform/modules/openstack",
    "terraform/modules/openstack/plan",
    "terraform/modules/docker_testbed",
]
CREDENTIALS = {
    # disk_image: no default, the image name must be checked in jFed.
    "environments/virtualwall": {"project", "pem_path", "disk_image"},
    "environments/gpulab": {"project", "pem_path", "stack_image"},
    "environments/openstack": {"cloud", "allowed_cidr", "flavor_name", "network_name"},
}


def variables(directory: str, pattern: str = "*.tf") -> dict[str, str]:
    """name -> body of every `variable` block in the directory's .tf files (links followed)."""
    blocks: dict[str, str] = {}
    for tf in sorted((REPO / directory).glob(pattern)):
        text = tf.read_text()
        for match in re.finditer(r'^variable "(\w+)" \{', text, flags=re.M):
            depth, i = 0, match.end() - 1
            for i in range(match.end() - 1, len(text)):
                depth += {"{": 1, "}": -1}.get(text[i], 0)
                if depth == 0:
                    break
            blocks[match[1]] = text[match.end() : i]
    return blocks


def delegated(directory: str) -> dict[str, str]:
    """The environment's own variables (variables.tf; controller.tf and
    stack_container.tf are shared inputs) that its module declares: passed on."""
    module = variables(ENV_MODULE[directory]) if directory in ENV_MODULE else {}
    return {k: v for k, v in variables(directory, "variables.tf").items() if k in module}


@pytest.mark.parametrize("directory", DIRS)
def test_every_variable_is_described_and_validated(directory: str) -> None:
    found = variables(directory)
    assert found
    passed_on = delegated(directory)
    for name, body in found.items():
        if name in passed_on or re.search(r"type\s*=\s*bool", body):
            continue  # declared once in the module / nothing to validate in a bool
        assert re.search(r'description\s*=\s*"[^"]{10,}', body), f"{directory}: {name}"
        assert "validation {" in body, f"{directory}: {name} has no validation"
        assert re.search(r'error_message\s*=\s*"[^"]{15,}', body), f"{directory}: {name}"


@pytest.mark.parametrize("directory", sorted(ENV_MODULE))
def test_module_settings_are_passed_on_not_copied(directory: str) -> None:
    for name, body in delegated(directory).items():
        for copied in ("description", "validation", "error_message"):
            assert copied not in body, f"{directory}: {name} repeats the module's {copied}"
        assert "default" not in body or re.search(r"default\s*=\s*(null|\"\")", body), (
            f"{directory}: {name}'s default belongs to the module"
        )


@pytest.mark.parametrize("directory", sorted(CREDENTIALS))
def test_credentials_have_no_default_and_say_how_to_set_them(directory: str) -> None:
    found = variables(directory)
    module = variables(ENV_MODULE[directory])
    for name in CREDENTIALS[directory]:
        body = found[name]
        assert "default" not in body, f"{directory}: {name} must have no default"
        declared = module.get(name, body)
        assert "default" not in declared, f"{directory}: {name} must have no default"
        assert f"TF_VAR_{name}" in declared, f"{directory}: {name} must say how to set it"


@pytest.mark.parametrize("directory", DIRS)
def test_no_secret_is_a_variable(directory: str) -> None:
    # hpcbench deploy refuses such names (hpcbench.core.secrets.looks_secret); the
    # PEM password travels as HPCBENCH_PEM_PASSWORD in the scripts' environment.
    found = variables(directory)
    assert "pem_password" not in found, f"{directory}: pem_password must not be a variable"
    assert not [n for n in found if looks_secret(n)], f"{directory}: a secret as a variable"


def test_virtualwall_10g_shares_everything_but_its_rate() -> None:
    folder = REPO / "environments/virtualwall"
    assert not (REPO / "environments/virtualwall-10g").exists()
    variant = json.loads((folder / "virtualwall-10g.tfvars.json").read_text())
    assert variant == {"env": "virtualwall-10g", "link_capacity_mbps": 10000}
    base = variables("terraform/modules/virtualwall")["link_capacity_mbps"]
    assert re.search(r"default\s*=\s*1000\n", base)


def rendered_keys(env: str) -> set[str]:
    """Keys the inventory module writes to all.vars for an environment: its facts,
    deploy_vars' attributes with a value or default, and those the env's main.tf sets."""
    body = variables("terraform/modules/inventory")["deploy_vars"]
    kind = body[body.index("object({") : body.index("})")]
    always = re.findall(r"^\s+(\w+)\s+=\s+(?:string|number|bool|optional\(\w+, )", kind, re.M)
    keys = {"hpcbench_env", "testbed_nodes", "testbed_head", *always}
    if env != "common":
        main = (REPO / "environments" / env / "main.tf").read_text()
        given = main[main.index("deploy_vars = {") : main.index("\n  }", main.index("deploy_vars"))]
        keys |= set(re.findall(r"^\s+(\w+)\s+=", given, flags=re.M))
    return keys


@pytest.mark.parametrize("env", ["common", "local", "virtualwall", "gpulab", "openstack"])
def test_group_vars_never_set_what_the_rendered_inventory_sets(env: str) -> None:
    # A group_vars/all file outranks an inventory file's all.vars (Ansible's
    # stock order), so a key set in both would silently lose this deploy's value.
    keys = rendered_keys(env)
    assert {"link_rate", "hpcbench_state_dir", "stack_image", "hpcbench_python"} <= keys
    layers = sorted({"common", env})  # what the env's deploy reads: common's, then its own
    files = [f for e in layers for f in (REPO / "environments" / e).glob("inventory/*/*.yml")]
    for path in files:
        clash = keys & set(yaml.safe_load(path.read_text()) or {})
        assert not clash, f"{path.relative_to(REPO)} sets {sorted(clash)}, rendered per deploy"
