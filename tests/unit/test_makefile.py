"""The Makefile's own contract: `make help` lists every target with what it does, and
every target named .PHONY has a rule (a name with none would do nothing, silently)."""

import re
import subprocess
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


def test_make_help_lists_every_target_with_a_line_on_it():
    out = subprocess.run(
        ["make", "-s", "--no-print-directory", "help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    listed = dict(re.findall(r"^  ([a-z][a-z-]*) +(\S.*)$", out, re.M))
    assert set(listed) == _rules()
    assert {"test", "test-unit", "lint", "clean-cache"} <= set(listed)
    assert not [text for text in listed.values() if "$(" in text], "unexpanded in help"
