"""Files written whole or not at all, and never through a link planted at their name.

A reader (a browser on report.html, a program on configurations.json) sees the
old file or the new one, never half of one; an interrupted or failed write
leaves the old file as it was.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def write_with(path: Path, fill: Callable[[BinaryIO], object]) -> None:
    """`fill` writes the content into a new file beside `path`, which is then flushed to
    disk and renamed over `path` (over a symlink there too: the link is replaced, what it
    points to is untouched). If `fill` raises, `path` stays as it was."""
    tmp, fd = _new_file(path)
    try:
        with os.fdopen(fd, "wb") as f:
            fill(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    _sync_folder(path.parent)


def write_text(path: Path, text: str) -> None:
    write_with(path, lambda f: f.write(text.encode()))


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
