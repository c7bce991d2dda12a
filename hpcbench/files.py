"""Whole-file writes that are never half done and never go through a planted link.

A results or state folder may hold a symbolic link someone planted where hpcbench
writes (report.md -> ~/.bashrc); writing by name would overwrite the file it points
to. `write_atomic` writes a fresh temporary file beside the target, created with
O_EXCL (so not a name anyone planted), and renames it over the target: rename(2)
replaces a link, it never follows one. A reader sees the old file or the new one,
never a torn one, and a failed write leaves the old file as it was.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

Content = bytes | str | Callable[[BinaryIO], None]


def write_atomic(path: Path, content: Content, mode: int = 0o644) -> None:
    """`path` holds `content` (bytes, text as UTF-8, or what a writer puts in the
    binary file it is given, e.g. a figure's savefig) with `mode`, or is unchanged."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), mode)  # mkstemp's 0600, widened only where asked
            if callable(content):
                content(out)
            else:
                out.write(content.encode() if isinstance(content, str) else content)
            out.flush()
            os.fsync(out.fileno())  # the data on disk before the name points at it
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
