"""A campaign as its file gives it (campaign_file.load): its testbeds, each testbed's
sweep parts and the cells they owe, as frozen data the runner, the journal and the
plan read. Nothing here reads a file or checks a value."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcbench.campaign.cost import Price
from hpcbench.core.errors import UsageError
from hpcbench.launchers.specs import SweepSpec, TargetSpec, WorkloadSpec
from hpcbench.measure.store import Store
from hpcbench.measure.sweep import Config
from hpcbench.testbeds.kinds import Kind


@dataclass(frozen=True)
class Cell:
    """One configuration on one testbed: what `status` lists and `--resume` skips."""

    testbed: str
    config: Config  # batch, nodes, workers: its label and key are the sweep's
    gpus_per_node: int  # the sweep it belongs to (a baseline is one worker of such a sweep)
    id: str
    # A transformer's parallelism (ddp, fsdp2, hsdp), which its label names; "" for a CNN.
    parallel: str = ""

    @property
    def batch(self) -> int:
        return self.config.batch

    @property
    def nodes(self) -> int:
        return self.config.nodes

    @property
    def workers(self) -> int:
        return self.config.workers

    @property
    def label(self) -> str:
        return self.config.label + (f", {self.parallel}" if self.parallel else "")


@dataclass(frozen=True)
class SweepPart:
    """One `scale` sweep on a testbed, as `scale` resolves its options (this testbed's
    environment, its results folder, resumed, its gpus_per_node), and its cells."""

    gpus_per_node: int
    workload: WorkloadSpec
    target: TargetSpec
    sweep: SweepSpec
    cells: tuple[Cell, ...]


@dataclass(frozen=True)
class Expect:
    """What `campaign plan` assumes before any result exists (None: not given)."""

    images_per_s: float | None = None
    deploy_s: int | None = None
    verify_s: int | None = None
    destroy_s: int | None = None
    tokens_per_s: float | None = None  # a transformer's one worker


@dataclass(frozen=True)
class Hardware:
    """What a testbed's forecast needs of its machines before they run anything (None:
    not given): the accelerator (or CPU) model a published figure or another store's
    runs are matched by, and the link across nodes where the settings give none."""

    accelerator: str | None = None  # 'V100', 'A100-SXM4-80GB': a GPU name holds it
    link: str | None = None  # line rate across nodes, '100gbit'
    transport: str | None = None  # tcp | rdma (scaling_model.LINK_EFFICIENCY)
    intra_node: str | None = None  # scaling_model.INTRA_NODE: pcie3, nvlink2, ...
    link_efficiency: float | None = None  # share of the line rate a ring achieves


@dataclass(frozen=True)
class TestbedPlan:
    index: int  # 1-based, in the file's order
    name: str
    env: str  # the environment deployed, or the kind's own name (slurm, hosts)
    title: str
    settings: tuple[tuple[str, str], ...]  # Terraform variables, as `deploy --var` takes them
    ansible: dict[str, Any]  # group_vars written beside the rendered inventory
    keep_on_failure: bool
    expect: Expect
    fingerprint: str
    nodes_available: int | None  # from the settings, where they say (node_count, topology)
    gpus_per_node: int | None  # per node, where the settings say (topology)
    parts: tuple[SweepPart, ...]
    kind: Kind  # hpcbench.testbeds.kinds: what it is, books and leaves behind
    # The variables it is known to be made with, read once at load (Kind.given_settings:
    # a deployed one's variant file, then its settings; none for the others).
    given: dict[str, Any]
    where: str = ""  # the partition and login node, or the hosts: what the plan shows
    hardware: Hardware = Hardware()
    price: Price | None = None  # `price:` (hpcbench.campaign.cost); None: not given

    @property
    def cells(self) -> list[Cell]:
        return [c for part in self.parts for c in part.cells]


@dataclass(frozen=True)
class Budget:
    """What a campaign `hpcbench advise` wrote was advised for (`advice:`): a model
    trained on `amount` tokens, samples (a transformer's sequences) or images; the
    report draws its measured front (time to the budget against GPU-hours)."""

    model: str
    amount: float
    unit: str  # tokens | samples | images


@dataclass(frozen=True)
class Campaign:
    path: Path
    name: str
    description: str
    out: Path
    testbeds: tuple[TestbedPlan, ...]
    sweep: dict[str, Any] = field(default_factory=dict)  # the campaign-wide sweep, as given
    # Results folders of earlier sweeps whose single-worker runs a forecast may use.
    calibrate_from: tuple[Path, ...] = ()
    advice: Budget | None = None  # `advice:`, where advise wrote the file

    @property
    def cells(self) -> list[Cell]:
        return [c for tb in self.testbeds for c in tb.cells]

    def testbed(self, name: str) -> TestbedPlan:
        for tb in self.testbeds:
            if tb.name == name:
                return tb
        raise UsageError(
            f"{self.path}: no testbed {name!r}: choose one of "
            f"{', '.join(t.name for t in self.testbeds)}"
        )

    def testbed_out(self, tb: TestbedPlan) -> Path:
        """Each testbed's own results store (a `scale --out` folder)."""
        return self.out / tb.name

    def testbed_store(self, tb: TestbedPlan) -> Store:
        """That store, read and written with no link followed below `out`."""
        return Store(self.testbed_out(tb), root=self.out)

    def before_booking_store(self) -> Store:
        """The one-worker runs measured on this machine before a testbed of its cores
        was booked (campaign/before_booking.py): beside the testbeds' stores, in a
        folder no testbed name can be ('_')."""
        return Store(self.out / "before_booking", root=self.out)


def iter_cells(campaign: Campaign) -> Iterator[tuple[TestbedPlan, Cell]]:
    for tb in campaign.testbeds:
        for cell in tb.cells:
            yield tb, cell
