"""Exclusive locks a command holds for its whole life: flock(2) on a file, which the
kernel drops when the holder exits, however it exits (SIGKILL, power loss: no stale
lock to clear by hand)."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from hpcbench.core import files
from hpcbench.core.errors import UsageError


def hold(path: Path, busy: str, root: Path | None = None) -> int:
    """Lock `path` (created if need be) and return the descriptor that holds it until
    closed; another holder already: UsageError(busy), one line, exit status 2.

    The descriptor is read-only (flock needs no more): a file open for writing would
    keep its file system from being remounted read-only for the holder's whole life.
    `root`: the folder the user named, below which no link is followed (hpcbench.core.files)."""
    try:
        # A link planted at the lock's name would have O_CREAT make a file where it
        # points (outside a results folder, say); a FIFO would block the open for ever.
        fd = files.open_regular(path, os.O_RDONLY | os.O_CREAT, 0o644, root)
    except OSError as err:
        raise UsageError(f"cannot lock {path}: {err.strerror or err}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise UsageError(busy) from None
    return fd


def holder(path: Path, root: Path | None = None) -> int | None:
    """The pid that holds `path`'s lock (hold_as_process wrote it beside), 0 when it is
    held by a process that did not say, None when nobody holds it. A link or a FIFO
    planted at either name is a UsageError naming it, never followed or waited on."""
    try:
        fd = files.open_regular(path, os.O_RDONLY, root=root)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return _pid_in(pid_file(path), root)
    finally:
        os.close(fd)  # a lock we took here goes with the descriptor
    return None


def _pid_in(path: Path, root: Path | None) -> int:
    """The pid written in `path`; 0 when there is none to read."""
    try:
        text = files.read_bounded(path, files.PID, root)
    except OSError:
        return 0
    try:
        return int(text.strip() or 0)
    except ValueError:
        return 0


def pid_file(path: Path) -> Path:
    return path.with_name(path.name + ".pid")


def hold_as_process(path: Path, busy: str, root: Path | None = None) -> int:
    """hold(), and this process's pid written beside the lock for holder() to read."""
    fd = hold(path, busy, root)
    with contextlib.suppress(OSError):  # who holds it is a courtesy; the lock is what counts
        # A fresh file renamed over the name: a link or FIFO planted there is replaced,
        # never written through or waited on, and a reader never sees half a pid.
        files.write_atomic(pid_file(path), f"{os.getpid()}\n", 0o644, root)
    return fd
