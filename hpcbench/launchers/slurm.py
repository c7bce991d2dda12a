"""Slurm: one sbatch job per run, one task per worker started by srun (pyxis optional).

The script is built by a pure function (`sbatch_script`), unit-tested without
a cluster; hpcbench.schedulers.slurm submits it, polls, reads the job's
output and cancels it.

Rendezvous from Slurm's variables: DDP gets MASTER_ADDR (the first node of
the allocation), RANK=SLURM_PROCID, WORLD_SIZE=SLURM_NTASKS, LOCAL_RANK=
SLURM_LOCALID. Horovod with Gloo gets the HOROVOD_* variables horovodrun
would set, and a Gloo rendezvous server (Horovod's own HTTP store) that rank 0
starts on the first node; Horovod with MPI uses `srun --mpi=pmix`.

In a container (pyxis): the job has one step, the workload's, so the image is
imported or unpacked once per node, into a container pyxis removes when the step
ends, however it ends; every folder the job reads or writes is mounted at its own
path.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from hpcbench.core.ssh import SshAccess
from hpcbench.launchers.base import Command, Launcher, LaunchOptions, RunSpec, register

# The batch script's last line names the workload's exit status.
EXIT_MARKER = "HPCBENCH_SLURM_EXIT"
# A failed setup line's first line in the job's .err, which the scheduler reports.
SETUP_FAILED = "hpcbench: setup failed"

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
# Every task waits for the rendezvous server (bounded: up to 60 s) before its workload;
# rank 0 stops waiting once its server has ended (no python there, a port taken): its
# workload then fails at once and srun ends the step, where every task would otherwise
# hold its node for the whole minute first.
RENDEZVOUS_WAIT = (
    "for _ in $(seq 120); do "
    '(exec 3<>"/dev/tcp/$MASTER_ADDR/$MASTER_PORT") 2>/dev/null && break; '
    '[ -z "${server:-}" ] || kill -0 "$server" 2>/dev/null || break; sleep 0.5; done'
)


def rendezvous(python: str, per_node: int, run: str) -> str:
    """run, once the rendezvous answers. Rank 0 (on the first node:
    --distribution=block) serves it in the background of its own task, in the
    workload's container, so the job needs no second step, and ends it with its
    workload: an orphan could outlive the step where Slurm tracks processes by their
    parents (proctrack/linuxproc). $HPCBENCH_HOSTS: the job's nodes."""
    serve = shlex.join([python, "-c", RENDEZVOUS_PY])
    return (
        f'if [ "$SLURM_PROCID" = 0 ]; then {serve} "$MASTER_PORT" "$HPCBENCH_HOSTS" '
        f'{per_node} "$MASTER_ADDR" & server=$!; fi; {RENDEZVOUS_WAIT}; '
        f'{run}; rc=$?; [ -z "${{server:-}}" ] || kill "$server" 2>/dev/null; exit "$rc"'
    )


def serves_rendezvous(backend: str, controller: str) -> bool:
    """Horovod over Gloo: the job serves the rendezvous horovodrun would serve."""
    return backend == "horovod" and controller == "gloo"


@dataclass(frozen=True)
class SlurmOptions:
    partition: str = ""
    account: str = ""
    qos: str = ""
    gpus_per_node: int = 0  # --gres=gpu:N; 0: none
    time_min: int = 0  # the run's time limit (+ import_s: --time); 0: from its timeout
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
    # CPUs per rank (sbatch and srun --cpus-per-task): given, or the node's CPUs as
    # Slurm reports them (node_cpus, asked before the first job) shared by its ranks.
    cpus_per_task: int = 0
    node_cpus: int = 0
    # Seconds a job may spend importing or unpacking its image before the workload
    # starts, on top of the run's own time; -1: the default for the image's kind.
    container_import_s: int = -1

    @property
    def pyxis(self) -> bool:
        return bool(self.container_image)

    @property
    def import_s(self) -> int:
        """The image's allowance: a registry image is pulled (minutes for an NGC image
        of ~9 GB), a .sqsh file only unpacked; nothing without a container."""
        if not self.pyxis:
            return 0
        if self.container_import_s >= 0:
            return self.container_import_s
        return IMPORT_PATH_S if is_image_path(self.container_image) else IMPORT_REGISTRY_S

    def rank_cpus(self, per_node: int) -> int:
        """--cpus-per-task of a job with per_node ranks on each node (0: not set): the
        node's CPUs shared by the ranks a full node runs (its GPUs, where it has more
        GPUs than this job's ranks), so a one-GPU baseline books one GPU's share."""
        if self.cpus_per_task:
            return self.cpus_per_task
        if not self.node_cpus:
            return 0
        return max(1, self.node_cpus // max(per_node, self.gpus_per_node, 1))


IMPORT_REGISTRY_S = 1800
IMPORT_PATH_S = 300


def is_image_path(image: str) -> bool:
    """pyxis reads an image that starts with '.' or '/' as a squashfs file, anything
    else as a registry reference (pyxis_slurmstepd.c: `strspn(image, "./") > 0`)."""
    return image[:1] in (".", "/")


def image_problem(image: str) -> str | None:
    """Why pyxis would read `image` other than meant (a file taken for a registry
    image), or None."""
    if image.startswith("~"):
        return "pyxis does not expand ~: give the file as /path/x.sqsh or ./x.sqsh"
    if not is_image_path(image) and image.lower().endswith((".sqsh", ".squashfs")):
        return (
            "pyxis reads a name that does not start with / or ./ as a registry image: "
            f"give the file as ./{image} or /path/{image.rsplit('/', 1)[-1]}"
        )
    return None


def mount_problem(mount: str) -> str | None:
    """Why pyxis would refuse or misread SRC:DST[:FLAGS], or None. Its add_mount
    (args.c) takes a source that starts with '.' or '/', or "tmpfs" or "umount", and a
    target that starts with '.' or '/'."""
    src, _, rest = mount.partition(":")
    dst = rest.partition(":")[0]
    if not dst:
        return "give SRC:DST, e.g. /dss/data:/data"
    for what, path in (("source", src), ("target", dst)):
        if path.startswith("~"):
            return f"pyxis does not expand ~ in a mount {what}: give an absolute path"
    if not is_image_path(src) and src not in ("tmpfs", "umount"):
        return "pyxis takes a mount source that starts with / or ./, or tmpfs"
    if not is_image_path(dst):
        return "pyxis takes a mount target that starts with / or ./"
    return None


def shell_path(path: str) -> str:
    """A path as one bash word; `~/` (a login node's home, resolved there before any
    job is submitted) as "$HOME", which bash expands where the script runs."""
    if path.startswith("~/"):
        return '"$HOME"' + shlex.quote(path[1:])
    return shlex.quote(path)


def _minutes(spec: RunSpec, opts: SlurmOptions) -> int:
    """--time: the run's limit (given, or its timeout) and the image's import
    allowance on top, given or not: a limit given for the run alone would leave the
    import none (the first job on a node pulls a ~9 GB NGC image in it)."""
    if opts.time_min:
        return opts.time_min + math.ceil(opts.import_s / 60)
    if not spec.time_limit_s:
        return 60
    return max(1, math.ceil((spec.time_limit_s + opts.import_s) / 60)) + 1


# Options of the workload's scripts that name a folder the job reads or writes.
FOLDER_ARGS = ("--data", "--shared")


def job_folders(workdir: str, args: Sequence[str], opts: SlurmOptions) -> list[str]:
    """Every folder a job in `workdir` with these script arguments uses (bench/, the job
    folder, --data and --shared) that no mount of the user's already brings into the
    container: enroot mounts no home unless the site says so, and a folder left out is
    "No such file or directory"."""
    args = list(args)
    named = [args[i + 1] for i, a in enumerate(args[:-1]) if a in FOLDER_ARGS]
    targets = [m.split(":")[1].rstrip("/") for m in opts.container_mounts]
    found: list[str] = []
    for path in [workdir, opts.job_dir, *named]:
        if not path.startswith(("/", "~/")) or path in found:
            continue  # 'synthetic' data, or no job folder
        if any(path == t or path.startswith(t + "/") for t in targets):
            continue
        found.append(path)
    return found


def container_flags(spec: RunSpec, opts: SlurmOptions) -> list[str]:
    """pyxis options of the job's step: its image, unnamed, so that pyxis makes a
    container for the step and removes it when the step's last task on a node ends,
    however it ends (slurm_spank_task_exit in pyxis_slurmstepd.c: enroot_cleanup
    removes a temporary rootfs; slurmstepd calls it for every task it reaps, a task
    killed by a cancel or a time limit included, mgr.c _wait_for_any_task). A named
    container would outlive the job under pyxis's default container_scope, and no
    step can start to remove it once the job is cancelled. Then the user's mounts and
    every folder the job uses, each at its own path, so the workdir and the arguments
    mean the same inside."""
    q = shlex.quote
    mounts = [q(m) for m in opts.container_mounts]
    mounts += [
        f"{shell_path(f)}:{shell_path(f)}" for f in job_folders(spec.workdir, spec.args, opts)
    ]
    return [
        q(f"--container-image={opts.container_image}"),
        "--container-mounts=" + ",".join(mounts),
        "--container-workdir=" + shell_path(spec.workdir),
    ]


# The first line of some output that is not blank, and the next where it ends with a
# colon: Lmod's "... The following module(s) are unknown:" names the module below.
FIRST_LINES_AWK = (
    'NF { l = l (l ? " " : "") $0; if ($0 !~ /:[[:space:]]*$/ || n++) exit } END { print l }'
)


def setup_lines(setup: str) -> list[str]:
    """The user's own line (module load ...; source activate ...), first: in this
    shell, so that it changes the script's environment, under `set -e`, and checked
    for its status too (set -e ignores a failure inside `a && b`, and so does a brace
    group that holds one: bash(1), "The shell does not exit if the command that fails
    is part of ... a && or || list except the command following the final && or
    ||"). Its output is kept until it is known: on a failure its first line (and the
    next, after a colon: Lmod's unknown module) leads the job's .err, then all of it,
    and the job ends before any srun; on success it goes to .out."""
    return [
        # sbatch runs the script as a non-login bash with the environment it was given:
        # no `module` function unless the site's login profile defines it.
        "type module >/dev/null 2>&1 || . /etc/profile >/dev/null 2>&1",
        "hpcbench_setup_log=$(mktemp)",
        "hpcbench_setup_failed() {",
        f'  cause=$(awk {shlex.quote(FIRST_LINES_AWK)} "$hpcbench_setup_log")',
        f'  [ -n "$cause" ] || cause={shlex.quote("no output from " + setup[:200])}',
        f'  {{ echo "{SETUP_FAILED} (exit $1): $cause"; cat "$hpcbench_setup_log"; }} >&2',
        f'  rm -f "$hpcbench_setup_log"; echo "{EXIT_MARKER} $1"; exit "$1"',
        "}",
        "trap 'hpcbench_setup_failed $(( $? ? $? : 1 ))' EXIT  # it ended the script",
        "set -e",
        "{",
        setup,
        '} >"$hpcbench_setup_log" 2>&1',
        "hpcbench_setup_rc=$?",
        "set +e",
        "trap - EXIT",
        '[ "$hpcbench_setup_rc" = 0 ] || hpcbench_setup_failed "$hpcbench_setup_rc"',
        'cat "$hpcbench_setup_log"; rm -f "$hpcbench_setup_log"',
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
    cd, workload = f"cd {shell_path(spec.workdir)}", shlex.join([python, spec.script, *spec.args])
    if serves_rendezvous(backend, controller):
        run = rendezvous(python, per_node, f"{cd} && {workload}")
    else:
        run = f"{cd} && exec {workload}"
    return f"export {env}; {run}" if env else run


def sbatch_script(
    spec: RunSpec,
    opts: SlurmOptions,
    backend: str,
    controller: str = "gloo",
    job_name: str = "hpcbench",
    cpus_mark: str = "",
) -> str:
    """The whole batch script of one run (a pure function of its inputs). cpus_mark:
    what a dry run shows for --cpus-per-task where the node's CPUs are not known yet."""
    nodes = len(spec.placements)
    per_node = spec.placements[0].slots
    out = f"{opts.job_dir or '/tmp'}/{job_name}-%j"
    # sbatch reads #SBATCH lines with shell-like quoting; the values were checked
    # (hpcbench.measure.scale_options) and are quoted besides.
    q = shlex.quote
    minutes = _minutes(spec, opts)
    head = [
        "#!/bin/bash",
        f"#SBATCH --job-name={q(job_name)}",
        f"#SBATCH --nodes={nodes}",
        f"#SBATCH --ntasks-per-node={per_node}",
        f"#SBATCH --time={minutes}",
        # Slurm removes a job that cannot end by its deadline (start > deadline - time,
        # sbatch(1)), so a job still pending when the queue wait runs out never starts,
        # even where the campaign that waits for it is gone by then. --deadline is read
        # by parse_time() as --begin is (slurm_opt.c arg_set_deadline): now+N minutes.
        f"#SBATCH --deadline=now+{math.ceil(opts.queue_wait_s / 60) + minutes}minutes",
        f"#SBATCH -o {q(out + '.out')}",
        f"#SBATCH -e {q(out + '.err')}",
    ]
    cpus = opts.rank_cpus(per_node) or cpus_mark
    if cpus:  # srun in Slurm 22.05 does not inherit sbatch's -c: both get it
        head.append(f"#SBATCH --cpus-per-task={cpus}")
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

    body = setup_lines(opts.setup) if opts.setup else []
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
    if cpus:
        srun.append(f"--cpus-per-task={cpus}")
    if opts.mpi:
        srun.append(q(f"--mpi={opts.mpi}"))
    if opts.pyxis:
        srun += container_flags(spec, opts)
    if serves_rendezvous(backend, controller):
        body += [
            "export HOROVOD_GLOO_RENDEZVOUS_ADDR=$MASTER_ADDR"
            " HOROVOD_GLOO_RENDEZVOUS_PORT=$MASTER_PORT",
            "export HOROVOD_CONTROLLER=gloo HOROVOD_CPU_OPERATIONS=gloo",
            'export HPCBENCH_HOSTS=$(echo "$nodes" | paste -sd, -)',
        ]
    body += [
        " ".join(srun) + " bash -c " + shlex.quote(task_command(spec, opts, backend, controller)),
        "rc=$?",
    ]
    body += [f'echo "{EXIT_MARKER} $rc"', 'exit "$rc"']
    return "\n".join(head + [""] + body) + "\n"


@register
class SlurmLauncher(Launcher):
    """`sbatch` per run; works with Horovod (Gloo or MPI) and DDP."""

    name = "slurm"
    scheduler = "slurm"

    @classmethod
    def from_spec(cls, spec: LaunchOptions, login: SshAccess | None) -> Launcher:
        return cls(spec.slurm, spec.horovod_controller, spec.backend, login)

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

    def container_only(self, data: str, workdir: str) -> bool:
        """Under pyxis, a path is the container's unless the job mounts it at its own
        path (job_folders): a user's mount shows it at another one."""
        return (
            bool(self.options.container_image)
            and data.startswith("/")
            and data not in job_folders(workdir, ("--data", data), self.options)
        )

    def check(self, spec: RunSpec, backend: str) -> str | None:
        if len({p.slots for p in spec.placements}) > 1:
            return "the slurm launcher needs the same number of workers on every node"
        return super().check(spec, backend)

    def script(self, spec: RunSpec, job_name: str = "hpcbench") -> str:
        return sbatch_script(spec, self.options, self.backend, self.controller, job_name)

    def submission(self, test_only: bool = False) -> Command:
        """sbatch where sbatch runs, the batch script given on its stdin ("If no file
        name is specified, sbatch reads the script from standard input", sbatch(1); ssh
        passes stdin on): no heredoc, so no line of the script can end it early. It
        prints the job id (with test_only, when the job would start: Slurm checks it and
        queues nothing)."""
        return Command(("sbatch", "--test-only" if test_only else "--parsable"), access=self.submit)

    def commands(self, spec: RunSpec) -> list[Command]:
        """The submission as one command (what --dry-run shows besides the script)."""
        return [self.submission()]

    def describe(self, spec: RunSpec) -> str:
        where = "this machine" if self.submit is None else self.submit.host
        return f"# sbatch on {where}:\n{self.script(spec)}"
