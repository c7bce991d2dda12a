"""Exclusive locks a command holds for its whole life: flock(2) on a file, which the
kernel drops when the holder exits, however it exits (SIGKILL, power loss: no stale
lock to clear by hand)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path

from hpcbench.errors import UsageError


def hold(path: Path, busy: str) -> int:
    """Lock `path` (created if need be) and return the descriptor that holds it until
    closed; another holder already: UsageError(busy), one line, exit status 2.

    The descriptor is read-only (flock needs no more): a file open for writing would
    keep its file system from being remounted read-only for the holder's whole life."""
    try:
        # O_NOFOLLOW: a link planted at the lock's name would have O_CREAT make a file
        # where it points (outside a results folder, say); it is refused instead.
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as err:
        why = (
            "a symbolic link, which hpcbench never opens (remove it)"
            if (err.errno == errno.ELOOP)
            else err.strerror or err
        )
        raise UsageError(f"cannot lock {path}: {why}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise UsageError(busy) from None
    return fd


def holder(path: Path) -> int | None:
    """The pid that holds `path`'s lock (hold_as_process wrote it beside), 0 when it is
    held by a process that did not say, None when nobody holds it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            return int(pid_file(path).read_text().strip() or 0)
        except (OSError, ValueError):
            return 0
    finally:
        os.close(fd)  # a lock we took here goes with the descriptor
    return None


def pid_file(path: Path) -> Path:
    return path.with_name(path.name + ".pid")


def hold_as_process(path: Path, busy: str) -> int:
    """hold(), and this process's pid written beside the lock for holder() to read."""
    fd = hold(path, busy)
    with contextlib.suppress(OSError):  # who holds it is a courtesy; the lock is what counts
        pid_file(path).write_text(f"{os.getpid()}\n")
    return fd
