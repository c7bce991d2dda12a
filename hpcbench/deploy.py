"""`deploy`, `verify`, `destroy` and `envs`: the testbed's life cycle.

deploy = controller key -> terraform plan (bad input stops here, nothing
created) -> apply -> wait for sshd -> ansible-playbook site.yml.
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
from pathlib import Path

from hpcbench.errors import UsageError
from hpcbench.paths import ANSIBLE_DIR, REPO, env_dir, env_state, environments, inventory_path
from hpcbench.terraform import TerraformEnv

SSH_WAIT_S = 90


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
    p.add_argument("--env", default=os.environ.get("ENV", "local"),
                   help="environment (a folder of terraform/envs); default local")


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
        "ssh_private_key_file": str(key),
        "ssh_public_key_file": f"{key}.pub",
        "inventory_path": str(inventory_path(env)),
        "state_dir": str(env_state(env)),
    }


def require_docker_engine(env: str) -> None:
    """Envs built from containers need an engine; say so in one line when none answers."""
    versions = env_dir(env) / "versions.tf"
    if "kreuzwerker/docker" not in versions.read_text():
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
    cmd = ["ansible-playbook", "-i", str(inventory_path(env)), str(ANSIBLE_DIR / "site.yml"),
           *(extra or [])]
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
    env_dir(args.env)  # unknown env: lists the known ones
    values = settings(args.env, parse_vars(args.var))
    require_docker_engine(args.env)
    start = time.monotonic()
    tf = TerraformEnv(args.env, {**values, **generated_vars(args.env)})
    try:
        _say(f"[1/4] terraform init ({args.env})")
        tf.init()
        _say("[2/4] terraform plan")
        plan, changes = tf.plan()
    except UsageError:
        if not tf.has_resources():  # leave nothing behind for a testbed that never existed
            shutil.rmtree(env_state(args.env), ignore_errors=True)
        raise
    save_settings(args.env, values)  # only settings that passed validation
    _say("[3/4] terraform apply")
    tf.apply(plan)
    if changes:
        # Recreated nodes come with new host keys: learn them afresh.
        (env_state(args.env) / "ssh" / "known_hosts").unlink(missing_ok=True)
    nodes = tf.outputs()["nodes"]
    assert isinstance(nodes, list)
    if args.skip_ansible:
        _say(f"{len(nodes)} nodes created in {time.monotonic() - start:.0f} s (ansible skipped)")
        return 0
    wait_for_ssh(nodes)
    _say(f"[4/4] ansible-playbook site.yml on {len(nodes)} nodes")
    totals = run_ansible(args.env)
    _say(f"deployed {args.env}: {len(nodes)} nodes in {time.monotonic() - start:.0f} s, "
         f"ansible changed={totals['changed']} failed={totals['failed']}")
    _say(f"inventory: {inventory_path(args.env)}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    inv = inventory_path(args.env)
    env_dir(args.env)
    if not inv.is_file():
        raise UsageError(f"{args.env} is not deployed (no {inv}): run `make deploy ENV={args.env}`")
    cmd = [sys.executable, "-m", "pytest", str(REPO / "tests" / "infra"), "-p", "no:cacheprovider",
           "--hosts=ansible://all", f"--ansible-inventory={inv}", "--connection=ansible",
           *[a for a in args.pytest_args if a != "--"]]
    environ = tool_environ(HPCBENCH_INVENTORY=str(inv), HPCBENCH_ENV=args.env)
    return subprocess.run(cmd, env=environ, cwd=REPO).returncode


def cmd_destroy(args: argparse.Namespace) -> int:
    env_dir(args.env)
    state = env_state(args.env)
    tf = TerraformEnv(args.env, settings(args.env, {}))
    if tf.has_resources():
        # The keys are only needed (and made) when there is something to destroy.
        tf.variables.update(generated_vars(args.env))
        require_docker_engine(args.env)
        _say(f"destroying {args.env}")
        tf.init()
        tf.apply(tf.plan(destroy=True)[0])
    else:
        _say(f"{args.env}: nothing deployed")
    shutil.rmtree(state, ignore_errors=True)
    _say(f"removed {state}")
    return 0
