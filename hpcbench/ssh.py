"""How the controller reaches a node over SSH, and one bounded remote call.

Launchers wrap their commands in `SshAccess.argv()`; the target's pre-flight
check (reachability and the node's bench/ manifest) uses `call`.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

CALL_TIMEOUT_S = 30


@dataclass(frozen=True)
class SshAccess:
    """What ssh needs to reach one node, nothing else."""

    host: str
    port: int = 22
    user: str | None = None
    key_file: str | None = None
    extra_args: tuple[str, ...] = ()

    def argv(self) -> list[str]:
        args = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]
        # Testbed nodes are recreated often; their host keys change with them.
        args += ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"]
        args += ["-o", "LogLevel=ERROR", "-p", str(self.port)]
        if self.key_file:
            args += ["-i", self.key_file]
        args += list(self.extra_args)
        args.append(f"{self.user}@{self.host}" if self.user else self.host)
        return args


@dataclass(frozen=True)
class Reply:
    """What one remote call gave: its output, or why the node could not be reached."""

    stdout: str = ""
    problem: str | None = None  # None: reached, and the command exited 0

    @property
    def ok(self) -> bool:
        return self.problem is None


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def call(access: SshAccess, command: str = "true", timeout_s: float = CALL_TIMEOUT_S) -> Reply:
    """Run one shell line on the node, bounded; a failure is the last line ssh printed."""
    try:
        proc = subprocess.run(
            [*access.argv(), command],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return Reply(problem=f"no answer in {timeout_s:.0f} s")
    except OSError as err:
        return Reply(problem=str(err))
    if proc.returncode != 0:
        return Reply(proc.stdout, last_line(proc.stderr))
    return Reply(proc.stdout)
