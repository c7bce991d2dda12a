"""deploy's reachability check (hpcbench.testbeds.reach) goes the way Ansible goes: the
inventory's user, key, port and ProxyJump/ProxyCommand, with `ssh ... true`.

Loopback stand-ins only: a TCP listener that records who connects (a bastion
that is never logged in to), and, where the machine has OpenSSH's server, a
private sshd on 127.0.0.1 that the test starts and stops itself.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from hpcbench.core import bounded
from hpcbench.core.errors import UsageError
from hpcbench.launchers.base import free_port
from hpcbench.testbeds import reach

pytestmark = pytest.mark.integration

SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if Path("/usr/sbin/sshd").is_file() else None)


def inventory(path: Path, host: dict[str, object]) -> Path:
    data = {
        "all": {
            "vars": {
                "testbed_nodes": [{"name": "node1", "address": "10.0.0.1"}],
                "testbed_head": "node1",
            },
            "hosts": {"node1": host},
        }
    }
    path.write_text(yaml.safe_dump(data))
    return path


class Listener:
    """127.0.0.1:port that accepts, records the client's first line, and hangs up."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.5)
        self.port = int(self.sock.getsockname()[1])
        self.seen: list[bytes] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    conn.sendall(b"SSH-2.0-standin\r\n")
                    self.seen.append(conn.recv(64))
                except OSError:
                    self.seen.append(b"")

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=5)
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


def test_argv_carries_the_inventory_proxy(tmp_path: Path) -> None:
    inv = inventory(
        tmp_path / "inv.yml",
        {
            "ansible_host": "10.2.0.5",
            "ansible_port": 2222,
            "ansible_user": "hpc",
            "ansible_ssh_private_key_file": "/k/id",
            "ansible_ssh_common_args": "-o ProxyJump=me@bastion.example:22",
        },
    )
    [target] = reach.targets(inv)
    argv = reach.argv(target.access, tmp_path / "known_hosts")
    assert argv[0] == "ssh" and argv[-3:] == ["--", "hpc@10.2.0.5", "true"]
    assert "ProxyJump=me@bastion.example:22" in argv
    assert "BatchMode=yes" in argv and "StrictHostKeyChecking=accept-new" in argv
    assert f'UserKnownHostsFile="{tmp_path / "known_hosts"}"' in argv
    assert argv[argv.index("-p") + 1] == "2222" and 'IdentityFile="/k/id"' in argv
    assert "-i" not in argv  # ssh checks -i's file before expanding its tokens


# Folder names ssh's configuration syntax would misread unquoted: % starts a token (%d
# is the home folder), " is quoting, a space splits UserKnownHostsFile into two files
# (which `ssh -G` prints joined by a space again: the real login below tells them apart).
ODD_NAMES = ["hb 50%d", "50%", 'say "hi"']


@pytest.mark.skipif(shutil.which("ssh") is None, reason="no ssh client")
@pytest.mark.parametrize("name", ODD_NAMES)
def test_ssh_reads_the_known_hosts_as_named(tmp_path: Path, name: str) -> None:
    """`ssh -G` prints the configuration ssh would use, without connecting."""
    known = tmp_path / name / "known_hosts"
    args = reach.argv(reach.SshAccess("10.2.0.5", 2222, "hpc"), known)
    out = subprocess.run(["ssh", "-G", *args[1:-1]], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    config = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    assert config["userknownhostsfile"] == str(known)
    assert config["stricthostkeychecking"] == "accept-new"


def test_a_known_hosts_ssh_would_expand_is_refused_in_one_line(tmp_path: Path) -> None:
    """ssh expands ${NAME} from the environment in the name and has no escape for it."""
    with pytest.raises(UsageError) as err:
        reach.argv(reach.SshAccess("10.2.0.5"), tmp_path / "${HOME}" / "known_hosts")
    assert "\n" not in str(err.value) and "has no escape" in str(err.value)


@pytest.mark.parametrize(
    "host",
    [
        {"ansible_host": "127.0.0.1", "ansible_port": "abc"},
        ["a", "list"],
        {"ansible_host": "127.0.0.1", "ansible_port": 2222, "ansible_ssh_common_args": "-o 'x"},
    ],
    ids=["port", "entry", "args"],
)
def test_malformed_inventory_is_a_usage_error(tmp_path: Path, host: object) -> None:
    with pytest.raises(UsageError, match="inv.yml"):
        reach.targets(inventory(tmp_path / "inv.yml", host))  # type: ignore[arg-type]


def test_reach_goes_through_the_proxy_jump(
    tmp_path: Path, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The node's own address answers nothing; only the bastion can be contacted.
    monkeypatch.setenv("HPCBENCH_REACH_TIMEOUT_S", "3")
    inv = inventory(
        tmp_path / "inv.yml",
        {
            "ansible_host": "node1.invalid",
            "ansible_port": 22,
            "ansible_user": "hpc",
            "ansible_ssh_common_args": f"-o ProxyJump=jump@127.0.0.1:{listener.port}",
        },
    )
    with pytest.raises(bounded.Timeout, match="ssh to node1") as err:
        reach.wait(inv, tmp_path / "known_hosts")
    assert "HPCBENCH_REACH_TIMEOUT_S" in str(err.value)
    assert listener.seen and all(s.startswith(b"SSH-2.0-OpenSSH") for s in listener.seen)


def test_reach_goes_through_the_proxy_command(
    tmp_path: Path, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HPCBENCH_REACH_TIMEOUT_S", "3")
    relay = tmp_path / "relay.py"  # what `ssh -W` or `nc` would be: stdio <-> TCP
    relay.write_text(RELAY)
    command = f"{sys.executable} {relay} 127.0.0.1 {listener.port}"
    inv = inventory(
        tmp_path / "inv.yml",
        {
            "ansible_host": "node1.invalid",
            "ansible_port": 22,
            "ansible_user": "hpc",
            "ansible_ssh_common_args": f"-o ProxyCommand={shlex.quote(command)}",
        },
    )
    with pytest.raises(bounded.Timeout):
        reach.wait(inv, tmp_path / "known_hosts")
    assert listener.seen and listener.seen[0].startswith(b"SSH-2.0-OpenSSH")


RELAY = """import socket, sys, threading
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
def up():
    while (b := sys.stdin.buffer.read1(65536)):
        s.sendall(b)
    s.shutdown(socket.SHUT_WR)
threading.Thread(target=up, daemon=True).start()
while (b := s.recv(65536)):
    sys.stdout.buffer.write(b); sys.stdout.buffer.flush()
"""


# --- a real sshd on loopback ---------------------------------------------------------


class Sshd:
    def __init__(self, folder: Path, user: str) -> None:
        self.user = user
        folder.mkdir()
        self.folder = folder
        self.port = free_port()
        self.client_key = folder / "id_ed25519"
        host_key = folder / "host_key"
        for key in (self.client_key, host_key):
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)],
                check=True,
                timeout=30,
            )
        shutil.copy(f"{self.client_key}.pub", folder / "authorized_keys")
        self.log = folder / "sshd.log"
        config = folder / "sshd_config"
        config.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {host_key}",
                    f"AuthorizedKeysFile {folder / 'authorized_keys'}",
                    "StrictModes no",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "PermitRootLogin prohibit-password",
                    "AllowTcpForwarding yes",
                    f"PidFile {folder / 'sshd.pid'}",
                    "LogLevel DEBUG1",
                ]
            )
            + "\n"
        )
        assert SSHD is not None
        with self.log.open("w") as log:
            argv = [SSHD, "-D", "-e", "-f", str(config)]
            self.proc = subprocess.Popen(argv, stderr=log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    pytest.fail(f"test sshd did not start: {self.log.read_text()[-500:]}")
                time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[Sshd]:
    if SSHD is None:
        pytest.skip("no sshd on this machine: apt-get install openssh-server (no service needed)")
    if os.geteuid() == 0 and not Path("/run/sshd").is_dir():
        # sshd run as root insists on its privilege-separation directory, which
        # the package's service would make; the test starts no service.
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    user = "root" if os.geteuid() == 0 else os.environ.get("USER", "")
    server = Sshd(tmp_path / "sshd", user)
    yield server
    server.stop()


def test_reach_logs_in_through_a_jump_host(tmp_path: Path, sshd: Sshd) -> None:
    # The inventory module's form for a bastion with its own key: ProxyCommand
    # `ssh -i KEY -W %h:%p bastion`. The target name resolves on the bastion only.
    known = tmp_path / "known_hosts"
    jump = shlex.join(
        [
            "ssh",
            "-i",
            str(sshd.client_key),
            "-p",
            str(sshd.port),
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=accept-new",
            "-o",
            f"UserKnownHostsFile={known}",
            "-W",
            "%h:%p",
            f"{sshd.user}@127.0.0.1",
        ]
    )
    inv = inventory(
        tmp_path / "inv.yml",
        {
            "ansible_host": "localhost",
            "ansible_port": sshd.port,
            "ansible_user": sshd.user,
            "ansible_ssh_private_key_file": str(sshd.client_key),
            "ansible_ssh_common_args": f"-o ProxyCommand={shlex.quote(jump)}",
        },
    )
    reach.wait(inv, known)
    log = sshd.log.read_text()
    assert "direct-tcpip" in log or "direct_tcpip" in log  # the bastion forwarded the login
    # Learned on first contact (ssh may hash the names: ask ssh-keygen).
    found = subprocess.run(
        ["ssh-keygen", "-F", f"[localhost]:{sshd.port}", "-f", str(known)],
        capture_output=True,
        timeout=30,
    )
    assert found.returncode == 0


def test_reach_logs_in_with_a_key_and_known_hosts_oddly_named(
    tmp_path: Path, sshd: Sshd, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real login: before, ssh read the folder's space as the end of the known_hosts
    name (two files) and the key's % as a token, so the key was not the one given."""
    monkeypatch.setenv("HPCBENCH_REACH_TIMEOUT_S", "30")
    odd = tmp_path / 'hb 50%d "x"'
    odd.mkdir()
    key = odd / "id %k"
    shutil.copy(sshd.client_key, key)  # mode bits too: ssh refuses a key others can read
    known = odd / "known hosts"
    inv = inventory(
        tmp_path / "inv.yml",
        {
            "ansible_host": "127.0.0.1",
            "ansible_port": sshd.port,
            "ansible_user": sshd.user,
            "ansible_ssh_private_key_file": str(key),
        },
    )
    reach.wait(inv, known)
    found = subprocess.run(
        ["ssh-keygen", "-F", f"[127.0.0.1]:{sshd.port}", "-f", str(known)],
        capture_output=True,
        timeout=30,
    )
    assert found.returncode == 0  # learned into that file, not into "hb" or the home folder


def test_reach_fails_on_a_refused_key_with_sshs_words(
    tmp_path: Path, sshd: Sshd, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HPCBENCH_REACH_TIMEOUT_S", "3")
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    inv = inventory(
        tmp_path / "inv.yml",
        {
            "ansible_host": "127.0.0.1",
            "ansible_port": sshd.port,
            "ansible_user": sshd.user,
            "ansible_ssh_private_key_file": str(other),
        },
    )
    with pytest.raises(bounded.Timeout, match="Permission denied"):
        reach.wait(inv, tmp_path / "known_hosts")


@pytest.mark.skipif(shutil.which("ssh") is None, reason="no ssh client")
def test_unreachable_names_each_silent_or_refused_node_within_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HPCBENCH_PREFLIGHT_TIMEOUT_S", "1")
    with socket.socket() as silent:  # accepts connections (the backlog) and says nothing
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        nodes = [
            reach.Target("refused", reach.SshAccess("127.0.0.1", free_port())),
            reach.Target("silent", reach.SshAccess("127.0.0.1", silent.getsockname()[1])),
        ]
        started = time.monotonic()
        problems = reach.unreachable(nodes)
    assert time.monotonic() - started < 5  # one bound for all, not one per node
    assert problems["silent"] == "no answer in 1 s"
    assert "Connection refused" in problems["refused"]
    assert reach.unreachable([]) == {}
