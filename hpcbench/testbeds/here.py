"""One worker on this machine before anything is booked: the bench in a node's image
under the node's CPU limits, as the booking check's plan gives them (`terraform plan`
of environments/local), started with `docker run`.

A testbed whose nodes are this machine's cores can tell its one worker's speed before
it is deployed, so that its forecast starts from this machine and not from a figure
measured on another (campaigns' `expect:`). The limits are read from the plan, not
worked out again here: terraform/modules/docker_testbed decides them (a whole-core
quota pinned where every node fits, else a quota on any core).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from hpcbench.launchers.base import Command

# The nodes' containers in the plan (docker_testbed's node[i]); the one-worker
# baseline runs on the first.
NODE_ADDRESS = re.compile(r"module\.testbed\.docker_container\.node\[(\d+)\]")
# Where the nodes' image keeps the stack (images/stack/Dockerfile) and where the
# run sees this checkout's bench/ (read-only).
PYTHON = "/opt/hpcbench/venv/bin/python"
BENCH_IN_CONTAINER = "/opt/hpcbench-before-booking/bench"


@dataclass(frozen=True)
class NodeLimits:
    """What a node of the planned testbed would be: its image, CFS period and quota,
    the cores it is pinned to (None: any) and its memory limit (None: none)."""

    image: str
    cpu_period_us: int
    cpu_quota_us: int
    cpu_set: str | None = None
    memory_mb: int | None = None

    @property
    def cpus(self) -> float:
        return self.cpu_quota_us / self.cpu_period_us

    def said(self) -> str:
        where = f"pinned to CPU set {self.cpu_set}" if self.cpu_set else "on any core"
        return (
            f"{self.cpus:.3g} core(s) (quota {self.cpu_quota_us}/{self.cpu_period_us} us), {where}"
        )


def planned_nodes(shown: dict[str, Any]) -> tuple[NodeLimits, ...]:
    """Every node's limits in a plan's JSON (`terraform show -json`), the first node's
    first; () where the plan holds no nodes, or where any node's values are not known
    until apply (or the nodes are not numbered from 0 without a gap)."""
    changes = shown.get("resource_changes")
    found: dict[int, NodeLimits | None] = {}
    for change in changes if isinstance(changes, list) else []:
        address = change.get("address") if isinstance(change, dict) else None
        matched = NODE_ADDRESS.fullmatch(address) if isinstance(address, str) else None
        if matched:
            found[int(matched[1])] = _limits(change.get("change"))
    nodes = [found.get(i) for i in range(len(found))]
    return tuple(n for n in nodes if n is not None) if all(nodes) else ()


def _limits(planned: object) -> NodeLimits | None:
    """A node's limits from its planned change; None where they are not all known."""
    after = planned.get("after") if isinstance(planned, dict) else None
    if not isinstance(after, dict):
        return None
    image, period, quota = after.get("image"), after.get("cpu_period"), after.get("cpu_quota")
    if not isinstance(image, str) or not image:
        return None
    if not (_positive(period) and _positive(quota)):
        return None
    cpu_set, memory = after.get("cpu_set"), after.get("memory")
    return NodeLimits(
        image,
        period,
        quota,
        cpu_set if isinstance(cpu_set, str) and cpu_set else None,
        memory if _positive(memory) else None,
    )


def _positive(value: object) -> TypeGuard[int]:
    """A whole number above 0 (a bool is none)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def in_container(node: NodeLimits, run: Command, name: str, bench: Path) -> Command:
    """`run` (a one-worker command as the local launcher builds it, its paths under
    BENCH_IN_CONTAINER) in a container of the node's image and limits: no network
    (one worker needs none), this checkout's bench/ read-only, removed on exit. Its
    stdin stays attached (-i), so that the leash in `run` stops the worker when this
    process's end closes, the container then exiting and removed (--rm)."""
    # No network, and a host name loopback resolves: Gloo's controller looks its own
    # host name up, and a container's id resolves to no address without a network.
    argv = ["docker", "run", "-i", "--rm", "--name", name, "--network", "none"]
    argv += ["--hostname", "localhost"]
    argv += ["--volume", f"{bench}:{BENCH_IN_CONTAINER}:ro"]
    argv += ["--cpu-period", str(node.cpu_period_us), "--cpu-quota", str(node.cpu_quota_us)]
    if node.cpu_set:
        argv += ["--cpuset-cpus", node.cpu_set]
    if node.memory_mb:
        argv += ["--memory", f"{node.memory_mb}m"]
    for key, value in sorted(run.env.items()):
        argv += ["-e", f"{key}={value}"]
    argv += ["-w", run.cwd or BENCH_IN_CONTAINER, "--entrypoint", run.argv[0], node.image]
    return Command(tuple([*argv, *run.argv[1:]]))
