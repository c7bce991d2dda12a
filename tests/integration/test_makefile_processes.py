"""`make help`, run here, lists every target with what it does (the rules themselves:
tests/unit/test_makefile.py)."""

import re
import subprocess

import pytest

from tests.unit.test_makefile import REPO, _rules

pytestmark = pytest.mark.integration


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
