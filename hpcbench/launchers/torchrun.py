"""torchrun: one command per node, static rendezvous at rank 0's node."""

from __future__ import annotations

from hpcbench.launchers.base import Command, Launcher, RunSpec


class TorchrunLauncher(Launcher):
    """`torchrun --nnodes N --node-rank i --nproc-per-node s --master-addr A ...` per node.

    A single node uses `--standalone` (a private rendezvous on a free port).
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
            argv = [spec.tool("torchrun"), "--nproc-per-node", str(placement.slots)]
            if nodes == 1:
                argv.append("--standalone")
            else:
                argv += [
                    "--nnodes",
                    str(nodes),
                    "--node-rank",
                    str(rank),
                    "--master-addr",
                    spec.master_addr,
                    "--master-port",
                    str(spec.master_port),
                ]
            argv += [spec.script, *spec.args]
            commands.append(spec.on(placement, argv))
        return commands
