"""What every testbed kind answers, and the registry that finds a kind by name."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

from hpcbench import launchers
from hpcbench.core import paths
from hpcbench.core.errors import Problem
from hpcbench.core.registry import Registry
from hpcbench.launchers.base import RunSpec
from hpcbench.launchers.specs import TargetSpec
from hpcbench.schedulers.base import Scheduler
from hpcbench.testbeds import here
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


class KeyChecks(Protocol):
    """The campaign file's checks a kind reads its keys with (hpcbench.campaign.checks,
    a layer above): each returns the value as the campaign keeps it, or raises a
    Problem (hpcbench.core.errors) naming the key path and what to write instead."""

    def mapping(
        self, value: Any, path: str, keys: tuple[str, ...] | None = None
    ) -> dict[str, Any]: ...

    def text(self, value: Any, path: str, example: str = "") -> str: ...

    def duration(self, value: Any, path: str) -> int: ...

    def int_list(self, value: Any, path: str, maximum: int) -> list[int]: ...

    def setting(self, key: str, value: Any, path: str) -> str: ...

    def plain(self, value: Any, path: str) -> Any: ...

    def scale(self, argv: list[str], path: str) -> None:
        """argv (its --env first) through the very parser `scale` uses: a Problem at
        path with the parser's own words."""


@dataclass(frozen=True)
class Given:
    """What a testbed's kind keys in a campaign file give."""

    kind: Kind  # the kind they resolve to (a deployed environment's own)
    env: str  # the environment deployed, or the kind's own name (slurm, hosts)
    where_args: list[str]  # `scale`'s options for it: --env ... or --hosts ...
    identity: dict[str, Any]  # what identifies it, hashed into the fingerprint
    nodes_available: int | None  # where its keys say (node_count, topology, nodes:)
    slots: int | None  # GPUs (workers) per node, where its keys say
    slots_said: str = ""  # which key says so, for the line when a sweep asks more
    where: str = ""  # the partition and login node, or the hosts: what the plan shows
    settings: dict[str, str] = field(default_factory=dict)  # a deployed one's Terraform
    ansible: dict[str, Any] = field(default_factory=dict)  # and Ansible variables


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
    # Keys of a testbed's entry beside campaign_key that only this kind reads.
    beside: ClassVar[tuple[str, ...]] = ()
    # Keys of those whose value is a count: a number there is checked as one.
    counts: ClassVar[tuple[str, ...]] = ()
    # Keys of those that bound how long or say how it is reached, not what is
    # measured: not part of a cell's identity.
    operational: ClassVar[tuple[str, ...]] = ()
    # Who says how many nodes it has, for the line when a sweep asks for more.
    gives_nodes: ClassVar[str] = ""
    # What a campaign does around the testbed's cells, in order, each with the seconds
    # it is assumed to take before one was measured (campaign/estimate.py): here a
    # stack check on one node (a process on a host, a job on a partition), 2 minutes.
    phases: ClassVar[dict[str, float]] = {"verify": 120.0}
    # Its testbeds are environment folders (environments/<name>/), found by the
    # folder's name, which hpcbench deploys and destroys.
    from_folder: ClassVar[bool] = False
    # Each run is a batch job that waits in a queue (its wait is part of the plan).
    queues_jobs: ClassVar[bool] = False
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

    def read_keys(self, raw: dict[str, Any], path: str, checks: KeyChecks) -> Given:
        """Its keys of a campaign's testbed entry (raw; path: the entry's), checked:
        here as it declares them (campaign_options), each becoming its `scale` option,
        checked by the very parser `scale` uses, its error naming the key; what
        identifies it (less its operational keys); its nodes where `nodes` is given."""
        path = f"{path}.{self.campaign_key}"
        given = checks.mapping(raw[self.campaign_key], path, tuple(self.campaign_options))
        argv: list[str] = []
        for key, raw_value in given.items():
            flag, where = self.campaign_options[key], f"{path}.{key}"
            if flag is None:
                continue
            if isinstance(raw_value, bool):  # YAML 1.1's yes/no/on/off
                raise Problem(where, "YAML read this as true/false: write the value in quotes")
            number = isinstance(raw_value, int | float)
            argv.append(f"{flag}={checks.text(str(raw_value) if number else raw_value, where)}")
        checks.scale(["--env", self.name, *argv], path)
        nodes = most_nodes(given, path, checks)
        identity = {k: v for k, v in given.items() if k not in self.operational}
        return Given(
            self,
            self.name,
            ["--env", self.name, *argv],
            {self.campaign_key: identity},
            nodes,
            None,
            where=self.name,
        )

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
        return False

    # ---------------------------------------------------------------- its booking
    # What a campaign books of it and how it gets, checks and gives back its nodes. The
    # defaults: machines that are there (hosts, a partition), nothing booked for the
    # campaign, nothing left behind.

    def booked_line(self, where: str, env: str, nodes: int, gpus: int | None) -> str:
        """What the testbed is and books, for the plan's heading line."""
        return f"{where}: your own machines, nothing booked"

    def node_hours(self, nodes: int, wall_s: float, jobs_node_s: float) -> float:
        """Node-hours booked, from the campaign's wall time on it (wall_s) or its
        jobs' node-seconds (jobs_node_s: each job's seconds times its nodes)."""
        return 0.0

    def gpu_hours(self, gpus: int | None, wall_s: float, jobs_gpu_s: float) -> float | None:
        """GPU-hours booked, as node_hours (gpus: the testbed's GPUs, None where its
        settings do not say; jobs_gpu_s: each job's seconds times its workers)."""
        return 0.0

    def nodes_known(self, env: str) -> bool:
        """Its nodes can be named before the campaign gets them (in the current state
        folder): what a plan resolves a sweep's target against."""
        return True

    # What checks what it would book without creating anything, in the campaign's
    # words ("": nothing is booked for the campaign; its nodes are checked as they are).
    booking_check: ClassVar[str] = ""

    def check_booking(
        self, env: str, settings: tuple[tuple[str, str], ...]
    ) -> tuple[here.NodeLimits, ...]:
        """booking_check, in the current state folder (a scratch one): a UsageError or
        RuntimeError naming what is wrong. Where its nodes would be this machine's
        cores, each one's image and limits, the first's first (runs there tell one
        worker's speed, and what the nodes computing at once cost it, before anything
        is booked: hpcbench.testbeds.here); else ()."""
        return ()

    def acquire(self, env: str, settings: tuple[tuple[str, str], ...]) -> None:
        """Get its nodes for the campaign's turn (the "deploy" phase, where it has one)."""

    def verify(self, env: str) -> int | None:
        """Its own checks of what acquire made: their exit status; None where it has
        none, and a stack check on one node stands in."""
        return None

    def release(self, env: str) -> int:
        """Give back what acquire got (the "destroy" phase): 0, or the exit status of a
        release that left something held."""
        return 0

    def held(self, env: str) -> list[str]:
        """What it still holds in the current state folder, each a line (empty:
        nothing): what a stop, a failed release or `campaign destroy` must speak of."""
        return []

    def given_settings(self, env: str, settings: tuple[tuple[str, str], ...]) -> dict[str, Any]:
        """The variables it is known to be made with before it is made (a forecast reads
        its link there); none for machines that are there."""
        return {}

    def defaults_of(self, env: str) -> str | None:
        """What its defaults are read from (an environment's folder): two testbeds of
        the same carry each other's measured figures. None: nothing of the kind."""
        return None

    def login_sees_node_files(self) -> bool:
        """The login node sbatch runs on sees the files the workers read: a path
        is worth asking it about before anything is submitted."""
        return False


def most_nodes(given: dict[str, Any], path: str, checks: KeyChecks) -> int | None:
    """The most nodes a kind's `nodes:` key gives (the last of its list), if given."""
    if "nodes" not in given:
        return None
    return checks.int_list(given["nodes"], f"{path}.nodes", 100_000)[-1]


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
    if kind is not None and not kind.from_folder:
        return kind
    folder = paths.env_dir(env).name  # unknown names: UsageError listing the known ones
    kind = KINDS.get(folder)
    return kind if kind is not None and kind.from_folder else KINDS.named("deployed")


def for_target(spec: TargetSpec) -> Kind:
    """The kind a sweep's or probe's options name: --hosts, else --env."""
    return KINDS.named("hosts") if spec.hosts else for_env(spec.env)


def of(tb: Testbed) -> Kind:
    return named(tb.kind)
