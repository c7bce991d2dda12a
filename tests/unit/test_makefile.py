"""The Makefile's own contract: every target named .PHONY has a rule (a name with none
would do nothing, silently), and `make help` lists every target with what it does
(tests/integration/test_makefile_processes.py runs it)."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MAKEFILE = (REPO / "Makefile").read_text()


def _phony() -> set[str]:
    text = MAKEFILE.replace("\\\n", " ")
    return {name for line in re.findall(r"^\.PHONY:(.*)$", text, re.M) for name in line.split()}


def _rules() -> set[str]:
    return set(re.findall(r"^([a-z][a-z-]*):(?!=)", MAKEFILE, re.M))


def test_every_phony_target_has_a_rule_and_every_rule_is_phony():
    assert _phony() - _rules() == set(), "named .PHONY without a rule"
    assert _rules() - _phony() == set(), "a rule not named .PHONY"
