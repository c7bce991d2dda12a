"""How the controller reaches a node over SSH, one bounded remote call, and the end of
the connection masters a run leaves.

Launchers wrap their commands in `SshAccess.argv()`; the target's pre-flight
check (reachability and the node's bench/ manifest) uses `call`; an ansible-playbook
or verify run keeps its masters in `own_masters_folder()`.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hpcbench.core import bounded, paths
from hpcbench.core.errors import UsageError

CALL_TIMEOUT_S = 30


# Options the harness decides itself (host-key checking); an inventory's values of
# them are read (the known_hosts file) or dropped (Ansible's accept-new).
_OWN_OPTIONS = {"stricthostkeychecking", "userknownhostsfile"}


def split_options(args: tuple[str, ...]) -> tuple[tuple[str, ...], dict[str, str]]:
    """ssh arguments without the host-key options, and those options by lower-case name:
    ('-o', 'UserKnownHostsFile=/k', '-p', '2') -> (('-p', '2'), {'userknownhostsfile': '/k'})."""
    kept: list[str] = []
    own: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-o" and i + 1 < len(args):
            option, i = args[i + 1], i + 2
        elif arg.startswith("-o") and len(arg) > 2:
            option, i = arg[2:], i + 1
        else:
            kept.append(arg)
            i += 1
            continue
        key, _, value = option.replace("=", " ", 1).partition(" ")
        if key.lower() in _OWN_OPTIONS:
            own[key.lower()] = value.strip()
        else:
            kept += ["-o", option]
    return tuple(kept), own


# What a refusal names: the file, as the user gave it (--slurm-known-hosts, known_hosts:).
KNOWN_HOSTS, KEY, SOCKETS = "known_hosts", "SSH key", "ssh's socket folder"


def config_path(path: str, what: str, tail: str = "") -> str:
    r"""A file name as one argument of an ssh -o option: '/a b/50%' -> '"/a b/50%%"'.

    ssh reads -o as a configuration line (OpenSSH 9.2 readconf.c process_config_line,
    whose argv_split in misc.c splits at whitespace): ssh_config(5) "Arguments may
    optionally be enclosed in double quotes (") in order to represent arguments
    containing spaces", and in them argv_split takes \\ for \ and \" for ". These three
    options then expand tokens, ssh_config(5) TOKENS: "%% A literal '%'". `tail` is
    already ssh syntax (ControlPath's "/%C"). UsageError where ssh cannot take the name
    at all (paths.ssh_refusal).
    """
    why = paths.ssh_refusal(path)
    if why:
        raise UsageError(f"{what} {path[:80]!r} cannot be given to ssh: {why}; use another path")
    text = path.replace("%", "%%") + tail
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class SshAccess:
    """What ssh needs to reach one node, nothing else."""

    host: str
    port: int = 22
    user: str | None = None
    key_file: str | None = None
    extra_args: tuple[str, ...] = ()
    # The testbed's known_hosts (Ansible's, in the state folder); None: the user's own.
    known_hosts: str | None = None
    # A private folder for one shared connection (ControlMaster): a login node polled
    # by squeue every few seconds is asked to authenticate once, not at every call.
    multiplex: str | None = None

    def __post_init__(self) -> None:
        # Refused where the access is made (option parsing, an inventory read), before
        # anything is created, not at the first connection.
        for path, what in (
            (self.known_hosts, KNOWN_HOSTS),
            (self.key_file, KEY),
            (self.multiplex, SOCKETS),
        ):
            if path:
                config_path(path, what)

    def argv(self) -> list[str]:
        args = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]
        # Host keys are always checked: against the testbed's known_hosts, which the
        # deploy's Ansible run learned them into, or the user's own for --hosts.
        # ssh takes the first value of an option: these come before extra_args.
        args += ["-o", "StrictHostKeyChecking=yes"]
        # Every file name quoted as ssh's configuration syntax reads it (config_path):
        # UserKnownHostsFile takes several files separated by whitespace (ssh_config(5)),
        # so an unquoted "/a b/known_hosts" would be the two files "/a" and "b/known_hosts".
        if self.known_hosts:
            known = config_path(self.known_hosts, KNOWN_HOSTS)
            args += ["-o", f"UserKnownHostsFile={known}"]
        args += ["-o", "LogLevel=ERROR", "-p", str(self.port)]
        if self.multiplex:  # %C: a hash of host, port and user, short enough for a socket
            paths.private_dir(Path(self.multiplex))  # made at the first use, owner only
            args += [
                "-o",
                "ControlMaster=auto",
                "-o",
                "ControlPath=" + config_path(self.multiplex, SOCKETS, "/%C"),
                "-o",
                "ControlPersist=120",
            ]
        # Not -i: ssh expands % tokens in -i's file too, but checks that the file exists
        # before it does (OpenSSH 9.2 ssh.c, case 'i': stat(), then add_identity_file), so
        # no -i name holding a % reaches the key, escaped or not.
        if self.key_file:
            args += ["-o", "IdentityFile=" + config_path(self.key_file, KEY)]
        args += list(split_options(self.extra_args)[0])
        args += ["--", f"{self.user}@{self.host}" if self.user else self.host]
        return args


@dataclass(frozen=True)
class Reply:
    """What one remote call gave: its output, or why the node could not be reached."""

    stdout: str = ""
    problem: str | None = None  # None: reached, and the command exited 0

    @property
    def ok(self) -> bool:
        return self.problem is None


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def call(access: SshAccess, command: str = "true", timeout_s: float = CALL_TIMEOUT_S) -> Reply:
    """Run one shell line on the node, bounded; a failure is the last line ssh printed."""
    try:
        proc = subprocess.run(
            [*access.argv(), command],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return Reply(problem=f"no answer in {timeout_s:.0f} s")
    except OSError as err:
        return Reply(problem=str(err))
    if proc.returncode != 0:
        return Reply(proc.stdout, last_line(proc.stderr))
    return Reply(proc.stdout)


def send(access: SshAccess, command: str, data: bytes, timeout_s: float = 120) -> Reply:
    """Run one shell line on the node with `data` on its standard input, bounded."""
    try:
        proc = subprocess.run(
            [*access.argv(), command], input=data, capture_output=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        return Reply(problem=f"no answer in {timeout_s:.0f} s")
    except OSError as err:
        return Reply(problem=str(err))
    out = proc.stdout.decode(errors="replace")
    if proc.returncode != 0:
        return Reply(out, last_line(proc.stderr.decode(errors="replace")))
    return Reply(out)


# How long the `ssh -O exit`s that end an ansible run's connection masters may take.
MASTER_EXIT_TIMEOUT_S = 10
STRAGGLER_TERM_S = 3  # from TERM to KILL, for a master that missed `ssh -O exit`


@contextmanager
def own_masters_folder() -> Iterator[Path]:
    """A control-path folder of its own for one ansible-playbook or verify run; the ssh
    connection masters in it are ended when the run ends, however it ends.

    ansible.cfg keeps masters 120 s (ControlPersist) and ssh detaches them from the
    playbook's process group: a Ctrl-C or a timeout, which stops that group, would
    leave them holding root sessions on the nodes. A short folder: a socket's path
    is at most 108 bytes."""
    base = tempfile.gettempdir()
    folder = Path(tempfile.mkdtemp(prefix="hpcbench-cp-", dir=base if len(base) <= 60 else "/tmp"))
    try:
        yield folder
    finally:
        with bounded.ctrl_c_deferred():  # a second Ctrl-C cuts no master's exit short
            end_masters(folder)


def end_masters(folder: Path) -> None:
    """`ssh -O exit` to every master in `folder` at once, within MASTER_EXIT_TIMEOUT_S in
    all, then the folder removed; one that does not answer, or no ssh, leaves it to end
    on its own (ControlPersist)."""
    asked = []
    for socket in sorted(folder.iterdir()):
        if not socket.is_socket():  # verify's ansible.cfg beside them
            continue
        with contextlib.suppress(OSError):
            asked.append(
                subprocess.Popen(
                    ["ssh", "-O", "exit", "-o", f"ControlPath={socket}", "hpcbench-master"],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
    deadline = time.monotonic() + MASTER_EXIT_TIMEOUT_S
    for proc in asked:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    shutil.rmtree(folder, ignore_errors=True)
    stop_stragglers(folder)


def stop_stragglers(folder: Path) -> None:
    """Stop this user's processes that name `folder` in their command line: a master
    that bound its socket after the folder was listed was not asked to exit, and would
    hold a session on a node until ControlPersist ran out. A master is a daemon in a
    session of its own whose title overwrote its environment, so neither the group kill
    nor bounded's RUN_TAG finds it. TERM, then KILL whatever is left a few seconds
    later. Linux's /proc; elsewhere nothing is found."""
    mark = f"{folder}/".encode()  # the masters' titles and ControlPath= name a file in it

    def find() -> list[int]:
        return bounded.processes_with("cmdline", mark)

    if not bounded.signal_until_gone(find, signal.SIGTERM, STRAGGLER_TERM_S):
        bounded.signal_until_gone(find, signal.SIGKILL, STRAGGLER_TERM_S)
