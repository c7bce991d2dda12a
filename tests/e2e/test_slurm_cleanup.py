"""No job leaves its pyxis container on a node, however it ends, on the e2e testbed's
real Slurm, pyxis and enroot: Ctrl-C of hpcbench, its terminal closed, SIGTERM to it,
the job's time limit, and scancel from outside. Each case runs one 2-node job in the
stack's .sqsh (`hpcbench probe`, the cheapest job that runs on two nodes), as the
testbed's user over SSH, stops it once its workload runs in its container on both
nodes (the time limit: one minute from its start), and then Slurm must hold no job
and `enroot list` must be empty on both nodes within a minute. And the partition's
`setup:` line: a failing one fails the job with Lmod's own line first in its .err,
and one that loads no module leaves no stack on PATH.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.conftest import E2E_VARS, REPO, STACK_SQSH, DeployedTestbed, head
from tests.interrupt import as_from_a_terminal

pytestmark = [pytest.mark.e2e, pytest.mark.stage("slurm jobs")]

NODES = ("node1", "node2")  # the fast partition's
GONE_WITHIN_S = 60


def on_node(node: str, command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """A command on a testbed node as its user (a login shell, as a user has it)."""
    return subprocess.run(
        ["docker", "exec", f"{E2E_VARS['name']}-{node}", "su", "-", "hpcbench", "-c", command],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def containers(node: str) -> list[str]:
    proc = on_node(node, "enroot list")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def jobs() -> list[str]:
    """Every job Slurm holds, running, queued or completing."""
    proc = on_node("node1", "squeue --noheader --all --format='%i %j %T'")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def slurm_args(bed: DeployedTestbed) -> list[str]:
    """The fast partition as the testbed's user reaches it (campaigns/lrz.yaml's way)."""
    access = head(bed).access
    assert access is not None and access.known_hosts
    return [
        "--env",
        "slurm",
        "--slurm-login",
        f"hpcbench@{access.host}:{access.port}",
        "--slurm-ssh-key",
        str(bed.state / "local" / "ssh_mesh_ed25519"),
        "--slurm-known-hosts",
        access.known_hosts,
        "--slurm-job-dir",
        "/shared/slurm-jobs",
        "--slurm-bench-dir",
        "/opt/hpcbench/bench",
        "--partition",
        "fast",
    ]


def probe(bed: DeployedTestbed, out: Path, log: Path, *more: str) -> subprocess.Popen[str]:
    """`hpcbench probe` on both nodes in the stack's .sqsh, as from a terminal: one
    2-node job whose all-reduce sizes keep it running for minutes."""
    argv = [
        sys.executable,
        "-m",
        "hpcbench",
        "probe",
        *slurm_args(bed),
        "--container-image",
        f"/images/{STACK_SQSH.name}",
        "--nodes",
        "2",
        "--device",
        "cpu",
        "--threads",
        "1",
        "--probe-max-bytes",
        "512M",
        "--probe-budget",
        "600",
        "--timeout",
        "900",
        "--out",
        str(out),
        *more,
    ]
    with log.open("w") as sink:
        return subprocess.Popen(
            argv,
            cwd=REPO,
            env=bed.environ,
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            preexec_fn=as_from_a_terminal,
        )


def until(what: str, done: Callable[[], bool], limit_s: float, log: Path) -> float:
    """Seconds until done() (asked every second, for at most limit_s)."""
    start = time.monotonic()
    while not done():
        assert time.monotonic() - start < limit_s, (
            f"{what}: not within {limit_s} s\n" + (log.read_text()[-3000:])
        )
        time.sleep(1)
    return time.monotonic() - start


def running_in_it(node: str) -> bool:
    """The job's container is made and its workload runs in it: `enroot list --fancy`
    lists a process in it (NAME PID ...)."""
    proc = on_node(node, "enroot list --fancy")
    rows = [line.split() for line in proc.stdout.splitlines()]
    return any(r[0].startswith("pyxis_") and r[1:2] and r[1].isdigit() for r in rows)


def on_both_nodes() -> bool:
    return all(running_in_it(n) for n in NODES)


def made_on_both_nodes() -> bool:
    return all(any(c.startswith("pyxis_") for c in containers(n)) for n in NODES)


def nothing_left() -> bool:
    return not jobs() and not any(containers(n) for n in NODES)


def last_job_state() -> str:
    """The state of the last job Slurm knows (it keeps a finished one MinJobAge s)."""
    proc = on_node("node1", "scontrol -o show job")
    states = {}
    for line in proc.stdout.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if fields.get("JobId", "").isdigit():
            states[int(fields["JobId"])] = fields.get("JobState", "")
    return states[max(states)] if states else ""


def stop_hpcbench(proc: subprocess.Popen[str], how: str) -> None:
    if how == "ctrl-c":  # the terminal's SIGINT reaches its foreground process group
        os.killpg(proc.pid, signal.SIGINT)
    elif how == "hangup":  # a closed terminal: SIGHUP to its processes
        os.killpg(proc.pid, signal.SIGHUP)
    elif how == "sigterm":  # kill PID
        proc.send_signal(signal.SIGTERM)
    elif how == "scancel":  # the user cancels the job from a login node
        cancel = on_node("node1", "scancel --user=hpcbench")
        assert cancel.returncode == 0, cancel.stderr


@pytest.mark.parametrize("how", ["ctrl-c", "hangup", "sigterm", "scancel", "time limit"])
def test_no_container_is_left_on_any_node_however_the_job_ends(
    deployed: DeployedTestbed,
    tmp_path: Path,
    how: str,
) -> None:
    bed = deployed
    assert not jobs() and not any(containers(n) for n in NODES), "the testbed is not clean"
    log = tmp_path / "probe.log"
    # The time limit: one minute for the whole job, its image's unpacking included; the
    # job's setup line waits 30 s first, so that it outlasts the minute however fast the
    # nodes unpack and probe (unpacked on tmpfs, a fast machine ended it in the minute).
    limit = (
        ["--slurm-time", "1", "--container-import-time", "0", "--slurm-setup", "sleep 30"]
        if how == "time limit"
        else []
    )
    proc = probe(bed, tmp_path / "out", log, *limit)
    try:
        if how == "time limit":  # from the job's start, its image's unpacking included
            until("its container on both nodes", made_on_both_nodes, 900, log)
            proc.wait(timeout=600)  # Slurm ends the job; hpcbench records it
            assert last_job_state() == "TIMEOUT", log.read_text()[-3000:]
        else:
            until("the workload in its container on both nodes", on_both_nodes, 900, log)
            stop_hpcbench(proc, how)
        took = until("no job and no container", nothing_left, GONE_WITHIN_S, log)
        assert last_job_state() in ("CANCELLED", "TIMEOUT"), last_job_state()
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    print(f"{how}: no job and no container {took:.0f} s after it ended")


def test_a_failing_setup_line_fails_its_job_with_lmods_line_first(
    deployed: DeployedTestbed,
    tmp_path: Path,
) -> None:
    """GWDG's way (Lmod, the environment's python) with a module that does not exist:
    the job ends before any step, and its .err begins with Lmod's own line."""
    log = tmp_path / "probe.log"
    setup = "module load no-such-module && source activate hpcbench"
    proc = probe_plain(deployed, tmp_path, log, setup)
    assert proc.returncode != 0, log.read_text()[-3000:]
    first = on_node("node1", 'head -n1 "$(ls -t /shared/slurm-jobs/*.err | head -n1)"')
    assert first.stdout.startswith(
        "hpcbench: setup failed (exit 1): Lmod has detected the following error:"
    )
    assert '"no-such-module"' in first.stdout, first.stdout
    assert not jobs()


def test_a_setup_line_that_loads_no_module_leaves_no_stack_on_path(
    deployed: DeployedTestbed,
    tmp_path: Path,
) -> None:
    """Without `module load miniforge3 && source activate hpcbench`, gwdg.yaml's
    `python: python` finds no stack: the line is what puts it on PATH."""
    log = tmp_path / "probe.log"
    proc = probe_plain(deployed, tmp_path, log, "true")
    assert proc.returncode != 0, log.read_text()[-3000:]
    assert not jobs()


def probe_plain(
    bed: DeployedTestbed, tmp: Path, log: Path, setup: str
) -> subprocess.CompletedProcess[str]:
    """`hpcbench probe` on both nodes without a container, as gwdg.yaml runs: the
    setup line, then the environment's `python`."""
    argv = [
        "probe",
        *slurm_args(bed),
        "--slurm-setup",
        setup,
        "--slurm-python",
        "python",
        "--nodes",
        "2",
        "--device",
        "cpu",
        "--probe-max-bytes",
        "1M",
        "--timeout",
        "300",
        "--out",
        str(tmp / "out"),
    ]
    proc = bed.hpcbench(*argv, timeout=900)
    log.write_text(proc.stdout + proc.stderr)
    return proc
