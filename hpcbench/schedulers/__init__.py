"""Layer schedulers (above launchers): what starts a launcher's rendering of a run, watches
it, and collects it.

Processes on this machine (and over SSH) today, Slurm batch jobs, and a job
API such as GPULab's tomorrow: subclass Scheduler in a module of its own with
`@register` (base.py), import it here, and name it as the `scheduler` of the launchers
whose commands it runs. Launchers build command
lines and nothing else (docs/method.md, "Three layers").
"""

from __future__ import annotations

from hpcbench.launchers.base import Launcher
from hpcbench.schedulers.base import SCHEDULERS, Outcome, Scheduler
from hpcbench.schedulers.process import ProcessScheduler
from hpcbench.schedulers.slurm import SlurmScheduler

__all__ = ["Outcome", "ProcessScheduler", "Scheduler", "SlurmScheduler", "for_launcher"]


def for_launcher(launcher: Launcher) -> Scheduler:
    """The scheduler that runs what this launcher renders, by the name it gives."""
    return SCHEDULERS.named(launcher.scheduler)(launcher)  # type: ignore[call-arg]
