"""`scale`'s and `probe`'s options, and the one place they become specs.

The command line registers both commands here (`add_commands`); a campaign file's
sweep is read with the same parser (`scale_parser`), so a sweep key is a `scale`
option. The argparse Namespace stops here: it is validated once and turned into
frozen WorkloadSpec, TargetSpec, SweepSpec and ProbeSpec; hpcbench.measure.sweep and
hpcbench.measure.probe take only those. Bad input is a UsageError naming the bad
value (exit status 2, nothing launched).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
from pathlib import Path

from hpcbench import launchers
from hpcbench.core import paths
from hpcbench.core.bench import cnns, transformer_configs, units, workload_options
from hpcbench.core.errors import Parser, UsageError
from hpcbench.core.ssh import SshAccess
from hpcbench.launchers import sbatch_options, slurm
from hpcbench.launchers.parse import (
    IMAGE,
    MOUNT,
    SAFE_PATH,
    WORD,
    check_path,
    check_text,
    count_type,
    duration_type,
    megabytes_type,
    parse_batch,
    parse_hosts,
    parse_login,
    parse_nodes,
    parse_size,
    seconds_type,
    target_ci_type,
)
from hpcbench.launchers.slurm import SlurmOptions
from hpcbench.launchers.specs import ProbeSpec, SweepSpec, TargetSpec, WorkloadSpec
from hpcbench.measure import identity, probe, sweep
from hpcbench.performance import sharded_model
from hpcbench.testbeds import kinds
from hpcbench.testbeds.kinds.deployed import Local

# Where --slurm-login keeps bench/ and the jobs' output on the cluster, below the login
# user's home (which the compute nodes share on the clusters this serves); `~/` is
# resolved on the login node before the first job (hpcbench.testbeds.target).
REMOTE_BENCH_DIR = "~/.cache/hpcbench/bench"
REMOTE_JOB_DIR = "~/.cache/hpcbench/slurm"


# ------------------------------------------------------------------ options
def add_target_arguments(parser: argparse.ArgumentParser, nodes_default: str) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--env",
        default=os.environ.get("HPCBENCH_ENV", Local.name),
        help="deployed environment whose inventory lists the nodes, or 'localhost' for "
        "worker processes on this machine (default: $HPCBENCH_ENV or local)",
    )
    where.add_argument("--hosts", help="ad-hoc nodes host:slots,... reached with your SSH setup")
    parser.add_argument("--nodes", default=nodes_default, help="node counts: 1-10 or 1,2,4,8")
    parser.add_argument(
        "--gpus-per-node",
        type=count_type("gpus-per-node"),
        default=None,
        help="workers per node (default: the node's GPUs, else 1)",
    )
    parser.add_argument("--backend", default="horovod", choices=workload_options.BACKENDS)
    parser.add_argument(
        "--launcher",
        default="auto",
        # Checked as it is read: a campaign's sweep key is refused by `campaign plan`,
        # not when its testbed is already deployed.
        choices=["auto", *launchers.LAUNCHERS.names()],
        help="auto (horovodrun for horovod, torchrun for ddp), "
        f"or one of {', '.join(launchers.LAUNCHERS.names())}",
    )
    parser.add_argument("--horovod-controller", default="gloo", choices=["gloo", "mpi"])
    parser.add_argument("--out", default="results", help="results directory (default: results/)")
    parser.add_argument(
        "--timeout",
        type=count_type("timeout"),
        default=1800,
        help="seconds per run before it is killed",
    )
    add_slurm_arguments(parser)


def add_slurm_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("slurm launcher (--launcher slurm, or --env slurm)")
    g.add_argument("--partition", default="", help="sbatch --partition")
    g.add_argument("--account", default="", help="sbatch --account")
    g.add_argument("--qos", default="", help="sbatch --qos")
    g.add_argument(
        "--slurm-gpus",
        type=count_type("slurm-gpus"),
        default=None,
        help="GPUs per node to request (--gres=gpu:N); default: the workers per node "
        "when --gpus-per-node is given and --device is not cpu, else none",
    )
    g.add_argument(
        "--slurm-time",
        type=count_type("slurm-time"),
        default=0,
        help="the run's time limit in minutes; a job in a container gets its image's "
        "import time (--container-import-time) on top (default: from --timeout)",
    )
    g.add_argument(
        "--container-image",
        default="",
        help="pyxis: run the workers in this image (registry image or .sqsh)",
    )
    g.add_argument(
        "--container-mounts",
        default="",
        help="pyxis: SRC:DST[,SRC:DST...], absolute or ./ paths (bench/, the job folder "
        "and --data are mounted at their own paths without it)",
    )
    g.add_argument(
        "--container-import-time",
        type=count_type("container-import-time"),
        default=-1,
        metavar="SECONDS",
        help="pyxis: time a job may take to import or unpack its image, on top of the "
        "run's (default 1800 for a registry image, 300 for a .sqsh file)",
    )
    g.add_argument(
        "--slurm-cpus-per-task",
        type=count_type("slurm-cpus-per-task"),
        default=0,
        help="CPUs per rank (sbatch and srun --cpus-per-task); default: the node's CPUs "
        "as sinfo reports them, shared by the ranks a full node runs",
    )
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
        type=count_type("slurm-queue-wait"),
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
    g.add_argument(
        "--slurm-login",
        default="",
        metavar="[USER@]HOST[:PORT]",
        help="--env slurm: the login node where sbatch runs, over one multiplexed SSH "
        "connection with its host key checked (default: this machine is the login node)",
    )
    g.add_argument("--slurm-ssh-key", default="", help="identity file for --slurm-login")
    g.add_argument(
        "--slurm-known-hosts",
        default="",
        help="known_hosts file holding --slurm-login's host key (default: your ssh's)",
    )
    g.add_argument(
        "--slurm-python",
        default="",
        help="--env slurm without a container: the Python on the nodes that holds the "
        "stack (a venv or conda environment on the shared file system); default: this "
        "machine's where sbatch runs here",
    )
    g.add_argument(
        "--slurm-bench-dir",
        default="",
        help=f"--env slurm: bench/ on the cluster's shared file system; default: this "
        f"checkout's where sbatch runs here, else {REMOTE_BENCH_DIR} on the login node "
        "(copied there and checked before the first job)",
    )
    g.add_argument(
        "--slurm-setup",
        default="",
        metavar="LINE",
        help="one shell line the batch script runs first, e.g. 'module load anaconda3 && "
        "source activate hb'",
    )


# The parsers of the workload's option kinds (bench/workload_options.py), the harness's:
# bad input is one line naming the option, before anything is launched.
WORKLOAD_PARSERS = {"count": count_type, "megabytes": megabytes_type, "seconds": seconds_type}


def add_workload_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch", default="32,64,96", help="per-worker batch sizes: 32,64,96")
    workload_options.add_to(p, WORKLOAD_PARSERS)
    p.add_argument("--repeats", type=count_type("repeats"), default=3)
    p.add_argument(
        "--target-ci",
        type=target_ci_type(),
        default=0.05,
        help="run a configuration again while its throughput's 95%% interval is wider than "
        "this share (default 5%%), up to --max-repeats runs and within --budget",
    )
    p.add_argument(
        "--max-repeats",
        type=count_type("max-repeats"),
        default=0,
        help="most runs per configuration (default: --repeats, i.e. no extra runs)",
    )
    p.add_argument(
        "--budget",
        type=duration_type("budget"),
        default=None,
        help="no extra repeat starts after this much sweep time: 90s, 30m, 2h",
    )


# -------------------------------------------------------- Namespace -> specs
def sbatch_option(text: str) -> str:
    """--sbatch: verbatim, but one #SBATCH line: an option, no line breaks, no '#'
    (sbatch ends an #SBATCH line's value at a '#': nvcr.io#nvidia/... would be cut)."""
    if not text.startswith("-") or any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise UsageError(f"--sbatch: {text[:60]!r} is not one sbatch option like --exclusive")
    if "#" in text:
        raise UsageError(
            f"--sbatch: {text[:60]!r} holds '#', where sbatch ends an #SBATCH line's value; "
            "an image goes in --container-image (campaign key container_image)"
        )
    return text


def extra_sbatch(texts: list[str]) -> tuple[str, ...]:
    """--sbatch's options, each one #SBATCH line (sbatch_option), read together as
    sbatch reads them: one that sets what hpcbench keeps (the job's name, output,
    time, deadline, ...; hpcbench.launchers.sbatch_options), however spelled, is
    refused, and so are lines sbatch itself would refuse."""
    extra = tuple(sbatch_option(x) for x in texts)
    why = sbatch_options.owned_problem(extra)
    if why:
        raise UsageError(f"--sbatch: {why}")
    return extra


def slurm_options(args: argparse.Namespace, cluster: bool) -> SlurmOptions:
    """--slurm-* and --sbatch checked and read (cluster: the runs are jobs of a
    partition's queue, submitted on its login node; else a testbed's own Slurm)."""
    for flag in ("partition", "account", "qos", "slurm_mpi"):
        if getattr(args, flag):
            check_text(getattr(args, flag), f"--{flag.replace('_', '-')}", WORD, "a Slurm name")
    if args.container_image:
        check_text(args.container_image, "--container-image", IMAGE, "an image or .sqsh path")
        why = slurm.image_problem(args.container_image)
        if why:
            raise UsageError(f"--container-image: {args.container_image[:60]!r}: {why}")
    mounts = tuple(m for m in args.container_mounts.split(",") if m)
    for flag, given in (
        ("--container-mounts", bool(mounts)),
        ("--container-import-time", args.container_import_time >= 0),
    ):
        if given and not args.container_image:  # no container: pyxis would never see it
            raise UsageError(
                f"{flag} is for jobs in a container: give --container-image (campaign key "
                "container_image) too"
            )
    for mount in mounts:
        check_text(mount, "--container-mounts", MOUNT, "SRC:DST[:FLAGS] of plain paths")
        why = slurm.mount_problem(mount)
        if why:
            raise UsageError(f"--container-mounts: {mount[:60]!r}: {why}")
    check_text(args.container_python, "--container-python", SAFE_PATH, "a plain path")
    if args.slurm_job_dir:
        check_text(args.slurm_job_dir, "--slurm-job-dir", SAFE_PATH, "a plain path")
    gpus = args.slurm_gpus
    if gpus is None:
        gpus = args.gpus_per_node if args.gpus_per_node and args.device != "cpu" else 0
    login = login_access(args)  # checked whatever --env, as every option's value is
    if not cluster:
        login = None
    job_dir = args.slurm_job_dir
    if cluster and not job_dir:  # on the cluster's shared file system, where sbatch runs
        job_dir = REMOTE_JOB_DIR if login else str(Path(args.out).resolve() / "slurm")
    if job_dir:
        check_text(job_dir, "--slurm-job-dir", SAFE_PATH, "a plain path")
    if job_dir.startswith("~") and not login:  # sbatch and mkdir would take it literally
        raise UsageError(
            f"--slurm-job-dir: {job_dir[:60]!r}: ~ is the home of a --slurm-login node, "
            "resolved there; without one give an absolute path"
        )
    for flag in ("slurm_python", "slurm_bench_dir"):
        if getattr(args, flag):
            check_text(
                getattr(args, flag), f"--{flag.replace('_', '-')}", SAFE_PATH, "a plain path"
            )
    if cluster and not login:  # sbatch runs here, with this environment's SBATCH_*
        sets = {k for k in ("partition", "account", "qos") if getattr(args, k)}
        why = sbatch_options.env_problem(dict(os.environ), sets | ({"gres"} if gpus else set()))
        if why:
            raise UsageError(why)
    if login and not args.container_image and not args.slurm_python:
        raise UsageError(
            "--slurm-login without --container-image needs --slurm-python: the "
            "stack's Python on the cluster (a venv or conda environment)"
        )
    if any(ord(c) < 32 or ord(c) == 127 for c in args.slurm_setup) or len(args.slurm_setup) > 2000:
        raise UsageError(
            "--slurm-setup: one line of shell (no line breaks or control characters, at most 2000)"
        )
    return SlurmOptions(
        partition=args.partition,
        account=args.account,
        qos=args.qos,
        gpus_per_node=gpus,
        time_min=args.slurm_time,
        container_image=args.container_image,
        container_mounts=mounts,
        container_python=args.container_python,
        mpi=args.slurm_mpi or ("pmix" if args.horovod_controller == "mpi" else ""),
        job_dir=job_dir,
        pin_nodes=not cluster,  # --env slurm: Slurm chooses the nodes
        queue_wait_s=args.slurm_queue_wait,
        extra=extra_sbatch(args.sbatch),
        login=login,
        python=args.slurm_python,
        bench_dir=args.slurm_bench_dir or (REMOTE_BENCH_DIR if login else ""),
        setup=args.slurm_setup,
        cpus_per_task=args.slurm_cpus_per_task,
        container_import_s=args.container_import_time,
    )


def login_access(args: argparse.Namespace) -> SshAccess | None:
    """--slurm-login as the SSH access sbatch runs through (None: this machine)."""
    if not args.slurm_login:
        for flag in ("slurm_ssh_key", "slurm_known_hosts"):
            if getattr(args, flag):
                raise UsageError(
                    f"--{flag.replace('_', '-')} is for --slurm-login: give both, or neither"
                )
        return None
    user, host, port = parse_login(args.slurm_login)
    for flag in ("slurm_ssh_key", "slurm_known_hosts"):
        if getattr(args, flag):
            check_path(getattr(args, flag), f"--{flag.replace('_', '-')}")
    return SshAccess(
        host=host,
        port=port,
        user=user,
        key_file=args.slurm_ssh_key or None,
        known_hosts=args.slurm_known_hosts or None,
        multiplex=str(paths.ssh_control_dir()),
    )


def target_spec(args: argparse.Namespace) -> TargetSpec:
    hosts = tuple(parse_hosts(args.hosts)) if args.hosts is not None else ()
    check_path(args.out, "--out")
    spec = TargetSpec(
        env=args.env,
        node_counts=tuple(parse_nodes(args.nodes)),  # the testbed bounds them once resolved
        hosts=hosts,
        gpus_per_node=args.gpus_per_node,
        backend=args.backend,
        launcher=args.launcher,
        horovod_controller=args.horovod_controller,
        given=tuple(identity.target_given(args, scale_parser()).items()),
    )
    cluster = kinds.for_target(spec).queues_jobs
    return dataclasses.replace(spec, slurm=slurm_options(args, cluster))


def probe_spec(
    args: argparse.Namespace, collectives: tuple[str, ...] = ProbeSpec.collectives
) -> ProbeSpec:
    parse_size(args.probe_max_bytes, "--probe-max-bytes")
    return ProbeSpec(
        args.probe_max_bytes,
        args.device,
        args.threads,
        args.timeout,
        args.probe_budget,
        collectives,
    )


def workload_spec(args: argparse.Namespace) -> WorkloadSpec:
    models = cnns.MODELS
    if transformer_configs.is_config_path(args.model):
        # A config.json: the model it describes by its name (folder@hash), in the options
        # too, so that a run's record and a campaign cell's identity name the model alike
        # wherever its file lies.
        config = sharded_model.shape(args.model)
        assert config is not None  # a path's model is read, or refused in one line
        args.model = config.name
    transformer = transformer_configs.is_transformer(args.model)
    if args.model not in models and not transformer:
        names = sorted([*models, *transformer_configs.CONFIGS])
        raise UsageError(
            f"unknown model {args.model!r}: choose one of {', '.join(names)}, or give a "
            "Hugging Face config.json's path"
        )
    why = transformer_configs.problem_of(args) or workload_options.grouping_problem(
        args.backend, args.bucket_cap_mb, args.fusion_threshold_mb
    )
    if why:
        raise UsageError(why)
    if args.data != "synthetic":
        check_path(args.data, "--data")
        if args.data.startswith("-"):  # bench/train.py would read it as an option
            raise UsageError(f"--data: {args.data[:60]!r} is not a path; write ./{args.data}")
    if args.compile_backend != "inductor" and args.step != "compile":
        raise UsageError(
            f"--compile-backend {args.compile_backend} is for --step compile: add it, or drop "
            "--compile-backend"
        )
    if args.step == "graph" and args.device == "cpu":
        raise UsageError(
            "--step graph needs CUDA (CUDA graphs): drop --device cpu, or use "
            "--step eager or compile"
        )
    seq_len, image_size = 0, 0
    if transformer:
        config = transformer_configs.resolve(args.model)  # known: checked above
        seq_len = transformer_configs.resolve_seq_len(config, args.seq_len)
    else:
        image_size = args.image_size or models[args.model]["image_size"]  # bounded by its type
    return WorkloadSpec(
        model=args.model,
        image_size=image_size,
        data=args.data,
        data_workers=args.data_workers,
        warmup=args.warmup,
        windows=args.windows,
        steps=args.steps,
        min_window_s=args.min_window_s,
        device=args.device,
        threads=args.threads,
        amp=args.amp,
        step=args.step,
        compile_backend=args.compile_backend,
        decode=args.decode,
        fp16_allreduce=args.fp16_allreduce,
        fusion_threshold_mb=args.fusion_threshold_mb,
        bucket_cap_mb=args.bucket_cap_mb,
        seq_len=seq_len,
        parallel=args.parallel,
        shard_group=args.shard_group,
        tp=args.tp,
        grad_accum=args.grad_accum,
        activation_checkpoint=args.activation_checkpoint,
    )


def sweep_spec(args: argparse.Namespace) -> SweepSpec:
    # FSDP2 and HSDP also all-gather and reduce-scatter: their sweeps probe those too.
    sharded = args.parallel != "ddp"
    probe_of_sweep = probe_spec(args, units.COLLECTIVES if sharded else ("all_reduce",))
    # (checked even with --no-probe, as before)
    return SweepSpec(
        batches=tuple(parse_batch(args.batch)),
        out=Path(args.out),
        repeats=args.repeats,
        seed=args.seed,
        resume=args.resume,
        probe=None if args.no_probe else probe_of_sweep,
        timeout_s=args.timeout,
        dry_run=args.dry_run,
        verbose=args.verbose,
        target_ci=args.target_ci,
        max_repeats=_max_repeats(args.max_repeats, args.repeats),
        budget_s=args.budget,
    )


def _max_repeats(most: int, repeats: int) -> int:
    if most and most < repeats:
        raise UsageError(f"--max-repeats {most} is below --repeats {repeats}: raise it or drop it")
    return most or repeats


# ----------------------------------------------------------------- commands
def scale_main(args: argparse.Namespace) -> int:
    workload = workload_spec(args)
    return sweep.run(workload, target_spec(args), sweep_spec(args))


def probe_main(args: argparse.Namespace) -> int:
    spec = probe_spec(args, args.collectives)
    return probe.run(target_spec(args), spec, Path(args.out))


def add_scale_arguments(p: argparse.ArgumentParser) -> None:
    add_target_arguments(p, nodes_default="1-10")
    add_workload_arguments(p)
    p.add_argument("--seed", type=count_type("seed"), default=0, help="seed of the run order")
    p.add_argument("--resume", action="store_true", help="skip runs the store already holds")
    p.add_argument("--no-probe", action="store_true", help="skip the all-reduce probe")
    p.add_argument("--probe-max-bytes", default="64M")
    add_probe_budget(p, probe.SWEEP_DEFAULT_HELP)
    p.add_argument("--verbose", action="store_true", help="echo the workers' output")
    p.add_argument(
        "--dry-run", action="store_true", help="print what each run would launch; run nothing"
    )


def add_probe_budget(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument(
        "--probe-budget",
        type=duration_type("probe-budget"),
        default=None,
        help="each probe starts no message size after this long (90s, 5m), keeps the "
        f"sizes it completed and is killed {probe.GRACE_S} s after; default: "
        + default.replace("%", "%%"),  # argparse expands % in help
    )


@functools.cache
def scale_parser() -> argparse.ArgumentParser:
    """`scale`'s options alone, for a campaign file's sweep: what the command line
    accepts, checked by the same parser (built once; parsing leaves it unchanged)."""
    p = Parser(prog="hpcbench scale")
    add_scale_arguments(p)
    return p


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    """The `scale` and `probe` commands, in the order `--help` lists them."""
    p = subparsers.add_parser(
        "scale",
        help="measure how data-parallel training scales",
        description=sweep.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_scale_arguments(p)
    p.set_defaults(func=scale_main)

    p = subparsers.add_parser(
        "probe", help="measure all-reduce bus bandwidth on the nodes", description=probe.__doc__
    )
    add_target_arguments(p, nodes_default="2")
    workload_options.add_to(p, WORKLOAD_PARSERS, only=("--device", "--threads"))
    p.add_argument("--probe-max-bytes", default="64M", help="largest message (default 64M)")
    p.add_argument(
        "--collectives",
        type=units.argtype(lambda _name, text: units.parse_collectives(text), "collectives"),
        default=("all_reduce",),
        help="all_reduce, then any of all_gather, reduce_scatter (FSDP's), comma-separated",
    )
    add_probe_budget(p, "--timeout")
    p.set_defaults(func=probe_main)
