"""Fixtures the unit tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcbench.schedulers import slurm
from tests.interrupt import ctrl_c_raises_here
from tests.unit.test_campaign import Fakes


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
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))
    return Fakes(monkeypatch)
