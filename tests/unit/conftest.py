"""Fixtures the unit tests share."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

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
