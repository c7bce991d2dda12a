"""Whole-file writes that are never half done and never go through a planted link,
and opens in place that refuse what someone planted at the name.

A results or state folder may hold a symbolic link someone planted where hpcbench
writes (report.md -> ~/.bashrc); writing by name would overwrite the file it points
to. `write_atomic` writes a fresh temporary file beside the target, created with
O_EXCL (so not a name anyone planted), and renames it over the target: rename(2)
replaces a link, it never follows one. A reader (a browser on report.html, a program
on configurations.json) sees the old file or the new one, never a torn one, and a
failed or interrupted write leaves the old file as it was.

A file opened in place (a lock, a log appended to) goes through `open_regular`:
a link at its name is refused (O_NOFOLLOW), a FIFO or device there cannot block
the open (O_NONBLOCK), and whatever is not a regular file is refused once open
(fstat), in one line that names the path.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from hpcbench.errors import UsageError

Content = bytes | str | Callable[[BinaryIO], object]


def write_atomic(path: Path, content: Content, mode: int | None = None) -> None:
    """`path` holds `content` (bytes, text as UTF-8, or what a writer puts in the
    binary file it is given, e.g. a figure's savefig), or is unchanged. `mode`: the
    file's permissions (0o600 for state that names hosts); None: what any new file
    gets (the umask's)."""
    tmp, fd = _new_file(path)
    try:
        with os.fdopen(fd, "wb") as out:
            if mode is not None:
                os.fchmod(out.fileno(), mode)
            if callable(content):
                content(out)
            else:
                out.write(content.encode() if isinstance(content, str) else content)
            out.flush()
            os.fsync(out.fileno())  # the data on disk before the name points at it
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    _sync_folder(path.parent)


def open_regular(path: Path, flags: int, mode: int = 0o600) -> int:
    """A descriptor of the regular file `path`, opened with `flags` (O_CREAT makes it
    with `mode`); a link, a FIFO, a socket, a device or a folder at the name is a
    UsageError naming it (exit status 2). Other failures are the OSError of open(2)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise UsageError(
                f"{path} is a symbolic link, which hpcbench never opens: remove it"
            ) from None
        if err.errno in (errno.ENXIO, errno.EISDIR):  # a FIFO with no reader, a socket, a folder
            raise UsageError(_not_regular(path)) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(_not_regular(path))
        os.set_blocking(fd, True)  # a regular file: ordinary I/O from here on
    except BaseException:
        os.close(fd)
        raise
    return fd


def _not_regular(path: Path) -> str:
    return f"{path} is not a regular file (a FIFO, socket, device or folder): remove it"


def _new_file(path: Path) -> tuple[Path, int]:
    """A file of a fresh name beside `path`, created by this call (O_EXCL: a name that
    exists, a link included, is never opened) with the mode a new file gets (umask),
    and its descriptor, open for writing."""
    for _ in range(100):
        # Short prefix: the temporary name must fit NAME_MAX whatever `path`'s length.
        tmp = path.with_name(f".{path.name[:40]}.{secrets.token_hex(4)}.tmp")
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        except FileExistsError:
            continue
    raise FileExistsError(f"{path.parent}: no free temporary name beside {path.name}")


def _sync_folder(folder: Path) -> None:
    """The rename itself on disk (where the system lets a folder be opened and synced)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
