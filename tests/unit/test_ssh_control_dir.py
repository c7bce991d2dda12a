"""Where ssh's connection masters listen (paths.ssh_control_dir): a socket's path is at
most 107 bytes, and a state folder deep enough (a repository in a long path, pytest's
folders under xdist) left ssh none: "unix_listener: path ... too long"."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from hpcbench.core import paths
from hpcbench.core.errors import UsageError
from hpcbench.core.ssh import SshAccess

# What ssh binds while it makes a master: <folder>/<%C: 40 hex>.<16 random>.
MAKING = "0" * 40 + ".6RizyaC6WNE2BkfB"


def binds(folder: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.bind(str(folder / MAKING))
        except OSError:
            return False
    (folder / MAKING).unlink()
    return True


@pytest.fixture
def short_root(tmp_path, monkeypatch) -> Path:
    root = Path("/tmp") / f"h{os.getpid()}"  # short, as /tmp is
    monkeypatch.setattr(paths, "SHORT_ROOT", root)
    yield root
    for p in sorted(root.rglob("*"), reverse=True):
        p.unlink() if p.is_file() or p.is_symlink() else p.rmdir()
    root.rmdir() if root.is_dir() else None


def test_a_short_state_keeps_its_own_folder(tmp_path, monkeypatch, short_root):
    state = Path("/tmp") / f"s{os.getpid()}"
    monkeypatch.setenv("HPCBENCH_STATE", str(state))
    assert paths.ssh_control_dir() == state / "ssh"


@pytest.mark.parametrize("depth", [50, 120, 300])
def test_a_deep_state_gets_a_short_folder_a_socket_fits_in(
    tmp_path, monkeypatch, short_root, depth
):
    state = tmp_path / ("d" * max(1, depth - len(str(tmp_path)) - 1))
    monkeypatch.setenv("HPCBENCH_STATE", str(state))
    own = state / "ssh"
    folder = paths.ssh_control_dir()
    if len(str(own)) <= paths.SSH_CONTROL_DIR_MAX:
        assert folder == own
    else:
        assert folder.parent == short_root / f"hpcbench-{os.getuid()}"
        assert paths.ssh_control_dir() == folder  # the same for every command of this state
        monkeypatch.setenv("HPCBENCH_STATE", str(state) + "2")
        assert paths.ssh_control_dir() != folder  # another state, other masters
        if depth < 200:
            own.mkdir(parents=True)
            assert not binds(own)  # what ssh met before
    # As SshAccess makes it: owner only, every level it created.
    SshAccess(host="login", multiplex=str(folder)).argv()
    assert folder.stat().st_mode & 0o077 == 0 and folder.parent.stat().st_mode & 0o077 == 0
    assert binds(folder)


@pytest.mark.parametrize("plant", ["symlink", "file"])
def test_a_folder_planted_in_tmp_is_refused_in_one_line(tmp_path, monkeypatch, short_root, plant):
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / ("d" * 100)))
    short_root.mkdir()
    planted = short_root / f"hpcbench-{os.getuid()}"
    if plant == "symlink":
        (tmp_path / "theirs").mkdir()
        planted.symlink_to(tmp_path / "theirs")
    else:
        planted.write_text("")
    with pytest.raises(UsageError, match="not a folder of yours") as err:
        paths.ssh_control_dir()
    assert "\n" not in str(err.value) and "HPCBENCH_STATE" in str(err.value)
    assert not (tmp_path / "theirs").exists() or not any((tmp_path / "theirs").iterdir())
