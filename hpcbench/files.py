"""Whole-file writes that are never half done and never go through a planted link.

A results or state folder may hold a symbolic link someone planted where hpcbench
writes (report.md -> ~/.bashrc); writing by name would overwrite the file it points
to. `write_atomic` writes a fresh temporary file beside the target, created with
O_EXCL (so not a name anyone planted), and renames it over the target: rename(2)
replaces a link, it never follows one. A reader (a browser on report.html, a program
on configurations.json) sees the old file or the new one, never a torn one, and a
failed or interrupted write leaves the old file as it was.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

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
