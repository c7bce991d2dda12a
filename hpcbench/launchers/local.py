"""Worker processes on this machine, started directly with the env:// variables."""

from __future__ import annotations

from hpcbench.launchers.base import Command, Launcher, RunSpec, register


@register
class LocalLauncher(Launcher):
    """One process per rank, no launcher tool in between.

    torch.distributed reads RANK, WORLD_SIZE, MASTER_ADDR/PORT; Horovod needs
    horovodrun's rendezvous for more than one rank, so it runs single-worker only.
    """

    name = "local"

    def check(self, spec: RunSpec, backend: str) -> str | None:
        if not spec.on_controller:
            return "the local launcher starts processes on this machine only"
        if backend == "horovod" and spec.workers > 1:
            return "the local launcher runs Horovod with one worker only; use horovodrun"
        return None

    def commands(self, spec: RunSpec) -> list[Command]:
        world = spec.workers
        common = {
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(spec.master_port),
            "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(world),
            **spec.network_env(),
        }
        return [
            Command(
                argv=tuple(spec.leashed([spec.python, spec.script, *spec.args])),
                env={**common, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                cwd=spec.workdir,
            )
            for rank in range(world)
        ]
