"""Terraform/OpenTofu for one environment, run as a subprocess.

State, provider cache and plans live under `.hpcbench/<env>/`, never in the
source tree; providers come from the filesystem mirror that `make tools`
builds (TF_CLI_CONFIG_FILE); inputs travel as TF_VAR_* variables in the
child's environment only, never on the command line (where `ps` would show
them) and never in this process's os.environ.

Secrets are never Terraform variables: a saved plan holds every variable in
clear. The module scripts read the PEM password from HPCBENCH_PEM_PASSWORD,
which reaches them only through the child's environment. Every command is
bounded (hpcbench.core.bounded) and runs with umask 077, so that what it writes
(state, plans, rendered files) is private from the start.

What Python needs to know about a configuration it asks the CLI for, as JSON
(`providers schema -json`), rather than reading HCL: the CLI resolves every
module and file the way `plan` will, which no text search can.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hpcbench.core import bounded, files
from hpcbench.core.errors import UsageError
from hpcbench.core.paths import cache_root, ensure_env_state, env_layout, env_state
from hpcbench.core.secrets import looks_secret

STREAM_TAIL_LINES = 200  # of a streamed command's output, kept for its error's one line
PASSWORD_ENV = "HPCBENCH_PEM_PASSWORD"  # read by the module scripts, never a variable


def controller_facts() -> dict[str, str]:
    """What an environment may want to know about the machine `hpcbench deploy` runs on,
    as variables it may declare (Terraform ignores TF_VAR_* that a root does not
    declare); a --var of the same name wins. host_cpus: the CPUs this process may use,
    for the local testbed's CPU sets (modules/docker_testbed)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"host_cpus": str(cpus or 0)}


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
_MISSING = re.compile(r'input variable "(\w+)" is not set')


_SCRIPT_LINE = re.compile(r"^\S+ \(local-exec\): (.+)$", re.M)


def summarize_error(stderr: str) -> str:
    """Terraform's first error, as one line that says what to fix. For a module script
    that failed (a local-exec provisioner), its own last line: the scripts print
    their error last (terraform/modules/*/scripts), and Terraform's own block only
    re-wraps the whole output behind the command."""
    text = _ANSI.sub("", stderr)
    if "Error: local-exec provisioner error" in text:
        said = _SCRIPT_LINE.findall(text.split("Error: local-exec provisioner error")[0])
        if said:
            return said[-1].strip()[:400]
    lines = _error_lines(stderr)
    if not lines:
        return " ".join(text.split())[:300] or "terraform failed without a message"
    return lines[0]


def _error_lines(stderr: str) -> list[str]:
    """Every error of the output, one line each."""
    text = re.sub(r"^[ \t]*[│╷╵][ \t]?", "", _ANSI.sub("", stderr), flags=re.M)
    return [_one_line(block) for block in text.split("Error: ")[1:]]


def _one_line(block: str) -> str:
    title, _, body = block.partition("\n")
    missing = _MISSING.search(body)
    if title.startswith("No value for required variable") and missing:
        return f"missing setting {missing[1]}: export TF_VAR_{missing[1]}=..."
    # Paragraphs after the title: the source excerpt ("on FILE line N:"), the
    # message, and "This was checked by ..."; the message says what to do.
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", body) if p.strip()]
    message = next(
        (p for p in paragraphs if not p.startswith(("on ", "with ", "This was checked by"))),
        title.strip(),
    )
    var = re.search(r"var\.(\w+)", body)
    prefix = (
        f"{var[1]}: "
        if var and title.startswith("Invalid value for variable") and not message.startswith(var[1])
        else ""
    )
    return f"{prefix}{message}"[:400]


class TerraformEnv:
    """One environment's root module with its out-of-tree state."""

    def __init__(self, env: str, variables: dict[str, str]) -> None:
        layout = env_layout(env)
        self.env = env
        self.workdir = layout.root
        self.state_dir = env_state(env)
        self.state_file = self.state_dir / "terraform.tfstate"
        # A variant's settings come first; the caller's (remembered --var) win.
        base = json.loads(layout.var_file.read_text()) if layout.var_file else {}
        self.variables = {k: _tf_value(v) for k, v in base.items()} | variables
        self.binary = find_binary()

    def _environ(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        # TF_VAR_* of the user's shell that name a secret (old docs said to export
        # TF_VAR_pem_password) would land in the saved plan: they are not passed.
        inherited = {
            k: v
            for k, v in os.environ.items()
            if not (k.startswith("TF_VAR_") and looks_secret(k[7:]))
        }
        env = {
            **inherited,
            "TF_DATA_DIR": str(self.state_dir / "tfdata"),
            "TF_IN_AUTOMATION": "1",
            "TF_INPUT": "0",
            "CHECKPOINT_DISABLE": "1",
        }
        rc = cli_config_file()
        if rc is not None:
            env["TF_CLI_CONFIG_FILE"] = str(rc)
        env.update({f"TF_VAR_{k}": v for k, v in controller_facts().items()})
        env.update({f"TF_VAR_{k}": v for k, v in self.variables.items() if not looks_secret(k)})
        env.update(extra or {})
        return env

    def _run(
        self, *args: str, stream: bool = False, extra_env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """One CLI command; stream=True lets its output through (apply) and also returns
        its last lines as stderr (for the error's one line), else captures it."""
        command, *rest = args
        flags = [] if command == "providers" else ["-no-color"]  # before positional arguments
        limit = bounded.APPLY if command == "apply" else bounded.TERRAFORM
        what = f"terraform {command} ({self.env})"
        tail: deque[str] = deque(maxlen=STREAM_TAIL_LINES)

        def through(line: str) -> None:
            sys.stdout.write(line)
            sys.stdout.flush()
            tail.append(line)

        proc = bounded.run(
            [self.binary, command, *flags, *rest],
            limit,
            what=what,
            capture=not stream,
            on_line=through if stream else None,
            env=self._environ(extra_env),
            cwd=self.workdir,
            umask=0o077,
        )
        if stream:
            proc.stderr = "".join(tail)
        return proc

    def init(self) -> None:
        ensure_env_state(self.env)
        proc = self._run(
            "init", "-input=false", "-reconfigure", f"-backend-config=path={self.state_file}"
        )
        if proc.returncode != 0:
            why = summarize_error(proc.stderr)
            raise UsageError(f"terraform init failed for {self.env}: {why}")

    def providers(self) -> set[str]:
        """namespace/name of every provider the configuration needs (after init)."""
        proc = self._run("providers", "schema", "-json")
        if proc.returncode != 0:
            raise RuntimeError(f"terraform providers schema failed: {summarize_error(proc.stderr)}")
        schemas = json.loads(proc.stdout or "{}").get("provider_schemas") or {}
        return {"/".join(address.split("/")[-2:]) for address in schemas}

    def plan(self, destroy: bool = False) -> tuple[Path, bool]:
        """Plans first, so that bad input fails before anything is created.

        Returns the saved plan and whether it changes anything. Callers use
        saved_plan(), which removes the file whatever happens next.
        """
        plan = self.state_dir / ("destroy.plan" if destroy else "apply.plan")
        args = ["plan", "-input=false", f"-out={plan}", "-detailed-exitcode"]
        try:
            proc = self._run(*args, *(["-destroy"] if destroy else []))
        except BaseException:
            plan.unlink(missing_ok=True)
            raise
        if proc.returncode not in (0, 2):  # 2: success with changes
            plan.unlink(missing_ok=True)
            raise UsageError(f"{self.env}: {self._explain(proc.stderr)}")
        return plan, proc.returncode == 2

    @contextmanager
    def saved_plan(self, destroy: bool = False) -> Iterator[tuple[Path, bool]]:
        """plan(), and the plan file removed on leaving: applied, failed or interrupted."""
        plan, changes = self.plan(destroy)
        try:
            yield plan, changes
        finally:
            plan.unlink(missing_ok=True)

    def show(self, plan: Path) -> dict[str, object]:
        """The saved plan as JSON (`show -json`): its changes and the configuration."""
        proc = self._run("show", "-json", str(plan))
        if proc.returncode != 0:
            raise RuntimeError(f"terraform show failed: {summarize_error(proc.stderr)}")
        shown = json.loads(proc.stdout or "{}")
        return shown if isinstance(shown, dict) else {}

    def _explain(self, stderr: str) -> str:
        """The one-line error; for a missing setting, with the check that says what it is.

        The check lives with the setting's declaration (often in a module); an
        empty value makes Terraform itself show its message, no HCL parsing.
        """
        line = summarize_error(stderr)
        missing = _MISSING.search(_ANSI.sub("", stderr))
        if not line.startswith("missing setting") or not missing:
            return line
        name = missing[1]
        empty = {f"TF_VAR_{n}": "" for n in _MISSING.findall(_ANSI.sub("", stderr))}
        probe = self._run("plan", "-input=false", "-lock=false", "-refresh=false", extra_env=empty)
        hint = next((h for h in _error_lines(probe.stderr) if h.startswith(name)), "")
        return f"{line} ({hint})" if probe.returncode != 0 and hint else line

    def apply(self, plan: Path) -> None:
        try:
            proc = self._run("apply", "-input=false", str(plan), stream=True)
        finally:
            plan.unlink(missing_ok=True)  # applied or not, it is of no further use
        if proc.returncode != 0:
            why = summarize_error(proc.stderr or "")
            raise RuntimeError(f"terraform apply failed for {self.env}: {why} (output above)")

    def outputs(self) -> dict[str, object]:
        proc = self._run("output", "-json")
        if proc.returncode != 0:
            raise RuntimeError(f"terraform output failed: {summarize_error(proc.stderr)}")
        return {k: v["value"] for k, v in json.loads(proc.stdout or "{}").items()}

    def has_resources(self) -> bool:
        root = self.state_dir.parent  # the state folder: no link followed below it
        if not files.present(self.state_file, root):
            return False
        try:
            state = json.loads(files.read_bounded(self.state_file, files.TF_STATE, root) or b"{}")
        except OSError as err:
            raise UsageError(f"{self.state_file}: cannot read it ({err.strerror or err})") from None
        except (ValueError, RecursionError) as err:  # RecursionError: nested without end
            raise UsageError(
                f"{self.state_file}: not a Terraform state ({err}); restore it "
                "from terraform.tfstate.backup beside it"
            ) from None
        return bool(isinstance(state, dict) and state.get("resources"))


def declared_variables(shown: dict[str, object]) -> dict[str, dict[str, object]]:
    """The root module's variables and their declarations, from `show -json` of a plan
    (Terraform's own reading of the modules, no HCL parsing)."""
    config = shown.get("configuration")
    root = config.get("root_module") if isinstance(config, dict) else None
    declared = root.get("variables") if isinstance(root, dict) else None
    if not isinstance(declared, dict):
        return {}
    return {name: body if isinstance(body, dict) else {} for name, body in declared.items()}


def sensitive_variables(shown: dict[str, object]) -> set[str]:
    """Root variables the configuration declares `sensitive = true`."""
    return {name for name, body in declared_variables(shown).items() if body.get("sensitive")}


def _tf_value(value: object) -> str:
    """A JSON value as TF_VAR_ text: strings as they are, the rest as HCL-compatible JSON."""
    return value if isinstance(value, str) else json.dumps(value)
