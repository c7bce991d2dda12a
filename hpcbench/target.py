"""The nodes a command runs on, resolved from --env/--hosts, checked and staged.

Shared by `scale` and `probe`: both resolve the testbed, refuse bad input
before anything is launched, copy the controller's bench/ to remote nodes,
and turn "n nodes, w workers" into a launcher's RunSpec.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import shlex
import socket
import subprocess
import sys
import tarfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from hpcbench import launchers, paths, testbed
from hpcbench.errors import UsageError
from hpcbench.launchers import Launcher, Placement, RunSpec, slurm
from hpcbench.specs import parse_hosts, parse_nodes
from hpcbench.testbed import SshAccess, Testbed

SSH_CHECK_TIMEOUT_S = 30
STAGE_TIMEOUT_S = 120


def add_arguments(parser: argparse.ArgumentParser, nodes_default: str) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--env",
        default=os.environ.get("HPCBENCH_ENV", "local"),
        help="deployed environment whose inventory lists the nodes, or 'localhost' for "
        "worker processes on this machine (default: $HPCBENCH_ENV or local)",
    )
    where.add_argument("--hosts", help="ad-hoc nodes host:slots,... reached with your SSH setup")
    parser.add_argument("--nodes", default=nodes_default, help="node counts: 1-10 or 1,2,4,8")
    parser.add_argument(
        "--gpus-per-node",
        type=int,
        default=None,
        help="workers per node (default: the node's GPUs, else 1)",
    )
    parser.add_argument("--backend", default="horovod", choices=["horovod", "ddp"])
    parser.add_argument(
        "--launcher",
        default="auto",
        help="auto (horovodrun for horovod, torchrun for ddp), "
        f"or one of {', '.join(launchers.LAUNCHERS)}",
    )
    parser.add_argument("--horovod-controller", default="gloo", choices=["gloo", "mpi"])
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads per worker (default: cores / workers on the node)",
    )
    parser.add_argument("--out", default="results", help="results directory (default: results/)")
    parser.add_argument(
        "--timeout", type=int, default=1800, help="seconds per run before it is killed"
    )
    slurm.add_arguments(parser)


@dataclass
class Target:
    testbed: Testbed
    nodes: list[int]
    gpus_per_node: int | None
    backend: str
    launcher: Launcher

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Target:
        cluster = not args.hosts and args.env == slurm.ENV_NAME
        if args.hosts:
            tb = testbed.from_hosts(parse_hosts(args.hosts))
        elif cluster:
            tb = slurm.cluster_testbed(args.gpus_per_node)
        else:
            tb = testbed.for_env(args.env)
        if args.gpus_per_node is not None and args.gpus_per_node < 1:
            raise UsageError("--gpus-per-node must be at least 1")
        nodes = parse_nodes(args.nodes, available=len(tb.nodes))
        if cluster or args.launcher == slurm.SlurmLauncher.name:
            if args.launcher not in ("auto", slurm.SlurmLauncher.name):
                raise UsageError(f"--env slurm runs with the slurm launcher, not {args.launcher}")
            # sbatch runs here on a cluster's login node, on the head of a testbed.
            submit = None if cluster else tb.head_node().access
            launcher: Launcher = slurm.from_args(
                args, args.backend, args.horovod_controller, submit, cluster
            )
        else:
            launcher = launchers.get(args.launcher, args.backend, args.horovod_controller)
        target = cls(tb, nodes, args.gpus_per_node, args.backend, launcher)
        for n in nodes:  # ask the launcher now, so that nothing starts on a spec it refuses
            why = launcher.check(target.spec("train.py", [], n, target.workers(n)), args.backend)
            if why:
                raise UsageError(f"--nodes {n}: {why}")
        return target

    def workers(self, nodes: int) -> int:
        return sum(self.testbed.slots(n, self.gpus_per_node) for n in self.testbed.nodes[:nodes])

    def placements(self, nodes: int, workers: int) -> tuple[Placement, ...]:
        """The first `nodes` nodes filled in order up to `workers`; repeated names merge
        (localhost's 'nodes' are processes on one machine)."""
        merged: dict[str, Placement] = {}
        left = workers
        for node in self.testbed.nodes[:nodes]:
            slots = min(left, self.testbed.slots(node, self.gpus_per_node))
            left -= slots
            if slots <= 0:
                break
            prior = merged.get(node.name)
            merged[node.name] = Placement(
                node.name, slots + (prior.slots if prior else 0), node.access
            )
        return tuple(merged.values())

    def spec(
        self, script: str, args: list[str], nodes: int, workers: int, time_limit_s: int = 0
    ) -> RunSpec:
        tb = self.testbed
        placements = self.placements(nodes, workers)
        remote = not tb.local and tb.env != "hosts"
        first = next(n for n in tb.nodes if n.name == placements[0].host)
        return RunSpec(
            script=script,
            args=tuple(args),
            python=tb.python if remote else sys.executable,
            workdir=tb.bench_dir if remote else str(paths.BENCH_DIR),
            placements=placements,
            master_addr="127.0.0.1" if tb.local else first.address,
            master_port=free_port() if tb.local else random.randint(29500, 29999),
            iface=tb.iface if not tb.local else "",
            time_limit_s=time_limit_s,
        )

    def remote_nodes(self) -> list[testbed.Node]:
        needed = self.testbed.nodes[: max(self.nodes)]
        unique = {n.name: n for n in needed if n.access is not None}
        return list(unique.values())

    def prepare(self) -> None:
        """Refuse unreachable nodes (nothing launched yet), then copy bench/ to them."""
        nodes = self.remote_nodes()
        if not nodes:
            return
        with ThreadPoolExecutor(max_workers=min(16, len(nodes))) as pool:
            problems = list(pool.map(lambda n: ssh_problem(n.access), nodes))
        for node, problem in zip(nodes, problems, strict=True):
            if problem:
                raise UsageError(
                    f"node {node.name} ({node.access.host}:{node.access.port}) "
                    f"is unreachable over SSH: {problem}"
                )
        if self.testbed.env == "hosts":
            return  # ad-hoc hosts see this checkout through a shared file system
        archive = bench_archive()
        with ThreadPoolExecutor(max_workers=min(16, len(nodes))) as pool:
            problems = list(
                pool.map(lambda n: stage(n.access, archive, self.testbed.bench_dir), nodes)
            )
        for node, problem in zip(nodes, problems, strict=True):
            if problem:
                raise UsageError(f"copying bench/ to {node.name} failed: {problem}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def ssh_problem(access: SshAccess) -> str | None:
    try:
        proc = subprocess.run(
            [*access.argv(), "true"],
            capture_output=True,
            text=True,
            timeout=SSH_CHECK_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return f"no answer in {SSH_CHECK_TIMEOUT_S} s"
    except OSError as err:
        return str(err)
    return None if proc.returncode == 0 else _last_line(proc.stderr)


def bench_archive() -> bytes:
    """bench/ as a tar stream, without caches: what every node gets."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in sorted(paths.BENCH_DIR.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                tar.add(path, arcname=str(path.relative_to(paths.BENCH_DIR)))
    return buf.getvalue()


def stage(access: SshAccess, archive: bytes, bench_dir: str) -> str | None:
    remote = f"mkdir -p {shlex.quote(bench_dir)} && tar -xf - -C {shlex.quote(bench_dir)}"
    try:
        proc = subprocess.run(
            [*access.argv(), remote], input=archive, capture_output=True, timeout=STAGE_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return f"no answer in {STAGE_TIMEOUT_S} s"
    return None if proc.returncode == 0 else _last_line(proc.stderr.decode(errors="replace"))
