"""Layer launchers (above performance): what a run is asked to do (specs.py: sweeps, probes,
targets), the parsers of its options' text (parse.py), and small classes that turn a
RunSpec into command lines.

Add one by subclassing Launcher in a module of its own, with `@register` (base.py),
and importing that module here.
"""

from __future__ import annotations

from hpcbench.core.ssh import SshAccess
from hpcbench.launchers.base import LAUNCHERS, Command, Launcher, Placement, RunSpec

# Imported to be registered (@register), and named from here as before.
from hpcbench.launchers.horovodrun import HorovodrunLauncher
from hpcbench.launchers.local import LocalLauncher
from hpcbench.launchers.slurm import SlurmLauncher
from hpcbench.launchers.specs import TargetSpec
from hpcbench.launchers.torchrun import TorchrunLauncher

# What `--launcher auto` picks for each backend.
DEFAULT_FOR_BACKEND = {"horovod": "horovodrun", "ddp": "torchrun"}

__all__ = [
    "LAUNCHERS",
    "Command",
    "HorovodrunLauncher",
    "Launcher",
    "LocalLauncher",
    "Placement",
    "RunSpec",
    "SlurmLauncher",
    "TorchrunLauncher",
    "get",
]


def get(spec: TargetSpec, login: SshAccess | None = None) -> Launcher:
    """The launcher the target asks for (`auto`: its backend's), built by its own
    from_spec; login: where a batch launcher submits (None: this machine)."""
    name = DEFAULT_FOR_BACKEND[spec.backend] if spec.launcher == "auto" else spec.launcher
    return LAUNCHERS.named(name, also=("auto",)).from_spec(spec, login)
