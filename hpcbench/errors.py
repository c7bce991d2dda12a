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
