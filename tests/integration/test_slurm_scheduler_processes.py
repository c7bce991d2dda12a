"""Slurm without a cluster, run here: the launcher's batch scripts under bash, and the
scheduler's submit/poll/collect/cancel cycle against stand-in sbatch, squeue, scontrol
and scancel scripts (the scripts as text: tests/unit/test_slurm_scheduler.py)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcbench import cli
from hpcbench.core.errors import UsageError
from hpcbench.core.ssh import SshAccess
from hpcbench.launchers.slurm import SlurmLauncher, SlurmOptions, sbatch_script, task_command
from hpcbench.schedulers import Outcome, SlurmScheduler
from hpcbench.schedulers import slurm as slurm_scheduler
from tests.unit.test_slurm_scheduler import (
    LMOD_UNKNOWN,
    PYXIS_MISSING_IMAGE,
    Book,
    Unwritable,
    _scheduler,
    _spec,
    srun_lines,
)

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    "backend,controller", [("ddp", "gloo"), ("horovod", "gloo"), ("horovod", "mpi")]
)
@pytest.mark.parametrize("image", ["", "nvcr.io#nvidia/pytorch:23.06-py3"])
def test_scripts_are_valid_bash(backend, controller, image):
    opts = SlurmOptions(container_image=image, mpi="pmix" if controller == "mpi" else "")
    script = sbatch_script(_spec(), opts, backend, controller)
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)


def test_arguments_survive_both_shells(tmp_path):
    """The batch script's shell and srun's `bash -c` hand the workload its arguments as given."""
    odd = ("--note", 'it\'s "quoted" $HOME `x` ;|&')
    spec = _spec(python="/usr/bin/printf", script="%s|", args=odd, workdir=str(tmp_path))
    [srun] = srun_lines(sbatch_script(spec, SlurmOptions(), "ddp"))
    fake_srun = 'srun() { while [[ $1 == --* ]]; do shift; done; "$@"; }'
    out = subprocess.run(
        ["bash", "-c", f"{fake_srun}\n{srun}"],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "SLURM_PROCID": "0"},
    )
    assert out.stdout == "".join(f"{a}|" for a in odd), out.stderr


@pytest.mark.parametrize(
    "backend,controller,expect",
    [
        ("ddp", "gloo", "RANK=3 WORLD_SIZE=4 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2"),
        ("horovod", "gloo", "HOROVOD_RANK=3 SIZE=4 LOCAL_RANK=1 LOCAL_SIZE=2 CROSS=1/2 HOST=n2"),
    ],
)
def test_task_gets_its_rank_from_slurm(tmp_path, backend, controller, expect):
    show = {
        "ddp": "RANK=$RANK WORLD_SIZE=$WORLD_SIZE LOCAL_RANK=$LOCAL_RANK "
        "LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE",
        "horovod": "HOROVOD_RANK=$HOROVOD_RANK SIZE=$HOROVOD_SIZE LOCAL_RANK=$HOROVOD_LOCAL_RANK "
        "LOCAL_SIZE=$HOROVOD_LOCAL_SIZE CROSS=$HOROVOD_CROSS_RANK/$HOROVOD_CROSS_SIZE "
        "HOST=$HOROVOD_HOSTNAME",
    }[backend]
    spec = _spec(
        nodes=2,
        slots=2,
        python="/bin/sh",
        script="-c",
        args=(f"echo {show}",),
        workdir=str(tmp_path),
    )
    line = task_command(spec, SlurmOptions(), backend, controller)
    slurm_env = {
        "SLURM_PROCID": "3",
        "SLURM_NTASKS": "4",
        "SLURM_LOCALID": "1",
        "SLURM_NODEID": "1",
        "SLURM_NNODES": "2",
        "SLURMD_NODENAME": "n2",
        "PATH": os.environ["PATH"],
    }
    with socket.create_server(("127.0.0.1", 0)) as rendezvous:  # rank 0's, for Horovod
        slurm_env["MASTER_ADDR"] = "127.0.0.1"
        slurm_env["MASTER_PORT"] = str(rendezvous.getsockname()[1])
        out = subprocess.run(
            ["bash", "-c", line], env=slurm_env, capture_output=True, text=True, timeout=60
        )
    assert out.stdout.strip() == expect, out.stderr


def test_run_collects_the_record(fake_slurm, monkeypatch):
    (fake_slurm / "mode").write_text("ok")
    outcome = _scheduler(fake_slurm).run(_spec(), timeout_s=30)
    assert outcome.ok, outcome.error()
    assert outcome.records == [{"workers": 2, "window_times": [1.0]}]
    assert outcome.returncodes == [0]
    assert outcome.tail[0] == "slurm job 4242: COMPLETED"
    assert (fake_slurm / "script").read_text().startswith("#!/bin/bash")
    assert not (fake_slurm / "scancel").exists()
    assert outcome.queue_wait_s == 5.0  # StartTime - SubmitTime, as scontrol says


def test_the_job_inherits_no_secret_of_the_users_shell(fake_slurm, monkeypatch):
    monkeypatch.setenv("HPCBENCH_PEM_PASSWORD", "pem-s3cret")
    monkeypatch.setenv("OS_APPLICATION_CREDENTIAL_SECRET", "os-s3cret")
    monkeypatch.setenv("SBATCH_ACCOUNT", "physics")
    monkeypatch.setenv("ENROOT_CONFIG_PATH", "/home/me/.config/enroot")
    monkeypatch.setenv("BASH_FUNC_module%%", "() {  eval $($LMOD_CMD bash $@) }")
    (fake_slurm / "mode").write_text("ok")
    assert _scheduler(fake_slurm).run(_spec(), timeout_s=30).ok
    inherited = (fake_slurm / "sbatch.env").read_text()
    assert "s3cret" not in inherited and "HPCBENCH_PEM_PASSWORD" not in inherited
    assert f"PATH={os.environ['PATH']}\n" in inherited and "SBATCH_ACCOUNT=physics" in inherited
    # pyxis's enroot finds the user's registry credentials where the user keeps them;
    # the shell's own functions stay behind (the script sources the site's profile).
    assert "ENROOT_CONFIG_PATH=/home/me/.config/enroot\n" in inherited
    assert "BASH_FUNC" not in inherited


def test_failed_job_keeps_its_exit_status_and_output(fake_slurm, monkeypatch):
    (fake_slurm / "mode").write_text("fail")
    outcome = _scheduler(fake_slurm).run(_spec(), timeout_s=30)
    assert not outcome.ok and outcome.returncodes == [3]
    assert "Traceback: boom" in outcome.error()
    assert "FAILED" in outcome.error()


def test_timeout_cancels_the_job(fake_slurm, monkeypatch):
    (fake_slurm / "mode").write_text("hang")
    outcome = _scheduler(fake_slurm).run(_spec(), timeout_s=0.1)
    assert outcome.timed_out and not outcome.ok
    assert (fake_slurm / "scancel").read_text() == "4242\n"  # by its id, not its name


def test_queue_wait_is_bounded(fake_slurm, monkeypatch):
    (fake_slurm / "mode").write_text("hang")
    monkeypatch.setattr(SlurmScheduler, "state", lambda self, job: ("PENDING", ""))
    outcome = _scheduler(fake_slurm, queue_wait_s=0).run(_spec(), timeout_s=30)
    assert outcome.timed_out
    assert (fake_slurm / "scancel").exists()


def test_ctrl_c_cancels_the_job(fake_slurm, monkeypatch):
    (fake_slurm / "mode").write_text("hang")

    def interrupt(self, job: str) -> tuple[str, str]:  # Ctrl-C while the job is polled
        raise KeyboardInterrupt

    monkeypatch.setattr(SlurmScheduler, "state", interrupt)
    with pytest.raises(KeyboardInterrupt):
        _scheduler(fake_slurm).run(_spec(), timeout_s=30)
    assert (fake_slurm / "scancel").read_text() == "4242\n"


def test_sbatch_refusal_is_a_failed_run(fake_slurm, monkeypatch):
    (fake_slurm / "bin" / "sbatch").write_text(
        "#!/bin/bash\necho 'sbatch: error: bad partition' >&2\nexit 1\n"
    )
    outcome = _scheduler(fake_slurm).run(_spec(), timeout_s=30)
    assert not outcome.ok and "bad partition" in outcome.error()


def test_records_go_to_the_store_like_other_launchers(fake_slurm, monkeypatch, tmp_path, capsys):
    """`scale --env slurm` end to end against the fake tools: the record lands in the store."""
    (fake_slurm / "mode").write_text("ok")

    def fake_run(self, spec, timeout_s, echo=False):
        record = {
            "workers": spec.workers,
            "window_times": [1.0, 1.0],
            "rank_window_times": [[1.0]],
            "timeline": {},
            "fingerprint": {},
        }
        return Outcome([0], [record], [], 0.0, 1.0)

    monkeypatch.setattr(SlurmScheduler, "run", fake_run)
    out = tmp_path / "results"
    code = cli.main(
        [
            "scale",
            "--env",
            "slurm",
            "--nodes",
            "2",
            "--batch",
            "8",
            "--repeats",
            "1",
            "--model",
            "resnet18",
            "--no-probe",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    runs = [r for r in records if r["kind"] == "run"]
    assert [r["launcher"] for r in runs] == ["slurm", "slurm"]
    assert {r["env"] for r in runs} == {"slurm"} and all(r["status"] == "ok" for r in runs)


def test_a_job_whose_state_stays_unknown_is_cancelled(fake_slurm, monkeypatch):
    (fake_slurm / "mode").write_text("hang")
    monkeypatch.setattr(SlurmScheduler, "state", lambda self, job: ("UNKNOWN", ""))
    outcome = _scheduler(fake_slurm).run(_spec(), timeout_s=30)
    assert not outcome.ok and outcome.tail[0] == "slurm job 4242: UNKNOWN"
    assert (fake_slurm / "scancel").read_text() == "4242\n"


def test_an_sbatch_that_times_out_cancels_the_job(fake_slurm, monkeypatch):
    # The job may be queued although sbatch never answered: cancelled by its unique name.
    monkeypatch.setattr(slurm_scheduler, "CONTROL_TIMEOUT_S", 0.5)
    (fake_slurm / "bin" / "sbatch").write_text("#!/bin/bash\nexec sleep 30\n")
    outcome = _scheduler(fake_slurm).run(_spec(), timeout_s=30)
    assert not outcome.ok and outcome.error().splitlines()[1] == "sbatch did not answer in 0.5 s"
    assert "--name=hpcbench-" in (fake_slurm / "scancel").read_text()


@pytest.mark.parametrize("tool", ["squeue", "cat"])
def test_a_control_call_that_times_out_is_a_failed_run(fake_slurm, monkeypatch, tool):
    """squeue (or cat of the output) hanging: one line in the record, the job cancelled,
    no exception for the sweep."""
    (fake_slurm / "mode").write_text("ok")
    monkeypatch.setattr(slurm_scheduler, "CONTROL_TIMEOUT_S", 0.5)
    real = SlurmScheduler._control

    def control(self, line, access=None, timeout=None):
        if line.startswith(("scancel", "squeue --noheader --jobs")):
            return real(self, line, access, timeout)
        if (tool == "squeue") == line.startswith("out=$(squeue"):
            raise subprocess.TimeoutExpired(line, 0.5)
        return real(self, line, access, timeout)

    monkeypatch.setattr(SlurmScheduler, "_control", control)
    outcome = _scheduler(fake_slurm).run(_spec(), timeout_s=30)
    assert not outcome.ok
    assert "did not answer in 0.5 s" in outcome.error() or "could not be read" in outcome.error()
    if tool == "squeue":
        assert (fake_slurm / "scancel").read_text() == "4242\n"


def test_rank_0_serves_the_gloo_rendezvous_on_its_node_alone_while_its_workload_runs(tmp_path):
    """Every rank waits for the rendezvous that rank 0 serves in its own task; the store
    has no authentication, so it binds MASTER_ADDR, not 0.0.0.0; and it ends with rank
    0's workload. Run with a stand-in for Horovod's server class (an HTTP server that
    reports its address) and a workload that prints its rank."""
    pkg = tmp_path / "horovod" / "runner" / "http"
    pkg.mkdir(parents=True)
    for d in (tmp_path / "horovod", tmp_path / "horovod" / "runner", pkg):
        (d / "__init__.py").write_text("")
    (pkg / "http_server.py").write_text(
        "import http.server\n"
        "RendezvousHandler = http.server.BaseHTTPRequestHandler\n"
        "class RendezvousHTTPServer(http.server.HTTPServer):\n"
        "    def __init__(self, addr, handler, verbose):\n"
        "        print('serving', addr, flush=True)\n"
        "        super().__init__(addr, handler)\n"
    )
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]  # free once closed
    spec = _spec(
        nodes=2,
        slots=1,
        python=sys.executable,
        script="-c",
        args=("import os; print('rank', os.environ['HOROVOD_RANK'])",),
        workdir=str(tmp_path),
    )
    line = task_command(spec, SlurmOptions(), "horovod", "gloo")
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(tmp_path),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "HPCBENCH_HOSTS": "node1,node2",
        "SLURM_NTASKS": "2",
        "SLURM_LOCALID": "0",
        "SLURM_NNODES": "2",
    }

    def rank(n: int) -> subprocess.Popen[str]:
        return subprocess.Popen(
            ["bash", "-c", line],
            env={**env, "SLURM_PROCID": str(n), "SLURM_NODEID": str(n)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    second = rank(1)
    time.sleep(1)
    assert second.poll() is None  # it waits for the rendezvous
    first = rank(0)
    out0, err0 = first.communicate(timeout=60)
    out1, err1 = second.communicate(timeout=60)
    assert first.returncode == 0 and second.returncode == 0, err0 + err1
    assert out0.splitlines() == [f"serving ('127.0.0.1', {port})", "rank 0"], err0
    assert out1.splitlines() == ["rank 1"], err1
    for _ in range(100):  # bounded: the server ends with rank 0's workload (SIGTERM)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        except OSError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the rendezvous server outlived rank 0's workload")
    assert "0.0.0.0" not in sbatch_script(_spec(), SlurmOptions(), "horovod", "gloo")


def test_hostile_values_stay_values_in_the_batch_script(tmp_path):
    """Past the CLI's checks too, each value reaches srun and sbatch as one literal
    argument: a fake srun prints its container flags; nothing is executed."""
    witness = tmp_path / "pwned"
    evil = f"$(touch {witness})"
    opts = SlurmOptions(
        partition=f"p;touch {witness}",
        container_image=f"img{evil}",
        container_mounts=(f"/a:/b {evil}",),
        mpi=f"pmix`touch {witness}`",
    )
    script = sbatch_script(_spec(workdir=str(tmp_path)), opts, "horovod", "mpi", job_name="j")
    assert f"#SBATCH --partition='p;touch {witness}'" in script.splitlines()
    [srun] = srun_lines(script)
    fake_srun = (
        'srun() { for a; do [[ $a == --container-* || $a == --mpi* ]] && echo "$a"; done; true; }'
    )
    out = subprocess.run(
        ["bash", "-c", f"{fake_srun}\n{srun}"], capture_output=True, text=True, timeout=30
    )
    assert out.stdout.splitlines() == [
        f"--mpi=pmix`touch {witness}`",
        f"--container-image=img{evil}",
        f"--container-mounts=/a:/b {evil},{tmp_path}:{tmp_path}",
        f"--container-workdir={tmp_path}",
    ], out.stderr
    assert not witness.exists()


def test_the_setup_line_runs_first_in_the_batch_script():
    opts = SlurmOptions(setup="module load anaconda3 && source activate hb")
    script = sbatch_script(_spec(), opts, "ddp")
    body = script.split("\n\n", 1)[1].splitlines()
    # A non-login batch shell has no `module` unless the site's profile gives it.
    assert body[0] == "type module >/dev/null 2>&1 || . /etc/profile >/dev/null 2>&1"
    line = body.index("module load anaconda3 && source activate hb")
    assert body[line - 1 : line + 2] == ["{", body[line], '} >"$hpcbench_setup_log" 2>&1']
    assert line < body.index("set -u")
    assert bash_n(script) == 0


def bash_n(script: str) -> int:
    """bash's own syntax check of a rendered script."""
    return subprocess.run(["bash", "-n"], input=script, text=True).returncode


# ------------------------------------------------------- jobs accounted for
# ssh to a login node that is this machine: runs its remote line here.
FAKE_SSH = '#!/bin/bash\nexec bash -c "${@: -1}"\n'


SCANCEL_REFUSED = """#!/bin/bash
echo "scancel: error: Kill job error on job id 4242: Access/permission denied" >&2
exit 1
"""


def _fake(tmp: Path, name: str, text: str) -> None:
    path = tmp / "bin" / name
    path.write_text(text.replace("$FAKE", str(tmp)))
    path.chmod(0o755)


@pytest.fixture
def quick_confirm(monkeypatch):
    """Tries 0.01 s, 0.02 s, 0.04 s apart (2, 4, 8 s on a cluster)."""
    monkeypatch.setattr(slurm_scheduler, "CANCEL_BACKOFF_S", 0.01)


def test_a_refused_scancel_names_the_job_and_the_command_that_cancels_it(
    fake_slurm, quick_confirm, capsys
):
    """The job is still listed after scancel failed: the sweep stops on one line with
    the job's id and its scancel command (printed at once, too), not a quiet timeout."""
    (fake_slurm / "mode").write_text("hang")
    _fake(fake_slurm, "scancel", SCANCEL_REFUSED)
    with pytest.raises(slurm_scheduler.JobLeftBehind) as err:
        _scheduler(fake_slurm).run(_spec(), timeout_s=0.1)
    assert str(err.value) == (
        "slurm job 4242 may still be queued or running (scancel: scancel: error: Kill job "
        "error on job id 4242: Access/permission denied; scancel tried 4 time(s)): "
        "`scancel 4242` on this machine cancels it"
    )
    assert f"hpcbench: {err.value}" in capsys.readouterr().err


def test_a_job_that_stays_in_the_queue_after_scancel_is_named(fake_slurm, quick_confirm):
    """scancel said yes, squeue still lists the job: not taken for gone."""
    (fake_slurm / "mode").write_text("hang")
    _fake(fake_slurm, "scancel", '#!/bin/bash\necho "$@" >> "$FAKE/scancel.log"\n')
    with pytest.raises(slurm_scheduler.JobLeftBehind, match=r"squeue still lists it.*`scancel"):
        _scheduler(fake_slurm).run(_spec(), timeout_s=0.1)
    assert (fake_slurm / "scancel.log").read_text() == "4242\n" * 4


def test_a_cancel_that_cannot_ask_squeue_names_the_job_by_its_name(fake_slurm, quick_confirm):
    """sbatch did not answer, so no job id is known, and squeue fails: the job's
    unique name is the handle, on the login node where sbatch ran."""
    (fake_slurm / "mode").write_text("hang")
    _fake(fake_slurm, "squeue", "#!/bin/bash\necho 'squeue: error: Unable to contact' >&2; exit 1")
    _fake(fake_slurm, "ssh", FAKE_SSH)
    scheduler = _scheduler(fake_slurm)
    scheduler.launcher.submit = SshAccess(host="login.example.org")
    left = scheduler.cancel("hpcbench-0123abcd")
    assert left is not None and left.line() == (
        "slurm job hpcbench-0123abcd may still be queued or running (squeue: squeue: error: "
        "Unable to contact; scancel tried 4 time(s)): `scancel --name=hpcbench-0123abcd` on "
        "the login node login.example.org cancels it"
    )


def test_a_confirmed_cancel_says_nothing(fake_slurm, capsys):
    (fake_slurm / "mode").write_text("hang")
    outcome = _scheduler(fake_slurm).run(_spec(), timeout_s=0.1)
    assert outcome.timed_out and outcome.tail == ["slurm job 4242: RUNNING"]
    assert "may still be" not in capsys.readouterr().err


def test_a_second_ctrl_c_does_not_cut_the_scancel_short(fake_slurm, monkeypatch):
    """A Ctrl-C (SIGINT to this process) while scancel runs waits for it to finish and
    is raised after; scancel runs in a process group of its own, so the terminal's
    Ctrl-C to the foreground group does not reach it either."""
    _fake(
        fake_slurm,
        "scancel",
        f"#!/bin/bash\ncut -d' ' -f5 /proc/$$/stat > $FAKE/pgid\nkill -INT {os.getpid()}\n"
        "sleep 0.5\necho done > $FAKE/scancel\n",
    )
    with pytest.raises(KeyboardInterrupt):
        _scheduler(fake_slurm).cancel("hpcbench-0123abcd")
    assert (fake_slurm / "scancel").read_text() == "done\n"
    assert int((fake_slurm / "pgid").read_text()) != os.getpgrp()


def test_the_script_reaches_sbatch_on_stdin_whatever_its_lines(fake_slurm, monkeypatch):
    """A setup line that reads as a heredoc's end stays a line of the batch script."""
    (fake_slurm / "mode").write_text("ok")
    scheduler = _scheduler(fake_slurm, setup="HPCBENCH_EOF")
    assert scheduler.run(_spec(), timeout_s=30).ok
    # The fake sbatch keeps what it read ($(cat) drops the last newline).
    sent = scheduler.launcher.script(_spec(), "x").split("\n")
    kept = (fake_slurm / "script").read_text().split("\n")
    assert len(kept) == len(sent) and "HPCBENCH_EOF" in kept and kept[-2] == 'exit "$rc"'


def test_an_unreachable_login_node_is_named_as_such(fake_slurm):
    """ssh's own exit status 255 is the connection, not a missing partition."""
    _fake(
        fake_slurm,
        "ssh",
        "#!/bin/bash\necho 'ssh: connect to host login port 22: Connection refused' >&2\n"
        "exit 255\n",
    )
    login = SshAccess(host="login", user="me")
    launcher = SlurmLauncher(SlurmOptions(partition="cpu"), "gloo", "ddp", submit=login)
    with pytest.raises(UsageError) as err:
        SlurmScheduler(launcher).preflight(_spec())
    assert str(err.value) == (
        "slurm on login: login node unreachable: ssh: connect to host login port 22: "
        "Connection refused"
    )
    # Past sinfo (no partition named), sbatch --test-only is read the same way.
    launcher.options = SlurmOptions()
    with pytest.raises(UsageError, match="login node unreachable: ssh: connect"):
        SlurmScheduler(launcher).preflight(_spec())


# scancel failing N times (non-zero exit), then taking the job: squeue lists it no more.
SCANCEL_FLAKY = """#!/bin/bash
echo "$@" >> "$FAKE/scancel.log"
n=$(cat "$FAKE/fails" 2>/dev/null || echo 0)
if [ "$n" -gt 0 ]; then
  echo $((n - 1)) > "$FAKE/fails"
  echo "scancel: error: Unable to contact slurm controller (connect failure)" >&2
  exit 1
fi
echo "$@" >> "$FAKE/scancel"
"""


def test_a_scancel_that_fails_twice_is_retried_and_leaves_nothing(
    fake_slurm, quick_confirm, capsys
):
    (fake_slurm / "mode").write_text("hang")
    (fake_slurm / "fails").write_text("2")
    _fake(fake_slurm, "scancel", SCANCEL_FLAKY)
    outcome = _scheduler(fake_slurm).run(_spec(), timeout_s=0.1)
    assert outcome.timed_out
    assert (fake_slurm / "scancel.log").read_text() == "4242\n" * 3  # by its id, 3 tries
    assert slurm_scheduler.take_left() == []
    assert "may still be" not in capsys.readouterr().err


def test_a_scancel_that_always_fails_leaves_the_job_named_for_the_campaign(
    fake_slurm, quick_confirm, capsys
):
    """Tried CANCEL_TRIES times, then the job's id, its scancel command and where to run
    it are said at once and kept for the campaign's journal."""
    (fake_slurm / "mode").write_text("hang")
    (fake_slurm / "fails").write_text("99")
    _fake(fake_slurm, "scancel", SCANCEL_FLAKY)
    with pytest.raises(slurm_scheduler.JobLeftBehind) as err:
        _scheduler(fake_slurm).run(_spec(), timeout_s=0.1)
    assert (fake_slurm / "scancel.log").read_text() == "4242\n" * slurm_scheduler.CANCEL_TRIES
    [left] = slurm_scheduler.take_left()
    assert left == err.value.left
    assert left.record() == {
        "job": "4242",
        "scancel": "scancel 4242",
        "where": "on this machine",
        "why": "scancel: scancel: error: Unable to contact slurm controller (connect failure); "
        "scancel tried 4 time(s)",
        "name": left.name,
        "partition": "",
    }
    assert left.name.startswith(slurm_scheduler.JOB_PREFIX)
    assert f"hpcbench: {left.line()}" in capsys.readouterr().err


def test_the_cancel_goes_by_id_whatever_the_jobs_name(fake_slurm, quick_confirm):
    """A name the user's sbatch options gave it, or one shared with another job, plays
    no part: scancel and squeue are given the job's id alone."""
    (fake_slurm / "mode").write_text("hang")
    _fake(
        fake_slurm,
        "squeue",
        '#!/bin/bash\necho "$@" >> "$FAKE/squeue.log"\n'
        '[ -e "$FAKE/scancel" ] && exit 0\ncase "$*" in *%i*) echo "4242 RUNNING" ;; '
        '*) echo "RUNNING node1" ;; esac\n',
    )
    scheduler = _scheduler(fake_slurm, extra=("--job-name=mine",))
    assert scheduler.run(_spec(), timeout_s=0.1).timed_out
    asked = (fake_slurm / "squeue.log").read_text()
    assert "--name" not in asked and "--jobs=4242 --format=%i %T" in asked
    assert (fake_slurm / "scancel").read_text() == "4242\n"


@pytest.mark.parametrize(
    "reply",
    [
        # slurmctld forgot the job (MinJobAge): squeue --jobs=ID fails so, with status 1.
        "echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1",
        "echo '4242 CANCELLED'",  # listed, but ended
        "echo '4242 COMPLETING'",  # stopped; its nodes are being released
    ],
)
def test_a_job_squeue_no_longer_holds_as_queued_or_running_is_gone(fake_slurm, reply):
    _fake(fake_slurm, "squeue", f"#!/bin/bash\n{reply}\n")
    assert _scheduler(fake_slurm).cancel("hpcbench-0123abcd", "4242") is None


def test_a_login_node_that_cannot_be_reached_is_said_with_where_to_cancel(
    fake_slurm, quick_confirm
):
    _fake(
        fake_slurm,
        "ssh",
        "#!/bin/bash\necho 'ssh: connect to host login port 2222: No route to host' >&2\n"
        "exit 255\n",
    )
    scheduler = _scheduler(fake_slurm)
    scheduler.launcher.submit = SshAccess(host="login", port=2222, user="me")
    left = scheduler.cancel("hpcbench-0123abcd", "4242")
    assert left is not None and left.line() == (
        "slurm job 4242 may still be queued or running (login node unreachable: ssh: connect "
        "to host login port 2222: No route to host; scancel tried 4 time(s)): `scancel 4242` "
        "on the login node me@login (ssh port 2222) cancels it"
    )


def test_the_cancel_is_bounded_in_time(fake_slurm, monkeypatch):
    """However the tries go, no further scancel starts past CANCEL_WITHIN_S."""
    monkeypatch.setattr(slurm_scheduler, "CANCEL_WITHIN_S", 0.5)
    monkeypatch.setattr(slurm_scheduler, "CANCEL_BACKOFF_S", 0.2)
    (fake_slurm / "fails").write_text("99")
    (fake_slurm / "mode").write_text("hang")
    _fake(fake_slurm, "scancel", SCANCEL_FLAKY)
    left = _scheduler(fake_slurm).cancel("hpcbench-0123abcd", "4242")
    assert left is not None
    tries = (fake_slurm / "scancel.log").read_text().count("4242")
    assert 1 <= tries < slurm_scheduler.CANCEL_TRIES  # 0.2 + 0.4 s of waits > 0.5 s


ERR_SBATCH = r"""#!/bin/bash
script=$(cat)
out=$(echo "$script" | sed -n 's/^#SBATCH -o //p' | sed 's/%j/4242/')
err=$(echo "$script" | sed -n 's/^#SBATCH -e //p' | sed 's/%j/4242/')
printf 'HPCBENCH_SLURM_EXIT 1\n' > "$out"
cat "$FAKE/err" > "$err"
echo "4242;cluster"
"""


def test_a_failed_jobs_error_file_gives_the_runs_cause(fake_slurm):
    """-o and -e are read apart: the -e file's line is the run's cause, first in its
    error (what a cell's and the check's cause show); both stay in its tail."""
    (fake_slurm / "mode").write_text("fail")
    (fake_slurm / "err").write_text("\n".join(PYXIS_MISSING_IMAGE) + "\n")
    _fake(fake_slurm, "sbatch", ERR_SBATCH)
    outcome = _scheduler(fake_slurm).run(_spec(), timeout_s=30)
    assert outcome.cause == "[ERROR] No such file or directory: /images/x.sqsh"
    assert outcome.error().splitlines()[0] == (
        "[ERROR] No such file or directory: /images/x.sqsh (exit status [1])"
    )
    assert outcome.tail[-1] == PYXIS_MISSING_IMAGE[-1]


def test_a_failed_check_job_names_its_cause(fake_slurm, monkeypatch):
    from hpcbench.launchers.specs import WorkloadSpec
    from hpcbench.testbeds import readiness

    (fake_slurm / "mode").write_text("fail")
    (fake_slurm / "err").write_text("\n".join(LMOD_UNKNOWN) + "\n")
    _fake(fake_slurm, "sbatch", ERR_SBATCH)
    scheduler = _scheduler(fake_slurm)

    class Target:
        launcher = scheduler.launcher

        def prepare(self):
            pass

        def run(self, spec, timeout_s):
            return scheduler.run(spec, timeout_s)

    monkeypatch.setattr(readiness, "check_spec", lambda target, workload: _spec())
    result = readiness.check(Target(), WorkloadSpec("resnet18", 32))  # type: ignore[arg-type]
    assert not result.ok and result.why == (
        "Lmod has detected the following error: The following module(s) are unknown: "
        '"no-such-module" (exit status [1])'
    )


def logging_fakes(tmp: Path) -> None:
    """sbatch, squeue and scancel as before, each call written down first."""
    for name in ("sbatch", "squeue", "scancel"):
        path = tmp / "bin" / name
        text = path.read_text()
        path.write_text(
            text.replace("#!/bin/bash\n", f"#!/bin/bash\necho {name} >> {tmp}/calls.log\n", 1)
        )


def test_a_job_is_in_its_book_by_name_before_sbatch_and_by_id_before_anything_else(
    fake_slurm,
):
    (fake_slurm / "mode").write_text("ok")
    logging_fakes(fake_slurm)
    book = Book(fake_slurm)
    with slurm_scheduler.booked(book):
        assert _scheduler(fake_slurm, partition="gpu").run(_spec(), timeout_s=30).ok
    assert book.statuses() == [
        ("sbatch", "", ""),
        ("queued", "4242", ""),
        ("gone", "4242", "ended COMPLETED"),
    ]
    [(sbatch, before), (queued, calls), _] = book.notes
    assert before == [] and calls == ["sbatch"]  # nothing asked of the job before its id is kept
    assert sbatch.name == queued.name and sbatch.name.startswith(slurm_scheduler.JOB_PREFIX)
    assert (queued.partition, queued.where, queued.scancel) == (
        "gpu",
        "on this machine",
        "scancel 4242",
    )
    assert sbatch.scancel == f"scancel --name={sbatch.name}"


def test_a_job_whose_id_its_book_cannot_keep_is_cancelled_by_it(fake_slurm, capsys):
    """Queued, but nowhere written down: cancelled at once, not left to run."""
    (fake_slurm / "mode").write_text("hang")
    book = Book(fake_slurm, refuse=("queued",))
    with slurm_scheduler.booked(book), pytest.raises(Unwritable):
        _scheduler(fake_slurm).run(_spec(), timeout_s=30)
    assert (fake_slurm / "scancel").read_text() == "4242\n"
    assert book.statuses()[-1] == ("gone", "4242", "cancelled: squeue lists it no more")


def test_a_cancelled_job_is_gone_in_its_book_and_a_job_left_stays_open(fake_slurm, quick_confirm):
    (fake_slurm / "mode").write_text("hang")
    book = Book(fake_slurm)
    with slurm_scheduler.booked(book):
        assert _scheduler(fake_slurm).run(_spec(), timeout_s=0.1).timed_out
    assert book.statuses()[-1] == ("gone", "4242", "cancelled: squeue lists it no more")
    (fake_slurm / "scancel").unlink()  # the stand-in's job runs again, and stays
    _fake(fake_slurm, "scancel", SCANCEL_REFUSED)
    book = Book(fake_slurm)
    with slurm_scheduler.booked(book), pytest.raises(slurm_scheduler.JobLeftBehind) as err:
        _scheduler(fake_slurm).run(_spec(), timeout_s=0.1)
    [left] = [n for n, _ in book.notes if n.status == "left"]
    assert (left.job, left.scancel, left.why) == ("4242", "scancel 4242", err.value.left.why)
    assert "gone" not in [n.status for n, _ in book.notes]


def test_a_book_that_cannot_keep_a_jobs_end_is_said_and_the_cancel_stands(fake_slurm, capsys):
    """The job stays open there: the next run's cancel finds it gone (scancel of a job
    that ended exits 0)."""
    (fake_slurm / "mode").write_text("ok")
    with slurm_scheduler.booked(Book(fake_slurm, refuse=("gone",))):
        assert _scheduler(fake_slurm).run(_spec(), timeout_s=30).ok
    assert "hpcbench: cannot write the journal (gone)" in capsys.readouterr().err


def test_without_a_book_a_job_is_said_with_its_id_and_scancel_as_it_is_submitted(
    fake_slurm, capsys
):
    """`scale` keeps no journal: what a killed one leaves is on its terminal."""
    (fake_slurm / "mode").write_text("ok")
    assert _scheduler(fake_slurm, partition="gpu").run(_spec(), timeout_s=30).ok
    [said] = [x for x in capsys.readouterr().err.splitlines() if "submitted" in x]
    assert re.fullmatch(
        r"hpcbench: slurm job 4242 \(hpcbench-[0-9a-f]{8}\) submitted on partition gpu; "
        r"`scancel 4242` on this machine cancels it",
        said,
    )
