"""Ctrl-C for the processes a test starts, whatever started the test run.

A shell runs background jobs with SIGINT ignored when job control is off (`cmd &`
in a script), and an ignored signal is inherited: bash then cannot trap it
("Signals ignored upon entry to the shell cannot be trapped or reset", bash(1)),
and Python never installs its KeyboardInterrupt handler. A test that sends Ctrl-C
starts its process with SIGINT back at its default, as a terminal's foreground
job has it; a test that sends Ctrl-C to its own process sets Python's handler
for the test's length (tests/unit/conftest.py, ctrl_c_raises).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


def as_from_a_terminal() -> None:
    """preexec_fn for subprocess.Popen: SIGINT at its default in the child."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def ctrl_c_raises_here() -> Iterator[None]:
    """This process's SIGINT as Python sets it up under a terminal (KeyboardInterrupt),
    then back to what it inherited."""
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, inherited)
