"""Slurm: one sbatch job per run, one task per worker started by srun (pyxis optional).

The script is built by a pure function (`sbatch_script`), unit-tested without
a cluster; hpcbench.schedulers.slurm submits it, polls, reads the job's
output and cancels it.

Rendezvous from Slurm's variables: DDP gets MASTER_ADDR (the first node of
the allocation), RANK=SLURM_PROCID, WORLD_SIZE=SLURM_NTASKS, LOCAL_RANK=
SLURM_LOCALID. Horovod with Gloo gets the HOROVOD_* variables horovodrun
would set, and a Gloo rendezvous server (Horovod's own HTTP store) that the
job starts on its first node; Horovod with MPI uses `srun --mpi=pmix`.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass

from hpcbench.launchers.base import Command, Launcher, RunSpec
from hpcbench.ssh import SshAccess

# The batch script's last line names the workload's exit status.
EXIT_MARKER = "HPCBENCH_SLURM_EXIT"

# Horovod's Gloo rendezvous (what horovodrun serves) on a fixed port; the scope
# sizes only matter for clean-up. argv: port, comma-separated hosts, tasks per node,
# and the address it listens on: the first node's (MASTER_ADDR), never 0.0.0.0, as
# the store has no authentication; only the job's nodes need to reach it.
RENDEZVOUS_PY = (
    "import sys;from horovod.runner.http.http_server import RendezvousHTTPServer as S,"
    'RendezvousHandler as H;p,h,n,a=int(sys.argv[1]),sys.argv[2].split(","),int(sys.argv[3]),'
    'sys.argv[4];s=S((a,p),H,0);s.scope_size={"global":n*len(h),'
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
    # --env slurm: where sbatch runs (None: this machine, a login node), the stack's
    # Python and bench/ on the cluster's shared file system ("": this machine's), and a
    # shell line the batch script runs before srun (module load ...).
    login: SshAccess | None = None
    python: str = ""
    bench_dir: str = ""
    setup: str = ""

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
    flags = [
        f"--container-image={opts.container_image}",
        f"--container-mounts={','.join(mounts)}",
        f"--container-workdir={spec.workdir}",
    ]
    return [shlex.quote(f) for f in flags]  # the script is bash: every value quoted


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
    # sbatch reads #SBATCH lines with shell-like quoting; the values were checked
    # (hpcbench.options) and are quoted besides.
    q = shlex.quote
    head = [
        "#!/bin/bash",
        f"#SBATCH --job-name={q(job_name)}",
        f"#SBATCH --nodes={nodes}",
        f"#SBATCH --ntasks-per-node={per_node}",
        f"#SBATCH --time={_minutes(spec, opts)}",
        f"#SBATCH -o {q(out + '.out')}",
        f"#SBATCH -e {q(out + '.err')}",
    ]
    for flag, value in (
        ("partition", opts.partition),
        ("account", opts.account),
        ("qos", opts.qos),
    ):
        if value:
            head.append(f"#SBATCH --{flag}={q(value)}")
    if opts.gpus_per_node:  # no more GPUs than workers: the 1-worker baseline asks for one
        head.append(f"#SBATCH --gres=gpu:{min(opts.gpus_per_node, per_node)}")
    if opts.pin_nodes:
        head.append(f"#SBATCH --nodelist={q(','.join(p.host for p in spec.placements))}")
    head += [f"#SBATCH {x}" for x in opts.extra]

    body = [opts.setup] if opts.setup else []  # the user's own line, before `set -u`
    body += [
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
        srun.append(q(f"--mpi={opts.mpi}"))
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
            '"$MASTER_ADDR"',
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

    def script(self, spec: RunSpec, job_name: str = "hpcbench") -> str:
        return sbatch_script(spec, self.options, self.backend, self.controller, job_name)

    def submission(self, script: str, test_only: bool = False) -> Command:
        """sbatch of a script where sbatch runs; it prints the job id (with test_only,
        when the job would start: Slurm checks it and queues nothing)."""
        flag = "--test-only" if test_only else "--parsable"
        line = f"sbatch {flag} <<'HPCBENCH_EOF'\n{script}HPCBENCH_EOF"
        return Command(("bash", "-c", line), access=self.submit)

    def commands(self, spec: RunSpec) -> list[Command]:
        """The submission as one command (what --dry-run shows besides the script)."""
        return [self.submission(self.script(spec))]

    def describe(self, spec: RunSpec) -> str:
        where = "this machine" if self.submit is None else self.submit.host
        return f"# sbatch on {where}:\n{self.script(spec)}"
