"""horovodrun: one command on the launching node; it reaches the others over SSH."""

from __future__ import annotations

from hpcbench.core.ssh import SshAccess
from hpcbench.launchers.base import Command, Launcher, LaunchOptions, RunSpec, register


@register
class HorovodrunLauncher(Launcher):
    """`horovodrun -np N -H h1:s1,h2:s2 --gloo python script ...`.

    Runs on the first placement's node (the head), which must reach the
    others by name over SSH on `ssh_port`; Gloo by default, MPI where the
    nodes' Horovod was built with it.
    """

    name = "horovodrun"
    backends = ("horovod",)

    @classmethod
    def from_spec(cls, spec: LaunchOptions, login: SshAccess | None) -> Launcher:
        return cls(controller=spec.horovod_controller)

    def __init__(self, controller: str = "gloo", ssh_port: int = 22) -> None:
        if controller not in ("gloo", "mpi"):
            raise ValueError(f"unknown Horovod controller {controller!r}")
        self.controller = controller
        self.ssh_port = ssh_port

    def commands(self, spec: RunSpec) -> list[Command]:
        hosts = ",".join(f"{p.host}:{p.slots}" for p in spec.placements)
        # The Gloo rendezvous bound to the address the ranks are given (on the
        # --network-interface, loopback on one host): bench/bind_rendezvous.py.
        argv = [
            *spec.bound("horovodrun"),
            "-np",
            str(spec.workers),
            "-H",
            hosts,
            f"--{self.controller}",
        ]
        if not spec.on_controller:
            argv += ["-p", str(self.ssh_port)]
        # One host: horovodrun keeps every rank on loopback and refuses an
        # interface that does not carry 127.0.0.1.
        if spec.iface and len(spec.placements) > 1:
            argv += ["--network-interface", spec.iface]
        # Each rank on a leash of its own: horovodrun's ssh gives them no stdin to
        # watch, but a dead horovodrun leaves their output without a reader.
        argv += spec.leashed([spec.python, spec.script, *spec.args], stdin=False)
        return [spec.on(spec.placements[0], argv)]
