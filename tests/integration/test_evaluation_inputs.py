"""The evaluation scripts put user values into command lines: hostile ones are refused
before anything runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rates", "1gbit;touch {marker}"], "--rates"),
        (["--rates", "1gbit,$(touch {marker})"], "--rates"),
        (["--env", "local;touch {marker}"], "--env"),
    ],
)
def test_bench_links_refuses_hostile_rates_and_envs(tmp_path, argv, message):
    marker = tmp_path / "ran"
    argv = [a.format(marker=marker) for a in argv]
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "evaluation" / "testbed_links.py"),
            *argv,
            "--reshape",
            f"touch {marker}",
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and message in proc.stderr
    assert not marker.exists() and not (tmp_path / "out").exists()
