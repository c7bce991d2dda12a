"""Fixtures the unit tests share, and the check that none of them starts a process."""

from __future__ import annotations

import importlib
import importlib.util
import multiprocessing.process
import os
import subprocess
import sys
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from types import ModuleType

import pytest

from hpcbench.measure import fingerprint

NO_PROCESS = "a unit test starts no process (CONTRIBUTING.md): move it to tests/integration"


# What a test tried to start, kept so that a refusal the code under test caught (an
# `except Exception` on the way) still fails the test.
_STARTED = pytest.StashKey[list[str]]()


def _argv0(args: object) -> str:
    """The program a call names: a command line's first word, or the path as given."""
    if isinstance(args, str | bytes | os.PathLike):
        return os.fsdecode(args).split(" ", 1)[0]
    if isinstance(args, Sequence) and args:
        return os.fsdecode(args[0])
    return "?"


@pytest.fixture(scope="session", autouse=True)
def _third_party_first_imports() -> None:
    """Imports that start a process once, the first time (torch's asks ldconfig where
    libdl is, matplotlib's font cache asks fc-list on a machine without one): done
    before any test's check, as collection does for a whole run."""
    import matplotlib.font_manager  # noqa: F401

    if importlib.util.find_spec("torch") is not None:
        import torch  # noqa: F401


@pytest.fixture(autouse=True)
def _no_git_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """A record's commit comes from git (fingerprint.git_commit, cached per process,
    so whichever test came first would start it): none in a unit test."""
    monkeypatch.setattr(fingerprint, "git_commit", lambda: None)


@pytest.fixture(autouse=True)
def _no_process_started(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Any process a unit test starts fails it loudly, whichever way it is started."""
    started = request.node.stash.setdefault(_STARTED, [])

    def refuse(call: str, program: Callable[..., str] | None = None) -> Callable[..., None]:
        def refused(*args: object, **kwargs: object) -> None:
            started.append(f"{call} {program(*args, **kwargs)}" if program else call)
            raise AssertionError(f"{NO_PROCESS}; it started {started[-1]}")

        return refused

    # subprocess.run, check_output, Popen and asyncio's subprocesses all come here.
    monkeypatch.setattr(
        subprocess.Popen, "_execute_child", refuse("subprocess", lambda _, args, *__: _argv0(args))
    )
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse("multiprocessing"))
    for name in ("fork", "forkpty"):
        monkeypatch.setattr(os, name, refuse(f"os.{name}()"))
    for name in ("posix_spawn", "posix_spawnp", "execv", "execve", "execvp", "execvpe"):
        monkeypatch.setattr(os, name, refuse(f"os.{name}", lambda path, *_, **__: _argv0(path)))
    monkeypatch.setattr(os, "system", refuse("os.system", _argv0))


@pytest.fixture
def refused(request: pytest.FixtureRequest) -> list[str]:
    """What the check refused to start in this test; a test that means to be refused
    empties it."""
    return request.node.stash.setdefault(_STARTED, [])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A phase that passed although a process start was refused in it fails."""
    report = yield
    started = item.stash.get(_STARTED, [])
    if started and report.passed:
        report.outcome = "failed"
        report.longrepr = f"{NO_PROCESS}; it started {', '.join(started)} (the error was caught)"
    started.clear()
    return report


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
