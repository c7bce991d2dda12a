"""Command line: `python -m hpcbench <command>`.

`build_parser` lists the commands in the order `--help` does. Each command's
parser carries a `func(args) -> int` default, which lives with what it does:
deploy's and report's options are here; `scale`'s and `probe`'s in
hpcbench/scale_options.py (a campaign file's sweep is read with the same parser),
`predict`'s in hpcbench/predict.py, `campaign`'s in hpcbench/campaign/commands.py.
"""

from __future__ import annotations

import argparse
import os
import sys

from hpcbench import deploy, paths, predict, report, scale_options
from hpcbench.campaign import commands as campaign_commands
from hpcbench.errors import Parser, UsageError, one_line


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="hpcbench",
        description="Build testbeds for distributed deep learning and measure how training scales.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_deploy_commands(sub)
    scale_options.add_commands(sub)
    add_report_commands(sub)
    predict.add_command(sub)
    campaign_commands.add_command(sub)
    return parser


def _env_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--env",
        default=os.environ.get("HPCBENCH_ENV", "local"),
        help="environment: a folder of environments/ or a variant "
        "(`hpcbench envs` lists them); default $HPCBENCH_ENV or local",
    )


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
    p.set_defaults(func=deploy.cmd_destroy)

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
