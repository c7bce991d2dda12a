"""torchrun: one command per node, static rendezvous at rank 0's node."""

from __future__ import annotations

import sys

from hpcbench.core import paths
from hpcbench.launchers.base import BIND_SCRIPT, Command, Launcher, RunSpec, free_port, register


@register
class TorchrunLauncher(Launcher):
    """`torchrun --nnodes N --node-rank i --nproc-per-node s --master-addr A ...` per node.

    A single node too: `--standalone` would pick the c10d rendezvous
    (torch/distributed/run.py:1098-1100), whose agent unpickles the rendezvous state
    it reads from its store every monitoring interval
    (torch/distributed/elastic/rendezvous/dynamic_rendezvous.py:448, called through
    num_nodes_waiting() from elastic/agent/server/api.py:958), and that store listens
    on every interface (docs/testbeds.md, "What a run exposes on the network"): bytes
    anyone there wrote would run in the agent. The static rendezvous
    (elastic/rendezvous/static_tcp_rendezvous.py:67) unpickles nothing. It needs
    --master-port: without one, one node is switched to c10d (run.py:1114-1121).
    """

    name = "torchrun"
    backends = ("ddp",)

    def check(self, spec: RunSpec, backend: str) -> str | None:
        if len({p.slots for p in spec.placements}) > 1:
            return "torchrun needs the same number of workers on every node"
        return super().check(spec, backend)

    def commands(self, spec: RunSpec) -> list[Command]:
        nodes = len(spec.placements)
        commands = []
        for rank, placement in enumerate(spec.placements):
            # The store on node rank 0 bound to --master-addr (bench/bind_rendezvous.py).
            argv = [
                *spec.bound("torchrun"),
                "--nproc-per-node",
                str(placement.slots),
                "--nnodes",
                str(nodes),
                "--node-rank",
                str(rank),
                "--master-addr",
                spec.master_addr,
                "--master-port",
                str(spec.master_port),
                spec.script,
                *spec.args,
            ]
            commands.append(spec.on(placement, argv))
        return commands


def here(nproc: int) -> list[str]:
    """torchrun for `nproc` ranks on this machine by this Python, at the same static
    rendezvous (127.0.0.1, a free port) as a run's, its store bound there by the same
    wrapper (bench/bind_rendezvous.py), for the GPU checks and tests that start ranks
    themselves."""
    return [
        sys.executable,
        str(paths.BENCH_DIR / BIND_SCRIPT),
        "torchrun",
        "--nnodes",
        "1",
        "--node-rank",
        "0",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(free_port()),
        "--nproc-per-node",
        str(nproc),
    ]
