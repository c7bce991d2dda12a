"""Slurm: submit the slurm launcher's batch script, poll it, read its output, cancel it.

sbatch, squeue, scontrol, sacct and scancel run where sbatch runs (this
machine on a cluster's login node, the head of a testbed over SSH). Polling
is bounded: a job may wait in the queue for queue_wait_s and run for the
run's timeout; then, or on Ctrl-C, it is cancelled by its unique job name
and squeue confirms it gone (a job that may be left is named, with the
scancel command that cancels it, and the sweep stops); every script carries
an sbatch --deadline, so a job pending past its queue wait never starts.
The job's -o/-e files are read on its batch host where the testbed reaches
it, and the workload's record goes to the sweep like any other scheduler's.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from hpcbench import energy_use
from hpcbench.bounded import ctrl_c_deferred
from hpcbench.errors import UsageError
from hpcbench.launchers.base import Command, RunSpec
from hpcbench.launchers.slurm import EXIT_MARKER, SlurmLauncher, SlurmOptions
from hpcbench.schedulers.base import RESULT_MARKER, TAIL_LINES, Outcome, Scheduler, parse_records
from hpcbench.ssh import SshAccess, last_line

CONTROL_TIMEOUT_S = 60  # one sbatch/squeue/scancel/cat call
POLL_MIN_S, POLL_MAX_S = 1.0, 10.0
CANCEL_CONFIRM_S = 30.0  # squeue asked, a few times, that a cancelled job has left
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


def _why(err: BaseException, tool: str = "the command") -> str:
    """One line for a failed control call."""
    if isinstance(err, subprocess.TimeoutExpired):
        return f"{tool} did not answer in {err.timeout:g} s"
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


class JobLeftBehind(RuntimeError):
    """A job that may still be queued or running after its cancel: the message names
    it and the scancel command that cancels it. A sweep stops on it rather than queue
    more jobs it could not account for."""


@dataclass
class JobResult:
    job_id: str
    state: str
    lines: list[str] = field(default_factory=list)
    rc: int | None = None
    timed_out: bool = False
    queue_wait_s: float | None = None
    energy: dict[str, Any] | None = None


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


class SlurmScheduler(Scheduler):
    """One sbatch job per run; works with every script the slurm launcher renders."""

    name = "slurm"

    def __init__(self, launcher: SlurmLauncher) -> None:
        self.launcher = launcher

    @property
    def options(self) -> SlurmOptions:
        """The launcher's, as the target last resolved them (paths on a login node)."""
        return self.launcher.options

    def job_name(self) -> str:
        return f"hpcbench-{uuid.uuid4().hex[:8]}"

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

    def consumed_energy(self, job: str) -> dict[str, Any]:
        """The job's energy as Slurm's accounting gives it (sacct(1), ConsumedEnergyRaw
        and ElapsedRaw), or why there is none (hpcbench.energy_use.sacct_energy)."""
        try:
            proc = self._control(
                f"sacct --noheader --parsable2 --allocations --jobs={job} "
                "--format=ConsumedEnergyRaw,ElapsedRaw"
            )
        except (subprocess.SubprocessError, OSError) as err:
            return {"unknown": f"sacct: {_why(err)}"}
        return energy_use.sacct_energy(proc.stdout if proc.returncode == 0 else "", proc.stderr)

    def cancel(self, job_name: str, job: str = "") -> str | None:
        """scancel by the run's unique job name (which also finds a job whose sbatch was
        interrupted), then squeue until it lists no job of that name, for at most
        CANCEL_CONFIRM_S. None once confirmed; otherwise one line naming the job and the
        scancel command that cancels it, printed here too. A Ctrl-C, SIGTERM or SIGHUP
        meanwhile waits for the cancel to end."""
        with ctrl_c_deferred():
            left = self._cancel(job_name, job)
            if left:  # now: a deferred Ctrl-C raises as the block ends
                with contextlib.suppress(OSError, ValueError):  # a terminal gone
                    print(f"hpcbench: {left}", file=sys.stderr, flush=True)
            return left

    def _cancel(self, job_name: str, job: str) -> str | None:
        name = shlex.quote(job_name)
        why = ""
        try:
            proc = self._control(f"scancel --name={name}")
            if proc.returncode != 0:
                why = f"scancel: {last_line(proc.stderr or proc.stdout or '')}"
        except (subprocess.SubprocessError, OSError) as err:
            why = _why(err, "scancel")
        ends = time.monotonic() + CANCEL_CONFIRM_S
        delay = POLL_MIN_S
        listed: list[str] = []
        while True:
            try:
                proc = self._control(
                    f"squeue --noheader --name={name} --format='%i %T'",
                    timeout=max(1.0, min(CONTROL_TIMEOUT_S, ends - time.monotonic())),
                )
                if proc.returncode == 0:
                    # A job still COMPLETING was stopped; its nodes are being released.
                    listed = [
                        row.split()[0]
                        for row in proc.stdout.splitlines()
                        if row.split() and "COMPLETING" not in row.split()[1:]
                    ]
                    if not listed:
                        return None
                else:
                    why = f"squeue: {last_line(proc.stderr or proc.stdout or '')}"
            except (subprocess.SubprocessError, OSError) as err:
                why = _why(err, "squeue")
            if time.monotonic() + delay > ends:
                break
            time.sleep(delay)
            delay *= 2
        ids = listed or ([job] if job else [])
        command = f"scancel {' '.join(ids)}" if ids else f"scancel --name={job_name}"
        where = "" if self.launcher.submit is None else f" on {self.launcher.submit.host}"
        what = f"slurm job {', '.join(ids)}" if ids else f"slurm job {job_name}"
        return (
            f"{what} may still be queued or running ({why or 'squeue still lists it'}): "
            f"`{command}`{where} cancels it"
        )

    def cancelled(self, job_name: str, job: str = "") -> None:
        """cancel, and JobLeftBehind where the job may be left."""
        left = self.cancel(job_name, job)
        if left:
            raise JobLeftBehind(left)

    def read_output(self, job: str, job_name: str, host_access: SshAccess | None) -> list[str]:
        base = f"{self.options.job_dir or '/tmp'}/{job_name}-{job}"
        try:
            proc = self._control(
                f"cat {shlex.quote(base + '.out')} {shlex.quote(base + '.err')}",
                access=host_access,
            )
        except (subprocess.SubprocessError, OSError) as err:
            return [f"the job's output could not be read: {_why(err)}"]
        return proc.stdout.splitlines()

    def wait(self, spec: RunSpec, job: str, job_name: str, timeout_s: float) -> JobResult:
        """Poll (bounded) until the job leaves the queue; cancel it on a timeout or Ctrl-C."""
        queued_until = time.monotonic() + self.options.queue_wait_s
        deadline: float | None = None
        delay = POLL_MIN_S
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
                time.sleep(delay)
                delay = min(POLL_MAX_S, delay * 1.5)
        except BaseException as err:  # Ctrl-C, or a failing squeue: leave no job behind
            left = self.cancel(job_name, job)
            if left and not isinstance(err, KeyboardInterrupt):
                raise JobLeftBehind(left) from err
            raise
        if timed_out or unknown >= 3:
            self.cancelled(job_name, job)
        if timed_out:
            return JobResult(job, state, timed_out=True)
        # The batch host writes -o/-e; read them there when the testbed reaches it.
        hosts = {p.host: p.access for p in spec.placements}
        lines = self.read_output(job, job_name, hosts.get(host, self.launcher.submit))
        rc = next(
            (int(line.split()[1]) for line in reversed(lines) if line.startswith(EXIT_MARKER)), None
        )
        if rc is None:
            rc = 0 if state == "COMPLETED" else 1
        wait_s, energy = self.queue_wait_s(job), self.consumed_energy(job)
        return JobResult(job, state, lines, rc, queue_wait_s=wait_s, energy=energy)

    def run(self, spec: RunSpec, timeout_s: float, echo: bool = False) -> Outcome:
        launched_at, start = time.time(), time.monotonic()
        job_name = self.job_name()
        script = self.launcher.script(spec, job_name)
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
            job_energy=result.energy,
        )
