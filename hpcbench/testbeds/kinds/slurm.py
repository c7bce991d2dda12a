"""A Slurm partition (`--env slurm`, a campaign's `slurm:`): the nodes Slurm allocates to
each job, seen from a login node (this machine, or one reached with --slurm-login) with
a shared file system. Each run is a batch job that waits in the queue and books its own
nodes while it runs; Slurm shares the nodes out, so hpcbench marks nothing busy."""

from __future__ import annotations

import dataclasses
import shlex
import sys
from pathlib import Path
from typing import cast

from hpcbench import launchers
from hpcbench.core import paths, ssh
from hpcbench.core.errors import UsageError
from hpcbench.launchers.base import RunSpec
from hpcbench.launchers.slurm import SlurmLauncher
from hpcbench.launchers.specs import TargetSpec
from hpcbench.testbeds import manifest
from hpcbench.testbeds.kinds.base import Kind, Target, register
from hpcbench.testbeds.nodeset import Node, Testbed

CLUSTER_NODES = 64  # the most nodes `--env slurm` offers; Slurm refuses what it lacks


@register
class Slurm(Kind):
    name = "slurm"
    reported_as = "slurm"
    campaign_key = "slurm"
    described = "a partition of a cluster you use"
    gives_nodes = "slurm: nodes gives"
    queued = True
    releasing = "its job in flight, if any, is cancelled; nothing else is held"
    # A partition's campaign keys, and the `scale` option each becomes (--env slurm).
    campaign_options = {
        "partition": "--partition",
        "account": "--account",
        "qos": "--qos",
        "gpus_per_node": "--slurm-gpus",
        "time": "--slurm-time",
        "sbatch": "--sbatch",
        "login": "--slurm-login",
        "ssh_key": "--slurm-ssh-key",
        "known_hosts": "--slurm-known-hosts",
        "container_image": "--container-image",
        "container_mounts": "--container-mounts",
        "container_python": "--container-python",
        "python": "--slurm-python",
        "bench_dir": "--slurm-bench-dir",
        "job_dir": "--slurm-job-dir",
        "setup": "--slurm-setup",
        "queue_wait": "--slurm-queue-wait",
        "cpus_per_task": "--slurm-cpus-per-task",
        "container_import": "--container-import-time",
        "nodes": None,
    }
    # Keys whose value is a count: a number there is checked as one (1.5 is named).
    counts = ("gpus_per_node", "cpus_per_task")
    # Keys that bound how long or say how the cluster is reached, not what is
    # measured: not part of a cell's identity.
    operational = (
        "time",
        "queue_wait",
        "container_import",
        "job_dir",
        "ssh_key",
        "known_hosts",
    )

    def testbed(self, spec: TargetSpec) -> Testbed:
        return testbed(spec.gpus_per_node, spec.slurm.python, spec.slurm.bench_dir)

    def launcher(self, spec: TargetSpec, tb: Testbed) -> launchers.Launcher:
        """sbatch on the cluster's login node: this machine, or --slurm-login over SSH."""
        if spec.launcher not in ("auto", SlurmLauncher.name):
            raise UsageError(f"--env slurm runs with the slurm launcher, not {spec.launcher}")
        return SlurmLauncher.from_spec(spec, spec.slurm.login)

    def lock_files(self, tb: Testbed) -> list[Path]:
        return []  # Slurm shares the nodes out itself

    def preflight(self, target: Target, largest: RunSpec) -> None:
        """The partition exists, is up and accepts the sweep's largest job (its account
        and qos) before anything is submitted."""
        target.scheduler.preflight(largest)

    def prepare(self, target: Target) -> None:
        """This checkout's bench/ on the login node reached over SSH; the nodes' CPUs."""
        # launcher() above made it: a partition's runs are batch jobs.
        place_on_login(target, cast(SlurmLauncher, target.launcher))
        target.scheduler.prepare()

    def login_sees_node_files(self) -> bool:
        return True  # a cluster's login node shares its file systems with the nodes


def testbed(gpus_per_node: int | None, python: str = "", bench_dir: str = "") -> Testbed:
    """The stack's Python and bench/ on the login node (--slurm-python,
    --slurm-bench-dir), this machine's where they are not given (sbatch runs here), or
    the container's Python."""
    nodes = [Node(f"slurm{i}", "", gpus_per_node or 0, None) for i in range(CLUSTER_NODES)]
    return Testbed(
        env=Slurm.name,
        nodes=nodes,
        head=nodes[0].name,
        kind=Slurm.name,
        python=python or sys.executable,
        bench_dir=bench_dir or str(paths.BENCH_DIR),
    )


def place_on_login(target: Target, launcher: SlurmLauncher) -> None:
    """`~/` of --slurm-bench-dir and the job folder resolved on the login node, and
    this checkout's bench/ there (copied when its manifest differs, then checked);
    nothing where sbatch runs on this machine, whose checkout the jobs see."""
    if launcher.submit is None:
        return
    login, opts = launcher.submit, launcher.options
    where = f"login node {login.host}"
    home = ssh.call(login, 'printf %s "$HOME"')
    if not home.ok or not home.stdout.startswith("/"):
        raise UsageError(f"{where} is unreachable over SSH: {home.problem or 'no $HOME'}")

    def resolved(path: str) -> str:
        return home.stdout.rstrip("/") + path[1:] if path.startswith("~/") else path

    bench, jobs = resolved(target.testbed.bench_dir), resolved(opts.job_dir)
    target.testbed.bench_dir = bench
    launcher.options = dataclasses.replace(opts, bench_dir=bench, job_dir=jobs)
    expected = manifest.compute(paths.BENCH_DIR)
    # The manifest, if the files still match it (sha256sum checks each one).
    listing = (
        f"cd {shlex.quote(bench)} 2>/dev/null && sha256sum --check --quiet "
        f"{manifest.MANIFEST_FILE} >/dev/null 2>&1 && cat {manifest.MANIFEST_FILE}"
        " || true"
    )
    first = ssh.call(login, f"mkdir -p {shlex.quote(jobs)}; {listing}")
    if manifest.matches(expected, first.stdout):
        return
    unpack = manifest.unpack_command(bench, jobs)
    reply = ssh.send(login, unpack, manifest.pack(paths.BENCH_DIR))
    if not reply.ok or not manifest.matches(expected, ssh.call(login, listing).stdout):
        why = reply.problem or "its manifest differs after the copy"
        raise UsageError(f"{where}: bench/ could not be placed in {bench}: {why}")
