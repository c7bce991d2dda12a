"""Fixtures the unit tests share."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

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


EVALUATION = Path(__file__).parents[2] / "evaluation"


@pytest.fixture
def evaluation(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], ModuleType]]:
    """A script of evaluation/ imported by its name. Its modules (published, cli, ...:
    evaluation's, not hpcbench's) are forgotten after the test, passed or failed."""
    monkeypatch.syspath_prepend(str(EVALUATION))
    yield importlib.import_module
    for name, module in list(sys.modules.items()):
        if Path(getattr(module, "__file__", None) or "/").parent == EVALUATION:
            del sys.modules[name]
