"""Slurm: one sbatch job per run, one task per worker started by srun (pyxis optional).

The script is built by a pure function (`sbatch_script`), unit-tested without
a cluster; hpcbench.schedulers.slurm submits it, polls, reads the job's
output and cancels it.

Rendezvous from Slurm's variables: DDP gets MASTER_ADDR (the first node of
the allocation), RANK=SLURM_PROCID, WORLD_SIZE=SLURM_NTASKS, LOCAL_RANK=
SLURM_LOCALID. Horovod with Gloo gets the HOROVOD_* variables horovodrun
would set, and a Gloo rendezvous server (Horovod's own HTTP store) that the
job starts on its first node; Horovod with MPI uses `srun --mpi=pmix`.

In a container (pyxis): the image is imported or unpacked once per node for the
whole job, as a named container that every step reuses and the job removes at its
end; every folder the job reads or writes is mounted at its own path.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass

from hpcbench.launchers.base import Command, Launcher, RunSpec
from hpcbench.ssh import SshAccess

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


def job_folders(spec: RunSpec, opts: SlurmOptions) -> list[str]:
    """Every folder the job uses (bench/, the job folder, --data and --shared) that no
    mount of the user's already brings into the container: enroot mounts no home
    unless the site says so, and a folder left out is "No such file or directory"."""
    args = list(spec.args)
    named = [args[i + 1] for i, a in enumerate(args[:-1]) if a in FOLDER_ARGS]
    targets = [m.split(":")[1].rstrip("/") for m in opts.container_mounts]
    found: list[str] = []
    for path in [spec.workdir, opts.job_dir, *named]:
        if not path.startswith(("/", "~/")) or path in found:
            continue  # 'synthetic' data, or no job folder
        if any(path == t or path.startswith(t + "/") for t in targets):
            continue
        found.append(path)
    return found


def container_flags(spec: RunSpec, opts: SlurmOptions, name: str) -> list[str]:
    """pyxis options of the job's steps: the job's named container (made by the
    script's first step), the user's mounts and every folder the job uses, each at its
    own path, so the workdir and the arguments mean the same inside."""
    q = shlex.quote
    mounts = [q(m) for m in opts.container_mounts]
    mounts += [f"{shell_path(f)}:{shell_path(f)}" for f in job_folders(spec, opts)]
    return [
        q(f"--container-name={name}"),
        "--container-mounts=" + ",".join(mounts),
        "--container-workdir=" + shell_path(spec.workdir),
    ]


# The job's container on one node, removed in the time Slurm gives a job's steps
# between SIGTERM and SIGKILL, however the job ends: its end, scancel or its time limit
# (slurmd req.c:5356-5369 _rpc_terminate_job sends every step, the batch script's
# too, SIGCONT and SIGTERM, then :5423 waits MAX(KillWait, 5) s before SIGKILL;
# :3807-3876 _rpc_timelimit first). argv: the container, KillWait. It says "ready"
# once its trap is set, then holds none of its step's output; on the signal it waits
# (half of the time) for the container's processes to end, which `enroot list
# --fancy` lists by PID, then removes it.
JANITOR_SH = (
    "n=$1; w=$(( $2 > 5 ? $2 : 5 )); "
    'busy() { enroot list --fancy 2>/dev/null | awk -v n="$n" '
    "'$1 == n && $2 ~ /^[0-9]+$/ {b = 1} END {exit !b}'; }; "
    'left() { enroot list 2>/dev/null | grep -qxF -- "$n"; }; '
    'clean() { trap "" TERM HUP INT; t=$SECONDS; '
    "while busy && [ $((SECONDS - t)) -lt $((w / 2)) ]; do sleep 0.2; done; "
    "while left && [ $((SECONDS - t)) -lt $((w - 1)) ]; do "
    'enroot remove --force "$n" >/dev/null 2>&1 || sleep 0.5; done; exit 0; }; '
    "trap clean TERM HUP INT; echo ready; exec >/dev/null 2>&1 </dev/null; "
    "while :; do sleep 60 & wait $!; done"
)


def container_steps(spec: RunSpec, opts: SlurmOptions, name: str) -> list[str]:
    """The lines that make the job's container on each of its nodes before the
    workload, and remove it however the job ends. pyxis imports an unnamed container
    again for every step (pyxis_slurmstepd.c gives each step a temporary rootfs); a
    named one is made once and reused (its "reusing existing container filesystem"),
    and under pyxis's default container_scope it outlives the job unless removed (a
    site's container_scope=job has pyxis remove it; then this finds none).

    No step can start once a job is cancelled, so the exit trap's `srun enroot
    remove` serves the normal end alone. A janitor step (JANITOR_SH), one task per
    node outside the container, started before the container is made and running
    beside every other step (--overlap), removes it in the time Slurm gives steps
    after its SIGTERM. Its srun stays: an srun that dies or gets SIGTERM asks
    slurmctld to kill its step (srun_job.c:2245-2298, the shepherd; step_launch.c:
    667), which slurmctld refuses once the job has ended (step_mgr.c:621), and grants
    while it runs."""
    nodes = len(spec.placements)
    per_node = ["srun", "--overlap", f"--ntasks={nodes}", "--ntasks-per-node=1"]
    remove = [*per_node, "enroot", "remove", "--force", f"pyxis_{name}"]
    make = [*per_node[:1], *per_node[2:]]
    make += [f"--container-image={opts.container_image}", f"--container-name={name}", "true"]
    janitor = [*per_node, "bash", "-c", JANITOR_SH, "janitor", f"pyxis_{name}"]
    return [
        "# the container removed however the job ends: a janitor on each node, which",
        "# Slurm's SIGTERM at the job's end (or cancel, or time limit) sets to work",
        "kill_wait=$(scontrol show config 2>/dev/null | awk '$1 == \"KillWait\" {print $3}')",
        "janitor_log=$(mktemp)",
        shlex.join(janitor) + ' "${kill_wait:-30}" >"$janitor_log" 2>&1 &',
        "janitor=$!",
        "for _ in $(seq 600); do  # bounded: up to 60 s for every node's janitor",
        f'  [ "$(grep -c "^ready$" "$janitor_log")" -ge {nodes} ] && break',
        '  kill -0 "$janitor" 2>/dev/null || break; sleep 0.1',
        "done",
        f'[ "$(grep -c "^ready$" "$janitor_log")" -ge {nodes} ] ||'
        ' echo "hpcbench: janitor not ready: $(head -c 300 "$janitor_log" | tr "\\n" " ")"',
        'rm -f "$janitor_log"',
        f"trap {shlex.quote(shlex.join(remove) + ' >/dev/null 2>&1')} EXIT",
        "# the image imported (or unpacked) once per node; every step below reuses it",
        shlex.join(make) + f' || {{ rc=$?; echo "{EXIT_MARKER} $rc"; exit "$rc"; }}',
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
    run = f"cd {shell_path(spec.workdir)} && exec " + shlex.join([python, spec.script, *spec.args])
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
    # (hpcbench.scale_options) and are quoted besides.
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
    flags = container_flags(spec, opts, job_name) if opts.pyxis else []
    srun += flags
    if opts.pyxis:
        body += container_steps(spec, opts, job_name)
    gloo_horovod = backend == "horovod" and controller == "gloo"
    if gloo_horovod:
        python = opts.container_python if opts.pyxis else spec.python
        rendezvous = [
            "srun",
            "--overlap",
            "--nodes=1",
            "--ntasks=1",
            '--nodelist="$MASTER_ADDR"',
            *flags,
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
