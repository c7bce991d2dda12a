"""The nodes runs go to, how they are launched and scheduled, and the pre-flight check.

Shared by `scale` and `probe`: a Target is resolved once from a TargetSpec
(refusing bad input before anything is launched), checks that the nodes
answer over SSH and hold this checkout's bench/ (the stack role puts it there
at deploy time), and turns "n nodes, w workers" into a launcher's RunSpec.
"""

from __future__ import annotations

import contextlib
import os
import random
import shlex
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from hpcbench import schedulers
from hpcbench.core import locks, paths, ssh
from hpcbench.core.errors import UsageError
from hpcbench.launchers import Launcher, Placement, RunSpec
from hpcbench.launchers.base import free_port
from hpcbench.launchers.parse import check_node_counts
from hpcbench.launchers.specs import TargetSpec
from hpcbench.schedulers import Outcome, Scheduler
from hpcbench.testbeds import kinds, manifest, nodeset, reach
from hpcbench.testbeds.nodeset import Testbed


@dataclass
class Target:
    testbed: Testbed
    node_counts: list[int]
    gpus_per_node: int | None
    backend: str
    launcher: Launcher
    # TargetSpec.given: what its runs' method label names of the target's options.
    given: tuple[tuple[str, Any], ...] = ()

    @cached_property
    def scheduler(self) -> Scheduler:
        return schedulers.for_launcher(self.launcher)

    @classmethod
    def resolve(cls, spec: TargetSpec) -> Target:
        kind = kinds.for_target(spec)
        tb = kind.testbed(spec)
        counts = check_node_counts(spec.node_counts, available=len(tb.nodes))
        launcher = kind.launcher(spec, tb)
        target = cls(tb, counts, spec.gpus_per_node, spec.backend, launcher, spec.given)
        for n in counts:  # ask the launcher now, so that nothing starts on a spec it refuses
            why = launcher.check(target.spec("train.py", [], n, target.workers(n)), spec.backend)
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

    def nodes_of(self, nodes: int, workers: int) -> list[str]:
        """The names of the nodes a configuration's runs go to."""
        return [p.host for p in self.placements(nodes, workers)]

    def spec(
        self, script: str, args: list[str], nodes: int, workers: int, time_limit_s: int = 0
    ) -> RunSpec:
        tb = self.testbed
        placements = self.placements(nodes, workers)
        here = tb.on_controller
        first = next(n for n in tb.nodes if n.name == placements[0].host)
        return RunSpec(
            script=script,
            args=tuple(args),
            python=tb.python,
            workdir=tb.bench_dir,
            placements=placements,
            master_addr="127.0.0.1" if here else first.address,
            master_port=free_port() if here else random.randint(29500, 29999),
            # Gloo's and NCCL's sockets bind this interface's address: on this machine
            # loopback (the localhost testbed's "lo"), never the LAN's.
            iface=tb.iface,
            time_limit_s=time_limit_s,
        )

    def run(self, spec: RunSpec, timeout_s: float, echo: bool = False) -> Outcome:
        return self.scheduler.run(spec, timeout_s=timeout_s, echo=echo)

    def describe(self, spec: RunSpec) -> str:
        """What --dry-run prints for the run: what would be started, or submitted."""
        return self.scheduler.describe(spec)

    def unreachable(self, spec: RunSpec) -> dict[str, str]:
        """The run's nodes that do not answer now, with why, in seconds (reach.PREFLIGHT);
        none to ask where every rank is a process here (--env localhost, --env slurm)."""
        nodes = [reach.Target(p.host, p.access) for p in spec.placements if p.access is not None]
        return reach.unreachable(nodes)

    def remote_nodes(self) -> list[nodeset.Node]:
        needed = self.testbed.nodes[: max(self.node_counts)]
        unique = {n.name: n for n in needed if n.access is not None}
        return list(unique.values())

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """The testbed for this command alone while it measures: a second sweep or
        probe on it (any --out) is refused in one line, as its runs would spoil these."""
        held: list[int] = []
        busy = (
            f"testbed {self.testbed.env} is in use by another sweep or probe: wait for it to finish"
        )
        try:
            for path in kinds.of(self.testbed).lock_files(self.testbed):
                held.append(locks.hold(path, busy, paths.state_root()))  # no link below it
            yield
        finally:
            for fd in held:
                os.close(fd)

    def prepare(self) -> None:
        """Refuse unreachable nodes, and deployed nodes whose bench/ is not this
        checkout's, in one SSH round trip per node; nothing is launched yet.

        --hosts nodes see this checkout through a shared file system, as
        `--env slurm` and `--env localhost` do: only reachability is checked. A
        cluster reached through --slurm-login gets this checkout's bench/ copied to
        its shared file system first (kinds/slurm.py, place_on_login).
        """
        kinds.of(self.testbed).prepare(self)

    def check_nodes(self) -> None:
        """The nodes answer over SSH and (deployed) hold this checkout's bench/."""
        nodes = self.remote_nodes()
        if not nodes:
            return
        tb = self.testbed
        deployed = kinds.of(tb).checks_bench_copy()
        path = f"{tb.bench_dir.rstrip('/')}/{manifest.MANIFEST_FILE}"
        # A missing manifest prints nothing; only an unreachable node fails the call.
        command = f"cat {shlex.quote(path)} 2>/dev/null || true" if deployed else "true"
        with ThreadPoolExecutor(max_workers=min(16, len(nodes))) as pool:
            replies = list(pool.map(lambda n: ssh.call(n.access, command), nodes))
        expected = manifest.compute(paths.BENCH_DIR) if deployed else {}
        for node, reply in zip(nodes, replies, strict=True):
            assert node.access is not None  # remote_nodes keeps the nodes reached over SSH
            if not reply.ok:
                raise UsageError(
                    f"node {node.name} ({node.access.host}:{node.access.port}) "
                    f"is unreachable over SSH: {reply.problem}"
                )
            if deployed and not manifest.matches(expected, reply.stdout):
                raise UsageError(
                    f"node {node.name}: the workload in {tb.bench_dir} differs from this "
                    f"checkout's bench/ (run make deploy ENV={tb.env})"
                )
