"""Paid resources a testbed holds, kept track of outside Terraform.

Contract with the module scripts (terraform/modules/gpulab, virtualwall): the
moment a paid resource exists (a GPULab job id, a Virtual Wall slice) the
script writes `<state_dir>/leases/<name>.json`, 0600 and atomically:

    {"what": "GPULab job 4a5b...", "created": "<ISO-8601>", "cancel": [argv]}

and removes it once a cancel was confirmed. Terraform can lose track of such a
resource (a failed create taints it and its destroy-time provisioner never
runs; a Ctrl-C while queued leaves no state at all), so `hpcbench destroy`
runs every lease left after `terraform destroy` itself, and keeps the state
directory, with a line per resource still held, when any cancel fails.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from hpcbench.core import bounded, files
from hpcbench.core.errors import UsageError, one_line

LEASES = "leases"


@dataclass(frozen=True)
class Lease:
    path: Path
    what: str
    created: str
    cancel: tuple[str, ...]  # empty: the file is unreadable, nothing to run

    def by_hand(self) -> str:
        """One line: what is held and how to cancel it without hpcbench (the file's text
        with its line breaks and escapes written out: a planted one splits no line)."""
        how = shlex.join(self.cancel) if self.cancel else f"see {self.path}"
        since = f", since {self.created}" if self.created else ""
        return one_line(f"still held: {self.what}{since}; cancel it by hand: {how}")


def lease_dir(state_dir: Path) -> Path:
    return state_dir / LEASES


def read(path: Path, root: Path | None = None) -> Lease:
    """A lease file; one that is not the contract's shape, or that cannot be read
    (a link, a FIFO or an oversized file planted at its name: never followed, waited
    on or read whole), still counts as held. `root`: the state folder (files)."""
    try:
        data = json.loads(files.read_bounded(path, files.LEASE, root))
        what, created, cancel = data["what"], data.get("created", ""), data["cancel"]
        if not (
            isinstance(what, str)
            and what.strip()  # a lease names what it holds
            and isinstance(created, str)
            and isinstance(cancel, list)
            and cancel
            and all(isinstance(a, str) and a for a in cancel)
        ):
            raise TypeError("fields of the wrong type")
    except UsageError as err:  # planted: says what is there
        return Lease(path, f"unreadable lease {path.name} ({_planted(err, path)})", "", ())
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as err:  # [[[[... too deep
        return Lease(path, f"unreadable lease {path.name} ({type(err).__name__})", "", ())
    return Lease(path, what, created, tuple(cancel))


def _planted(err: UsageError, path: Path) -> str:
    """What the opener found at a lease's name, without the name (said beside it)."""
    return str(err).removeprefix(f"{path}: ").removeprefix(f"{path} ").split(":")[0]


def held(state_dir: Path, root: Path | None = None) -> list[Lease]:
    """Every lease under the state directory, oldest file name first. `root`: the
    state folder `state_dir` is in (default: its parent), below which no link is
    followed; a leases folder that is a link or not a folder counts as one lease held
    (nothing says what it held)."""
    root = state_dir.parent if root is None else root
    folder = lease_dir(state_dir)
    try:
        found = files.names(folder, root)
    except (UsageError, NotADirectoryError) as err:
        why = _planted(err, folder) if isinstance(err, UsageError) else "not a folder"
        return [Lease(folder, f"unreadable leases folder ({why})", "", ())]
    # As glob("*.json"): a script's temporary file (.lease.XXXXXX) is not a lease yet.
    return [
        read(folder / name, root)
        for name in found
        if name.endswith(".json") and not name.startswith(".")
    ]


def cancel(lease: Lease) -> str | None:
    """Runs the lease's cancel command (bounded, with this process's environment:
    the module scripts read HPCBENCH_PEM_PASSWORD from it). None when it
    succeeded, else why not; the lease file is removed only on success."""
    if not lease.cancel:
        return "no cancel command in the lease"
    try:
        proc = bounded.run(
            list(lease.cancel),
            bounded.CANCEL,
            what=f"cancelling {lease.what}",
            capture=True,
            env=dict(os.environ),
        )
    except bounded.Timeout as err:
        return str(err)
    except OSError as err:  # the command is not there (a client uninstalled since)
        return f"cannot run {lease.cancel[0]}: {err.strerror or err}"
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr or proc.stdout or "").splitlines() if ln.strip()]
        return f"exit {proc.returncode}" + (f": {lines[-1].strip()[:200]}" if lines else "")
    # Confirmed (the script may have removed it itself); a link at its name goes, not
    # what it points at.
    files.remove(lease.path)
    return None


def cancel_leftovers(state_dir: Path) -> list[tuple[Lease, str]]:
    """Cancels every lease left; returns those still held, each with why."""
    still: list[tuple[Lease, str]] = []
    for lease in held(state_dir):
        why = cancel(lease)
        if why is not None:
            still.append((lease, why))
    return still
