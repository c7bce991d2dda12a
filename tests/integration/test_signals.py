"""Signals and the command line: SIGTERM and SIGHUP stop `scale` and `probe` the way
Ctrl-C does (the run in flight is stopped, the command says so in one line and exits
130); a second stop kills a tool that ignores the first at once, on a machine whose
CPUs are all busy; output piped to a reader that exited ends without a traceback; a
stop on a partition or hosts says what it does there, and the journal names it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hpcbench import cli
from hpcbench.campaign.journal import Journal
from hpcbench.core import bounded, paths
from hpcbench.measure import sweep
from hpcbench.schedulers.base import stop_on_signals
from tests.integration.test_bounded_processes import _gone, _until
from tests.interrupt import as_from_a_terminal
from tests.unit.test_campaign_clusters import CLUSTERS_ONLY, Cluster, write

pytestmark = pytest.mark.integration

# The command up to Target.resolve, whose stand-in sends the signal to the harness
# itself, the moment the nodes are resolved (before anything is launched).
CODE = """
import os, signal, sys
from hpcbench import cli
from hpcbench.testbeds import target
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


# --------------------------------------------- two presses on a loaded machine
# A tool that will not stop on Ctrl-C (as ansible-playbook finishing its task may not)
# and talks all the while, so that the harness's reader thread wants the GIL too.
STUBBORN = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
open(sys.argv[1], "w").write(str(os.getpid()))
while True:
    print("changed: [node1] => (item=x)", flush=True)
    time.sleep(0.001)
"""
# `deploy` as it runs Ansible: its lines read by a thread, the whole grace period's.
DEPLOYING = """
import sys
from hpcbench.core import bounded
bounded.run([sys.executable, "-c", {code!r}, {pid_file!r}], bounded.ANSIBLE, on_line=len)
"""
HOG = "import signal\nsignal.alarm({seconds})\nwhile True: pass\n"
HOG_S = 120  # each hog ends itself by then, whatever becomes of the test


@pytest.fixture
def busy_cpus() -> Iterator[None]:
    """Every CPU this process may use busy (two spinning processes per core) for the
    test's length."""
    hogs = [
        subprocess.Popen([sys.executable, "-c", HOG.format(seconds=HOG_S)])
        for _ in range(2 * len(os.sched_getaffinity(0)))
    ]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def _pending(pid: int, sig: int) -> bool:
    """`sig` sent to the process and not yet delivered (proc(5): ShdPnd)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("ShdPnd:"):
            return bool(int(line.split()[1], 16) & (1 << (sig - 1)))
    return False


@pytest.mark.usefixtures("busy_cpus")
@pytest.mark.parametrize("gap_s", [0.0, 0.2], ids=["at-once", "0.2s-later"])
@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGHUP], ids=["ctrl-c", "hang-up"])
def test_a_second_stop_kills_the_deploys_tool_at_once_on_a_loaded_machine(
    tmp_path: Path, gap_s: float, second: int
) -> None:
    # The first press has been delivered (the kernel has handed it over) when the
    # second is sent: two deliveries, however late Python runs its handler for them.
    pid_file = tmp_path / "tool.pid"
    code = (
        "from hpcbench.schedulers.base import stop_on_signals\nstop_on_signals()\n"
        + DEPLOYING.format(code=STUBBORN, pid_file=str(pid_file))
    )
    harness = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=paths.REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_from_a_terminal,
    )
    tool = 0
    try:
        assert _until(lambda: pid_file.exists() and pid_file.read_text().strip() != "", 60)
        tool = int(pid_file.read_text())
        harness.send_signal(signal.SIGINT)
        assert _until(lambda: not _pending(harness.pid, signal.SIGINT), 30)
        time.sleep(gap_s)
        harness.send_signal(second)
        pressed = time.monotonic()
        with contextlib.suppress(subprocess.TimeoutExpired):
            harness.wait(timeout=bounded.GRACE_S - 5)
        took = time.monotonic() - pressed
        assert harness.returncode is not None, "the second stop waited out the grace period"
        assert took < bounded.GRACE_S / 3, took  # not the grace that one press gives
        err = harness.stderr.read()
        assert harness.returncode != 0 and "Interrupted: SIGINT" in err.splitlines()[-1], err
        assert _until(lambda: _gone(tool), 10), "the tool outlived its harness"
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
        if tool and not _gone(tool):
            os.kill(tool, signal.SIGKILL)


# ------------------------------------------------- a reader that stops reading
@pytest.mark.parametrize(
    "argv",
    [
        ["envs"],
        ["campaign", "run", "--dry-run", str(paths.REPO / "campaigns" / "lrz.yaml")],
        ["scale", "--env", "localhost", "--model", "resnet18", "--nodes", "1-2", "--dry-run"],
    ],
    ids=["envs", "campaign-dry-run", "scale-dry-run"],
)
def test_output_piped_to_a_reader_that_exited_ends_without_a_traceback(
    tmp_path: Path, argv: list[str]
) -> None:
    # `... | head -c1`, where head has taken its byte and exited before the command
    # writes: every write to the pipe fails (EPIPE), at once and at exit alike.
    read, write = os.pipe()
    head = subprocess.Popen(["head", "-c1"], stdin=read, stdout=subprocess.DEVNULL)
    os.close(read)
    try:
        os.write(write, b"x")
        assert head.wait(timeout=30) == 0
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "hpcbench",
                *argv,
                *(["--out", str(tmp_path / "out")] if argv[0] == "scale" else []),
            ],
            stdin=subprocess.DEVNULL,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            cwd=paths.REPO,
        )
    finally:
        os.close(write)
    assert proc.stderr == ""  # no BrokenPipeError, no "Exception ignored" at exit
    assert proc.returncode == 1  # as Python's own `print` to a closed pipe exits
    assert not (tmp_path / "out").exists()


# ------------------------------------------ what a stop says of testbeds not deployed
def test_a_stop_on_a_partition_or_hosts_says_what_happens_not_a_destroy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))
    cluster = Cluster(monkeypatch)
    swept = cluster.sweep

    def stopped_on_hosts(workload: Any, target: Any, spec: Any) -> Any:
        if target.hosts:  # the terminal's SIGTERM, mid-sweep
            raise bounded.Interrupted(signal.SIGTERM)
        return swept(workload, target, spec)

    monkeypatch.setattr(sweep, "events", stopped_on_hosts)
    path = write(tmp_path, CLUSTERS_ONLY)
    assert cli.main(["campaign", "run", str(path)]) == 130
    err = capfd.readouterr().err
    assert "destroying" not in err
    assert (
        "[testbed 2/2 mine] interrupted by SIGTERM: its runs in flight, if any, are stopped; "
        "nothing else is held"
    ) in err.splitlines()
    records = Journal(tmp_path / "out", "mixed").records()
    mine = {r["cell"]: r for r in records if r["kind"] == "cell" and r["testbed"] == "mine"}
    assert mine and all(
        r["status"] == "pending" and r["why"].startswith("interrupted by SIGTERM: ")
        for r in mine.values()
    )
    (phase,) = [r for r in records if r["kind"] == "phase" and r["status"] == "interrupted"]
    assert (phase["testbed"], phase["phase"], phase["why"]) == ("mine", "sweep", "by SIGTERM")


def test_stop_on_signals_keeps_nohup_and_a_clean_up_in_place() -> None:
    before = {sig: signal.getsignal(sig) for sig in bounded.STOP_SIGNALS}
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # `nohup hpcbench campaign run ...`
        stop_on_signals()
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is bounded.interrupt
        assert signal.getsignal(signal.SIGINT) is bounded.interrupt
        with bounded.ctrl_c_deferred():  # a clean-up's deferral is not undone by a sweep's
            deferring = signal.getsignal(signal.SIGTERM)
            stop_on_signals()
            assert signal.getsignal(signal.SIGTERM) is deferring
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
