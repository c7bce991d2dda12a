"""Schedulers: what starts a launcher's rendering of a run, watches it, and collects it.

Processes on this machine (and over SSH) today, Slurm batch jobs, and a job
API such as GPULab's tomorrow: subclass Scheduler and pick it in `for_launcher`.
Launchers build command lines and nothing else (docs/method.md, "Three layers").
"""

from __future__ import annotations

from hpcbench.launchers.base import Launcher
from hpcbench.launchers.slurm import SlurmLauncher
from hpcbench.schedulers.base import Outcome, Scheduler
from hpcbench.schedulers.process import ProcessScheduler
from hpcbench.schedulers.slurm import SlurmScheduler

__all__ = ["Outcome", "ProcessScheduler", "Scheduler", "SlurmScheduler", "for_launcher"]


def for_launcher(launcher: Launcher) -> Scheduler:
    """The scheduler that runs what this launcher renders."""
    if isinstance(launcher, SlurmLauncher):
        return SlurmScheduler(launcher)
    return ProcessScheduler(launcher)
