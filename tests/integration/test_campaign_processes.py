"""A campaign's results folder while another process holds it (tests/unit/test_campaign.py:
the campaign in one process, its deploy, verify and destroy stood in)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hpcbench import cli
from tests.unit.test_campaign import Fakes, base

pytestmark = pytest.mark.integration


def test_a_folder_a_running_campaign_holds_is_refused_in_one_line(
    tmp_path: Path, fakes: Fakes, capfd: pytest.CaptureFixture[str]
) -> None:
    path = base(tmp_path)
    assert cli.main(["campaign", "run", str(path)]) == 0
    capfd.readouterr()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import fcntl, os, time
        fd = os.open({str(tmp_path / "out" / ".lock")!r}, os.O_RDWR | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print('locked', flush=True)
        time.sleep(60)
    """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        assert cli.main(["campaign", "run", str(path), "--resume"]) == 2
        assert "in use by another campaign run" in capfd.readouterr().err
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
