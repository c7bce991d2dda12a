"""bench/sysinfo.py on a node that names no OS: what it does not say is left out, the OS
read from Python's platform module, which asks `uname` (the fake /proc and /sys trees:
tests/unit/test_sysinfo.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import sysinfo  # noqa: E402


def test_what_a_node_does_not_say_is_left_out(tmp_path):
    facts = sysinfo.host_facts(tmp_path / "none", tmp_path / "none", tmp_path / "none")
    assert set(facts) == {"os"}
