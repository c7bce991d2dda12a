"""Where things live: the repository, per-environment state, caches."""

from __future__ import annotations

import os
from pathlib import Path

from hpcbench.errors import UsageError

REPO = Path(__file__).resolve().parent.parent
TERRAFORM_ENVS = REPO / "terraform" / "envs"
ANSIBLE_DIR = REPO / "ansible"
BENCH_DIR = REPO / "bench"


def state_root() -> Path:
    """Generated, never committed: inventories, keys, tokens, terraform state."""
    return Path(os.environ.get("HPCBENCH_STATE", REPO / ".hpcbench"))


def cache_root() -> Path:
    """Outside the repository so that fresh clones (CI) reuse downloads and builds."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hpcbench"
    return Path(os.environ.get("HPCBENCH_CACHE", default))


def environments() -> list[str]:
    return sorted(p.name for p in TERRAFORM_ENVS.iterdir() if (p / "main.tf").is_file())


def env_dir(env: str) -> Path:
    """The Terraform root module of an environment; unknown names list the known ones."""
    known = environments()
    if env not in known:
        raise UsageError(f"unknown environment {env!r}: choose one of {', '.join(known)}")
    return TERRAFORM_ENVS / env


def env_state(env: str) -> Path:
    return state_root() / env


def inventory_path(env: str) -> Path:
    return env_state(env) / "inventory.yml"
