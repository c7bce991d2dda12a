"""What every testbed kind answers, and the registry that finds a kind by name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol, TypeVar

from hpcbench import launchers
from hpcbench.core import paths
from hpcbench.core.registry import Registry
from hpcbench.launchers.base import RunSpec
from hpcbench.launchers.specs import TargetSpec
from hpcbench.schedulers.base import Scheduler
from hpcbench.testbeds.nodeset import Testbed


class Target(Protocol):
    """What a kind acts on of the target that asks it (hpcbench.testbeds.target.Target, which
    imports the kinds: this keeps the import one way)."""

    testbed: Testbed
    launcher: launchers.Launcher

    @property
    def scheduler(self) -> Scheduler: ...

    def check_nodes(self) -> None: ...


@dataclass(frozen=True)
class LeaseRule:
    """Where an environment's lease is set (its OpenTofu variable), in minutes, and the
    shortest and longest it may be (None: no upper bound)."""

    variable: str
    shortest_min: int
    longest_min: int | None
    form: str  # how the variable takes the minutes


class Kind:
    """A kind of testbed. Subclasses set `name` and override what differs from these
    defaults: nodes reached over SSH that see this checkout's bench/ through a shared
    file system, each marked busy by a lock of its own, nothing booked."""

    name: ClassVar[str] = ""  # what it is registered and found by
    # What the records and the comparison's systems say it is (one word a reader knows).
    reported_as: ClassVar[str] = ""
    # The campaign file's key that gives a testbed of this kind (env:, slurm:, hosts:).
    campaign_key: ClassVar[str] = ""
    # What a testbed of this kind is, in the words the campaign's errors use.
    described: ClassVar[str] = ""
    # Its keys in a campaign file (under campaign_key), and the `scale` option each
    # becomes (None: read by the campaign itself, such as the nodes it has).
    campaign_options: ClassVar[dict[str, str | None]] = {}
    # Keys of those whose value is a count: a number there is checked as one.
    counts: ClassVar[tuple[str, ...]] = ()
    # Keys of those that bound how long or say how it is reached, not what is
    # measured: not part of a cell's identity.
    operational: ClassVar[tuple[str, ...]] = ()
    # Who says how many nodes it has, for the line when a sweep asks for more.
    gives_nodes: ClassVar[str] = ""
    # hpcbench deploys and destroys it, and books its nodes for the campaign's whole turn.
    deployed: ClassVar[bool] = False
    # Each run is a job that waits in a queue and books its own nodes while it runs.
    queued: ClassVar[bool] = False
    # What a stop does to what it holds, as the campaign says it.
    releasing: ClassVar[str] = "its runs in flight, if any, are stopped; nothing else is held"
    # A figure measured on one testbed of this kind carries to another of the same
    # cores per node (the same machine's cores), where no accelerator is named.
    same_cores_same_speed: ClassVar[bool] = False
    # A lease that ends by itself, sized from the campaign's plan (None: what it books
    # ends when its user releases it).
    lease: ClassVar[LeaseRule | None] = None
    # The setting that names what it makes on a machine several testbeds share ("":
    # none shared).
    named_by: ClassVar[str] = ""

    def testbed(self, spec: TargetSpec) -> Testbed:
        raise NotImplementedError

    def launcher(self, spec: TargetSpec, tb: Testbed) -> launchers.Launcher:
        """The launcher its runs take, the one asked for: a batch launcher (the
        testbed's own Slurm) submits on its head node."""
        return launchers.get(spec, tb.head_node().access)

    def lock_files(self, tb: Testbed) -> list[Path]:
        """What marks the testbed busy while a sweep or probe measures on it: a lock
        per machine."""
        machines = paths.private_dir(paths.state_root() / "machines", paths.state_root())
        return [machines / f"{name}.lock" for name in sorted({n.name for n in tb.nodes})]

    def preflight(self, target: Target, largest: RunSpec) -> None:
        """UsageError naming what to fix, before anything is submitted or started
        (largest: the sweep's largest run)."""

    def prepare(self, target: Target) -> None:
        """Refuse nodes that do not answer; nothing is launched yet."""
        target.check_nodes()
        target.scheduler.prepare()

    def checks_bench_copy(self) -> bool:
        """Its nodes hold a copy of bench/ (placed at deploy time) that must be this
        checkout's; the others see this checkout itself."""
        return self.deployed

    def login_sees_node_files(self) -> bool:
        """The login node sbatch runs on sees the files the workers read: a path
        is worth asking it about before anything is submitted."""
        return False


K = TypeVar("K", bound=type[Kind])
KINDS: Registry[Kind] = Registry("testbed kind", lambda cls: cls())


def register(cls: K) -> K:
    """The class decorator that makes a kind found by its name."""
    return KINDS.register(cls)


def unregister(name: str) -> None:
    """A kind no longer found (a test's own kind, once the test is done)."""
    KINDS.unregister(name)


def registered() -> dict[str, Kind]:
    return dict(KINDS.items())


def named(name: str) -> Kind:
    return KINDS.named(name)


def for_env(env: str) -> Kind:
    """The kind behind `--env NAME`: a kind of that name that hpcbench does not deploy
    (localhost, slurm), else the deployed environment's, by its folder (a variant's
    is its folder's); a folder no kind names is a plain deployed one."""
    kind = KINDS.get(env)
    if kind is not None and not kind.deployed:
        return kind
    folder = paths.env_dir(env).name  # unknown names: UsageError listing the known ones
    kind = KINDS.get(folder)
    return kind if kind is not None and kind.deployed else KINDS.named("deployed")


def for_target(spec: TargetSpec) -> Kind:
    """The kind a sweep's or probe's options name: --hosts, else --env."""
    return KINDS.named("hosts") if spec.hosts else for_env(spec.env)


def of(tb: Testbed) -> Kind:
    return named(tb.kind)
