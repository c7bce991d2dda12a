"""`deploy`, `verify`, `destroy` and `envs`: the testbed's life cycle.

deploy = controller key -> terraform plan (bad input stops here, nothing
created) -> apply -> wait until ssh reaches every node -> ansible-playbook site.yml.
Every step is bounded (hpcbench.core.bounded). Secrets never travel as Terraform
variables (saved plans hold those in clear): the PEM password comes from
HPCBENCH_PEM_PASSWORD, which only Terraform's children see. destroy cancels
what Terraform could not by the module scripts' leases (hpcbench.testbeds.leases).

The argparse Namespace stops in the cmd_* functions: each turns it into a
typed, checked request (DeployRequest, VerifyRequest, EnvRequest) once.
"""

from __future__ import annotations

import argparse
import configparser
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Set
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hpcbench.core import bounded, files, ssh
from hpcbench.core.errors import UsageError
from hpcbench.core.paths import (
    ANSIBLE_DIR,
    REPO,
    ansible_inventories,
    ensure_env_state,
    env_dir,
    env_state,
    inventory_path,
    state_root,
)
from hpcbench.core.secrets import looks_secret
from hpcbench.testbeds import hostkeys, leases, reach
from hpcbench.testbeds.terraform import (
    PASSWORD_ENV,
    TerraformEnv,
    declared_variables,
    sensitive_variables,
)

DOCKER_PROVIDER = "kreuzwerker/docker"
SETTING_VALUE_MAX = 4096  # a remembered --var value; longer is not a setting


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


def _say(msg: str) -> None:
    print(f"hpcbench: {msg}", flush=True)


def secret_refusal(name: str) -> str:
    """Why a secret is not a setting, and what to do instead (one line)."""
    if name == "pem_password":
        return (
            f"the PEM password is not a setting (it would be written into Terraform's "
            f"saved plan): export {PASSWORD_ENV}=... instead"
        )
    return (
        f"{name} looks like a secret, which is never given with --var nor remembered "
        f"(saved plans and settings.json would hold it): pass it the way its module "
        f"documents through the environment"
    )


def parse_vars(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
            raise UsageError(
                f"--var {pair[:60]!r}: write NAME=VALUE with a lowercase variable name"
            )
        if looks_secret(name):
            raise UsageError(f"--var {name}: {secret_refusal(name)}")
        if len(value) > SETTING_VALUE_MAX or "\x00" in value:
            raise UsageError(
                f"--var {name}: the value is not a setting "
                f"(at most {SETTING_VALUE_MAX} characters, no NUL)"
            )
        out[name] = value
    return out


def settings(env: str, overrides: dict[str, str]) -> dict[str, str]:
    """Variables of the last deploy plus new ones, so that a plain re-run changes nothing.

    A secret an older hpcbench remembered (pem_password) is forgotten here: it is
    not passed on, and the next save_settings drops it from the file.
    """
    path = env_state(env) / "settings.json"
    saved = load_settings(path) if files.present(path, state_root()) else {}
    for name in [n for n in saved if looks_secret(n)]:
        del saved[name]
        _say(f"forgot the remembered {name}: {secret_refusal(name).split(': ')[-1]}")
    return {**saved, **overrides}


def load_settings(path: Path) -> dict[str, str]:
    """settings.json (in the state folder, no link followed below it): an object of
    variable names to strings; anything else says how to fix it."""
    fix = f"fix or delete {path} (it only remembers earlier --var settings)"
    try:
        data = json.loads(files.read_bounded(path, files.SETTINGS, state_root()))
    except (OSError, ValueError, RecursionError) as err:
        why = getattr(err, "strerror", None) or type(err).__name__
        raise UsageError(f"{path}: not readable JSON ({why}): {fix}") from None
    if not isinstance(data, dict) or not all(
        isinstance(k, str)
        and re.fullmatch(r"[a-z_][a-z0-9_]*", k)
        and isinstance(v, str)
        and len(v) <= SETTING_VALUE_MAX
        for k, v in data.items()
    ):
        raise UsageError(f"{path}: not an object of variable names to text values: {fix}")
    return data


def save_settings(env: str, values: dict[str, str], secret: Set[str] = frozenset()) -> None:
    """settings.json, 0600 from the start, without secrets (by name, or declared
    `sensitive` in the configuration as Terraform reports it)."""
    path = ensure_env_state(env) / "settings.json"
    kept = {k: v for k, v in values.items() if k not in secret and not looks_secret(k)}
    text = json.dumps(kept, indent=2, sort_keys=True) + "\n"
    files.write_atomic(path, text, 0o600, state_root())


def controller_key(env: str) -> Path:
    """The key the controller (Terraform, Ansible, the harness) reaches nodes with."""
    key = ensure_env_state(env) / "ssh" / "id_ed25519"
    if not key.is_file():
        key.parent.mkdir(exist_ok=True, mode=0o700)
        subprocess.run(
            [
                "ssh-keygen",
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                f"hpcbench-{env}",
                "-f",
                str(key),
            ],
            check=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
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
    probe = subprocess.run(
        ["docker", "info", "--format", "{{.ServerVersion}}"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if probe.returncode != 0:
        raise UsageError("no Docker engine answers: start dockerd (`make tools` does on Debian)")


def known_hosts(env: str) -> Path:
    """The testbed's known_hosts (environments/common/controller.tf names the same file)."""
    return env_state(env) / "ssh" / "known_hosts"


def tool_environ(**extra: str) -> dict[str, str]:
    """The environment for Ansible and testinfra: the venv's tools first on PATH
    (testinfra calls `ansible-inventory` by name), the project's ansible.cfg.
    The PEM password is for Terraform's module scripts only."""
    venv_bin = str(Path(sys.executable).parent)
    inherited = {k: v for k, v in os.environ.items() if k != PASSWORD_ENV}
    return {
        **inherited,
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg"),
        **extra,
    }


def run_ansible(env: str, extra: list[str] | None = None) -> dict[str, int]:
    """Runs site.yml, streaming its output; returns the recap totals."""
    # common group_vars, then the env's, then the rendered hosts: Ansible's
    # stock precedence lets a later source's group_vars/all win.
    sources = [arg for path in ansible_inventories(env) for arg in ("-i", str(path))]
    cmd = ["ansible-playbook", *sources, str(ANSIBLE_DIR / "site.yml"), *(extra or [])]
    totals = {"ok": 0, "changed": 0, "unreachable": 0, "failed": 0}

    def recap(line: str) -> None:
        sys.stdout.write(line)
        sys.stdout.flush()
        if " : ok=" in line:
            for key in totals:
                found = re.search(rf"\b{key}=(\d+)", line)
                totals[key] += int(found[1]) if found else 0

    with ssh.own_masters_folder() as folder:
        proc = bounded.run(
            cmd,
            bounded.ANSIBLE,
            what=f"ansible-playbook site.yml ({env})",
            on_line=recap,
            env=tool_environ(ANSIBLE_SSH_CONTROL_PATH_DIR=str(folder)),
            cwd=REPO,
        )
    if proc.returncode != 0:
        raise RuntimeError(
            f"ansible-playbook failed (exit {proc.returncode}); see the output above"
        )
    return totals


def cmd_deploy(args: argparse.Namespace) -> int:
    return deploy(DeployRequest.from_args(args))


@contextmanager
def _nothing_left_if_new(env: str) -> Iterator[None]:
    """A testbed that did not exist before and holds nothing after a refusal or failure
    leaves no state folder behind (keys, settings)."""
    existed = env_state(env).exists()
    try:
        yield
    except (UsageError, RuntimeError, KeyboardInterrupt):
        if (
            not existed
            and not TerraformEnv(env, {}).has_resources()
            and not leases.held(env_state(env))
        ):
            shutil.rmtree(env_state(env), ignore_errors=True)
        raise


def _planned(req: DeployRequest) -> tuple[TerraformEnv, Path, dict[str, str]]:
    """init and plan: bad settings and missing credentials stop here (UsageError)."""
    env = req.env
    values = settings(env, dict(req.overrides))  # a bad settings.json stops here
    tf = TerraformEnv(env, {**values, **generated_vars(env)})
    _say(f"[1/4] terraform init ({env})")
    tf.init()
    require_docker_engine(tf)
    _say("[2/4] terraform plan")
    plan, _ = tf.plan()
    return tf, plan, values


def unknown_settings(env: str, given: list[str], shown: dict[str, object]) -> None:
    """Terraform ignores a TF_VAR_ that no variable declares: a typo (`node_cout=10`)
    would deploy the default silently. One line naming it and what is declared."""
    declared = declared_variables(shown)
    if not declared:  # a plan that lists no variables: nothing to check against
        return
    unknown = [name for name in given if name not in declared]
    if unknown:
        raise UsageError(
            f"{env}: {unknown[0]} is not a setting of this environment; it has "
            f"{', '.join(sorted(n for n in declared if not looks_secret(n)))}"
        )


def _checked_plan(req: DeployRequest, tf: TerraformEnv, plan: Path) -> dict[str, object]:
    """The plan as JSON, once the settings given now are known and none is a secret; a
    refused plan is removed (it holds every variable in clear)."""
    try:
        shown = tf.show(plan)
        unknown_settings(req.env, [name for name, _ in req.overrides], shown)
        given = sorted(set(dict(req.overrides)) & sensitive_variables(shown))
        if given:
            raise UsageError(f"--var {given[0]}: {secret_refusal(given[0])}")
    except BaseException:
        plan.unlink(missing_ok=True)
        raise
    return shown


def check(req: DeployRequest) -> dict[str, object]:
    """What `deploy` checks before it creates anything (settings and their names,
    credentials, the engine), creating nothing: a campaign asks it of every testbed
    before the first deploy. The plan as JSON (what would be made); the plan file, which
    holds every variable in clear, is gone."""
    with _nothing_left_if_new(req.env):
        tf, plan, _ = _planned(req)
        shown = _checked_plan(req, tf, plan)
        plan.unlink(missing_ok=True)
    return shown


def deploy(req: DeployRequest) -> int:
    env = req.env
    start = time.monotonic()
    with _nothing_left_if_new(env):
        tf, plan, values = _planned(req)
        shown = _checked_plan(req, tf, plan)
    try:  # the plan holds every variable in clear: gone after apply, failure or Ctrl-C
        save_settings(env, values, sensitive_variables(shown))  # only what passed validation
        _say("[3/4] terraform apply")
        tf.apply(plan)
    except (RuntimeError, KeyboardInterrupt):
        held = leases.held(env_state(env))
        if held:  # a create that failed half-way may hold paid resources
            _say(
                f"{len(held)} paid resource(s) may be held ({held[0].what}, ...): "
                f"`hpcbench destroy --env {env}` cancels them"
            )
        raise
    finally:
        plan.unlink(missing_ok=True)
    # Only machines Terraform replaced or destroyed come with new host keys.
    hostkeys.forget(known_hosts(env), hostkeys.replaced_hosts(shown))
    nodes = tf.outputs()["nodes"]
    assert isinstance(nodes, list)
    if req.skip_ansible:
        _say(f"{len(nodes)} nodes created in {time.monotonic() - start:.0f} s (ansible skipped)")
        return 0
    _say(f"waiting until ssh reaches each of the {len(nodes)} nodes")
    reach.wait(inventory_path(env), known_hosts(env))  # also: a malformed inventory stops here
    _say(f"[4/4] ansible-playbook site.yml on {len(nodes)} nodes")
    totals = run_ansible(env)
    _say(
        f"deployed {env}: {len(nodes)} nodes in {time.monotonic() - start:.0f} s, "
        f"ansible changed={totals['changed']} failed={totals['failed']}"
    )
    _say(f"inventory: {inventory_path(env)}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    return verify(VerifyRequest.from_args(args))


def verify(req: VerifyRequest) -> int:
    """pytest-testinfra against the deployed nodes; its exit status (0: healthy)."""
    inv = inventory_path(req.env)
    if not inv.is_file():
        raise UsageError(f"{req.env} is not deployed (no {inv}): run `make deploy ENV={req.env}`")
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        str(REPO / "tests" / "infra"),
        "-p",
        "no:cacheprovider",
        "--hosts=ansible://all",
        f"--ansible-inventory={inv}",
        "--connection=ansible",
        *req.pytest_args,
    ]
    with ssh.own_masters_folder() as folder:
        config = _testinfra_config(folder)
        environ = tool_environ(
            HPCBENCH_INVENTORY=str(inv), HPCBENCH_ENV=req.env, ANSIBLE_CONFIG=str(config)
        )
        return bounded.run(
            cmd, bounded.VERIFY, what=f"verify ({req.env})", env=environ, cwd=REPO
        ).returncode


# ansible.cfg's settings that name a path, relative to the file's own folder.
ANSIBLE_PATH_SETTINGS = ("roles_path", "library", "filter_plugins", "test_plugins")


def _testinfra_config(folder: Path) -> Path:
    """The project's ansible.cfg, written into `folder` with its ssh masters kept there.

    testinfra runs each check's command through its own `ssh`, multiplexed only where
    the config names a control path; it reads the folder from
    [persistent_connection] control_path_dir, not from the environment
    (testinfra/utils/ansible_runner.py, get_ansible_host). One master per node
    instead of a handshake per command: verify on three nodes took 137 s, then 62.
    The copy lives elsewhere, so the paths in it become absolute."""
    config = configparser.ConfigParser(interpolation=None)
    config.read(ANSIBLE_DIR / "ansible.cfg")
    for key in ANSIBLE_PATH_SETTINGS:
        if config.has_option("defaults", key):
            value = config.get("defaults", key)
            config.set("defaults", key, str(ANSIBLE_DIR / value))
    if not config.has_section("persistent_connection"):
        config.add_section("persistent_connection")
    config.set("persistent_connection", "control_path_dir", str(folder))
    # ssh's %C (a hash of the host, port and user) is short: a socket's path is at most
    # 108 bytes. `%%`: testinfra and Ansible both expand this value once.
    config.set("ssh_connection", "control_path", "%(directory)s/%%C")
    path = folder / "ansible.cfg"
    with path.open("w") as out:
        config.write(out)
    return path


def held(env: str) -> list[str]:
    """What an environment still holds in the current state folder: machines in
    Terraform's state, leases of paid resources (empty: nothing)."""
    out = []
    if TerraformEnv(env, {}).has_resources():
        out.append("machines in Terraform's state")
    out += [lease.what for lease in leases.held(env_state(env))]
    return out


def cmd_destroy(args: argparse.Namespace) -> int:
    return destroy(EnvRequest(args.env))


def destroy(req: EnvRequest) -> int:
    """terraform destroy, then every lease left (a resource Terraform lost track of)
    cancelled by its own command; the state directory goes only when nothing is held."""
    env = req.env
    state = env_state(env)
    tf = TerraformEnv(env, settings(env, {}))
    failure: Exception | None = None
    if tf.has_resources():
        # The keys are only needed (and made) when there is something to destroy.
        tf.variables.update(generated_vars(env))
        _say(f"destroying {env}")
        try:
            tf.init()
            require_docker_engine(tf)
            with tf.saved_plan(destroy=True) as (plan, _):
                tf.apply(plan)
        except (UsageError, RuntimeError) as err:  # the leases are cancelled all the same
            failure = err
    elif not leases.held(state):
        _say(f"{env}: nothing deployed")
    for lease in leases.held(state):
        _say(f"cancelling {lease.what} (lease {lease.path.name})")
    still = leases.cancel_leftovers(state)
    for lease, why in still:
        print(f"hpcbench: {lease.by_hand()} [{why}]", file=sys.stderr, flush=True)
    if failure is not None:
        _say(f"kept {state}: terraform destroy did not finish")
        raise failure
    if still:
        _say(
            f"kept {state}: {len(still)} resource(s) still held; "
            f"run `hpcbench destroy --env {env}` again once cancelled"
        )
        return 1
    shutil.rmtree(state, ignore_errors=True)
    _say(f"removed {state}")
    return 0
