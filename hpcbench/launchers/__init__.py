"""Layer launchers (above models): what a run is asked to do (specs.py: sweeps, probes,
targets), the parsers of its options' text (parse.py), and small classes that turn a
RunSpec into command lines.

Add one by subclassing Launcher and listing it in LAUNCHERS.
"""

from __future__ import annotations

from hpcbench.core.errors import UsageError
from hpcbench.launchers.base import Command, Launcher, Placement, RunSpec
from hpcbench.launchers.horovodrun import HorovodrunLauncher
from hpcbench.launchers.local import LocalLauncher
from hpcbench.launchers.slurm import SlurmLauncher
from hpcbench.launchers.torchrun import TorchrunLauncher

LAUNCHERS: dict[str, type[Launcher]] = {
    cls.name: cls for cls in (HorovodrunLauncher, TorchrunLauncher, LocalLauncher, SlurmLauncher)
}
# What `--launcher auto` picks for each backend.
DEFAULT_FOR_BACKEND = {"horovod": "horovodrun", "ddp": "torchrun"}

__all__ = ["Command", "Launcher", "Placement", "RunSpec", "LAUNCHERS", "get"]


def get(name: str, backend: str, horovod_controller: str = "gloo") -> Launcher:
    name = DEFAULT_FOR_BACKEND[backend] if name == "auto" else name
    if name not in LAUNCHERS:
        raise UsageError(f"unknown launcher {name!r}: choose one of auto, {', '.join(LAUNCHERS)}")
    if name == HorovodrunLauncher.name:
        return HorovodrunLauncher(controller=horovod_controller)
    return LAUNCHERS[name]()
