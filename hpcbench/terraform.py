"""Terraform/OpenTofu for one environment, through python-terraform.

State, provider cache and plans live under `.hpcbench/<env>/`, never in the
source tree; providers come from the filesystem mirror that `make tools`
builds (TF_CLI_CONFIG_FILE); inputs travel as TF_VAR_* environment variables,
never on the command line (where `ps` would show them).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from pathlib import Path

from python_terraform import IsFlagged, Terraform

from hpcbench.errors import UsageError
from hpcbench.paths import cache_root, env_dir, env_state

# python-terraform logs every failing command's stderr at WARNING; we report
# errors ourselves, once and short.
logging.getLogger("python_terraform").setLevel(logging.ERROR)


def tools_dir() -> Path:
    return Path(os.environ.get("TOOLS_DIR", cache_root() / "tools"))


def cli_config_file() -> Path | None:
    """The CLI config pointing at the provider mirror (`make providers` writes it).

    The project's mirror wins over a user-wide TF_CLI_CONFIG_FILE, which may
    name a file that does not exist or a registry that cannot be reached.
    """
    ours = tools_dir() / "tofurc"
    if ours.is_file():
        return ours
    theirs = os.environ.get("TF_CLI_CONFIG_FILE")
    return Path(theirs) if theirs and Path(theirs).is_file() else None


def find_binary() -> str:
    """tofu or terraform from PATH, else the OpenTofu that `make tools` built."""
    for name in ("tofu", "terraform"):
        found = shutil.which(name)
        if found:
            return found
    built = tools_dir() / "bin" / "tofu"
    if built.is_file():
        return str(built)
    raise UsageError("neither tofu nor terraform found: run `make tools` (builds OpenTofu)")


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def variable_description(workdir: Path, name: str) -> str:
    """The `description` of a root-module variable: it says how to set it."""
    pattern = re.compile(rf'variable\s+"{re.escape(name)}"\s*{{[^}}]*?description\s*=\s*"([^"]*)"',
                         re.S)
    for tf in sorted(workdir.glob("*.tf")):
        found = pattern.search(tf.read_text())
        if found:
            return found[1]
    return ""


def summarize_error(stderr: str, workdir: Path | None = None) -> str:
    """Terraform's first error, as one line that says what to fix."""
    text = _ANSI.sub("", stderr)
    text = re.sub(r"^[ \t]*[│╷╵][ \t]?", "", text, flags=re.M)
    blocks = text.split("Error: ")[1:]
    if not blocks:
        return " ".join(text.split())[:300] or "terraform failed without a message"
    title, _, body = blocks[0].partition("\n")
    missing = re.search(r'input variable "(\w+)" is not set', body)
    if title.startswith("No value for required variable") and missing:
        name = missing[1]
        how = variable_description(workdir, name) if workdir else ""
        return f"missing setting {name}: export TF_VAR_{name}=...{f' ({how})' if how else ''}"
    # Paragraphs after the title: the source excerpt ("on FILE line N:"), the
    # message, and "This was checked by ..."; the message says what to do.
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", body) if p.strip()]
    message = next((p for p in paragraphs
                    if not p.startswith(("on ", "with ", "This was checked by"))), title.strip())
    var = re.search(r"var\.(\w+)", body)
    prefix = (f"{var[1]}: " if var and title.startswith("Invalid value for variable")
              and not message.startswith(var[1]) else "")
    return f"{prefix}{message}"[:400]


class TerraformEnv:
    """One environment's root module with its out-of-tree state."""

    def __init__(self, env: str, variables: dict[str, str]) -> None:
        self.env = env
        self.workdir = env_dir(env)
        self.state_dir = env_state(env)
        self.state_file = self.state_dir / "terraform.tfstate"
        self.variables = variables
        self.tf = Terraform(working_dir=str(self.workdir), terraform_bin_path=find_binary())

    def _environ(self) -> dict[str, str]:
        env = {
            "TF_DATA_DIR": str(self.state_dir / "tfdata"),
            "TF_IN_AUTOMATION": "1",
            "TF_INPUT": "0",
        }
        rc = cli_config_file()
        if rc is not None:
            env["TF_CLI_CONFIG_FILE"] = str(rc)
        env.update({f"TF_VAR_{k}": v for k, v in self.variables.items()})
        return env

    def _run(self, cmd: str, *args: str, stream: bool = False, **options: object):
        saved = dict(os.environ)
        os.environ.update(self._environ())
        try:
            return self.tf.cmd(cmd, *args, capture_output=not stream, **options)
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def init(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        code, _, err = self._run("init", input=False, no_color=IsFlagged, reconfigure=IsFlagged,
                                 backend_config={"path": str(self.state_file)})
        if code != 0:
            raise UsageError(f"terraform init failed for {self.env}: {summarize_error(err)}")

    def plan(self, destroy: bool = False) -> tuple[Path, bool]:
        """Plans first, so that bad input fails before anything is created.

        Returns the saved plan and whether it changes anything.
        """
        plan = self.state_dir / ("destroy.plan" if destroy else "apply.plan")
        flags: dict[str, object] = {"input": False, "no_color": IsFlagged, "out": str(plan),
                                    "detailed_exitcode": IsFlagged}
        if destroy:
            flags["destroy"] = IsFlagged
        code, _, err = self._run("plan", **flags)
        if code not in (0, 2):  # 2: success with changes
            raise UsageError(f"{self.env}: {summarize_error(err, self.workdir)}")
        return plan, code == 2

    def apply(self, plan: Path) -> None:
        code, _, _ = self._run("apply", str(plan), stream=True, input=False, no_color=IsFlagged)
        plan.unlink(missing_ok=True)
        if code != 0:
            raise RuntimeError(f"terraform apply failed for {self.env} (output above)")

    def outputs(self) -> dict[str, object]:
        code, out, err = self._run("output", json=IsFlagged)
        if code != 0:
            raise RuntimeError(f"terraform output failed: {summarize_error(err)}")
        return {k: v["value"] for k, v in json.loads(out or "{}").items()}

    def has_resources(self) -> bool:
        if not self.state_file.is_file():
            return False
        return bool(json.loads(self.state_file.read_text() or "{}").get("resources"))
