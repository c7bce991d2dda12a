"""Slurm: one sbatch job per run, one task per worker started by srun (pyxis optional).

The script is built by a pure function (`sbatch_script`), unit-tested without
a cluster. `SlurmLauncher.run` submits it, polls squeue with a bound, reads
the job's output (where the batch host wrote it) and hands the workload's
record to the sweep like every other launcher; Ctrl-C or a timeout cancels
the job with scancel.

Rendezvous from Slurm's variables: DDP gets MASTER_ADDR (the first node of
the allocation), RANK=SLURM_PROCID, WORLD_SIZE=SLURM_NTASKS, LOCAL_RANK=
SLURM_LOCALID. Horovod with Gloo gets the HOROVOD_* variables horovodrun
would set, and a Gloo rendezvous server (Horovod's own HTTP store) that the
job starts on its first node; Horovod with MPI uses `srun --mpi=pmix`.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import re
import shlex
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from hpcbench.launchers.base import Command, Launcher, RunSpec
from hpcbench.testbed import SshAccess

ENV_NAME = "slurm"  # `--env slurm`: the nodes Slurm allocates, sbatch on this machine
CLUSTER_NODES = 64  # the most nodes `--env slurm` offers; Slurm refuses what it lacks
EXIT_MARKER = "HPCBENCH_SLURM_EXIT"
CONTROL_TIMEOUT_S = 60  # one sbatch/squeue/scancel/cat call
POLL_MIN_S, POLL_MAX_S = 1.0, 10.0
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

# Horovod's Gloo rendezvous (what horovodrun serves) on a fixed port; the scope
# sizes only matter for clean-up. argv: port, comma-separated hosts, tasks per node.
RENDEZVOUS_PY = (
    "import sys;from horovod.runner.http.http_server import RendezvousHTTPServer as S,"
    'RendezvousHandler as H;p,h,n=int(sys.argv[1]),sys.argv[2].split(","),int(sys.argv[3]);'
    's=S(("0.0.0.0",p),H,0);s.scope_size={"global":n*len(h),'
    '**{"local_"+x:n for x in h},**{"cross_%d"%i:len(h) for i in range(n)}};s.serve_forever()'
)


@dataclass(frozen=True)
class SlurmOptions:
    partition: str = ""
    account: str = ""
    qos: str = ""
    gpus_per_node: int = 0  # --gres=gpu:N; 0: none
    time_min: int = 0  # job time limit; 0: from the run's timeout
    container_image: str = ""  # pyxis: registry image (nvcr.io#nvidia/pytorch:...) or a .sqsh
    container_mounts: tuple[str, ...] = ()  # pyxis SRC:DST
    container_python: str = "/opt/hpcbench/venv/bin/python"  # python inside the image
    mpi: str = ""  # srun --mpi=...; "pmix" for Horovod over MPI
    job_dir: str = ""  # where -o/-e go (the batch host writes them); "" = /tmp
    pin_nodes: bool = False  # --nodelist=the run's hosts (testbeds whose nodes we know)
    queue_wait_s: int = 3600  # how long a job may wait in the queue before it is cancelled
    extra: tuple[str, ...] = ()  # more #SBATCH options, verbatim

    @property
    def pyxis(self) -> bool:
        return bool(self.container_image)


def _minutes(spec: RunSpec, opts: SlurmOptions) -> int:
    if opts.time_min:
        return opts.time_min
    return max(1, math.ceil(spec.time_limit_s / 60)) + 1 if spec.time_limit_s else 60


def container_flags(spec: RunSpec, opts: SlurmOptions) -> list[str]:
    """pyxis options of srun; bench/ is mounted at the same path inside the image."""
    if not opts.pyxis:
        return []
    mounts = [*opts.container_mounts, f"{spec.workdir}:{spec.workdir}"]
    return [
        f"--container-image={opts.container_image}",
        f"--container-mounts={','.join(mounts)}",
        f"--container-workdir={spec.workdir}",
    ]


def task_command(spec: RunSpec, opts: SlurmOptions, backend: str, controller: str) -> str:
    """What each srun task runs: its rank variables from Slurm's, then the workload."""
    per_node = spec.placements[0].slots
    if backend == "ddp":
        env = (
            "RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID "
            f"LOCAL_WORLD_SIZE={per_node}"
        )
    elif controller == "gloo":
        env = (
            "HOROVOD_RANK=$SLURM_PROCID HOROVOD_SIZE=$SLURM_NTASKS "
            f"HOROVOD_LOCAL_RANK=$SLURM_LOCALID HOROVOD_LOCAL_SIZE={per_node} "
            "HOROVOD_CROSS_RANK=$SLURM_NODEID HOROVOD_CROSS_SIZE=$SLURM_NNODES "
            "HOROVOD_HOSTNAME=$SLURMD_NODENAME"
        )
    else:  # MPI: Horovod reads its ranks from the PMIx world srun sets up
        env = ""
    python = opts.container_python if opts.pyxis else spec.python
    run = f"cd {shlex.quote(spec.workdir)} && exec " + shlex.join([python, spec.script, *spec.args])
    return f"export {env}; {run}" if env else run


def sbatch_script(
    spec: RunSpec,
    opts: SlurmOptions,
    backend: str,
    controller: str = "gloo",
    job_name: str = "hpcbench",
) -> str:
    """The whole batch script of one run (a pure function of its inputs)."""
    nodes = len(spec.placements)
    per_node = spec.placements[0].slots
    out = f"{opts.job_dir or '/tmp'}/{job_name}-%j"
    head = [
        "#!/bin/bash",
        f"#SBATCH --job-name={job_name}",
        f"#SBATCH --nodes={nodes}",
        f"#SBATCH --ntasks-per-node={per_node}",
        f"#SBATCH --time={_minutes(spec, opts)}",
        f"#SBATCH -o {out}.out",
        f"#SBATCH -e {out}.err",
    ]
    for flag, value in (
        ("partition", opts.partition),
        ("account", opts.account),
        ("qos", opts.qos),
    ):
        if value:
            head.append(f"#SBATCH --{flag}={value}")
    if opts.gpus_per_node:  # no more GPUs than workers: the 1-worker baseline asks for one
        head.append(f"#SBATCH --gres=gpu:{min(opts.gpus_per_node, per_node)}")
    if opts.pin_nodes:
        head.append(f"#SBATCH --nodelist={','.join(p.host for p in spec.placements)}")
    head += [f"#SBATCH {x}" for x in opts.extra]

    body = [
        "set -u",
        'nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        'export MASTER_ADDR=$(echo "$nodes" | head -n 1)',
        f"export MASTER_PORT={spec.master_port}",
    ]
    body += [f"export {k}={shlex.quote(v)}" for k, v in spec.network_env().items()]
    srun = [
        "srun",
        f"--ntasks={spec.workers}",
        f"--ntasks-per-node={per_node}",
        "--distribution=block",
        "--kill-on-bad-exit=1",
    ]
    if opts.mpi:
        srun.append(f"--mpi={opts.mpi}")
    srun += container_flags(spec, opts)
    gloo_horovod = backend == "horovod" and controller == "gloo"
    if gloo_horovod:
        python = opts.container_python if opts.pyxis else spec.python
        rendezvous = [
            "srun",
            "--overlap",
            "--nodes=1",
            "--ntasks=1",
            '--nodelist="$MASTER_ADDR"',
            *container_flags(spec, opts),
            shlex.quote(python),
            "-c",
            shlex.quote(RENDEZVOUS_PY),
            '"$MASTER_PORT"',
            '"$(echo "$nodes" | paste -sd, -)"',
            str(per_node),
        ]
        body += [
            "export HOROVOD_GLOO_RENDEZVOUS_ADDR=$MASTER_ADDR"
            " HOROVOD_GLOO_RENDEZVOUS_PORT=$MASTER_PORT",
            "export HOROVOD_CONTROLLER=gloo HOROVOD_CPU_OPERATIONS=gloo",
            "# Gloo rendezvous server (what horovodrun would serve) on the first node",
            " ".join(rendezvous) + " &",
            "rendezvous=$!",
            "for _ in $(seq 120); do  # bounded: up to 60 s for the server to listen",
            '  (exec 3<>"/dev/tcp/$MASTER_ADDR/$MASTER_PORT") 2>/dev/null && break; sleep 0.5',
            "done",
        ]
    body += [
        " ".join(srun) + " bash -c " + shlex.quote(task_command(spec, opts, backend, controller)),
        "rc=$?",
    ]
    if gloo_horovod:
        body.append('kill "$rendezvous" 2>/dev/null; wait "$rendezvous" 2>/dev/null')
    body += [f'echo "{EXIT_MARKER} $rc"', 'exit "$rc"']
    return "\n".join(head + [""] + body) + "\n"


@dataclass
class JobResult:
    job_id: str
    state: str
    lines: list[str] = field(default_factory=list)
    rc: int | None = None
    timed_out: bool = False


class SlurmLauncher(Launcher):
    """`sbatch` per run; works with Horovod (Gloo or MPI) and DDP."""

    name = "slurm"

    def __init__(
        self,
        options: SlurmOptions | None = None,
        controller: str = "gloo",
        backend: str = "horovod",
        submit: SshAccess | None = None,
    ) -> None:
        self.options = options or SlurmOptions()
        self.controller = controller
        self.backend = backend
        # Where sbatch runs: None is this machine (a login node); a testbed's head otherwise.
        self.submit = submit

    def check(self, spec: RunSpec, backend: str) -> str | None:
        if len({p.slots for p in spec.placements}) > 1:
            return "the slurm launcher needs the same number of workers on every node"
        return super().check(spec, backend)

    def job_name(self) -> str:
        return f"hpcbench-{uuid.uuid4().hex[:8]}"

    def script(self, spec: RunSpec, job_name: str = "hpcbench") -> str:
        return sbatch_script(spec, self.options, self.backend, self.controller, job_name)

    def commands(self, spec: RunSpec) -> list[Command]:
        """The submission as one command (what --dry-run shows besides the script)."""
        script = self.script(spec)
        return [self._shell(f"sbatch --parsable <<'HPCBENCH_EOF'\n{script}HPCBENCH_EOF")]

    def describe(self, spec: RunSpec) -> str:
        where = "this machine" if self.submit is None else self.submit.host
        return f"# sbatch on {where}:\n{self.script(spec)}"

    # ---------------------------------------------------------------- running
    def _shell(self, line: str) -> Command:
        return Command(("bash", "-c", line), access=self.submit)

    def _control(self, line: str, access: SshAccess | None = None) -> subprocess.CompletedProcess:
        cmd = Command(("bash", "-c", line), access=access or self.submit)
        return subprocess.run(
            cmd.local_argv(),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=CONTROL_TIMEOUT_S,
        )

    def submit_job(self, script: str) -> str:
        proc = self._control(f"sbatch --parsable <<'HPCBENCH_EOF'\n{script}HPCBENCH_EOF")
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

    def cancel(self, job_name: str) -> None:
        """By the run's unique job name: also finds a job whose sbatch was interrupted."""
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self._control(f"scancel --name={shlex.quote(job_name)}")

    def read_output(self, job: str, job_name: str, host_access: SshAccess | None) -> list[str]:
        base = f"{self.options.job_dir or '/tmp'}/{job_name}-{job}"
        proc = self._control(
            f"cat {shlex.quote(base + '.out')} {shlex.quote(base + '.err')}", access=host_access
        )
        return proc.stdout.splitlines()

    def wait(self, spec: RunSpec, job: str, job_name: str, timeout_s: float) -> JobResult:
        """Poll (bounded) until the job leaves the queue; cancel it on a timeout or Ctrl-C."""
        queued_until = time.monotonic() + self.options.queue_wait_s
        deadline: float | None = None
        delay = POLL_MIN_S
        state, host = "PENDING", ""
        unknown = 0
        try:
            while True:
                state, host = self.state(job)
                now = time.monotonic()
                unknown = unknown + 1 if state == "UNKNOWN" else 0
                if state in DONE_STATES or unknown >= 3:  # gone from squeue, scontrol and sacct
                    break
                if state == "RUNNING" and deadline is None:
                    deadline = now + timeout_s
                if (deadline is not None and now > deadline) or (
                    deadline is None and now > queued_until
                ):
                    self.cancel(job_name)
                    return JobResult(job, state, timed_out=True)
                time.sleep(delay)
                delay = min(POLL_MAX_S, delay * 1.5)
        except BaseException:
            self.cancel(job_name)  # Ctrl-C, or a failing squeue: leave no job behind
            raise
        # The batch host writes -o/-e; read them there when the testbed reaches it.
        hosts = {p.host: p.access for p in spec.placements}
        lines = self.read_output(job, job_name, hosts.get(host, self.submit))
        rc = next(
            (int(line.split()[1]) for line in reversed(lines) if line.startswith(EXIT_MARKER)), None
        )
        if rc is None:
            rc = 0 if state == "COMPLETED" else 1
        return JobResult(job, state, lines, rc)

    def run(self, spec: RunSpec, timeout_s: float, echo: bool = False):  # -> runner.Outcome
        from hpcbench import runner

        launched_at, start = time.time(), time.monotonic()
        job_name = self.job_name()
        script = self.script(spec, job_name)
        try:
            job = self.submit_job(script)
        except KeyboardInterrupt:
            self.cancel(job_name)
            raise
        except (RuntimeError, subprocess.SubprocessError, OSError) as err:
            return runner.Outcome(
                [1],
                [],
                [str(err)],
                launched_at,
                time.monotonic() - start,
                argv=[["sbatch", script]],
            )
        result = self.wait(spec, job, job_name, timeout_s)
        if echo:
            print("\n".join(result.lines), flush=True)
        tail = [f"slurm job {job}: {result.state}"]
        tail += [x for x in result.lines if runner.RESULT_MARKER not in x][-runner.TAIL_LINES :]
        return runner.Outcome(
            returncodes=[result.rc],
            records=runner.parse_records(result.lines),
            tail=tail,
            launched_at=launched_at,
            duration_s=time.monotonic() - start,
            timed_out=result.timed_out,
            argv=[["sbatch", f"job {job}"], script.splitlines()],
        )


# -------------------------------------------------------------------- CLI glue
def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("slurm launcher (--launcher slurm, or --env slurm)")
    g.add_argument("--partition", default="", help="sbatch --partition")
    g.add_argument("--account", default="", help="sbatch --account")
    g.add_argument("--qos", default="", help="sbatch --qos")
    g.add_argument(
        "--slurm-gpus",
        type=int,
        default=None,
        help="GPUs per node to request (--gres=gpu:N); default: the workers per node "
        "when --gpus-per-node is given and --device is not cpu, else none",
    )
    g.add_argument(
        "--slurm-time",
        type=int,
        default=0,
        help="job time limit in minutes (default: from --timeout)",
    )
    g.add_argument(
        "--container-image",
        default="",
        help="pyxis: run the workers in this image (registry image or .sqsh)",
    )
    g.add_argument("--container-mounts", default="", help="pyxis: SRC:DST[,SRC:DST...]")
    g.add_argument(
        "--container-python",
        default=SlurmOptions.container_python,
        help="python inside the container image",
    )
    g.add_argument(
        "--slurm-mpi",
        default="",
        help="srun --mpi= (default: pmix for --horovod-controller mpi, else none)",
    )
    g.add_argument(
        "--slurm-job-dir",
        default="",
        help="directory for the jobs' -o/-e files (default: /tmp on the testbed, "
        "<out>/slurm with --env slurm)",
    )
    g.add_argument(
        "--slurm-queue-wait",
        type=int,
        default=3600,
        help="seconds a job may wait in the queue before it is cancelled",
    )
    g.add_argument(
        "--sbatch",
        action="append",
        default=[],
        metavar="OPTION",
        help="extra #SBATCH option, verbatim (repeatable)",
    )


def from_args(
    args: argparse.Namespace, backend: str, controller: str, submit: SshAccess | None, cluster: bool
) -> SlurmLauncher:
    """The launcher for `scale`/`probe`; `cluster`: --env slurm (nodes chosen by Slurm)."""
    gpus = args.slurm_gpus
    if gpus is None:
        gpus = args.gpus_per_node if args.gpus_per_node and args.device != "cpu" else 0
    job_dir = args.slurm_job_dir or (str(Path(args.out).resolve() / "slurm") if cluster else "")
    if job_dir and submit is None:
        Path(job_dir).mkdir(parents=True, exist_ok=True)
    options = SlurmOptions(
        partition=args.partition,
        account=args.account,
        qos=args.qos,
        gpus_per_node=gpus,
        time_min=args.slurm_time,
        container_image=args.container_image,
        container_mounts=tuple(m for m in args.container_mounts.split(",") if m),
        container_python=args.container_python,
        mpi=args.slurm_mpi or ("pmix" if controller == "mpi" else ""),
        job_dir=job_dir,
        pin_nodes=not cluster,
        queue_wait_s=args.slurm_queue_wait,
        extra=tuple(args.sbatch),
    )
    return SlurmLauncher(options, controller, backend, submit)


def cluster_testbed(gpus_per_node: int | None):  # -> testbed.Testbed
    """`--env slurm`: the nodes Slurm will allocate, seen from a login node with a
    shared file system (this checkout's bench/ and python, or the container's)."""
    from hpcbench.testbed import Node, Testbed

    nodes = [Node(f"slurm{i}", "", gpus_per_node or 0, None) for i in range(CLUSTER_NODES)]
    return Testbed(env=ENV_NAME, nodes=nodes, head=nodes[0].name, python=sys.executable)
