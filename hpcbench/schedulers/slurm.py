"""Slurm: submit the slurm launcher's batch script, poll it, read its output, cancel it.

sbatch, squeue, scontrol, sacct and scancel run where sbatch runs (this
machine on a cluster's login node, the head of a testbed over SSH). Polling
is bounded: a job may wait in the queue for queue_wait_s and run for the
run's timeout; then, or on Ctrl-C, it is cancelled by its job id (by its
unique job name only where sbatch was cut short before the id came back),
tried again with a backoff, and squeue confirms it gone (a job that may be
left is named, with the scancel command that cancels it and where, kept for
the campaign's journal, and the sweep stops); every script carries
an sbatch --deadline, so a job pending past its queue wait never starts.
The job's -o/-e files are read on its batch host where the testbed reaches
it, and the workload's record goes to the sweep like any other scheduler's.

A book (`booked`: the campaign's journal) is told of each job as it comes and
goes (JobNote): its unique name before sbatch runs, its id the moment sbatch
returns it, before anything else, and its end once Slurm says it ended or a
cancel is confirmed; so a process killed outright (SIGKILL, the OOM killer)
leaves every job it queued named where the next run finds and cancels it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from hpcbench.core.bounded import ctrl_c_deferred
from hpcbench.core.errors import UsageError
from hpcbench.core.ssh import SshAccess, last_line
from hpcbench.launchers.base import Command, RunSpec
from hpcbench.launchers.slurm import (
    EXIT_MARKER,
    SETUP_FAILED,
    SlurmLauncher,
    SlurmOptions,
    sbatch_script,
)
from hpcbench.schedulers.base import (
    RESULT_MARKER,
    TAIL_LINES,
    Outcome,
    Scheduler,
    parse_records,
    register,
)

CONTROL_TIMEOUT_S = 60  # one sbatch/squeue/scancel/cat call
# How often a job's state is asked: a tenth of the time since it was submitted, at least
# POLL_MIN_S and at most POLL_MAX_S. A job's end is seen within a tenth of its length (a
# 30 s job's within 3 s, where growing the gap by half each poll saw it up to 10 s late),
# and a long job costs slurmctld one squeue each POLL_MAX_S.
POLL_MIN_S, POLL_MAX_S = 1.0, 10.0
POLL_SHARE = 0.1


def poll_delay(since_submit_s: float) -> float:
    """Seconds until the next squeue, `since_submit_s` after the job was submitted."""
    return min(POLL_MAX_S, max(POLL_MIN_S, since_submit_s * POLL_SHARE))


# A cancel: scancel by the job's id, then squeue; while squeue lists the job (or cannot
# say), scancel again after 2, then 4, 8 s: at most 4 scancels, within 60 s in all.
CANCEL_TRIES = 4
CANCEL_BACKOFF_S = 2.0
CANCEL_WITHIN_S = 60.0
# A job's unique name: this, then 8 random hex digits.
JOB_PREFIX = "hpcbench-"
# What --dry-run shows in place of a value set only at submission: @SUBMIT:<what>@, in
# characters that shell quoting leaves as they are (shlex.quote), so that the rest of
# the script is as submitted.
MARKS = (
    "@SUBMIT:x@ is set at submission: x = random, the job name's hex digits; sinfo, the "
    "node's CPUs (sinfo) shared by its ranks; port, a free port; home, the login's $HOME"
)


def _mark(what: str) -> str:
    return f"@SUBMIT:{what}@"


# Between the job's -o and -e files in the one call that reads both.
ERR_FILE_MARKER = "HPCBENCH_ERR_FILE"
# ssh's own exit status for a connection it could not make (ssh(1): "exits with the
# exit status of the remote command or with 255 if an error occurred").
SSH_FAILED = 255
# The shell's status for a command it cannot find (bash(1): "the return status is 127"):
# no Slurm there, which says nothing of the partition.
NOT_FOUND = 127
DONE_STATES = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
}


def scancel_line(ids: list[str], name: str) -> str:
    """The scancel that cancels a job: by its ids, else by its unique name."""
    return f"scancel {' '.join(ids)}" if ids else f"scancel --name={name}"


def _why(err: BaseException, tool: str = "the command") -> str:
    """One line for a failed control call."""
    if isinstance(err, subprocess.TimeoutExpired):
        return f"{tool} did not answer in {err.timeout:g} s"
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


# What a job is to its book (JobNote.status): its name given to sbatch, which has not
# answered yet; queued under its id; cancelled but not confirmed gone (left); gone.
JOB_STATUSES = ("sbatch", "queued", "left", "gone")


@dataclass(frozen=True)
class JobNote:
    """A job as its book keeps it: its unique name, its id ("" until sbatch gives one),
    its partition ("": the cluster's default), where its scancel runs, the scancel that
    cancels it, its status (JOB_STATUSES) and why (how it ended, why it is left)."""

    name: str
    job: str
    partition: str
    where: str
    scancel: str
    status: str
    why: str = ""


# The books told of every job, as they come and go (booked).
_BOOKS: list[Callable[[JobNote], None]] = []


@contextlib.contextmanager
def booked(book: Callable[[JobNote], None]) -> Iterator[None]:
    """`book` told of every job submitted, left or gone in the block. It must keep what
    it is told before it returns (an fsync'd line): a job is submitted only once its
    name is kept, and nothing else happens to it before its id is."""
    _BOOKS.append(book)
    try:
        yield
    finally:
        _BOOKS.remove(book)


@dataclass(frozen=True)
class LeftJob:
    """A job that may still be queued or running after its cancel: its id (its unique
    name where no id came back), the scancel command that cancels it, where to run it,
    why the cancel could not be confirmed, its unique name ("": not known) and its
    partition ("": the cluster's default)."""

    job: str
    scancel: str
    where: str
    why: str
    name: str = ""
    partition: str = ""

    def line(self) -> str:
        return (
            f"slurm job {self.job} may still be queued or running ({self.why}): "
            f"`{self.scancel}` {self.where} cancels it"
        )

    def record(self) -> dict[str, str]:
        """As the campaign's journal keeps it."""
        return {
            "job": self.job,
            "scancel": self.scancel,
            "where": self.where,
            "why": self.why,
            "name": self.name,
            "partition": self.partition,
        }


# Every job a cancel could not account for in this process, oldest first, until taken.
_LEFT: list[LeftJob] = []


# The jobs (LeftJob.job) an earlier run left that a cancel since confirmed gone.
_GONE: list[str] = []


def take_left() -> list[LeftJob]:
    """The jobs left since the last call (the campaign journals each phase's)."""
    taken = list(_LEFT)
    del _LEFT[: len(taken)]
    return taken


def take_gone() -> list[str]:
    """The jobs left earlier that cancel_left confirmed gone since the last call."""
    taken = list(_GONE)
    del _GONE[: len(taken)]
    return taken


class JobLeftBehind(RuntimeError):
    """A job that may still be queued or running after its cancel: the message names
    it and the scancel command that cancels it. A sweep stops on it rather than queue
    more jobs it could not account for."""

    def __init__(self, left: LeftJob) -> None:
        super().__init__(left.line())
        self.left = left


@dataclass
class JobResult:
    job_id: str
    state: str
    lines: list[str] = field(default_factory=list)  # the -o file's, then the -e file's
    rc: int | None = None
    timed_out: bool = False
    queue_wait_s: float | None = None
    cause: str = ""  # a failed job's first error line (first_error)
    energy: dict[str, Any] | None = None


# A terminal's colour escapes (Lmod colours its error title where stderr is a terminal).
_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# What a failed job's -e file holds first, most telling first:
# - the batch script's own line for a `setup:` that failed;
# - enroot's: common::log prints "[ERROR] <message>" (enroot src/common.sh:44, e.g.
#   runtime.sh:402 "No such file or directory: <image>"); pyxis passes enroot's log on
#   as "pyxis:     <line>" after slurmstepd's "error: " (pyxis common.c memfd_print_log);
# - Lmod's: MasterControl.lua M.error writes errTitle "Lmod has detected the following
#   error: " then the message (messageDir/en.lua e_Failed_Load "The following
#   module(s) are unknown: ..."), wrapped at 80 columns where stderr is no terminal
#   (utils.lua buildMsg), so a module list may go on on the next line.
_SETUP = re.compile("^" + re.escape(SETUP_FAILED))
_ENROOT = re.compile(r"\[ERROR\] .*")
_LMOD = re.compile(r"Lmod has detected the following errors?:.*")
_TRACEBACK = "Traceback (most recent call last):"
_ERROR = re.compile(r"\berror\b", re.IGNORECASE)


def first_error(err_lines: list[str]) -> str:
    """The line of a failed job's -e file that says why, as one line ("" for none):
    enroot's (through pyxis), Lmod's or a Python exception's, after the script's own
    line for a failed setup where there is one; else the first line that says
    "error", or the file's last line."""
    raw = [_ESCAPE.sub("", line) for line in err_lines]
    lines = [" ".join(line.split()) for line in raw]
    tool = _tool_line(lines, raw)
    setup = next((line for line in lines if _SETUP.match(line)), "")
    if setup:
        return f"{setup}: {tool}" if tool and tool not in setup else setup
    if tool:
        return tool
    said = [line for line in lines if line]
    return next((line for line in said if _ERROR.search(line)), said[-1] if said else "")


def _tool_line(lines: list[str], raw: list[str]) -> str:
    """enroot's [ERROR] line, Lmod's error (its module list too), or the exception that
    ends the first Python traceback; "" for none. `lines` are `raw` with their white
    space made one space (a traceback's frames are told by their indent)."""
    for line in lines:
        found = _ENROOT.search(line)
        if found:
            return found[0]
    for k, line in enumerate(lines):
        found = _LMOD.search(line)
        if found:
            more = lines[k + 1] if k + 1 < len(lines) else ""
            return f"{found[0]} {more}" if more.startswith('"') else found[0]
    if _TRACEBACK in lines:  # its frames are indented: the exception is the first line not
        after = raw[lines.index(_TRACEBACK) + 1 :]
        return next((" ".join(x.split()) for x in after if x.strip() and not x[0].isspace()), "")
    return ""


_TIME = r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)"


def queue_wait(text: str) -> float | None:
    """Start - submit time of a job, from `scontrol show job -o` (SubmitTime=...
    StartTime=...) or `sacct --parsable2 --format=Submit,Start` (Submit|Start); None
    when it has not started (Unknown, None) or neither says."""
    found = re.search(r"SubmitTime=" + _TIME + r".*?StartTime=" + _TIME, text)
    pair = found.groups() if found else None
    if pair is None:
        found = re.search(_TIME + r"\|" + _TIME, text)
        pair = found.groups() if found else None
    if pair is None:
        return None
    submit, start = (datetime.fromisoformat(t) for t in pair)
    return max(0.0, (start - submit).total_seconds())


@register
class SlurmScheduler(Scheduler):
    """One sbatch job per run; works with every script the slurm launcher renders."""

    name = "slurm"
    launcher: SlurmLauncher

    def __init__(self, launcher: SlurmLauncher) -> None:
        self.launcher = launcher

    def job_gpus(self, testbed_gpus: int) -> int:
        return self.options.gpus_per_node  # what the job books (--gres), not the testbed's

    def shared_job_dir(self) -> str:
        return self.options.job_dir

    def login(self) -> SshAccess | None:
        return self.launcher.submit

    def container_only(self, data: str, workdir: str) -> bool:
        return self.launcher.container_only(data, workdir)

    @property
    def options(self) -> SlurmOptions:
        """The launcher's, as the target last resolved them (paths on a login node)."""
        return self.launcher.options

    def job_name(self) -> str:
        return f"{JOB_PREFIX}{uuid.uuid4().hex[:8]}"

    def describe(self, spec: RunSpec) -> str:
        """What run() would submit for the spec, and where (what --dry-run prints): the
        same script, with each value that is set only at submission marked in place
        (MARKS), as nothing is asked of the cluster here."""
        login = self.launcher.submit

        def home(path: str) -> str:  # kinds/slurm.py place_on_login resolves ~/ there
            return _mark("home") + path[1:] if login is not None and path.startswith("~/") else path

        opts = self.options
        opts = dataclasses.replace(opts, bench_dir=home(opts.bench_dir), job_dir=home(opts.job_dir))
        shown = dataclasses.replace(
            spec, workdir=home(spec.workdir), args=tuple(home(a) for a in spec.args)
        )
        cpus = "" if opts.cpus_per_task or opts.node_cpus else _mark("sinfo")
        script = sbatch_script(
            shown,
            opts,
            self.launcher.backend,
            self.launcher.controller,
            JOB_PREFIX + _mark("random"),
            cpus_mark=cpus,
        )
        port = f"export MASTER_PORT={spec.master_port}\n"
        assert port in script, "the script names its rendezvous port"
        script = script.replace(port, f"export MASTER_PORT={_mark('port')}\n")
        submit = shlex.join(self.launcher.submission().argv)
        return f"# `{submit}` {self.where()}, this script on its stdin ({MARKS}):\n{script}"

    def _call(
        self, cmd: Command, stdin: str = "", timeout: float | None = None
    ) -> subprocess.CompletedProcess:
        """One control call, bounded. In a session of its own: a Ctrl-C or a closed
        terminal reaches this process alone, which decides (a cancel in progress finishes
        its scancel), and never kills the call under it."""
        return subprocess.run(
            cmd.local_argv(),
            env=cmd.environ(),  # allow-listed: sbatch passes its environment on to the job
            capture_output=True,
            text=True,
            input=stdin,
            timeout=CONTROL_TIMEOUT_S if timeout is None else timeout,
            start_new_session=True,
        )

    def _control(
        self, line: str, access: SshAccess | None = None, timeout: float | None = None
    ) -> subprocess.CompletedProcess:
        cmd = Command(("bash", "-c", line), access=access or self.launcher.submit)
        return self._call(cmd, timeout=timeout)

    def _unreachable(self, proc: subprocess.CompletedProcess) -> str | None:
        """ssh's own failure (not the remote command's), as one line; None otherwise."""
        if self.launcher.submit is None or proc.returncode != SSH_FAILED:
            return None
        return f"login node unreachable: {last_line(proc.stderr or '')}"

    def submit_job(self, script: str) -> str:
        if self.launcher.submit is None and self.options.job_dir:
            Path(self.options.job_dir).mkdir(parents=True, exist_ok=True)  # sbatch writes -o there
        proc = self._call(self.launcher.submission(), stdin=script)
        job = proc.stdout.strip().split(";")[0]
        if proc.returncode != 0 or not job.isdigit():
            raise RuntimeError(f"sbatch failed: {(proc.stderr or proc.stdout).strip()}")
        return job

    def state(self, job: str) -> tuple[str, str]:
        """(state, batch host) from squeue, or scontrol/sacct once the job has left the queue."""
        proc = self._control(
            f"out=$(squeue --noheader --jobs={job} --format='%T %B' 2>/dev/null);"
            ' if [ -n "$out" ]; then echo "$out";'
            f" else scontrol show job -o {job} 2>/dev/null"
            f" || sacct --noheader --parsable2 --allocations --jobs={job} --format=State; fi"
        )
        text = proc.stdout
        first = text.splitlines()[0].split() if text.strip() else []
        if first and first[0].isupper() and "=" not in first[0]:
            return first[0], first[1] if len(first) > 1 else ""
        found = re.search(r"JobState=(\S+)", text)
        host = re.search(r"BatchHost=(\S+)", text)
        return (found[1] if found else (first[0] if first else "UNKNOWN"), host[1] if host else "")

    def preflight(self, spec: RunSpec) -> None:
        """Before anything is submitted: the partition exists and is up (sinfo), and a
        job of this shape would be accepted there with this account and qos (`sbatch
        --test-only`: Slurm checks it and queues nothing). One UsageError line naming
        what to fix otherwise."""
        where = "this machine" if self.launcher.submit is None else self.launcher.submit.host
        part = self.options.partition
        if part:
            try:
                proc = self._control(
                    f"sinfo --noheader --partition={shlex.quote(part)} --format='%P %a %D %G'"
                )
            except (subprocess.SubprocessError, OSError) as err:
                raise UsageError(f"slurm on {where}: {_why(err, 'sinfo')}") from None
            unreachable = self._unreachable(proc)
            if unreachable:
                raise UsageError(f"slurm on {where}: {unreachable}")
            if proc.returncode == NOT_FOUND:
                fix = (
                    "run hpcbench on the cluster's login node, or give --slurm-login"
                    if self.launcher.submit is None
                    else "is it the cluster's login node?"
                )
                raise UsageError(
                    f"slurm on {where}: no sinfo there ({last_line(proc.stderr or '')}): {fix}"
                )
            rows = [line.split() for line in proc.stdout.splitlines() if line.strip()]
            if proc.returncode != 0 or not rows:
                why = (proc.stderr or "").strip().splitlines()
                raise UsageError(
                    f"partition {part!r} does not exist on {where}"
                    + (f" ({why[-1]})" if why else "")
                    + ": `sinfo -s` lists the partitions"
                )
            if rows[0][1] != "up":
                raise UsageError(f"partition {part!r} on {where} is {rows[0][1]}, not up")
        script = self.launcher.script(spec, "hpcbench-preflight")
        try:
            proc = self._call(self.launcher.submission(test_only=True), stdin=script)
        except (subprocess.SubprocessError, OSError) as err:
            raise UsageError(f"slurm on {where}: {_why(err, 'sbatch --test-only')}") from None
        unreachable = self._unreachable(proc)
        if unreachable:
            raise UsageError(f"slurm on {where}: {unreachable}")
        if proc.returncode != 0:
            lines = (proc.stderr or proc.stdout).strip().splitlines() or ["no reason given"]
            raise UsageError(f"slurm on {where} would refuse the jobs: {lines[-1]}")

    def prepare(self) -> None:
        """The nodes' CPUs from sinfo, once, where --slurm-cpus-per-task is not given:
        each job then books its ranks' share of a node (SlurmOptions.rank_cpus)."""
        opts = self.options
        if opts.cpus_per_task or opts.node_cpus:
            return
        cpus = self.node_cpus()
        if cpus:
            self.launcher.options = dataclasses.replace(opts, node_cpus=cpus)

    def node_cpus(self) -> int:
        """The fewest CPUs a node of the partition has, as sinfo reports them (%c: "64",
        or "64+" where nodes differ); 0 when sinfo does not say."""
        part = self.options.partition
        where = f" --partition={shlex.quote(part)}" if part else ""
        try:
            proc = self._control(f"sinfo --noheader{where} --format=%c")
        except (subprocess.SubprocessError, OSError):
            return 0
        counts = [int(m[1]) for m in re.finditer(r"^\s*(\d+)", proc.stdout, re.M)]
        return min(counts) if proc.returncode == 0 and counts else 0

    def queue_wait_s(self, job: str) -> float | None:
        """How long the job waited for its nodes, as Slurm recorded it (scontrol keeps a
        finished job for MinJobAge; sacct where accounting runs)."""
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            proc = self._control(
                f"scontrol show job -o {job} 2>/dev/null || sacct --noheader --parsable2 "
                f"--allocations --jobs={job} --format=Submit,Start"
            )
            return queue_wait(proc.stdout)
        return None

    def where(self) -> str:
        """Where sbatch, squeue and scancel run, as a person would reach it."""
        login = self.launcher.submit
        if login is None:
            return "on this machine"
        user = f"{login.user}@" if login.user else ""
        port = f" (ssh port {login.port})" if login.port != 22 else ""
        return f"on the login node {user}{login.host}{port}"

    def consumed_energy(self, job: str) -> dict[str, Any]:
        """The job's energy as Slurm's accounting gives it (sacct(1), ConsumedEnergyRaw
        and ElapsedRaw), or why there is none (sacct_energy)."""
        try:
            proc = self._control(
                f"sacct --noheader --parsable2 --allocations --jobs={job} "
                "--format=ConsumedEnergyRaw,ElapsedRaw"
            )
        except (subprocess.SubprocessError, OSError) as err:
            return {"unknown": f"sacct: {_why(err)}"}
        return sacct_energy(proc.stdout if proc.returncode == 0 else "", proc.stderr)

    def cancel(self, job_name: str, job: str = "") -> LeftJob | None:
        """scancel the job by its id (by its unique name only when sbatch was cut short
        before the id came back), confirmed by squeue; a scancel that failed, or a job
        still listed, is tried again (_cancel: bounded). None once confirmed; otherwise
        the job left, said on stderr here and kept for the campaign (take_left). A
        Ctrl-C, SIGTERM or SIGHUP meanwhile waits for the cancel to end."""
        with ctrl_c_deferred():
            left = self._cancel(job_name, job)
            if left:  # now: a deferred Ctrl-C raises as the block ends
                _LEFT.append(left)
                with contextlib.suppress(OSError, ValueError):  # a terminal gone
                    print(f"hpcbench: {left.line()}", file=sys.stderr, flush=True)
                self._note(job_name, job, "left", left.why, left.scancel)
            else:
                self._note(job_name, job, "gone", "cancelled: squeue lists it no more")
            return left

    def _note(self, name: str, job: str, status: str, why: str = "", scancel: str = "") -> None:
        """Every book told of the job (booked). A book that cannot keep a job's name or
        id raises: the job is then not submitted, or cancelled. One that cannot keep its
        end is said on stderr: the job stays open there, and the next run's cancel of
        it finds it gone (scancel of a job that ended exits 0)."""
        note = JobNote(
            name,
            job,
            self.options.partition,
            self.where(),
            scancel or scancel_line([job] if job else [], name),
            status,
            why,
        )
        for book in list(_BOOKS):
            if status in ("sbatch", "queued"):
                book(note)
                continue
            try:
                book(note)
            except Exception as err:  # noqa: BLE001 - said, never over the cancel's outcome
                with contextlib.suppress(OSError, ValueError):
                    print(f"hpcbench: {_why(err)}", file=sys.stderr, flush=True)

    def _scancel(self, handle: str, timeout: float) -> str:
        """One scancel; why it failed, or "" once Slurm took it. A job that ended, or an
        id slurmctld no longer holds, is no error to scancel (Slurm 25.05 scancel.c:
        917-919, 963-975: exit 0 for ESLURM_ALREADY_DONE and ESLURM_INVALID_JOB_ID under
        its default SIGKILL): its status confirms nothing, squeue does (_listed)."""
        try:
            proc = self._control(f"scancel {handle}", timeout=timeout)
        except (subprocess.SubprocessError, OSError) as err:
            return _why(err, "scancel")
        if proc.returncode == 0:
            return ""
        return self._unreachable(proc) or f"scancel: {last_line(proc.stderr or proc.stdout or '')}"

    def _listed(self, job_name: str, job: str, timeout: float) -> tuple[list[str] | None, str]:
        """The job's ids that squeue still lists as queued or running ([]: gone), or
        None and why, when squeue could not say."""
        ask = f"--jobs={job}" if job else f"--name={shlex.quote(job_name)}"
        try:
            proc = self._control(f"squeue --noheader {ask} --format='%i %T'", timeout=timeout)
        except (subprocess.SubprocessError, OSError) as err:
            return None, _why(err, "squeue")
        if proc.returncode != 0:
            # squeue asked for one job id loads that job alone and fails with "Invalid
            # job id specified" once slurmctld has forgotten it (squeue.c _print_job:
            # slurm_load_job, slurm_perror("slurm_load_jobs error"), exit 1): gone.
            if job and "Invalid job id specified" in (proc.stderr or ""):
                return [], ""
            return None, (
                self._unreachable(proc) or f"squeue: {last_line(proc.stderr or proc.stdout or '')}"
            )
        # Without --states, squeue lists pending, running, suspended and completing jobs
        # (print.c _filter_job; squeue(1) --states). A job COMPLETING was stopped and
        # its nodes are being released: not left.
        rows = [row.split() for row in proc.stdout.splitlines() if row.split()]
        return [r[0] for r in rows if len(r) < 2 or r[1] not in DONE_STATES | {"COMPLETING"}], ""

    def _cancel(self, job_name: str, job: str) -> LeftJob | None:
        """scancel, then squeue; while squeue lists the job or cannot say, scancel again
        after CANCEL_BACKOFF_S (doubling), at most CANCEL_TRIES scancels within
        CANCEL_WITHIN_S in all (each call bounded by what is left of it)."""
        handle = job if job else f"--name={shlex.quote(job_name)}"
        ends = time.monotonic() + CANCEL_WITHIN_S
        delay = CANCEL_BACKOFF_S
        why = ""
        listed: list[str] | None = None

        def left_s() -> float:
            return max(1.0, min(CONTROL_TIMEOUT_S, ends - time.monotonic()))

        attempt = 0
        while attempt < CANCEL_TRIES:
            attempt += 1
            refused = self._scancel(handle, left_s())
            listed, unknown = self._listed(job_name, job, left_s())
            if listed == []:
                return None
            why = refused or unknown or "squeue still lists it"
            if attempt == CANCEL_TRIES or time.monotonic() + delay >= ends:
                break
            time.sleep(delay)
            delay *= 2
        ids = [job] if job else (listed or [])
        return LeftJob(
            job=", ".join(ids) or job_name,
            scancel=scancel_line(ids, job_name),
            where=self.where(),
            why=f"{why}; scancel tried {attempt} time(s)",
            name=job_name,
            partition=self.options.partition,
        )

    def cancel_left(self, job: str) -> bool:
        """A job an earlier run left (LeftJob.job: ids, or the unique name where no id
        came back) cancelled again; True, and kept for take_gone, once confirmed gone."""
        left = [
            self.cancel("", one) if one.isdigit() else self.cancel(one) for one in job.split(", ")
        ]
        if any(left):
            return False
        _GONE.append(job)
        return True

    def cancelled(self, job_name: str, job: str = "") -> None:
        """cancel, and JobLeftBehind where the job may be left."""
        left = self.cancel(job_name, job)
        if left:
            raise JobLeftBehind(left)

    def read_output(
        self, job: str, job_name: str, host_access: SshAccess | None
    ) -> tuple[list[str], list[str]]:
        """The job's -o and -e files, each as its lines, read in one call (-o: one line
        saying why, where they cannot be read)."""
        base = f"{self.options.job_dir or '/tmp'}/{job_name}-{job}"
        try:
            proc = self._control(
                f"cat {shlex.quote(base + '.out')}; echo; echo {ERR_FILE_MARKER};"
                f" cat {shlex.quote(base + '.err')}",
                access=host_access,
            )
        except (subprocess.SubprocessError, OSError) as err:
            return [f"the job's output could not be read: {_why(err)}"], []
        out, found, err_text = proc.stdout.partition(f"\n{ERR_FILE_MARKER}\n")
        if not found:  # cut short before the marker: all of it is the .out file's
            return proc.stdout.splitlines(), []
        return out.splitlines(), err_text.splitlines()

    def wait(self, spec: RunSpec, job: str, job_name: str, timeout_s: float) -> JobResult:
        """Poll (bounded) until the job leaves the queue; cancel it on a timeout or Ctrl-C."""
        queued_until = time.monotonic() + self.options.queue_wait_s
        deadline: float | None = None
        submitted = time.monotonic()
        state, host = "PENDING", ""
        unknown = 0
        timed_out = False
        try:
            while True:
                state, host = self.state(job)
                now = time.monotonic()
                unknown = unknown + 1 if state == "UNKNOWN" else 0
                if state in DONE_STATES:
                    break
                if unknown >= 3:  # gone from squeue, scontrol and sacct: stop it, if it
                    break  # runs, and take its exit status from its output
                if state == "RUNNING" and deadline is None:
                    deadline = now + timeout_s
                if (deadline is not None and now > deadline) or (
                    deadline is None and now > queued_until
                ):
                    timed_out = True
                    break
                time.sleep(poll_delay(now - submitted))
        except BaseException as err:  # Ctrl-C, or a failing squeue: leave no job behind
            left = self.cancel(job_name, job)
            if left and not isinstance(err, KeyboardInterrupt):
                raise JobLeftBehind(left) from err
            raise
        if timed_out or unknown >= 3:
            self.cancelled(job_name, job)
        else:  # Slurm says it ended (DONE_STATES)
            self._note(job_name, job, "gone", f"ended {state}")
        if timed_out:
            return JobResult(job, state, timed_out=True)
        # The batch host writes -o/-e; read them there when the testbed reaches it.
        hosts = {p.host: p.access for p in spec.placements}
        out, errs = self.read_output(job, job_name, hosts.get(host, self.launcher.submit))
        rc = next(
            (int(line.split()[1]) for line in reversed(out) if line.startswith(EXIT_MARKER)), None
        )
        if rc is None:
            rc = 0 if state == "COMPLETED" else 1
        cause = first_error(errs) if rc != 0 else ""
        wait_s, energy = self.queue_wait_s(job), self.consumed_energy(job)
        return JobResult(
            job, state, out + errs, rc, queue_wait_s=wait_s, cause=cause, energy=energy
        )

    def run(self, spec: RunSpec, timeout_s: float, echo: bool = False) -> Outcome:
        launched_at, start = time.time(), time.monotonic()
        job_name = self.job_name()
        script = self.launcher.script(spec, job_name)
        self._note(job_name, "", "sbatch")  # kept first: a kill during sbatch leaves its name
        try:
            job = self.submit_job(script)
        except KeyboardInterrupt:
            self.cancel(job_name)
            raise
        except (RuntimeError, subprocess.SubprocessError, OSError) as err:
            # A timed-out sbatch may still have queued the job: cancel it by its name.
            self.cancelled(job_name)
            return Outcome(
                [1],
                [],
                [_why(err, "sbatch")],
                launched_at,
                time.monotonic() - start,
                argv=[["sbatch", script]],
            )
        try:  # the moment its id is known, before anything else
            self._note(job_name, job, "queued")
        except BaseException:
            self.cancel(job_name, job)  # a job its book could not keep is not left queued
            raise
        on = f" on partition {self.options.partition}" if self.options.partition else ""
        with contextlib.suppress(OSError, ValueError):  # a terminal gone
            print(
                f"hpcbench: slurm job {job} ({job_name}) submitted{on}; `scancel {job}` "
                f"{self.where()} cancels it",
                file=sys.stderr,
                flush=True,
            )
        try:  # the run's time starts once its image is in place on the nodes
            result = self.wait(spec, job, job_name, timeout_s + self.options.import_s)
        except (subprocess.SubprocessError, OSError) as err:  # wait() has cancelled the job
            return Outcome(
                [1],
                [],
                [f"slurm job {job}: {_why(err, 'squeue')}"],
                launched_at,
                time.monotonic() - start,
                argv=[["sbatch", f"job {job}"]],
            )
        if echo:
            print("\n".join(result.lines), flush=True)
        tail = [f"slurm job {job}: {result.state}"]
        tail += [x for x in result.lines if RESULT_MARKER not in x][-TAIL_LINES:]
        return Outcome(
            returncodes=[result.rc],
            records=parse_records(result.lines),
            tail=tail,
            launched_at=launched_at,
            duration_s=time.monotonic() - start,
            timed_out=result.timed_out,
            argv=[["sbatch", f"job {job}"], script.splitlines()],
            queue_wait_s=result.queue_wait_s,
            cause=result.cause,
            job_energy=result.energy,
        )


def sacct_energy(stdout: str, stderr: str = "") -> dict[str, Any]:
    """The job's energy from `sacct --noheader --parsable2 --allocations --jobs=ID
    --format=ConsumedEnergyRaw,ElapsedRaw` (joules, seconds), or why there is none.
    sacct(1): ConsumedEnergyRaw is the "total energy consumed by all tasks in a job,
    in joules"; "only in the case of an exclusive job allocation does this value
    reflect the job's real energy consumption". It prints 0 where no energy was
    gathered (src/sacct/print.c, PRINT_CONSUMED_ENERGY_RAW: a job's energy TRES that is
    missing reads as 0), i.e. where slurm.conf sets no AcctGatherEnergyType."""
    found = re.search(r"^\s*(\d*)\|(\d*)\s*$", stdout, re.MULTILINE)
    if found is None:
        why = (stderr.strip().splitlines() or ["no line for the job"])[0][:200]
        return {"unknown": f"sacct gives no ConsumedEnergy: {why}"}
    joules, seconds = found.groups()
    if not joules or int(joules) == 0:
        why = "sacct's ConsumedEnergy is 0: the cluster gathers no energy (AcctGatherEnergyType)"
        return {"unknown": why}
    if not seconds or int(seconds) == 0:
        return {"unknown": "sacct gives no elapsed time for the job"}
    return {"joules": float(joules), "seconds": float(seconds), "exclusive_only": True}
