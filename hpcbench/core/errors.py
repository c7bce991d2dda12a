"""Errors the user can fix. The CLI prints them as one line and exits with status 2."""

from __future__ import annotations

import argparse
from typing import Any, NoReturn


class UsageError(Exception):
    """Bad input or a missing prerequisite: the message names what to fix."""

    exit_code = 2


class Problem(Exception):
    """A bad value of a file at its key path (`testbeds[2].settings.link_rate`); the
    file's loader turns it into one UsageError line."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


class Parser(argparse.ArgumentParser):
    """argparse, but a bad command line is one line (no usage block) and exit
    status 2, like every other UsageError; sub-command parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog.removeprefix('hpcbench ')}: {message}")

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        """An option's strings as its value, '--' refused: CPython 3.11 takes it out of
        an option's own strings before converting them (Lib/argparse.py:2466-2471,
        `_get_values`), so `--partition=--` stored [] where one value belongs (3.13.0
        keeps it: Lib/argparse.py:2501). No option here takes '--' for a value, on any
        version; a sub-command's parser is a Parser too, so every command refuses it."""
        if action.option_strings and "--" in arg_strings and action.nargs != argparse.REMAINDER:
            raise argparse.ArgumentError(action, "'--' is no value: give one, or leave it out")
        return super()._get_values(action, arg_strings)


def one_line(text: str, limit: int | None = None) -> str:
    """A message as one line: runs of white space (a traceback's or a value's line
    breaks) as one space, other control characters (a terminal escape) written out as
    escapes, and past `limit` characters cut with "..."."""
    spaced = " ".join(str(text).split())
    flat = "".join(c if c.isprintable() else repr(c)[1:-1] for c in spaced)
    return flat if limit is None or len(flat) <= limit else flat[: limit - 3] + "..."
