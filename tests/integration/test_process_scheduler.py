"""The process scheduler: real processes, no cluster needed."""

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest

from hpcbench import launchers
from hpcbench.core import paths
from hpcbench.launchers import Placement, RunSpec
from hpcbench.launchers.base import BIND_SCRIPT
from hpcbench.launchers.local import LocalLauncher
from hpcbench.launchers.specs import TargetSpec
from hpcbench.schedulers import ProcessScheduler, base, process

pytestmark = pytest.mark.integration


def test_marker_matches_the_workload():
    assert f'RESULT_MARKER = "{base.RESULT_MARKER}"' in (paths.BENCH_DIR / "runtime.py").read_text()


def test_parse_records_ignores_launcher_prefixes_and_noise():
    lines = ['[1,0]<stdout>:HPCBENCH_RESULT {"a": 1}', "noise", "HPCBENCH_RESULT {broken"]
    assert base.parse_records(lines) == [{"a": 1}]


def _py(code):
    return launchers.Command((sys.executable, "-c", code))


def test_run_collects_record_and_output():
    out = process.run_commands(
        [_py('print("hello"); print(\'HPCBENCH_RESULT {"x": 2}\')')], timeout_s=30
    )
    assert out.ok and out.records == [{"x": 2}] and out.tail == ["hello"]


def test_run_kills_on_timeout():
    out = process.run_commands([_py("import time; time.sleep(60)")], timeout_s=1)
    assert out.timed_out and not out.ok and out.duration_s < 20
    assert "timed out" in out.error()


def test_a_failed_rank_stops_its_blocked_peers(monkeypatch):
    monkeypatch.setattr(process, "PEER_GRACE_S", 0.5)
    out = process.run_commands(
        [_py("import sys; print('boom'); sys.exit(3)"), _py("import time; time.sleep(60)")],
        timeout_s=60,
    )
    assert not out.ok and not out.timed_out and out.returncodes[0] == 3
    assert out.duration_s < 20
    assert "exit status" in out.error() and "boom" in out.error()


def test_success_without_record_is_a_failure():
    out = process.run_commands([_py("pass")], timeout_s=30)
    assert not out.ok and "without a result record" in out.error()


def test_the_scheduler_runs_what_its_launcher_renders(tmp_path):
    """Two local ranks, each printing its RANK as a record: the launcher renders, the
    scheduler starts, watches and collects."""
    shutil.copy(paths.BENCH_DIR / "leash.py", tmp_path)  # bench/ holds the leash
    spec = RunSpec(
        script="-c",
        args=("import os; print('HPCBENCH_RESULT {\"rank\": %s}' % os.environ['RANK'])",),
        python=sys.executable,
        workdir=str(tmp_path),
        placements=(Placement("localhost", 2),),
    )
    out = ProcessScheduler(LocalLauncher()).run(spec, timeout_s=30)
    assert out.ok and sorted(r["rank"] for r in out.records) == [0, 1]


def test_sigterm_to_the_harness_stops_the_ranks(tmp_path):
    pid_file = tmp_path / "rank.pid"
    rank = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    harness = (
        "import signal, sys\n"
        "from hpcbench import launchers\n"
        "from hpcbench.schedulers import base, process\n"
        "base.stop_on_signals()\n"
        f"process.run_commands([launchers.Command((sys.executable, '-c', {rank!r}))], "
        "timeout_s=120)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", harness], stderr=subprocess.DEVNULL)
    for _ in range(200):  # bounded: the rank writes its pid within seconds
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.05)
    rank_pid = int(pid_file.read_text())
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    for _ in range(100):
        try:
            os.kill(rank_pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"rank {rank_pid} outlived the harness")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# Two ranks: LocalLauncher's two leashed commands here; over ssh, one leashed command
# that starts both (as torchrun does on a node).
HARNESS = """
import os, subprocess, sys, time
from hpcbench.launchers import Placement, RunSpec
from hpcbench.launchers.local import LocalLauncher
from hpcbench.schedulers import process
from hpcbench.core.ssh import SshAccess

rank = {rank!r}
access = SshAccess(host="node1") if {ssh!r} else None
spec = RunSpec(script="-c", args=(rank,), python=sys.executable, workdir={bench!r},
               placements=(Placement("n", 2, access),), time_limit_s=600)
if access is None:
    cmds = LocalLauncher().commands(spec)
else:
    node = "import os, subprocess, sys, time; [subprocess.Popen([sys.executable, '-c', " \\
           "sys.argv[1]], env={{**os.environ, 'RANK': str(r)}}) for r in range(2)]; time.sleep(120)"
    cmds = [spec.on(spec.placements[0], [sys.executable, "-c", node, rank])]
process.run_commands(cmds, timeout_s=600)
"""


@pytest.mark.parametrize("over_ssh", [False, True])
def test_ranks_die_with_a_harness_killed_outright(tmp_path, over_ssh):
    """SIGKILL leaves the harness no time to stop anything: the ranks' leashes see their
    stdin end (the harness held it) and stop them, here and at the far end of ssh.

    The 'ssh' is a stand-in that runs the remote line with bash on this machine,
    passing stdin through as ssh does."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "ssh").write_text('#!/bin/bash\nfor last; do :; done\nexec bash -c "$last"\n')
    (fake_bin / "ssh").chmod(0o755)
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    rank = (
        f"import os, time; open(os.path.join({str(pid_dir)!r}, os.environ['RANK']), 'w')"
        ".write(str(os.getpid())); time.sleep(120)"
    )
    harness = tmp_path / "harness.py"
    harness.write_text(HARNESS.format(rank=rank, bench=str(paths.BENCH_DIR), ssh=over_ssh))
    env = {**os.environ, "PATH": f"{fake_bin}:{os.environ['PATH']}", "PYTHONPATH": str(paths.REPO)}
    proc = subprocess.Popen([sys.executable, str(harness)], env=env, stderr=subprocess.DEVNULL)
    pids: list[int] = []
    try:
        for _ in range(300):  # bounded: both ranks write their pids within seconds
            if len(list(pid_dir.iterdir())) == 2 and all(f.read_text() for f in pid_dir.iterdir()):
                break
            time.sleep(0.05)
        pids = [int(f.read_text()) for f in pid_dir.iterdir()]
        assert len(pids) == 2
        proc.kill()
        proc.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.05)
        assert not [p for p in pids if _alive(p)], "ranks outlived the harness"
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_command_that_cannot_start_is_a_failed_run():
    out = process.run_commands(
        [_py("import time; time.sleep(60)"), launchers.Command(("/no/such/tool",))], timeout_s=30
    )
    assert not out.ok and out.returncodes[-1] == 127 and out.duration_s < 20
    assert "cannot start /no/such/tool" in out.error()


# The user's shell, as docs/testbeds.md has it: the PEM password exported, and more.
SECRETS = {
    "HPCBENCH_PEM_PASSWORD": "pem-s3cret",
    "OS_PASSWORD": "os-s3cret",
    "GITHUB_TOKEN": "ghp-s3cret",
}
# Variables of the controller's shell that match a kept prefix or Python's own but are no
# business of a rank: PYTHONINSPECT would leave each rank at a prompt after its script.
UNRELATED = {
    "PYTHONSTARTUP": "/tmp/startup.py",
    "PYTHONINSPECT": "1",
    "PYTHON_KEYRING_PASSWORD": "kr-s3cret",
    "TORCH_HUB_TOKEN": "hub-s3cret",
}
# What horovodrun makes of its environment: every variable onto each rank's command
# line (horovod 0.28.1, horovod/runner/gloo_run.py:96-100); the fake prints that line.
FAKE_LAUNCHER = """
import json, os, shlex, sys
line = "env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in os.environ.items())
print("HPCBENCH_RESULT " + json.dumps({"rank_argv": line + " " + shlex.join(sys.argv[1:])}))
"""


@pytest.mark.parametrize(("tool", "backend"), [("horovodrun", "horovod"), ("torchrun", "ddp")])
def test_a_launcher_gets_what_training_needs_and_no_secret(tmp_path, monkeypatch, tool, backend):
    for name, value in {**SECRETS, **UNRELATED}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("PYTHONHASHSEED", "7")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)  # runs the leash
    shutil.copy(paths.BENCH_DIR / "leash.py", tmp_path)
    # In bench/ (the workdir), where RunSpec.bound runs the launcher from.
    (tmp_path / BIND_SCRIPT).write_text(FAKE_LAUNCHER)
    spec = RunSpec(
        script="train.py",
        args=(),
        python=str(bin_dir / "python"),
        iface="lo",
        workdir=str(tmp_path),
        placements=(Placement("localhost", 2),),
    )
    out = ProcessScheduler(
        launchers.get(TargetSpec("localhost", (1,), backend=backend, launcher=tool))
    ).run(spec, timeout_s=30)
    assert out.ok, out.error()
    rank_argv = out.records[0]["rank_argv"]
    assert not [n for n, v in SECRETS.items() if n in rank_argv or v in rank_argv]
    assert not [n for n in UNRELATED if f"{n}=" in rank_argv]
    # What training reads is kept: PATH, NCCL_*, Python's named ones, the interface pinned.
    assert f"PATH={shlex.quote(os.environ['PATH'])} " in rank_argv
    assert "NCCL_DEBUG=INFO" in rank_argv and "GLOO_SOCKET_IFNAME=lo" in rank_argv
    assert "PYTHONHASHSEED=7" in rank_argv
