"""How `make test` shares the machine: pytest-xdist workers (docs/development.md); and
the fixtures tests/unit and tests/integration share."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from hpcbench.schedulers import slurm
from tests.interrupt import ctrl_c_raises_here

if TYPE_CHECKING:
    from tests.unit.test_campaign import Fakes

# `make test` runs on two pytest-xdist workers. The tests of the shared local testbed
# are one unit of work, run on one worker in the order tests/e2e/conftest.py gives
# them; those of the GPULab and jFed stand-ins, whose testbeds (names, subnets, ports)
# are their own, another, run side by side with the first; the sweeps on this machine
# (--env localhost), which one lock lets run one at a time, a third. Any other test
# goes to whichever worker is free (pytest_xdist_make_scheduler).
GROUPS = {
    "testbed": (
        "tests/e2e/test_local_testbed.py",
        "tests/e2e/test_faults.py",
        "tests/e2e/test_kill.py",
        "tests/e2e/test_campaign_slurm.py",
        "tests/e2e/test_campaign_lm.py",
        "tests/e2e/test_slurm_cleanup.py",
    ),
    "standins": (
        "tests/e2e/test_campaign.py",
        "tests/e2e/test_gpulab.py",
        "tests/e2e/test_virtualwall.py",
        "tests/e2e/test_state_secrets.py",
        "tests/e2e/test_campaign_layouts.py",  # solo: run before the others, alone
    ),
    "localhost": (
        "tests/integration/test_scale_local.py",
        "tests/integration/test_transformer_local.py",
        "tests/integration/test_mlperf_local.py",
        "tests/integration/test_hf_config_local.py",
    ),
}


def group_of(nodeid: str) -> str | None:
    """The unit of work (GROUPS) a test belongs to; None for a test on its own."""
    for group, modules in GROUPS.items():
        if any(nodeid.startswith(f"{m}::") for m in modules):
            return group
    return None


@pytest.hookimpl(optionalhook=True)  # a run without pytest-xdist has no such hook
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """Each of GROUPS as one unit, every other test as a unit of its own. (pytest-xdist
    3.8's xdist_group mark would do it, but under pytest 9 its renamed node id is lost:
    it sets Item._nodeid, which pytest 9 no longer reads.) xdist deals the biggest units
    out first: the two e2e groups start at once, one on each worker."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid) or nodeid

    return GroupScheduling(config, log)


# The shared testbed's group is the suite's longest chain (one testbed, one test after
# another: a fresh run's last eleven minutes are that worker's alone); the other
# worker's tests have the time to spare, so they yield it the CPU. Not more than this:
# their own timing bounds must still hold, as on any loaded machine.
BESIDE_THE_TESTBED_NICE = 5
_beside: dict[str, bool] = {}  # this worker's choice, once made


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Under xdist, a worker whose first test is not of the testbed group, in a run that
    has that group, lowers its priority (and its children's) once."""
    if "worker" in _beside or not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    ours = group_of(item.nodeid) == "testbed"
    runs_it = ours or any(group_of(i.nodeid) == "testbed" for i in item.session.items)
    _beside["worker"] = runs_it and not ours
    if _beside["worker"]:
        os.nice(BESIDE_THE_TESTBED_NICE)


@pytest.fixture(autouse=True)
def _no_slurm_job_left_over() -> Iterator[None]:
    """The jobs a test's cancels left (schedulers.slurm.take_left) stay its own."""
    yield
    slurm.take_left()


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """Ctrl-C to this process raises KeyboardInterrupt, as under a terminal, even where
    the test run inherited SIGINT ignored (tests/interrupt.py)."""
    with ctrl_c_raises_here():
        yield


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Fakes:
    """tests/unit/test_campaign.py's stand-ins for deploy, verify, sweep and destroy,
    with the testbeds' state in this test's folder."""
    from tests.unit.test_campaign import Fakes

    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))
    return Fakes(monkeypatch)
