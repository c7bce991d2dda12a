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
import select
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcbench.core.errors import UsageError

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


# The signals that stop a command as Ctrl-C does (SIGTERM and SIGHUP once
# schedulers.base.stop_on_signals made them raise KeyboardInterrupt).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_STOP_BYTES = frozenset(int(sig) for sig in STOP_SIGNALS)

# What each stop signal means to the person who sent it, for the journal and the terminal.
SIGNAL_NAMES = {
    signal.SIGINT: "SIGINT (Ctrl-C)",
    signal.SIGTERM: "SIGTERM",
    signal.SIGHUP: "SIGHUP (terminal closed)",
}


class Interrupted(KeyboardInterrupt):
    """A stop signal, raised as Ctrl-C is (everything that handles KeyboardInterrupt
    handles it), naming the signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def interrupt(signum: int, frame: object) -> None:
    """A handler: the stop signal raised as Interrupted."""
    raise Interrupted(signum)


def stop_name(err: BaseException) -> str:
    """Which signal stopped the command: Python's own KeyboardInterrupt is Ctrl-C's."""
    return SIGNAL_NAMES.get(getattr(err, "signum", signal.SIGINT), "a signal")


class StopGate:
    """The stop signals of this process while a block runs (in the main thread: only it
    receives them; elsewhere, and for a signal ignored or at its default action,
    nothing changes). The gate is open or shut:

    - open: the first stop signal goes to the handler it would have met, which raises
      KeyboardInterrupt (or an enclosing gate's, which may keep it); once one has been
      raised the gate is shut, so that no second one can cut short what the first
      started, before it is even in place;
    - shut (`shut=True`, `hold()`, or after a raise): each is kept, and the first kept
      goes on to its handler as the block ends, unless one was raised already.

    With `count`, every delivery is counted, not only those Python's handler sees:
    CPython's C-level handler writes one byte to the wakeup fd for each signal even
    where its Python handler then runs once for several (Modules/signalmodule.c,
    trip_signal); `pressed_again()` says whether a stop signal came after the one
    raised."""

    def __init__(self, *, shut: bool = False, count: bool = False) -> None:
        self.shut, self.count = shut, count
        self.raised = False
        self.kept: list[int] = []
        self.after = 0  # stop signals since the one raised, that one included
        self.previous: dict[int, Callable[[int, Any], Any]] = {}
        self._done = False
        self._fds: tuple[int, int] | None = None  # the wakeup pipe (read, write)
        self._old_fd = -1

    def __enter__(self) -> StopGate:
        if threading.current_thread() is not threading.main_thread():
            return self
        try:
            if self.count:
                self._wakeup()
            for sig in STOP_SIGNALS:
                handler = signal.getsignal(sig)
                if callable(handler):
                    self.previous[sig] = handler
                    signal.signal(sig, self._handle)
        except BaseException:
            self._restore()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._restore()
        if self.kept and not self.raised:
            sig = self.kept[0]
            self.previous[sig](sig, None)

    def hold(self) -> None:
        """Shut: from here each stop signal waits for the block's end."""
        self.shut = True

    def open(self) -> None:
        """Open: a stop signal kept so far goes to its handler now."""
        self.shut = False
        if self.kept:
            sig, n = self.kept[0], len(self.kept)
            self.kept.clear()
            self._pass_on(sig, n)

    def pressed_again(self) -> bool:
        """Whether a stop signal came after the one raised."""
        self._note(self._take())
        return self.after >= 2

    def _handle(self, signum: int, frame: object) -> None:
        if self._done:  # left in place by an exit cut short: as if restored
            self.previous[signum](signum, frame)
            return
        n = max(1, self._take())  # this one, and any Python's handler ran once for
        if self.raised:
            self.after += n
        elif self.shut:
            self.kept.append(signum)
        else:
            self._pass_on(signum, n, frame)

    def _pass_on(self, signum: int, n: int, frame: object = None) -> None:
        try:
            self.previous[signum](signum, frame)
        except BaseException:
            self.raised, self.shut, self.after = True, True, n
            raise

    def _note(self, n: int) -> None:
        if self.raised:
            self.after += n

    def _wakeup(self) -> None:
        read, write = os.pipe()
        os.set_blocking(read, False)
        os.set_blocking(write, False)
        self._fds = (read, write)
        self._old_fd = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        if self._old_fd != -1:  # another's (an event loop): left to it, nothing counted
            signal.set_wakeup_fd(self._old_fd)
            self._close_fds()

    def _take(self) -> int:
        """The stop signals delivered since the last look (wakeup bytes read)."""
        if self._fds is None:
            return 0
        n = 0
        with contextlib.suppress(BlockingIOError):
            while data := os.read(self._fds[0], 512):
                n += sum(1 for byte in data if byte in _STOP_BYTES)
        return n

    def fileno(self) -> int | None:
        """The wakeup pipe's read end, readable once a signal came; None: not counting."""
        return None if self._fds is None else self._fds[0]

    def _close_fds(self) -> None:
        if self._fds is not None:
            for fd in self._fds:
                os.close(fd)
            self._fds = None

    def _restore(self) -> None:
        self._done = True
        try:
            for sig, handler in self.previous.items():
                signal.signal(sig, handler)
        finally:
            if self._fds is not None:
                signal.set_wakeup_fd(self._old_fd)
                self._close_fds()


def ctrl_c_deferred() -> StopGate:
    """A Ctrl-C (or a SIGTERM or SIGHUP handled as one) during a clean-up takes effect
    once the clean-up is done, so that a second press or a closed terminal cannot cut
    short the clean-up that the first started. The first such signal is then handed
    to the handler it would have met: KeyboardInterrupt, or an enclosing deferral's,
    which keeps it for its own end."""
    return StopGate(shut=True)


def stop(
    proc: subprocess.Popen[str],
    grace_s: float = GRACE_S,
    gate: StopGate | None = None,
    tag: str | None = None,
) -> None:
    """SIGINT to the child's group, then SIGKILL to it after grace_s, or at once on a
    second Ctrl-C (or SIGTERM, SIGHUP) during the grace period, counted by `gate`
    however close it came to the first: the group is killed either way, so no
    terraform, ansible or jFed is left holding a state lock. With `tag` (run's), what
    left the group is killed too (kill_tagged)."""
    try:
        _signal_group(proc, signal.SIGINT)
        _graced(proc, grace_s, gate)
    finally:
        _signal_group(proc, signal.SIGKILL)  # leftovers of the group, even if the leader exited
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace_s)  # a killed group ends at once; bounded all the same
        if tag is not None:
            kill_tagged(tag, grace_s)


# Set in each bounded child's environment, a value per run: what the child starts
# inherits it, in a session of its own or not (ansible's workers call setsid, and start
# ssh with start_new_session), so a stop finds and kills what the group kill missed.
RUN_TAG = "HPCBENCH_RUN_TAG"


def processes_with(field: str, mark: bytes) -> list[int]:
    """This user's processes, this one aside, whose /proc/<pid>/<field> (environ,
    cmdline) holds `mark`; none where there is no /proc."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, ValueError):
            pid = int(entry.name)
            mine = pid != os.getpid() and entry.stat().st_uid == os.getuid()
            if mine and mark in (entry / field).read_bytes():
                found.append(pid)
    return found


def tagged(tag: str) -> list[int]:
    """The processes whose environment holds RUN_TAG=tag."""
    return processes_with("environ", f"{RUN_TAG}={tag}\0".encode())


def signal_until_gone(find: Callable[[], list[int]], sig: int, within_s: float) -> bool:
    """Send `sig` to what find() finds, again until it finds none (one may fork between
    a look and its signal), for at most within_s; whether none is left. A process that
    has ended is found no more even before it is reaped: a zombie's environ and
    cmdline read empty."""
    deadline = time.monotonic() + within_s
    while found := find():
        if time.monotonic() >= deadline:
            return False
        for pid in found:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        time.sleep(0.05)
    return True


def kill_tagged(tag: str, within_s: float) -> None:
    """SIGKILL every process of the run's tag, until none is left or within_s passed."""
    signal_until_gone(lambda: tagged(tag), signal.SIGKILL, within_s)


def _graced(proc: subprocess.Popen[str], grace_s: float, gate: StopGate | None) -> None:
    """Until the child exits, grace_s passes, or a stop signal comes after the one that
    asked for the stop."""
    deadline = time.monotonic() + grace_s
    wake = gate.fileno() if gate is not None else None
    while proc.poll() is None:
        if gate is not None and gate.pressed_again():
            return
        left = deadline - time.monotonic()
        if left <= 0:
            return
        if wake is not None:  # woken by a signal's byte at once; the child's exit polled
            select.select([wake], [], [], min(left, 0.05))
        else:
            time.sleep(min(left, 0.05))


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
    tag = uuid.uuid4().hex
    env = {**(os.environ if env is None else env), RUN_TAG: tag}
    out = subprocess.PIPE if (capture or on_line) else None
    err = subprocess.PIPE if capture else (subprocess.STDOUT if on_line else None)
    # Shut while the child starts: a stop signal then is raised once the child can be
    # stopped (open), never between its start and the handler that stops it. Counting:
    # after a KeyboardInterrupt, Popen.wait and communicate wait 0.25 s more for the
    # child (Lib/subprocess.py, _sigint_wait_secs), and a second press then would end
    # that wait as a KeyboardInterrupt of its own, with stop() never the wiser.
    with StopGate(shut=True, count=True) as gate:
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
        try:
            gate.open()
            if on_line is not None:
                assert proc.stdout is not None
                stream = proc.stdout
                reader = threading.Thread(
                    target=lambda: [on_line(line) for line in stream], daemon=True
                )
                reader.start()
            if capture:
                stdout, stderr = proc.communicate(timeout=seconds)
            else:
                proc.wait(timeout=seconds)
                stdout = stderr = ""
        except subprocess.TimeoutExpired:
            stop(proc, grace_s, gate, tag)
            raise Timeout(what or limit.what, seconds, limit.variable) from None
        except BaseException:  # Ctrl-C (the child is in its own group: tell it ourselves)
            stop(proc, grace_s, gate, tag)
            raise
        finally:
            if reader is not None:
                reader.join(timeout=5)
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
