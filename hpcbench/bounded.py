"""One subprocess with a deadline: the tools deploy, verify and destroy call
(terraform, ansible-playbook, pytest, lease cancel commands) may wait on a
testbed for a long time, but never forever.

The child runs in its own process group, so that a timeout or a Ctrl-C stops
what it started too (terraform's provisioners, jFed's java, ssh). Each limit
has a default and an environment variable that raises it; the timeout's
message names both the step and that variable.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from hpcbench.errors import UsageError

# A child asked to stop (SIGINT, as a terminal's Ctrl-C would) gets this long to
# clean up (terraform writes its state, a script removes its temporary files)
# before the whole group is killed.
GRACE_S = 30.0


@dataclass(frozen=True)
class Limit:
    """How long one kind of step may take, and the variable that changes it."""

    what: str  # e.g. "terraform apply"
    variable: str  # HPCBENCH_..._TIMEOUT_S
    default_s: float

    def seconds(self) -> float:
        text = os.environ.get(self.variable, "").strip()
        if not text:
            return self.default_s
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not 1 <= value <= 7 * 24 * 3600:  # a typo, not a week-long wait
            raise UsageError(f"{self.variable}={text!r}: give a number of seconds from 1 to 604800")
        return value


# Defaults sized for real testbeds (a Virtual Wall slice takes up to ~30 min).
TERRAFORM = Limit("terraform", "HPCBENCH_TERRAFORM_TIMEOUT_S", 900)  # init, plan, show, output
APPLY = Limit("terraform apply", "HPCBENCH_APPLY_TIMEOUT_S", 3600)  # apply and destroy
ANSIBLE = Limit("ansible-playbook", "HPCBENCH_ANSIBLE_TIMEOUT_S", 3600)
VERIFY = Limit("verify (pytest-testinfra)", "HPCBENCH_VERIFY_TIMEOUT_S", 1800)
CANCEL = Limit("a lease's cancel command", "HPCBENCH_CANCEL_TIMEOUT_S", 600)
REACH = Limit("waiting for the nodes' sshd", "HPCBENCH_REACH_TIMEOUT_S", 300)


class Timeout(RuntimeError):
    """A step ran out of time; the message says which and how to allow more."""

    def __init__(self, what: str, seconds: float, variable: str) -> None:
        super().__init__(
            f"{what} did not finish in {seconds:.0f} s and was stopped; "
            f"to allow more, export {variable}=SECONDS"
        )
        self.what = what
        self.seconds = seconds


def _signal_group(proc: subprocess.Popen[str], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def stop(proc: subprocess.Popen[str], grace_s: float = GRACE_S) -> None:
    """SIGINT to the child's group, then SIGKILL to it after grace_s, or at once on a
    second Ctrl-C (or SIGTERM) during the grace period: the group is killed either way,
    so no terraform, ansible or jFed is left holding a state lock."""
    _signal_group(proc, signal.SIGINT)
    try:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace_s)
    finally:
        _signal_group(proc, signal.SIGKILL)  # leftovers of the group, even if the leader exited
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace_s)  # a killed group ends at once; bounded all the same


# The signals that stop a command as Ctrl-C does (SIGTERM and SIGHUP once
# schedulers.base.stop_on_signals made them raise KeyboardInterrupt).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def ctrl_c_deferred() -> Iterator[None]:
    """A Ctrl-C (or a SIGTERM or SIGHUP handled as one) during a clean-up takes effect
    once the clean-up is done, so that a second press or a closed terminal cannot cut
    short the clean-up that the first started. The first such signal is then handed
    to the handler it would have met: KeyboardInterrupt, or an enclosing deferral's,
    which keeps it for its own end. Only the main thread receives signals; elsewhere,
    and for a signal ignored or left at its default action, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handlers = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    previous = {sig: h for sig, h in handlers.items() if callable(h)}
    pressed: list[int] = []
    for sig in previous:
        signal.signal(sig, lambda signum, frame: pressed.append(signum))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if pressed:
        previous[signal.Signals(pressed[0])](pressed[0], None)


def run(
    argv: list[str],
    limit: Limit,
    *,
    what: str | None = None,
    capture: bool = False,
    on_line: Callable[[str], None] | None = None,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    umask: int = -1,
    grace_s: float = GRACE_S,
    seconds: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run argv to completion within limit.seconds() (or `seconds`, a part of it).

    capture: stdout and stderr come back in the result (nothing shown);
    on_line: stdout+stderr are read line by line and handed over (nothing
    captured); neither: the child writes to this process's stdout/stderr.
    A timeout stops the group and raises Timeout; a Ctrl-C stops it and
    re-raises KeyboardInterrupt. stdin is never the terminal's.
    """
    seconds = limit.seconds() if seconds is None else seconds
    out = subprocess.PIPE if (capture or on_line) else None
    err = subprocess.PIPE if capture else (subprocess.STDOUT if on_line else None)
    proc = subprocess.Popen(
        argv,
        stdout=out,
        stderr=err,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=cwd,
        start_new_session=True,
        umask=umask,
    )
    reader: threading.Thread | None = None
    if on_line is not None:
        assert proc.stdout is not None
        stream = proc.stdout
        reader = threading.Thread(target=lambda: [on_line(line) for line in stream], daemon=True)
        reader.start()
    try:
        if capture:
            stdout, stderr = proc.communicate(timeout=seconds)
        else:
            proc.wait(timeout=seconds)
            stdout = stderr = ""
    except subprocess.TimeoutExpired:
        stop(proc, grace_s)
        raise Timeout(what or limit.what, seconds, limit.variable) from None
    except BaseException:  # Ctrl-C (the child is in its own group: tell it ourselves)
        stop(proc, grace_s)
        raise
    finally:
        if reader is not None:
            reader.join(timeout=5)
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
