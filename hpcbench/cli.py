"""Command line: `python -m hpcbench <command>`.

Every command's options are in hpcbench/options.py (`register`); the parser of
each carries a `func(args) -> int` default, which lives with what it does.
"""

from __future__ import annotations

import argparse
import sys

from hpcbench import options
from hpcbench.campaign import commands as campaign_commands
from hpcbench.errors import Parser, UsageError, one_line


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="hpcbench",
        description="Build testbeds for distributed deep learning and measure how training scales.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    options.register(sub, campaign_commands.HANDLERS)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        return int(args.func(args) or 0)
    except UsageError as err:
        print(f"hpcbench: error: {one_line(str(err))}", file=sys.stderr)
        return err.exit_code
    except RuntimeError as err:  # an operation failed; its own output says more
        print(f"hpcbench: failed: {one_line(str(err))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("hpcbench: interrupted", file=sys.stderr)
        return 130
