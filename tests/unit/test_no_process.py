"""tests/unit/conftest.py's check: a process a unit test starts, by any of the ways
Python has, fails that test and names what it started."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.unit.conftest import NO_PROCESS


def test_a_subprocess_fails_the_test_naming_its_program(refused):
    with pytest.raises(AssertionError, match=re.escape(NO_PROCESS)) as error:
        subprocess.run(["true"])
    assert str(error.value).endswith("it started subprocess true")
    assert refused == ["subprocess true"]
    refused.clear()


@pytest.mark.parametrize(
    "start",
    [
        lambda: subprocess.check_output("echo hi", shell=True),
        lambda: os.system("true"),
        lambda: os.fork(),
        lambda: os.posix_spawnp("true", ["true"], os.environ),
        lambda: os.execvp("true", ["true"]),
        lambda: multiprocessing.get_context("fork").Process(target=print).start(),
        lambda: multiprocessing.get_context("spawn").Process(target=print).start(),
        lambda: asyncio.run(asyncio.create_subprocess_exec("true")),
    ],
    ids=["shell", "system", "fork", "posix_spawnp", "execvp", "mp-fork", "mp-spawn", "asyncio"],
)
def test_every_way_of_starting_one_fails_the_test(start, refused):
    with pytest.raises(AssertionError, match=re.escape(NO_PROCESS)):
        start()
    assert len(refused) == 1
    refused.clear()


def test_a_refusal_the_code_under_test_catches_still_fails_the_test(request, refused):
    with contextlib.suppress(Exception):  # as an `except Exception` in the code under test
        subprocess.run(["true"])
    # The conftest as pytest loaded it (an import would be a second copy of it).
    conftest = request.config.pluginmanager.get_plugin(str(Path(__file__).with_name("conftest.py")))
    passed = pytest.TestReport(request.node.nodeid, ("", 0, ""), {}, "passed", None, "call")
    hook = conftest.pytest_runtest_makereport(request.node, None)
    next(hook)
    with pytest.raises(StopIteration) as judged:
        hook.send(passed)
    assert judged.value.value.failed
    assert judged.value.value.longrepr.endswith("it started subprocess true (the error was caught)")
    assert refused == []  # judged once
