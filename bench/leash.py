"""Keeps a rank on a leash: it dies with the run that started it.

    python leash.py [--stdin] [--time-limit S] -- python train.py ...

Runs the command in its own process group and stops that group, and every
process the command left behind, when the first of these happens:

- the time limit passes (exit status 124, as coreutils `timeout`);
- --stdin: standard input reaches end of file. The harness holds the write end
  of the ssh client's stdin for the whole run; when the harness or the ssh
  client dies, sshd passes the end of file on to here;
- standard output has no reader left (sshd exited with a dropped connection,
  or the launcher that reads the rank's output died);
- SIGTERM, SIGHUP or SIGINT.

Without it, a rank whose launcher or ssh session went away stays blocked in
a collective until its own timeout and overlaps the sweep's next run.
The leash is a child subreaper, so processes that left the command's
process group (torchrun's workers start their own sessions) reparent to it
and are stopped too. Standard library only: it runs on the nodes.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import select
import signal
import subprocess
import sys
import threading
import time

POLL_S = 0.1
GRACE_S = 5.0  # between SIGTERM and SIGKILL
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
EXIT_TIME_LIMIT = 124  # coreutils timeout's status
EXIT_STOPPED = 143  # 128 + SIGTERM


def _subreaper() -> None:
    """Orphans of the command reparent to this process (Linux only; best effort)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def descendants(root: int) -> list[int]:
    """Every live process below `root`, from /proc (parents before children)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        children.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _signal_all(group: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, sig)
    for pid in descendants(os.getpid()):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _reap() -> None:
    """Collect exited orphans (a subreaper inherits them as children)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def stop(child: subprocess.Popen, grace_s: float = GRACE_S) -> None:
    """TERM the command's group and everything below the leash; KILL what is left."""
    _signal_all(child.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap()
        if child.poll() is not None and not descendants(os.getpid()):
            return
        time.sleep(POLL_S)
    _signal_all(child.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(grace_s)
    _reap()


def output_gone(fd: int = 1) -> bool:
    """True when nothing reads `fd` any more (a pipe or socket whose reader closed)."""
    poller = select.poll()
    poller.register(fd, 0)  # POLLERR and POLLHUP are always reported
    try:
        events = poller.poll(0)
    except OSError:
        return False
    return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in events)


def _watch_stdin(eof: threading.Event) -> None:
    with contextlib.suppress(OSError, ValueError):
        while os.read(0, 4096):
            pass
    eof.set()


def _say(text: str) -> None:
    with contextlib.suppress(OSError):  # stderr may be gone with the session
        sys.stderr.write(f"leash: {text}\n")
        sys.stderr.flush()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--time-limit", type=float, default=0.0, help="seconds; 0: none")
    p.add_argument("--stdin", action="store_true", help="stop at end of file on stdin")
    p.add_argument("--grace", type=float, default=GRACE_S, help="seconds from TERM to KILL")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        p.error("give the command after --")
    if not (0 <= args.time_limit < 1e9 and 0 <= args.grace < 3600):
        p.error("--time-limit and --grace must be 0 or more seconds")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    why: list[str] = []

    def on_signal(signum: int, frame: object) -> None:
        why.append(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, on_signal)
    _subreaper()
    deadline = time.monotonic() + args.time_limit if args.time_limit else None
    child = subprocess.Popen(args.command, stdin=subprocess.DEVNULL, start_new_session=True)
    eof = threading.Event()
    if args.stdin:
        threading.Thread(target=_watch_stdin, args=(eof,), daemon=True).start()
    status = EXIT_STOPPED
    while True:
        rc = child.poll()
        if rc is not None:
            status = rc if rc >= 0 else 128 - rc
            why.append("")  # ended by itself: stop only what it left behind
        elif deadline is not None and time.monotonic() > deadline:
            why.append(f"time limit of {args.time_limit:g} s")
            status = EXIT_TIME_LIMIT
        elif eof.is_set():
            why.append("end of input (the harness or its ssh session is gone)")
        elif output_gone():
            why.append("nothing reads the output any more")
        if why:
            break
        time.sleep(POLL_S)
    if why[0]:
        _say(f"stopping {args.command[0]}: {why[0]}")
    stop(child, args.grace)
    return status


if __name__ == "__main__":
    sys.exit(main())
