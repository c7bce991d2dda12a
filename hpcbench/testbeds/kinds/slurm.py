"""A Slurm partition (`--env slurm`, a campaign's `slurm:`): the nodes Slurm allocates to
each job, seen from a login node (this machine, or one reached with --slurm-login) with
a shared file system. Each run is a batch job that waits in the queue and books its own
nodes while it runs; Slurm shares the nodes out, so hpcbench marks nothing busy."""

from __future__ import annotations

import dataclasses
import shlex
import sys
from pathlib import Path
from typing import Any, cast

from hpcbench import launchers
from hpcbench.core import paths, ssh
from hpcbench.core.errors import Problem, UsageError
from hpcbench.launchers.base import RunSpec
from hpcbench.launchers.parse import parse_login
from hpcbench.launchers.slurm import SlurmLauncher
from hpcbench.launchers.specs import TargetSpec
from hpcbench.testbeds import manifest
from hpcbench.testbeds.kinds.base import Given, KeyChecks, Kind, Target, most_nodes, register
from hpcbench.testbeds.nodeset import Node, Testbed

CLUSTER_NODES = 64  # the most nodes `--env slurm` offers; Slurm refuses what it lacks
# What a partition's ssh_key, known_hosts and a login's job_dir are checked alone with.
STAND_IN_LOGIN = ["--slurm-login=login", "--slurm-python=/python"]


@register
class Slurm(Kind):
    name = "slurm"
    reported_as = "slurm"
    campaign_key = "slurm"
    described = "a partition of a cluster you use"
    gives_nodes = "slurm: nodes gives"
    queues_jobs = True
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

    def read_keys(self, raw: dict[str, Any], path: str, checks: KeyChecks) -> Given:
        """`scale --env slurm`'s options for the partition (each key checked by the very
        parser `scale` uses, its error naming the key), what identifies it, its nodes
        and GPUs per node where given, and a line for the plan."""
        path = f"{path}.{self.campaign_key}"
        keys = self.campaign_options
        given = checks.mapping(raw[self.campaign_key], path, tuple(keys))
        if "partition" not in given:
            raise Problem(f"{path}.partition", "name the partition (sinfo -s lists them)")
        env = ["--env", self.name]
        argv: list[str] = []
        for key, raw_value in given.items():
            flag, where = keys[key], f"{path}.{key}"
            if flag is None:  # nodes: the most the partition gives; bounds the sweep
                continue
            own = self._option(key, flag, raw_value, where, checks)
            if key == "login":  # alone it lacks --slurm-python: its own syntax only
                try:
                    parse_login(own[0].partition("=")[2])
                except UsageError as err:
                    raise Problem(where, str(err)) from None
            elif key in ("ssh_key", "known_hosts") or (key == "job_dir" and "login" in given):
                # Alone they lack the login they are for (job_dir: its ~ is the login's):
                # checked with a stand-in, and with the keys together below.
                checks.scale([*env, *own, *STAND_IN_LOGIN], where)
            elif key in ("container_mounts", "container_import"):  # alone it lacks the
                checks.scale([*env, *own, "--container-image=/image.sqsh"], where)  # image
            else:
                checks.scale([*env, *own], where)
            argv += own
        checks.scale([*env, *argv], path)  # the keys together
        nodes = most_nodes(given, path, checks)
        gpus = given.get("gpus_per_node")
        slots = int(gpus) if isinstance(gpus, int) and not isinstance(gpus, bool) and gpus else None
        identity = {k: v for k, v in given.items() if k not in self.operational}
        login = given.get("login")
        where = f"partition {given['partition']}" + (f" via {login}" if login else "")
        return Given(
            self,
            self.name,
            [*env, *argv],
            {self.campaign_key: identity},
            nodes,
            slots,
            f"{self.campaign_key}: gpus_per_node",
            where,
        )

    def _option(self, key: str, flag: str, value: Any, where: str, checks: KeyChecks) -> list[str]:
        """One key's value as its `scale` option(s)."""
        if key == "time":
            return [flag, str(max(1, -(-checks.duration(value, where) // 60)))]
        if key in ("sbatch", "container_mounts") and isinstance(value, list):
            texts = [checks.text(v, where) for v in value]
            return [f"{flag}={t}" for t in texts] if key == "sbatch" else [flag, ",".join(texts)]
        if key in ("queue_wait", "container_import"):
            return [flag, str(checks.duration(value, where))]
        if isinstance(value, bool):  # YAML 1.1's yes/no/on/off: never a name or count
            raise Problem(where, "YAML read this as true/false: write the value in quotes")
        if isinstance(value, float) and key not in self.counts:  # 1e3, .nan: no name
            raise Problem(where, f"YAML read this as the number {value}: write it in quotes")
        # A number as its text: the option's own parser says what is wrong with 1.5.
        number = isinstance(value, int | float)
        text = checks.text(str(value) if number else value, where)
        return [f"{flag}={text}"]  # =: a value may start with '-' (sbatch's --exclusive)

    def launcher(self, spec: TargetSpec, tb: Testbed) -> launchers.Launcher:
        """sbatch on the cluster's login node: this machine, or --slurm-login over SSH."""
        if spec.launcher not in ("auto", SlurmLauncher.name):
            raise UsageError(f"--env slurm runs with the slurm launcher, not {spec.launcher}")
        return SlurmLauncher.from_spec(spec, spec.slurm.login)

    def lock_files(self, tb: Testbed) -> list[Path]:
        return []  # Slurm shares the nodes out itself

    def booked_line(self, where: str, env: str, nodes: int, gpus: int | None) -> str:
        return f"{where}: each job books its own nodes while it runs"

    def node_hours(self, nodes: int, wall_s: float, jobs_node_s: float) -> float:
        return jobs_node_s / 3600  # each job's nodes while it runs

    def gpu_hours(self, gpus: int | None, wall_s: float, jobs_gpu_s: float) -> float | None:
        return jobs_gpu_s / 3600

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
