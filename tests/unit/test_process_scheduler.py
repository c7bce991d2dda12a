"""The process scheduler: real processes, no cluster needed."""

import os
import signal
import subprocess
import sys
import time

import pytest

from hpcbench import launchers, paths
from hpcbench.launchers import Placement, RunSpec
from hpcbench.launchers.local import LocalLauncher
from hpcbench.schedulers import ProcessScheduler, base, process


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
        "from hpcbench import launchers, sweep\n"
        "from hpcbench.schedulers import process\n"
        "signal.signal(signal.SIGTERM, sweep._terminate)\n"
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
