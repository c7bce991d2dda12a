"""Slurm without a cluster: the launcher's generated sbatch scripts, and the
scheduler's cycle where no Slurm tool runs. The scripts run under bash, and the
submit/poll/collect/cancel cycle against fake sbatch, squeue, scontrol, scancel
(FAKE_SBATCH and the rest): tests/integration/test_slurm_scheduler_processes.py."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpcbench import cli
from hpcbench.core.ssh import SshAccess
from hpcbench.launchers import Placement, RunSpec, slurm
from hpcbench.launchers.slurm import SlurmLauncher, SlurmOptions, sbatch_script
from hpcbench.schedulers import SlurmScheduler
from hpcbench.schedulers import slurm as slurm_scheduler
from hpcbench.testbeds.kinds import slurm as kinds_slurm


def _spec(
    nodes=2,
    slots=1,
    limit=600,
    iface="eth0",
    python="/opt/hpcbench/venv/bin/python",
    script="train.py",
    args=("--model", "resnet18", "--batch", "32"),
    workdir="/opt/b",
):
    return RunSpec(
        script=script,
        args=tuple(args),
        python=python,
        workdir=workdir,
        placements=tuple(Placement(f"node{i + 1}", slots, None) for i in range(nodes)),
        master_addr="10.0.0.1",
        master_port=29511,
        iface=iface,
        time_limit_s=limit,
    )


def sbatch_lines(script: str) -> list[str]:
    return [
        line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH ")
    ]


def srun_lines(script: str) -> list[str]:
    return [line for line in script.splitlines() if line.startswith("srun ")]


def test_plain_ddp_script():
    opts = SlurmOptions(
        partition="p1", account="acc", qos="short", job_dir="/scratch/j", pin_nodes=True
    )
    script = sbatch_script(_spec(nodes=2, slots=1), opts, "ddp", job_name="hpcbench-x")
    assert script.startswith("#!/bin/bash\n")
    assert sbatch_lines(script) == [
        "--job-name=hpcbench-x",
        "--nodes=2",
        "--ntasks-per-node=1",
        "--time=11",  # 600 s -> 10 min + 1
        "--deadline=now+71minutes",  # the queue wait (60 min by default) + the time
        "-o /scratch/j/hpcbench-x-%j.out",
        "-e /scratch/j/hpcbench-x-%j.err",
        "--partition=p1",
        "--account=acc",
        "--qos=short",
        "--nodelist=node1,node2",
    ]
    [srun] = srun_lines(script)
    assert "--container" not in script and "--mpi" not in srun and "--gres" not in script
    assert srun.startswith("srun --ntasks=2 --ntasks-per-node=1 --distribution=block")
    assert "RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID" in srun
    assert "exec /opt/hpcbench/venv/bin/python train.py --model resnet18" in srun
    assert "export MASTER_PORT=29511" in script
    assert "export GLOO_SOCKET_IFNAME=eth0" in script
    assert "HOROVOD_GLOO_RENDEZVOUS" not in script
    assert script.rstrip().endswith('exit "$rc"')


def test_pyxis_horovod_script():
    opts = SlurmOptions(
        gpus_per_node=8,
        container_image="/dss/stack.sqsh",
        container_mounts=("/dss/data:/data",),
        partition="lrz-dgx-a100-80x8",
        job_dir="/tmp",
    )
    script = sbatch_script(
        _spec(nodes=2, slots=8, workdir="/home/u/hpcbench/bench"),
        opts,
        "horovod",
        "gloo",
        job_name="j",
    )
    assert "--gres=gpu:8" in sbatch_lines(script)
    assert not any(x.startswith("--nodelist") for x in sbatch_lines(script))
    # One step: the workload's, in an unnamed container that pyxis removes at its end.
    [train] = srun_lines(script)
    assert "--container-name" not in script and "enroot" not in script
    assert "--container-image=/dss/stack.sqsh" in train
    # bench/ and the job folder are mounted at their own paths, so the workdir and the
    # job's output are the same inside
    assert (
        "--container-mounts=/dss/data:/data,/home/u/hpcbench/bench:/home/u/hpcbench/bench,"
        "/tmp:/tmp" in train
    )
    assert "--container-workdir=/home/u/hpcbench/bench" in train
    # rank 0 serves the rendezvous, with the container's python, for 8 tasks per node
    assert 'if [ "$SLURM_PROCID" = 0 ]; then /opt/hpcbench/venv/bin/python -c ' in train
    assert '"$HPCBENCH_HOSTS" 8 "$MASTER_ADDR" & server=$!; fi' in train
    assert "--ntasks=16 --ntasks-per-node=8" in train
    assert "HOROVOD_RANK=$SLURM_PROCID" in train and "HOROVOD_LOCAL_SIZE=8" in train
    assert "HOROVOD_HOSTNAME=$SLURMD_NODENAME" in train
    assert 'export HPCBENCH_HOSTS=$(echo "$nodes" | paste -sd, -)' in script
    assert "export HOROVOD_CONTROLLER=gloo HOROVOD_CPU_OPERATIONS=gloo" in script
    assert "HOROVOD_GLOO_RENDEZVOUS_PORT=$MASTER_PORT" in script


def test_gpus_requested_never_exceed_the_workers():
    opts = SlurmOptions(gpus_per_node=4)
    assert "--gres=gpu:1" in sbatch_lines(sbatch_script(_spec(nodes=1, slots=1), opts, "ddp"))


def test_horovod_over_mpi_uses_pmix_and_no_rendezvous():
    opts = SlurmOptions(mpi="pmix")
    script = sbatch_script(_spec(), opts, "horovod", "mpi")
    [srun] = srun_lines(script)
    assert "--mpi=pmix" in srun
    assert "HOROVOD_RANK" not in srun and "RendezvousHTTPServer" not in script


def test_time_limit():
    assert "--time=60" in sbatch_lines(sbatch_script(_spec(limit=0), SlurmOptions(), "ddp"))
    assert "--time=5" in sbatch_lines(sbatch_script(_spec(), SlurmOptions(time_min=5), "ddp"))


def test_a_job_never_starts_after_its_queue_wait():
    """Slurm removes a job that cannot end by its deadline (start > deadline - time):
    queue wait + time, so a pending job whose campaign gave up on it never runs."""
    opts = SlurmOptions(queue_wait_s=90, time_min=5)
    assert "--deadline=now+7minutes" in sbatch_lines(sbatch_script(_spec(), opts, "ddp"))
    opts = SlurmOptions(queue_wait_s=0)
    assert "--deadline=now+11minutes" in sbatch_lines(sbatch_script(_spec(), opts, "ddp"))


def test_extra_sbatch_options_are_verbatim():
    script = sbatch_script(_spec(), SlurmOptions(extra=("--exclusive", "--mem=0")), "ddp")
    assert sbatch_lines(script)[-2:] == ["--exclusive", "--mem=0"]


def test_rendezvous_server_code_compiles():
    compile(slurm.RENDEZVOUS_PY, "<rendezvous>", "exec")


def test_uneven_placements_are_refused():
    spec = RunSpec(
        "train.py", (), "python", "/b", (Placement("a", 2, None), Placement("b", 1, None))
    )
    assert "same number of workers" in SlurmLauncher().check(spec, "ddp")
    assert SlurmLauncher().check(_spec(), "ddp") is None


def test_commands_and_describe_name_the_submit_host():
    head = SshAccess(host="127.0.0.1", port=22701, user="root")
    launcher = SlurmLauncher(SlurmOptions(), "gloo", "ddp", submit=head)
    [cmd] = launcher.commands(_spec())
    assert cmd.access == head and cmd.argv == ("sbatch", "--parsable")
    assert launcher.describe(_spec()).startswith("# sbatch on 127.0.0.1:\n#!/bin/bash")


# ------------------------------------------------------------ fake Slurm tools
FAKE_SBATCH = r"""#!/bin/bash
# Reads the script, "runs" it: writes the -o file the batch host would write.
script=$(cat)
echo "$script" > "$FAKE/script"
env > "$FAKE/sbatch.env"  # what the job would inherit (sbatch's --export=ALL)
out=$(echo "$script" | sed -n 's/^#SBATCH -o //p' | sed 's/%j/4242/')
case "$FAKE_MODE" in
  ok) printf 'hello\nHPCBENCH_RESULT {"workers": 2, "window_times": [1.0]}\n' > "$out"
      echo "HPCBENCH_SLURM_EXIT 0" >> "$out" ;;
  fail) printf 'Traceback: boom\nHPCBENCH_SLURM_EXIT 3\n' > "$out" ;;
esac
echo "4242;cluster"
"""
FAKE_SQUEUE = """#!/bin/bash
# A hanging job is listed until scancel has run ("%i %T" when a cancel asks).
[ "$FAKE_MODE" = hang ] && [ ! -e "$FAKE/scancel" ] || exit 0
case "$*" in *%i*) echo "4242 RUNNING" ;; *) echo "RUNNING node1" ;; esac
"""
FAKE_SCONTROL = """#!/bin/bash
state=COMPLETED; [ "$FAKE_MODE" = fail ] && state=FAILED
echo "JobId=4242 JobName=x JobState=$state BatchHost=node1 SubmitTime=2026-11-26T10:00:00 \
EligibleTime=2026-11-26T10:00:00 StartTime=2026-11-26T10:00:05 EndTime=2026-11-26T10:01:00"
"""
FAKE_SCANCEL = """#!/bin/bash
echo "$@" >> "$FAKE/scancel"
"""


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (
        ("sbatch", FAKE_SBATCH),
        ("squeue", FAKE_SQUEUE),
        ("scontrol", FAKE_SCONTROL),
        ("scancel", FAKE_SCANCEL),
    ):
        path = bin_dir / name
        # The fakes get their folder and mode in their text: sbatch and the rest start
        # with the allow-listed environment only (launchers.base.launch_environ).
        mode = f'"$(cat {tmp_path}/mode 2>/dev/null)"'
        path.write_text(text.replace('"$FAKE_MODE"', mode).replace("$FAKE", str(tmp_path)))
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(slurm_scheduler, "POLL_MIN_S", 0.01)
    monkeypatch.setattr(slurm_scheduler, "POLL_MAX_S", 0.02)
    return tmp_path


def _scheduler(tmp: Path, **kw) -> SlurmScheduler:
    launcher = SlurmLauncher(SlurmOptions(job_dir=str(tmp), **kw), "gloo", "ddp", submit=None)
    return SlurmScheduler(launcher)


def test_dry_run_prints_scripts(tmp_path, capsys):
    code = cli.main(
        [
            "scale",
            "--env",
            "slurm",
            "--nodes",
            "2",
            "--gpus-per-node",
            "4",
            "--batch",
            "32",
            "--repeats",
            "1",
            "--container-image",
            "./x.sqsh",
            "--partition",
            "gpu",
            "--dry-run",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    # The 2-node all-reduce probe first, as it runs first, then the two runs.
    assert printed.count("#!/bin/bash") == 3
    assert printed.startswith("# all-reduce probe on 2 node(s)\n")
    assert "--gres=gpu:4" in printed and "--gres=gpu:1" in printed
    assert "--container-image=./x.sqsh" in printed and "--partition=gpu" in printed
    assert not (tmp_path / "results.jsonl").exists()


def test_env_slurm_refuses_another_launcher(tmp_path, capsys):
    code = cli.main(
        [
            "scale",
            "--env",
            "slurm",
            "--launcher",
            "horovodrun",
            "--nodes",
            "1",
            "--dry-run",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 2
    assert "slurm launcher" in capsys.readouterr().err


def test_python_of_the_controller_without_a_container():
    tb = kinds_slurm.testbed(4)
    assert tb.python == sys.executable and tb.nodes[0].gpus == 4 and tb.on_controller


@pytest.mark.parametrize(
    ("text", "wait"),
    [
        (
            "JobId=7 SubmitTime=2026-11-26T10:00:00 EligibleTime=2026-11-26T10:00:00 "
            "StartTime=2026-11-26T10:01:30 EndTime=Unknown",
            90.0,
        ),
        ("2026-11-26T10:00:00|2026-11-26T10:00:07\n", 7.0),  # sacct --parsable2
        ("JobId=7 SubmitTime=2026-11-26T10:00:00 StartTime=Unknown", None),  # still queued
        ("2026-11-26T10:00:00|Unknown", None),
        ("slurm_load_jobs error: Invalid job id specified", None),
        ("", None),
    ],
)
def test_the_queue_wait_is_slurms_start_minus_submit(text, wait):
    assert slurm_scheduler.queue_wait(text) == wait


def test_a_job_dir_in_a_home_without_a_login_node_is_refused(tmp_path, monkeypatch, capsys):
    """sbatch and mkdir take ~ literally: no ./~/jobs, one line instead."""
    monkeypatch.chdir(tmp_path)
    argv = ["scale", "--env", "slurm", "--nodes", "1", "--no-probe", "--dry-run"]
    code = cli.main([*argv, "--slurm-job-dir", "~/jobs", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [
        "hpcbench: error: --slurm-job-dir: '~/jobs': ~ is the home of a --slurm-login node, "
        "resolved there; without one give an absolute path"
    ]
    assert not (tmp_path / "~").exists()


# ------------------------------------------------------- a failed job's cause
# A missing .sqsh through pyxis 0.24 and enroot 4.1: pyxis runs `enroot create`
# (pyxis_slurmstepd.c:786), says "failed to create container filesystem for image"
# (:788), then passes enroot's log on line by line as "pyxis:     <line>" (common.c
# memfd_print_log), each through slurm_error, which slurmstepd prints as "error: ";
# enroot's line is common::err "No such file or directory: <image>" (runtime.sh:402),
# written "[ERROR] <message>" by common::log (common.sh:44).
PYXIS_MISSING_IMAGE = [
    "slurmstepd: error: pyxis: failed to create container filesystem for image: /images/x.sqsh",
    "slurmstepd: error: pyxis: printing enroot log file:",
    "slurmstepd: error: pyxis:     [ERROR] No such file or directory: /images/x.sqsh",
    "slurmstepd: error: pyxis: couldn't start container",
    "slurmstepd: error: spank: required plugin spank_pyxis.so: task_init_privileged() failed "
    "with rc=-1",
    "slurmstepd: error: Failed to invoke spank plugin stack",
    "srun: error: node1: task 0: Exited with exit code 1",
]
# Lmod 8.6's for an unknown module: MasterControl.lua M.error writes errTitle (red where
# stderr is a terminal) and messageDir/en.lua's e_Failed_Load, wrapped at 80 columns.
LMOD_UNKNOWN = [
    "\x1b[1;31mLmod has detected the following error: \x1b[0m The following module(s) are unknown:",
    '"no-such-module"',
    "",
    'Please check the spelling or version number. Also try "module spider ..."',
    "It is also possible your cache file is out-of-date; it may help to try:",
    '  $   module --ignore_cache load "no-such-module"',
]
PYTHON_EXCEPTION = [
    "pyxis: imported docker image: /images/stack.sqsh",
    "Traceback (most recent call last):",
    '  File "/opt/hpcbench/bench/train.py", line 12, in <module>',
    "    import torch",
    "ModuleNotFoundError: No module named 'torch'",
    "srun: error: node1: task 0: Exited with exit code 1",
]


@pytest.mark.parametrize(
    ("err", "cause"),
    [
        (PYXIS_MISSING_IMAGE, "[ERROR] No such file or directory: /images/x.sqsh"),
        (
            LMOD_UNKNOWN,
            "Lmod has detected the following error: The following module(s) are unknown: "
            '"no-such-module"',
        ),
        (PYTHON_EXCEPTION, "ModuleNotFoundError: No module named 'torch'"),
        (
            ["hpcbench: setup failed (exit 1): module load no-such-module", *LMOD_UNKNOWN],
            "hpcbench: setup failed (exit 1): module load no-such-module: Lmod has detected "
            'the following error: The following module(s) are unknown: "no-such-module"',
        ),
        (
            ["srun: Job step aborted", "srun: error: node2: task 1: Killed", "x"],
            "srun: error: node2: task 1: Killed",
        ),
        (["", "something odd", ""], "something odd"),
        ([], ""),
    ],
)
def test_the_cause_is_the_first_line_that_says_why(err, cause):
    assert slurm_scheduler.first_error(err) == cause


@given(st.lists(st.text(max_size=200), max_size=30))
def test_any_error_file_gives_one_line(lines):
    cause = slurm_scheduler.first_error(lines)
    assert "\n" not in cause and "\r" not in cause and "\x1b[" not in cause


class _Clock:
    """time.monotonic and time.sleep of the scheduler's module, without waiting."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.mark.parametrize("length_s", [3.0, 14.0, 21.0, 45.0, 400.0, 3600.0])
def test_a_jobs_end_is_seen_within_a_tenth_of_its_length(monkeypatch, tmp_path, length_s):
    """squeue is asked at most POLL_MAX_S apart, and the job's end is seen no later than a
    tenth of its length after it (POLL_MIN_S for a short one)."""
    clock = _Clock()
    monkeypatch.setattr(slurm_scheduler.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(slurm_scheduler.time, "sleep", clock.sleep)
    scheduler = _scheduler(tmp_path)
    submitted = clock.now
    asked: list[float] = []

    def state(job: str) -> tuple[str, str]:
        asked.append(clock.now)
        return ("COMPLETED" if clock.now - submitted >= length_s else "RUNNING"), "node1"

    monkeypatch.setattr(scheduler, "state", state)
    monkeypatch.setattr(scheduler, "read_output", lambda *a: ([], []))
    monkeypatch.setattr(scheduler, "queue_wait_s", lambda job: None)
    monkeypatch.setattr(scheduler, "consumed_energy", lambda job: {})
    result = scheduler.wait(_spec(), "7", "hpcbench-x", timeout_s=2 * length_s + 60)
    assert result.state == "COMPLETED"
    late = asked[-1] - submitted - length_s
    assert 0 <= late <= max(slurm_scheduler.POLL_MIN_S, 0.1 * length_s) + 1e-9
    gaps = [b - a for a, b in zip(asked, asked[1:], strict=False)]
    assert max(gaps) <= slurm_scheduler.POLL_MAX_S
    # An hour's job asks squeue a few hundred times, not once a second.
    assert len(asked) <= length_s / slurm_scheduler.POLL_MAX_S + 40


# ------------------------------------------------------- every job in its book
class Unwritable(RuntimeError):
    """A journal that cannot be written (hpcbench.measure.store.StoreWriteError)."""


class Book:
    """A book (slurm.booked) that keeps what it is told, with the control calls made
    before each note; it refuses the statuses in `refuse`, as a journal that cannot be
    written does."""

    def __init__(self, tmp: Path, refuse: tuple[str, ...] = ()) -> None:
        self.tmp, self.refuse = tmp, refuse
        self.notes: list[tuple[slurm_scheduler.JobNote, list[str]]] = []

    def __call__(self, note: slurm_scheduler.JobNote) -> None:
        if note.status in self.refuse:
            raise Unwritable(f"cannot write the journal ({note.status})")
        log = self.tmp / "calls.log"
        self.notes.append((note, log.read_text().splitlines() if log.exists() else []))

    def statuses(self) -> list[tuple[str, str, str]]:
        return [(n.status, n.job, n.why) for n, _ in self.notes]


def test_a_job_whose_name_its_book_cannot_keep_is_never_submitted(fake_slurm):
    (fake_slurm / "mode").write_text("ok")
    with slurm_scheduler.booked(Book(fake_slurm, refuse=("sbatch",))), pytest.raises(Unwritable):
        _scheduler(fake_slurm).run(_spec(), timeout_s=30)
    assert not (fake_slurm / "script").exists()
