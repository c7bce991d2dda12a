"""`terraform validate` for every testbed environment and the `terraform test`
suites (plan-only, mock providers) that assert node counts, link capacity,
topology, firewall rules and the `nodes` mapping. No credentials needed: the
environments whose provider talks to a service at plan time (openstack, local)
are planned against a closed local port and must fail there and only there."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
import yaml

from hpcbench.testbeds.terraform import summarize_error
from tests.terraform.conftest import ENVIRONMENTS, PUBKEY, REPO, TERRAFORM, env_root, mirror_has

ENVS = ["virtualwall", "virtualwall-10g", "gpulab", "openstack", "local"]
# Directories holding tests/*.tftest.hcl, and how many runs each must report.
# environments/virtualwall: its own suite (1) and virtualwall-10g's (2).
SUITES = {
    "terraform/modules/inventory": 15,
    "terraform/modules/virtualwall": 11,
    "terraform/modules/gpulab": 6,
    "terraform/modules/openstack/plan": 9,
    "terraform/modules/docker_testbed": 12,
    "environments/virtualwall": 3,
    "environments/gpulab": 3,
    "environments/local": 5,
}
# Providers tools/providers.sh builds beyond hashicorp/local (conftest skips without that).
PROVIDERS = {"openstack": "terraform-provider-openstack/openstack", "local": "kreuzwerker/docker"}


def needs_provider(env: str) -> None:
    provider = PROVIDERS.get(env)
    if provider and not mirror_has(provider):
        pytest.fail(
            f"{provider} is not in the provider mirror: run `make providers` "
            "(tools/providers.sh builds it from the Go module proxy)"
        )


def closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("env", ENVS)
def test_validate(tf, env: str) -> None:
    needs_provider(env)
    result = tf(env_root(env)[0])("validate")
    assert result.rc == 0, result.out


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_terraform_test(tf, suite: str) -> None:
    result = tf(suite)("test")
    assert result.rc == 0, result.out
    summary = re.search(r"(\d+) passed, (\d+) failed", result.out)
    assert summary, result.out
    assert (int(summary[1]), int(summary[2])) == (SUITES[suite], 0), result.out


def test_suites_cover_every_tftest_file() -> None:
    found = {
        str(p.parent.parent.relative_to(REPO))
        for tree in (TERRAFORM, ENVIRONMENTS)
        for p in tree.rglob("*.tftest.hcl")
        if ".terraform" not in p.parts
    }
    assert found == set(SUITES)


def plan(tf, env: str, tmp_path: Path, **environ: str):
    """`terraform plan` of an environment as `hpcbench deploy` runs it, with
    the controller key and a state dir under tmp_path, plus `environ`."""
    folder, var_files = env_root(env)
    return tf(folder)(
        "plan",
        "-input=false",
        "-lock=false",
        *var_files,
        env={
            "TF_VAR_ssh_public_key_file": str(PUBKEY),
            "TF_VAR_ssh_private_key_file": str(tmp_path / "id_ed25519"),
            "TF_VAR_state_dir": str(tmp_path / "state"),
            **environ,
        },
    )


@pytest.mark.parametrize("env", ["virtualwall", "virtualwall-10g", "gpulab", "openstack"])
def test_plan_without_credentials_names_the_first_missing(tf, env: str, tmp_path) -> None:
    """What `make deploy ENV=... ` without credentials sees: one line, nothing created."""
    needs_provider(env)
    first = {"openstack": "cloud"}.get(env, "project")
    result = plan(tf, env, tmp_path)
    assert result.rc != 0
    assert f'input variable "{first}" is not set' in result.out, result.out
    line = summarize_error(result.out)
    assert f"TF_VAR_{first}" in line and "\n" not in line
    assert not (tmp_path / "state").exists(), "a failed plan must create nothing"


def assert_fails_only_at(result, tmp_path: Path, needles: list[str], to_add: int) -> None:
    """The plan got through the configuration (`to_add` resources planned) and
    its one error is the connection that names every needle."""
    assert result.rc != 0
    errors = re.findall(r"^Error: (.*)$", result.out, flags=re.M)
    assert len(errors) == 1, result.out
    assert all(n in errors[0] for n in needles), result.out
    assert f"Plan: {to_add} to add, 0 to change, 0 to destroy." in result.out, result.out
    assert not (tmp_path / "state").exists(), "a failed plan must create nothing"


def test_openstack_plans_everything_and_fails_only_at_authentication(tf, tmp_path: Path) -> None:
    """No cloud here: the clouds.yaml entry sends Keystone to a closed local
    port. Every resource must plan; the one error is the provider's token
    request (POST <auth_url>/auth/tokens, Keystone v3's password login) being
    refused, which a configuration error would come before."""
    needs_provider("openstack")
    port = closed_port()
    clouds = tmp_path / "clouds.yaml"
    auth = {
        "auth_url": f"http://127.0.0.1:{port}/v3",
        "username": "offline",
        "password": "offline",
        "project_name": "offline",
        "user_domain_name": "Default",
        "project_domain_name": "Default",
    }
    clouds.write_text(yaml.safe_dump({"clouds": {"offline": {"auth": auth}}}))
    result = plan(
        tf,
        "openstack",
        tmp_path,
        OS_CLIENT_CONFIG_FILE=str(clouds),
        TF_VAR_cloud="offline",
        TF_VAR_flavor_name="g1.large-gpu",
        TF_VAR_network_name="tenant-net",
        TF_VAR_allowed_cidr="192.0.2.10/32",
    )
    # 8: 4 instances (the default node_count), the key pair, the group and its 2 rules.
    needles = [f"http://127.0.0.1:{port}/v3/auth/tokens", "connection refused"]
    assert_fails_only_at(result, tmp_path, needles, to_add=8)


def test_local_plans_and_fails_only_at_the_docker_daemon(tf, tmp_path: Path) -> None:
    """ENV=local without touching this machine's Docker: DOCKER_HOST names a
    closed local port. The one error is the provider's ping of the daemon; the
    network, shared volume and CPU limit plan (the containers wait for the
    node image, which the daemon would report)."""
    needs_provider("local")
    port = closed_port()
    result = plan(tf, "local", tmp_path, DOCKER_HOST=f"tcp://127.0.0.1:{port}")
    needles = [f"tcp://127.0.0.1:{port}", "Cannot connect to the Docker daemon"]
    assert_fails_only_at(result, tmp_path, needles, to_add=3)


def test_fmt_clean(tf_binary: str) -> None:
    import subprocess

    dirs = [TERRAFORM / "modules" / m for m in ("virtualwall", "gpulab", "openstack")]
    dirs += sorted({REPO / env_root(e)[0] for e in ENVS}) + [ENVIRONMENTS / "common"]
    proc = subprocess.run(
        [tf_binary, "fmt", "-check", "-recursive", *map(str, dirs)], capture_output=True, text=True
    )
    assert proc.returncode == 0, f"run terraform fmt on: {proc.stdout}"
