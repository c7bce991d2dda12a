"""Shared helpers for the Terraform tests: binary, provider mirror, isolated runs.

Tests run on a copy of terraform/ and environments/ (and the fixtures, at the
same relative place) under pytest's tmp dir: `init` writes neither `.terraform` nor a
dependency lock file into the source tree, so tests never disturb an
environment someone is deploying. Nothing needs credentials: plans only,
providers mocked where a resource would be created.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from hpcbench.core.errors import UsageError
from hpcbench.core.paths import env_layout
from hpcbench.testbeds.terraform import cli_config_file, find_binary

REPO = Path(__file__).resolve().parents[2]
TERRAFORM = REPO / "terraform"
ENVIRONMENTS = REPO / "environments"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
GOLDEN = Path(__file__).resolve().parent / "golden"
PUBKEY = FIXTURES / "id_ed25519.pub"


def env_root(env: str) -> tuple[str, list[str]]:
    """The folder an environment plans in (relative to the repository) and the
    -var-file arguments of a variant, as hpcbench deploy resolves them."""
    layout = env_layout(env)
    rel = str(layout.root.relative_to(REPO))
    return rel, [f"-var-file={layout.var_file.name}"] if layout.var_file else []


def mirror_has(provider: str) -> bool:
    """Whether the filesystem mirror holds `namespace/name` (any version)."""
    config = cli_config_file()
    if config is None:
        return False
    for mirror in re.findall(r'path\s*=\s*"([^"]+)"', config.read_text()):
        if any(
            (Path(mirror) / host / provider).is_dir()
            for host in ("registry.terraform.io", "registry.opentofu.org")
        ):
            return True
    return False


@dataclass
class Result:
    rc: int
    out: str


class TF:
    """Runs terraform/tofu in one configuration directory with a private data dir."""

    def __init__(self, binary: str, workdir: Path, data_dir: Path) -> None:
        self.binary = binary
        self.workdir = workdir
        self.env = {
            **os.environ,
            "TF_DATA_DIR": str(data_dir),
            "TF_IN_AUTOMATION": "1",
            "TF_INPUT": "0",
            "CHECKPOINT_DISABLE": "1",
        }
        config = cli_config_file()
        if config is not None:
            self.env["TF_CLI_CONFIG_FILE"] = str(config)

    def __call__(self, *args: str, env: dict[str, str] | None = None) -> Result:
        # nice: the CI machine has two cores and builds images at the same time.
        proc = subprocess.run(
            ["nice", "-n", "10", self.binary, *args, "-no-color"],
            cwd=self.workdir,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=600,
        )
        return Result(proc.returncode, proc.stdout + proc.stderr)

    def init(self) -> None:
        # The envs keep state through the local backend; tests keep it in their data dir.
        state = Path(self.env["TF_DATA_DIR"]) / "terraform.tfstate"
        result = self("init", "-input=false", f"-backend-config=path={state}")
        assert result.rc == 0, result.out


@pytest.fixture(scope="session")
def tf_binary() -> str:
    try:
        binary = find_binary()
    except UsageError as err:
        pytest.skip(str(err))
    if not mirror_has("hashicorp/local"):
        pytest.skip("hashicorp/local is not in the provider mirror: run `make providers`")
    return binary


@pytest.fixture(scope="session")
def tf_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch copy of terraform/ and environments/ with tests/terraform/fixtures beside them."""
    root = tmp_path_factory.mktemp("repo")
    skip = shutil.ignore_patterns(".terraform", ".terraform.lock.hcl", "*.tfstate*")
    shutil.copytree(TERRAFORM, root / "terraform", ignore=skip, symlinks=True)
    shutil.copytree(ENVIRONMENTS, root / "environments", ignore=skip, symlinks=True)
    shutil.copytree(FIXTURES, root / "tests" / "terraform" / "fixtures")
    return root


@pytest.fixture(scope="session")
def tf(tf_binary: str, tf_tree: Path, tmp_path_factory: pytest.TempPathFactory):
    """tf("environments/virtualwall") -> an initialised TF for that directory (once per session)."""
    made: dict[str, TF] = {}

    def get(rel: str) -> TF:
        if rel not in made:
            data_dir = tmp_path_factory.mktemp("tfdata-" + rel.replace("/", "-"))
            runner = TF(tf_binary, tf_tree / rel, data_dir)
            runner.init()
            made[rel] = runner
        return made[rel]

    return get
