"""Errors the user can fix. The CLI prints them as one line and exits with status 2."""

from __future__ import annotations

import argparse
from typing import NoReturn


class UsageError(Exception):
    """Bad input or a missing prerequisite: the message names what to fix."""

    exit_code = 2


class Parser(argparse.ArgumentParser):
    """argparse, but a bad command line is one line (no usage block) and exit
    status 2, like every other UsageError; sub-command parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog.removeprefix('hpcbench ')}: {message}")


def one_line(text: str, limit: int | None = None) -> str:
    """A message as one line: runs of white space (a traceback's or a value's line
    breaks) as one space, other control characters (a terminal escape) written out as
    escapes, and past `limit` characters cut with "..."."""
    spaced = " ".join(str(text).split())
    flat = "".join(c if c.isprintable() else repr(c)[1:-1] for c in spaced)
    return flat if limit is None or len(flat) <= limit else flat[: limit - 3] + "..."
