"""Fixtures the unit tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.interrupt import ctrl_c_raises_here


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """Ctrl-C to this process raises KeyboardInterrupt, as under a terminal, even where
    the test run inherited SIGINT ignored (tests/interrupt.py)."""
    with ctrl_c_raises_here():
        yield
