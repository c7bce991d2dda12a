"""evaluation/hostile.py, the black-box audit of hostile input: it tells each outcome
apart, so a case that is taken where a refusal was due counts against the code."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "evaluation" / "hostile.py"


@pytest.fixture(scope="module")
def hostile():
    spec = importlib.util.spec_from_file_location("hostile_audit", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["hostile_audit"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def work(tmp_path, hostile) -> Path:
    folder = tmp_path / "cases"
    folder.mkdir()
    hostile.make_standins(folder)
    return folder


def outcome(hostile, work: Path, case) -> str:
    hostile.run_case(case, work, len(list(work.glob("case-*"))) + 1, None)
    return case.outcome


def test_a_file_taken_where_a_refusal_was_due_is_silent(hostile, work):
    case = hostile.plan_case("t", "the base", hostile.BASE, hostile.REFUSED, "name")
    assert outcome(hostile, work, case) == "silent"


def test_a_refusal_that_names_another_key_is_a_wrong_message(hostile, work):
    doc = hostile.with_value(("sweep", "repeats"), "many")
    case = hostile.plan_case("t", "repeats", doc, hostile.REFUSED, "batch")
    assert outcome(hostile, work, case) == "wrong message"
    case = hostile.plan_case("t", "repeats", doc, hostile.REFUSED, "repeats")
    assert outcome(hostile, work, case) == hostile.REFUSED


def test_the_yaml_group_runs_clean_from_the_command_line():
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--group", "yaml"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "traceback 0, hang 0, silent 0" in proc.stdout
