"""Command line: `python -m hpcbench <command>`.

`build_parser` lists the commands in the order `--help` does. Each command's
parser carries a `func(args) -> int` default, which lives with what it does:
deploy's and report's options are here; `scale`'s and `probe`'s in
hpcbench/measure/scale_options.py (a campaign file's sweep is read with the same parser),
`predict`'s in hpcbench/reports/predict.py, `campaign`'s in hpcbench/campaign/commands.py.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import sys
from typing import TextIO

from hpcbench.campaign import advise
from hpcbench.campaign import commands as campaign_commands
from hpcbench.campaign import state as campaign_state
from hpcbench.core import paths
from hpcbench.core.errors import Parser, UsageError, one_line
from hpcbench.measure import scale_options
from hpcbench.reports import mlperf, predict, report
from hpcbench.testbeds import deploy
from hpcbench.testbeds.kinds.deployed import Local


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="hpcbench",
        description="Build testbeds for distributed deep learning and measure how training scales.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_deploy_commands(sub)
    scale_options.add_commands(sub)
    add_report_commands(sub)
    mlperf.add_command(sub)
    predict.add_command(sub)
    campaign_commands.add_command(sub)
    advise.add_command(sub)
    return parser


def _env_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--env",
        default=os.environ.get("HPCBENCH_ENV", Local.name),
        help="environment: a folder of environments/ or a variant "
        "(`hpcbench envs` lists them); default $HPCBENCH_ENV or local",
    )


def cmd_destroy(args: argparse.Namespace) -> int:
    """`destroy --env`, then the campaigns' state folders it leaves alone."""
    try:
        return deploy.cmd_destroy(args)
    finally:
        campaign_state.say_kept()


def add_deploy_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("deploy", help="create the testbed's machines and configure them")
    _env_argument(p)
    p.add_argument(
        "--var",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a Terraform variable of the env (remembered for later deploys)",
    )
    p.add_argument("--skip-ansible", action="store_true", help="create machines only")
    p.set_defaults(func=deploy.cmd_deploy)

    p = sub.add_parser("verify", help="run the testinfra checks against the deployed nodes")
    _env_argument(p)
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="extra pytest arguments")
    p.set_defaults(func=deploy.cmd_verify)

    p = sub.add_parser("destroy", help="remove the testbed and its local state")
    _env_argument(p)
    p.set_defaults(func=cmd_destroy)

    p = sub.add_parser("envs", help="list the environments")
    p.set_defaults(func=lambda args: print("\n".join(paths.environments())) or 0)


def add_report_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report", help="Markdown and HTML report with plots", description=report.__doc__
    )
    p.add_argument("--out", default="results", help="results directory (default: results/)")
    p.add_argument(
        "--format",
        choices=("html", "json", "csv"),
        default="html",
        help="html: report.html, report.md, plots and the numbers as files (default); "
        "json or csv: one record per configuration on stdout, nothing written "
        "(fields: docs/report.md)",
    )
    p.set_defaults(func=report.report_main)
    c = sub.add_parser("compare", help="two results directories side by side")
    c.add_argument("dir_a")
    c.add_argument("dir_b")
    c.add_argument("--output", help="write the Markdown here instead of stdout")
    c.set_defaults(func=report.compare_main)


def _reader_gone(stream: TextIO) -> bool:
    """Whether the pipe `stream` writes to has lost its reader (`| head` exited): poll(2)
    reports POLLERR on a pipe's write end once no reader is left (pipe(7))."""
    try:
        poller = select.poll()
        poller.register(stream.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError):  # no descriptor: a closed or replaced stream
        return False


def _say(text: str) -> None:
    """One line on stderr, unless its reader is gone too (`2>&1 | head`)."""
    with contextlib.suppress(OSError):
        print(text, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # here, where a reader that went is caught, not at exit
        return code
    except BrokenPipeError:
        if not _reader_gone(sys.stdout):
            raise
        # What is left to print, and what Python flushes at exit, goes nowhere: the
        # reader chose to read no more (Python's docs, signal module, "Note on SIGPIPE").
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 1
    except UsageError as err:
        _say(f"hpcbench: error: {one_line(str(err))}")
        return err.exit_code
    except RuntimeError as err:  # an operation failed; its own output says more
        _say(f"hpcbench: failed: {one_line(str(err))}")
        return 1
    except KeyboardInterrupt:
        _say("hpcbench: interrupted")
        return 130
