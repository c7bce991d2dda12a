"""Where things live: the repository, environments, per-environment state, caches.

An environment is a folder `environments/<name>/` (an OpenTofu root plus its
Ansible group_vars in `inventory/`, and optionally its settings in
`<name>.tfvars.json`), or a variant of one: a file
`environments/<root>/<name>.tfvars.json` that the root is planned with.
`environments/common/` holds what every environment shares (docs/environments.md).
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from hpcbench.core import files
from hpcbench.core.errors import UsageError

REPO = Path(__file__).resolve().parents[2]
ENVIRONMENTS = REPO / "environments"
COMMON = ENVIRONMENTS / "common"
ANSIBLE_DIR = REPO / "ansible"
BENCH_DIR = REPO / "bench"
VARIANT_SUFFIX = ".tfvars.json"


@dataclass(frozen=True)
class EnvLayout:
    """Where one environment's parts are: its root folder and its variant file, if any."""

    name: str
    root: Path  # the OpenTofu root module, also holding inventory/group_vars
    var_file: Path | None = None  # a variant's settings (JSON, so Python reads them too)


def state_root() -> Path:
    """Generated, never committed: inventories, keys, tokens, terraform state."""
    return Path(os.environ.get("HPCBENCH_STATE", REPO / ".hpcbench"))


def cache_root() -> Path:
    """Outside the repository so that fresh clones (CI) reuse downloads and builds."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hpcbench"
    return Path(os.environ.get("HPCBENCH_CACHE", default))


def _layouts() -> dict[str, EnvLayout]:
    found: dict[str, EnvLayout] = {}
    for root in sorted(p for p in ENVIRONMENTS.iterdir() if (p / "main.tf").is_file()):
        own = root / f"{root.name}{VARIANT_SUFFIX}"  # a folder's own settings, if it has any
        found[root.name] = EnvLayout(root.name, root, own if own.is_file() else None)
        for var_file in sorted(root.glob(f"*{VARIANT_SUFFIX}")):
            name = var_file.name.removesuffix(VARIANT_SUFFIX)
            found.setdefault(name, EnvLayout(name, root, var_file))
    return found


def environments() -> list[str]:
    return sorted(_layouts())


def env_layout(env: str) -> EnvLayout:
    """An environment's folder and variant file; unknown names list the known ones."""
    layouts = _layouts()
    if env not in layouts:
        raise UsageError(f"unknown environment {env!r}: choose one of {', '.join(sorted(layouts))}")
    return layouts[env]


def env_dir(env: str) -> Path:
    """The OpenTofu root module of an environment (a variant's is its root's)."""
    return env_layout(env).root


def env_state(env: str) -> Path:
    return state_root() / env


# ssh's connection master listens on "<folder>/%C": %C is 40 hex digits, and while it
# makes the socket ssh adds 17 more (".6RizyaC6WNE2BkfB", as its "unix_listener: path
# ... too long for Unix domain socket" shows); a socket's path is at most 107 bytes.
SSH_CONTROL_DIR_MAX = 107 - len("/") - 40 - 17
SHORT_ROOT = Path("/tmp")  # not $TMPDIR, which may be as long


def ssh_refusal(path: str) -> str | None:
    """Why ssh cannot take `path` as the file name of ControlPath, IdentityFile or
    UserKnownHostsFile, or None (ssh.config_path quotes the rest). ssh expands ${NAME}
    in them from the environment (ssh_config(5), ENVIRONMENT VARIABLES; OpenSSH 9.2
    misc.c vdollar_percent_expand) and has no escape for it; a newline cuts the name
    short (`ssh -G` shows it)."""
    if "${" in path:
        return "ssh reads ${...} in it as an environment variable and has no escape for it"
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        return "it holds control characters"
    return None


def ssh_control_dir() -> Path:
    """The folder of ssh's connection masters (ControlPath): <state>/ssh, or, where that
    path leaves a socket too little room or is a name ssh cannot take (ssh_refusal:
    spaces and % are quoted, ${ and control characters cannot be), a short one of this
    user's under /tmp named after the state folder, so that the commands of one state
    still share a master."""
    state = state_root()
    own = state / "ssh"
    if len(os.fsencode(own)) <= SSH_CONTROL_DIR_MAX and not ssh_refusal(str(own)):
        return own
    digest = hashlib.sha256(os.fsencode(state.absolute())).hexdigest()[:16]
    short = SHORT_ROOT / f"hpcbench-{os.getuid()}" / digest
    for level in (short.parent, short):  # /tmp is everyone's: take no folder planted there
        try:
            st = os.lstat(level)
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            raise UsageError(
                f"{level} (for ssh's connection sockets, which {str(own)!r} cannot hold) is "
                "not a folder of yours: remove it, or set HPCBENCH_STATE to a shorter path"
            )
    return short


def private_dir(path: Path, root: Path | None = None) -> Path:
    """A directory only its owner can enter, made so from the start.

    Each missing level is created 0700 (never made wider and tightened later);
    a level an older hpcbench left wider is tightened once. `root`: the folder the
    user named (the state folder), below which no level is a link (hpcbench.core.files);
    None: `path` itself.
    """
    fd = files.open_folder(path, root, make=0o700)
    try:
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)
    return path


def ensure_env_state(env: str) -> Path:
    """`.hpcbench/<env>`, private (it holds keys, state and tokens)."""
    root = state_root()
    if not root.exists():
        private_dir(root)
    return private_dir(env_state(env), root)


def inventory_path(env: str) -> Path:
    """The inventory Terraform renders: hosts, groups and this deploy's values."""
    return env_state(env) / "inventory.yml"


def ansible_inventories(env: str) -> list[Path]:
    """What Ansible reads, in order: later group_vars/all win (stock precedence)."""
    return [COMMON / "inventory", env_dir(env) / "inventory", inventory_path(env)]
