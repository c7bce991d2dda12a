"""`deploy`, `verify`, `destroy` and `envs`: the testbed's life cycle.

deploy = controller key -> terraform plan (bad input stops here, nothing
created) -> apply -> wait for sshd -> ansible-playbook site.yml.

The argparse Namespace stops in the cmd_* functions: each turns it into a
typed, checked request (DeployRequest, VerifyRequest, EnvRequest) once.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from hpcbench.errors import UsageError
from hpcbench.paths import (
    ANSIBLE_DIR,
    REPO,
    ansible_inventories,
    env_dir,
    env_state,
    environments,
    inventory_path,
)
from hpcbench.terraform import TerraformEnv

SSH_WAIT_S = 90
DOCKER_PROVIDER = "kreuzwerker/docker"


@dataclass(frozen=True)
class EnvRequest:
    """verify / destroy: a known environment."""

    env: str

    def __post_init__(self) -> None:
        env_dir(self.env)  # unknown env: UsageError listing the known ones


@dataclass(frozen=True)
class DeployRequest(EnvRequest):
    """deploy: a known environment, the Terraform settings given now, ansible or not."""

    overrides: tuple[tuple[str, str], ...] = ()
    skip_ansible: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> DeployRequest:
        return cls(args.env, tuple(parse_vars(args.var).items()), args.skip_ansible)


@dataclass(frozen=True)
class VerifyRequest(EnvRequest):
    """verify: a known environment and extra pytest arguments."""

    pytest_args: tuple[str, ...] = ()

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> VerifyRequest:
        return cls(args.env, tuple(a for a in args.pytest_args if a != "--"))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("deploy", help="create the testbed's machines and configure them")
    _env_args(p)
    p.add_argument("--var", action="append", default=[], metavar="NAME=VALUE",
                   help="set a Terraform variable of the env (remembered for later deploys)")
    p.add_argument("--skip-ansible", action="store_true", help="create machines only")
    p.set_defaults(func=cmd_deploy)

    p = sub.add_parser("verify", help="run the testinfra checks against the deployed nodes")
    _env_args(p)
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="extra pytest arguments")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("destroy", help="remove the testbed and its local state")
    _env_args(p)
    p.set_defaults(func=cmd_destroy)

    p = sub.add_parser("envs", help="list the environments")
    p.set_defaults(func=lambda args: print("\n".join(environments())) or 0)


def _env_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--env", default=os.environ.get("HPCBENCH_ENV", "local"),
                   help="environment: a folder of environments/ or a variant "
                        "(`hpcbench envs` lists them); default $HPCBENCH_ENV or local")


def _say(msg: str) -> None:
    print(f"hpcbench: {msg}", flush=True)


def parse_vars(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
            raise UsageError(f"--var {pair!r}: write NAME=VALUE with a lowercase variable name")
        out[name] = value
    return out


def settings(env: str, overrides: dict[str, str]) -> dict[str, str]:
    """Variables of the last deploy plus new ones, so that a plain re-run changes nothing."""
    path = env_state(env) / "settings.json"
    saved = json.loads(path.read_text()) if path.is_file() else {}
    return {**saved, **overrides}


def save_settings(env: str, values: dict[str, str]) -> None:
    path = env_state(env) / "settings.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(values, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


def controller_key(env: str) -> Path:
    """The key the controller (Terraform, Ansible, the harness) reaches nodes with."""
    key = env_state(env) / "ssh" / "id_ed25519"
    if not key.is_file():
        key.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"hpcbench-{env}",
                        "-f", str(key)], check=True)
    key.chmod(0o600)
    return key


def generated_vars(env: str) -> dict[str, str]:
    key = controller_key(env)
    return {
        "env": env,
        "ssh_private_key_file": str(key),
        "ssh_public_key_file": f"{key}.pub",
        "inventory_path": str(inventory_path(env)),
        "state_dir": str(env_state(env)),
    }


def require_docker_engine(tf: TerraformEnv) -> None:
    """Envs built from containers need an engine; say so in one line when none answers.

    Whether an env is one comes from the providers its configuration needs, as
    the CLI reports them (after init), not from reading its files.
    """
    if DOCKER_PROVIDER not in tf.providers():
        return
    if shutil.which("docker") is None:
        raise UsageError("no docker CLI found: install Docker (`make tools` does on Debian)")
    probe = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"],
                           capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        raise UsageError("no Docker engine answers: start dockerd (`make tools` does on Debian)")


def wait_for_ssh(nodes: list[dict], timeout_s: float = SSH_WAIT_S) -> None:
    """Nodes boot after they are created: wait (bounded) until every sshd sends its banner."""
    deadline = time.monotonic() + timeout_s
    for node in nodes:
        while True:
            try:
                with socket.create_connection((node["ssh_host"], node["ssh_port"]), timeout=3) as s:
                    s.settimeout(3)
                    if s.recv(4).startswith(b"SSH-"):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"sshd of {node['name']} did not answer in {timeout_s:.0f} s")
            time.sleep(1)


def tool_environ(**extra: str) -> dict[str, str]:
    """The environment for Ansible and testinfra: the venv's tools first on PATH
    (testinfra calls `ansible-inventory` by name), the project's ansible.cfg."""
    venv_bin = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
            "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg"), **extra}


def run_ansible(env: str, extra: list[str] | None = None) -> dict[str, int]:
    """Runs site.yml, streaming its output; returns the recap totals."""
    # common group_vars, then the env's, then the rendered hosts: Ansible's
    # stock precedence lets a later source's group_vars/all win.
    sources = [arg for path in ansible_inventories(env) for arg in ("-i", str(path))]
    cmd = ["ansible-playbook", *sources, str(ANSIBLE_DIR / "site.yml"), *(extra or [])]
    environ = tool_environ()
    totals = {"ok": 0, "changed": 0, "unreachable": 0, "failed": 0}
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=environ, cwd=REPO) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            if " : ok=" in line:
                for key in totals:
                    found = re.search(rf"\b{key}=(\d+)", line)
                    totals[key] += int(found[1]) if found else 0
        code = proc.wait()
    if code != 0:
        raise RuntimeError(f"ansible-playbook failed (exit {code}); see the output above")
    return totals


def cmd_deploy(args: argparse.Namespace) -> int:
    return deploy(DeployRequest.from_args(args))


def deploy(req: DeployRequest) -> int:
    env = req.env
    values = settings(env, dict(req.overrides))
    start = time.monotonic()
    tf = TerraformEnv(env, {**values, **generated_vars(env)})
    try:
        _say(f"[1/4] terraform init ({env})")
        tf.init()
        require_docker_engine(tf)
        _say("[2/4] terraform plan")
        plan, changes = tf.plan()
    except UsageError:
        if not tf.has_resources():  # leave nothing behind for a testbed that never existed
            shutil.rmtree(env_state(env), ignore_errors=True)
        raise
    save_settings(env, values)  # only settings that passed validation
    _say("[3/4] terraform apply")
    tf.apply(plan)
    if changes:
        # Recreated nodes come with new host keys: learn them afresh.
        (env_state(env) / "ssh" / "known_hosts").unlink(missing_ok=True)
    nodes = tf.outputs()["nodes"]
    assert isinstance(nodes, list)
    if req.skip_ansible:
        _say(f"{len(nodes)} nodes created in {time.monotonic() - start:.0f} s (ansible skipped)")
        return 0
    wait_for_ssh(nodes)
    _say(f"[4/4] ansible-playbook site.yml on {len(nodes)} nodes")
    totals = run_ansible(env)
    _say(f"deployed {env}: {len(nodes)} nodes in {time.monotonic() - start:.0f} s, "
         f"ansible changed={totals['changed']} failed={totals['failed']}")
    _say(f"inventory: {inventory_path(env)}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    req = VerifyRequest.from_args(args)
    inv = inventory_path(req.env)
    if not inv.is_file():
        raise UsageError(f"{req.env} is not deployed (no {inv}): run `make deploy ENV={req.env}`")
    cmd = [sys.executable, "-m", "pytest", str(REPO / "tests" / "infra"), "-p", "no:cacheprovider",
           "--hosts=ansible://all", f"--ansible-inventory={inv}", "--connection=ansible",
           *req.pytest_args]
    environ = tool_environ(HPCBENCH_INVENTORY=str(inv), HPCBENCH_ENV=req.env)
    return subprocess.run(cmd, env=environ, cwd=REPO).returncode


def cmd_destroy(args: argparse.Namespace) -> int:
    return destroy(EnvRequest(args.env))


def destroy(req: EnvRequest) -> int:
    env = req.env
    state = env_state(env)
    tf = TerraformEnv(env, settings(env, {}))
    if tf.has_resources():
        # The keys are only needed (and made) when there is something to destroy.
        tf.variables.update(generated_vars(env))
        _say(f"destroying {env}")
        tf.init()
        require_docker_engine(tf)
        tf.apply(tf.plan(destroy=True)[0])
    else:
        _say(f"{env}: nothing deployed")
    shutil.rmtree(state, ignore_errors=True)
    _say(f"removed {state}")
    return 0
