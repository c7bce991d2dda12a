"""Files planted where a command reads, locks or writes, tried through `python -m
hpcbench` in a process of its own that a FIFO would make wait or a device read without
end: each is one line and exit status 2, within a bound (the cases that need no
process: tests/unit/test_planted_files.py)."""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from hpcbench.core import files, locks
from tests.unit.test_campaign import Fakes, base
from tests.unit.test_planted_files import (
    SAYS,
    TIMEOUT_S,
    World,
    no_hang,  # noqa: F401  (autouse)
)

pytestmark = pytest.mark.integration


REPO = Path(__file__).resolve().parents[2]


MEMORY_LIMIT = 4 << 30  # address space: a read without end fails instead of swapping


def _bounded_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def hpcbench(*argv: str) -> subprocess.CompletedProcess[str]:
    """The command in a process of its own, bounded in time and memory."""
    return subprocess.run(
        [sys.executable, "-m", "hpcbench", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        stdin=subprocess.DEVNULL,
        preexec_fn=_bounded_memory,
    )


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, (proc.returncode, proc.stderr)
    return lines[0]


@pytest.mark.parametrize("action", ["run", "status"])
def test_a_fifo_at_the_campaigns_lock_is_one_line_not_a_hang(tmp_path: Path, action: str) -> None:
    path = base(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / ".lock")
    line = one_error_line(hpcbench("campaign", action, str(path)))
    assert f"{out / '.lock'} is not a regular file" in line


def test_status_beside_a_running_campaign_refuses_a_fifo_at_its_pid_file(tmp_path: Path) -> None:
    path = base(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    fd = locks.hold(out / ".lock", "busy")  # a campaign running
    try:
        os.mkfifo(out / ".lock.pid")
        line = one_error_line(hpcbench("campaign", "status", str(path)))
        assert f"{out / '.lock.pid'} is not a regular file" in line
    finally:
        os.close(fd)


# ------------------------------------------------------------ compare --output
@pytest.mark.parametrize("kind", ["link", "fifo", "folder"])
def test_compare_output_at_a_link_a_fifo_or_a_folder_is_one_line(
    tmp_path: Path, fakes: Fakes, victim: Path, kind: str
) -> None:
    world = World(tmp_path)
    output = tmp_path / "comparison.md"
    if kind == "link":
        output.symlink_to(victim)
    elif kind == "fifo":
        os.mkfifo(output)  # no reader: an open for writing by name waits for one
    else:
        output.mkdir()
    line = one_error_line(hpcbench(*world.argv("compare")))
    assert str(output) in line and re.search(SAYS.get(kind, "not a regular file"), line), line
    assert victim.read_text() == "not yours\n"
    assert output.is_symlink() or not output.is_file()  # left as it was


# ---------------------------------------------------------- the campaign file
def test_a_fifo_given_as_the_campaign_file_is_one_line_not_a_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "c.yaml"
    os.mkfifo(fifo)  # no writer: an open for reading by name waits for one
    line = one_error_line(hpcbench("campaign", "plan", str(fifo)))
    assert f"{fifo} is not a regular file" in line


def test_a_device_given_as_the_campaign_file_is_one_line_not_read_without_end() -> None:
    # /dev/zero never ends: read whole, it took all memory (here, up to the limit).
    line = one_error_line(hpcbench("campaign", "plan", "/dev/zero"))
    assert "/dev/zero is not a regular file" in line


def test_a_campaign_file_over_its_bound_is_one_line_and_not_read(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    with path.open("wb") as f:
        f.truncate(files.CAMPAIGN_FILE.most + 1)  # sparse: nothing to read but its size
    line = one_error_line(hpcbench("campaign", "plan", str(path)))
    assert f"{path}: over 1 MB; a campaign file is a page of YAML" in line


# ----------------------------------------------- hangs, as a command meets them
@pytest.mark.parametrize(
    "name", ["C/a/local/leases/job.json", "O/results.jsonl", "R/results.jsonl"]
)
def test_a_fifo_at_a_file_read_never_makes_a_command_wait(
    tmp_path: Path, fakes: Fakes, name: str
) -> None:
    world = World(tmp_path)
    world.plant(world.path(name), "fifo")
    command = "report" if name.startswith("R/") else "status"
    proc = hpcbench(*world.argv(command))  # HPCBENCH_STATE: the fakes' state folder
    if name.endswith("job.json"):  # what the lease was still counts as held
        assert proc.returncode == 0 and "unreadable lease job.json" in proc.stdout, proc
    else:
        assert f"{world.path(name)} is not a regular file" in one_error_line(proc)
