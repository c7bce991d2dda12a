"""What every launcher shares: the run spec it gets and the commands it returns.

A launcher only builds command lines (the ReFrame way): it gets a RunSpec and
returns Commands, each an argv plus environment and where it runs. Starting,
watching and killing them, or submitting and polling a batch job, is a
scheduler's job (hpcbench.schedulers), so each launcher is unit-tested
without a cluster.
"""

from __future__ import annotations

import os
import shlex
import socket
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar

from hpcbench.core.bench import workload_options
from hpcbench.core.registry import Registry
from hpcbench.core.secrets import looks_secret
from hpcbench.core.ssh import SshAccess

# bench/leash.py, beside the workload on every node.
LEASH_SCRIPT = "leash.py"
# bench/bind_rendezvous.py: torchrun or horovodrun with its rendezvous bound to the
# address the nodes meet at, not every interface.
BIND_SCRIPT = "bind_rendezvous.py"

# What a launcher started on this machine (horovodrun, torchrun, the ranks, sbatch)
# inherits of the harness's environment: what training and its tools read, nothing
# else. The user's shell holds secrets (HPCBENCH_PEM_PASSWORD, OS_*, tokens), and
# horovodrun writes every variable it has onto each rank's command line, where
# /proc/<pid>/cmdline shows it (horovod 0.28.1, horovod/runner/gloo_run.py:96-100:
# `'{shell} {horovod_env} {env} {run_command}'` over all of os.environ).
LAUNCH_ENV_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TERM",
        "TMPDIR",
        "LD_LIBRARY_PATH",
        "VIRTUAL_ENV",
        "XDG_CACHE_HOME",
        "SSH_AUTH_SOCK",  # ssh to the nodes, and horovodrun's ssh between them
        "SLURM_CONF",  # sbatch's cluster configuration
        # enroot's registry credentials (.credentials) for a job's pyxis import: the
        # folder's path only; the file stays where the user keeps it.
        "ENROOT_CONFIG_PATH",
        # Python's own, by name: not the PYTHON prefix, which let PYTHONINSPECT (a rank
        # waiting at a prompt after its script), PYTHONSTARTUP, PYTHONHOME (another
        # interpreter's library), PYTHONBREAKPOINT or a PYTHON_*_TOKEN through.
        "PYTHONPATH",  # where a checkout that is not installed finds its modules
        "PYTHONUNBUFFERED",  # rank output reaches the harness's echo and error tail as written
        "PYTHONHASHSEED",  # a run repeated with the same hash seed
        "PYTHONFAULTHANDLER",  # a rank that dies in C code prints its threads' stacks
    }
)
LAUNCH_ENV_PREFIXES = (
    "LC_",  # locale
    "CUDA_",
    "NCCL_",
    "GLOO_",
    "HOROVOD_",
    "TORCH_",
    "TORCHELASTIC_",
    "PYTORCH_",
    "NVIDIA_",
    "OMP_",
    "MKL_",
    "KMP_",
    "OPENBLAS_",  # CPU threads
    "OMPI_MCA_",
    "PMIX_MCA_",
    "UCX_",  # Horovod over MPI
    "SBATCH_",  # sbatch's defaults (account, partition)
)


def free_port() -> int:
    """A TCP port free on this machine's loopback now (for a rendezvous of ranks here)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch_environ(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a launcher starts with: the allow-listed part of this
    process's, less any name that looks like a secret (a TORCH_HUB_TOKEN matches a
    prefix), then `extra` (what the harness sets for the run)."""
    kept = {
        k: v
        for k, v in os.environ.items()
        if (k in LAUNCH_ENV_NAMES or k.startswith(LAUNCH_ENV_PREFIXES)) and not looks_secret(k)
    }
    return {**kept, **(extra or {})}


@dataclass(frozen=True)
class Placement:
    """One node's share of a run."""

    host: str  # the name the other nodes reach it by
    slots: int  # workers on it
    access: SshAccess | None = None  # how the controller reaches it; None: this machine


@dataclass(frozen=True)
class RunSpec:
    """A run of the workload on some nodes, independent of how it is launched."""

    script: str  # path of a bench/ script as the nodes see it
    args: tuple[str, ...]  # the script's arguments
    python: str  # interpreter on the nodes (launcher tools sit beside it)
    workdir: str  # where bench/ lives on the nodes
    placements: tuple[Placement, ...]
    master_addr: str = "127.0.0.1"  # rank 0's node, for rendezvous
    master_port: int = 29500
    iface: str = ""  # network interface for Gloo/NCCL; "" lets them choose
    env: dict[str, str] = field(default_factory=dict)  # extra environment for every rank
    time_limit_s: int = 0  # every rank stops itself after this (the leash); 0: no limit

    @property
    def workers(self) -> int:
        return sum(p.slots for p in self.placements)

    @property
    def on_controller(self) -> bool:
        """Every placement is this machine: nothing is reached over SSH."""
        return all(p.access is None for p in self.placements)

    def network_env(self) -> dict[str, str]:
        """The variables that pin Horovod, Gloo and NCCL to the testbed interface."""
        if not self.iface:
            return dict(self.env)
        return {
            "HOROVOD_GLOO_IFACE": self.iface,
            "GLOO_SOCKET_IFNAME": self.iface,
            "NCCL_SOCKET_IFNAME": self.iface,
            **self.env,
        }

    def leashed(self, argv: list[str], stdin: bool = True) -> list[str]:
        """argv under bench/leash.py: the rank stops with its run (docs/method.md,
        "Runs die with their sweep"): at the time limit, on TERM/HUP/INT, when its
        output has no reader, and with `stdin`, when the harness's end of its stdin closes."""
        leash = [self.python, f"{self.workdir.rstrip('/')}/{LEASH_SCRIPT}"]
        if stdin:
            leash.append("--stdin")
        if self.time_limit_s:
            leash += ["--time-limit", str(self.time_limit_s)]
        return [*leash, "--", *argv]

    def on(self, placement: Placement, argv: list[str]) -> Command:
        """One command run on a placement's node, in bench/, pinned to the
        testbed interface and on the leash."""
        return Command(
            tuple(self.leashed(argv)),
            env=self.network_env(),
            cwd=self.workdir,
            access=placement.access,
        )

    def bound(self, launcher: str) -> list[str]:
        """torchrun or horovodrun, run by bench/bind_rendezvous.py with the nodes' python
        (the launcher's own console script does no more than import and call it)."""
        return [self.python, f"{self.workdir.rstrip('/')}/{BIND_SCRIPT}", launcher]


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)  # added to launch_environ()
    cwd: str | None = None
    access: SshAccess | None = None  # run over SSH there; None: here

    def local_argv(self) -> list[str]:
        """What to exec on the controller: the argv itself, or ssh with a remote shell line.

        Over SSH the environment goes on the command line (ssh does not pass
        it); the leash in the argv (RunSpec.leashed) bounds the remote side.
        """
        if self.access is None:
            return list(self.argv)
        parts = []
        if self.cwd:
            parts.append(f"cd {shlex.quote(self.cwd)} &&")
        parts.append("exec")
        if self.env:
            parts.append("env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items()))
        parts.append(shlex.join(self.argv))
        return [*self.access.argv(), " ".join(parts)]

    def local_env(self) -> dict[str, str]:
        """Environment to add locally (over SSH it travels in the command line instead)."""
        return {} if self.access else dict(self.env)

    def environ(self) -> dict[str, str]:
        """The whole environment to start local_argv() with (never the user's shell's)."""
        return launch_environ(self.local_env())


class LaunchOptions(Protocol):
    """What a launcher is built from: a target's options (hpcbench.launchers.specs.
    TargetSpec, which imports the launchers: this keeps the import one way)."""

    @property
    def backend(self) -> str: ...
    @property
    def horovod_controller(self) -> str: ...
    @property
    def slurm(self) -> Any: ...  # hpcbench.launchers.slurm.SlurmOptions


class Launcher:
    """Builds the commands that start one run. Subclasses set `name` and `commands`."""

    name: ClassVar[str] = ""
    # The scheduler (hpcbench.schedulers, by name) that runs what it renders.
    scheduler: ClassVar[str] = "process"

    # The backends it starts: the workload's (bench/workload_options.py), unless a
    # launcher names fewer.
    backends: ClassVar[tuple[str, ...]] = tuple(workload_options.BACKENDS)

    @classmethod
    def from_spec(cls, spec: LaunchOptions, login: SshAccess | None) -> Launcher:
        """The launcher a target's options ask for; login: where a batch launcher
        submits (None: this machine), which the others do not take."""
        return cls()

    def check(self, spec: RunSpec, backend: str) -> str | None:
        """Why this launcher cannot run the spec, or None if it can."""
        if backend not in self.backends:
            return f"the {self.name} launcher cannot start {backend} runs"
        return None

    def commands(self, spec: RunSpec) -> list[Command]:
        raise NotImplementedError

    def describe(self, spec: RunSpec) -> str:
        """What `--dry-run` prints: the commands (a batch launcher prints its script)."""
        return "\n".join(shlex.join(c.local_argv()) for c in self.commands(spec))


L = TypeVar("L", bound=type[Launcher])
LAUNCHERS: Registry[type[Launcher]] = Registry("launcher", lambda cls: cls)


def register(cls: L) -> L:
    """The class decorator that makes a launcher found by its name (--launcher)."""
    return LAUNCHERS.register(cls)
