"""SIGTERM and SIGHUP stop `scale` and `probe` the way Ctrl-C does: the run in
flight is stopped, the command says so in one line and exits 130."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from hpcbench import paths

# The command up to Target.resolve, whose stand-in sends the signal to the harness
# itself, the moment the nodes are resolved (before anything is launched).
CODE = """
import os, signal, sys
from hpcbench import cli, target
def resolve(spec):
    os.kill(os.getpid(), signal.{sig})
    raise SystemExit("the signal did not stop the command")
target.Target.resolve = staticmethod(resolve)
sys.exit(cli.main({argv!r}))
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
@pytest.mark.parametrize(
    "argv",
    [["probe", "--env", "localhost"], ["scale", "--env", "localhost", "--model", "resnet18"]],
)
def test_a_signal_stops_the_command_like_ctrl_c(tmp_path, sig, argv):
    argv = [*argv, "--out", str(tmp_path / "out")]
    proc = subprocess.run(
        [sys.executable, "-c", CODE.format(sig=sig, argv=argv)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=paths.REPO,
    )
    assert proc.returncode == 130, (proc.returncode, proc.stderr)
    assert proc.stderr.strip() == "hpcbench: interrupted"
    assert proc.returncode != -getattr(signal, sig)
