"""How the harness calls ssh, asked of ssh itself: `ssh -G` prints the configuration ssh
would use, without connecting, and a login node on this machine's sshd is reached with
oddly named keys, known_hosts and sockets (the arguments as hpcbench builds them:
tests/unit/test_ssh_access.py)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcbench.core import paths, ssh
from hpcbench.core.errors import UsageError
from hpcbench.core.ssh import SshAccess
from hpcbench.launchers import Placement, RunSpec
from hpcbench.launchers.base import free_port
from hpcbench.launchers.slurm import SlurmLauncher, SlurmOptions
from hpcbench.schedulers import SlurmScheduler
from hpcbench.testbeds import nodeset
from tests.unit.test_ssh_access import _inventory

pytestmark = pytest.mark.integration


def effective(access: SshAccess) -> dict[str, str]:
    argv = access.argv()
    out = subprocess.run([argv[0], "-G", *argv[1:]], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)


def test_the_inventory_known_hosts_is_used_and_checked_strictly(tmp_path):
    # What terraform/modules/inventory writes: Ansible learns keys with accept-new.
    path = _inventory(
        tmp_path,
        ansible_ssh_extra_args="-o UserKnownHostsFile=/state/ssh/known_hosts "
        "-o StrictHostKeyChecking=accept-new",
        ansible_ssh_common_args="-o ProxyJump=jump@bastion",
    )
    [node] = nodeset.load_inventory(path).nodes
    config = effective(node.access)
    assert config["stricthostkeychecking"] == "true"
    assert config["userknownhostsfile"] == "/state/ssh/known_hosts"
    assert config["proxyjump"] == "jump@bastion" and config["port"] == "22901"
    assert "/dev/null" not in node.access.argv()


def test_without_ansible_arguments_the_state_folder_known_hosts_is_used(tmp_path):
    [node] = nodeset.load_inventory(_inventory(tmp_path)).nodes
    config = effective(node.access)
    assert config["userknownhostsfile"] == str(tmp_path / "ssh" / "known_hosts")
    assert config["stricthostkeychecking"] == "true"


def test_ad_hoc_hosts_use_the_users_known_hosts_strictly():
    config = effective(SshAccess(host="node1"))
    assert config["stricthostkeychecking"] == "true"
    assert "/dev/null" not in config["userknownhostsfile"]


def test_extra_arguments_cannot_turn_checking_off():
    access = SshAccess(
        host="n", extra_args=("-oStrictHostKeyChecking=no", "-o", "UserKnownHostsFile /dev/null")
    )
    config = effective(access)
    assert (
        config["stricthostkeychecking"] == "true"
        and "/dev/null" not in config["userknownhostsfile"]
    )


# Folder names ssh's configuration syntax would misread unquoted: a space ends the
# argument ("extra arguments at end of line"), % starts a token (%d is the home
# folder), " and \\ are quoting, # a comment.
ODD_NAMES = ["hb state", "50%", "50%d", 'say "hi"', "back\\slash", "#hash", "it's"]


@pytest.mark.parametrize("name", ODD_NAMES)
def test_ssh_reads_the_socket_folder_and_known_hosts_as_named(tmp_path, name):
    known = tmp_path / name / "known_hosts"
    folder = tmp_path / name / "ssh"
    config = effective(SshAccess(host="login", known_hosts=str(known), multiplex=str(folder)))
    assert config["userknownhostsfile"] == str(known)
    where, digest = config["controlpath"].rsplit("/", 1)
    assert where == str(folder) and re.fullmatch("[0-9a-f]{40}", digest)  # %C, expanded


@pytest.fixture
def odd() -> Iterator[Path]:
    """A folder whose name ssh's syntax would misread, short enough for a socket in it
    (107 bytes in all: paths.ssh_control_dir)."""
    folder = Path(tempfile.mkdtemp(prefix='hb 100%d "', dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_state_folder_with_a_space_and_a_percent_keeps_its_own_socket_folder(odd, monkeypatch):
    monkeypatch.setenv("HPCBENCH_STATE", str(odd))
    folder = paths.ssh_control_dir()
    assert folder == odd / "ssh"
    assert effective(SshAccess(host="login", multiplex=str(folder)))["controlpath"].startswith(
        f"{folder}/"
    )


SSHD = Path("/usr/sbin/sshd")


needs_sshd = pytest.mark.skipif(
    not os.access(SSHD, os.X_OK) or os.geteuid() != 0,
    reason="needs OpenSSH's sshd and root (sshd -i logs this user in)",
)


def _keys(folder: Path, name: str) -> Path:
    key = folder / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return key


def _login_node(tmp_path: Path, odd: Path) -> SshAccess:
    """A login node with no network: ssh talks to `sshd -i` as its ProxyCommand. The
    client's key, known_hosts and socket folder are in `odd`."""
    served = tmp_path / "sshd"
    served.mkdir()
    host = _keys(served, "host")
    client = _keys(odd, "id %k")
    (served / "authorized_keys").write_text(Path(f"{client}.pub").read_text())
    known = odd / "known hosts"
    known.write_text("login " + Path(f"{host}.pub").read_text())
    sshd = [str(SSHD), "-i", "-f", "/dev/null", "-h", str(host), "-o", "PermitRootLogin=yes"]
    sshd += ["-o", f"AuthorizedKeysFile={served}/authorized_keys", "-o", "StrictModes=no"]
    proxy = shlex.join(sshd).replace("%", "%%")  # ProxyCommand expands tokens too
    return SshAccess(
        host="login",
        key_file=str(client),
        known_hosts=str(known),
        multiplex=str(odd / "ssh"),
        extra_args=("-o", f"ProxyCommand={proxy}", "-o", "IdentitiesOnly=yes"),
    )


def _end_master(access: SshAccess) -> None:
    argv = access.argv()
    subprocess.run([*argv[:-2], "-O", "exit", *argv[-2:]], capture_output=True, timeout=30)


@needs_sshd
def test_a_login_node_is_reached_with_a_key_known_hosts_and_sockets_oddly_named(tmp_path, odd):
    """A real session: before, ssh read the known_hosts "known hosts" as two files ("Host
    key verification failed"), the key's % as a token, and the folder's space as the
    end of ControlPath."""
    access = _login_node(tmp_path, odd)
    try:
        reply = ssh.call(access, "echo reached")
        assert reply.ok and reply.stdout == "reached\n", reply.problem
        assert any(p.is_socket() for p in (odd / "ssh").iterdir())  # the shared connection
    finally:
        _end_master(access)


def _preflight(access: SshAccess) -> None:
    spec = RunSpec("check_stack.py", (), "python", "/tmp", (Placement("slurm0", 1),))
    launcher = SlurmLauncher(SlurmOptions(partition="cpu"), "gloo", "ddp", submit=access)
    SlurmScheduler(launcher).preflight(spec)


def test_a_refused_login_node_is_named_unreachable_whatever_the_state_folder(odd, monkeypatch):
    """ssh's 255 is the connection, with ssh's own reason: before, a state folder with a
    space made it ssh's complaint about its own command line."""
    monkeypatch.setenv("HPCBENCH_STATE", str(odd))
    port = free_port()  # nothing listens there: refused at once, on loopback
    access = SshAccess(host="127.0.0.1", port=port, multiplex=str(paths.ssh_control_dir()))
    with pytest.raises(UsageError) as err:
        _preflight(access)
    assert str(err.value) == (
        f"slurm on 127.0.0.1: login node unreachable: ssh: connect to host 127.0.0.1 "
        f"port {port}: Connection refused"
    )


@needs_sshd
@pytest.mark.skipif(shutil.which("sinfo") is not None, reason="this machine has Slurm")
def test_a_login_node_without_slurm_is_not_a_missing_partition(tmp_path, odd):
    """Reached, but sinfo is not there (the shell's 127): that, not "partition 'cpu' does
    not exist"."""
    access = _login_node(tmp_path, odd)
    try:
        with pytest.raises(UsageError) as err:
            _preflight(access)
    finally:
        _end_master(access)
    assert str(err.value).startswith("slurm on login: no sinfo there (")
    assert "does not exist" not in str(err.value)
