"""`scale --env slurm --slurm-login`: sbatch on a login node over SSH, bench/ copied to
the cluster's shared file system. The shell lines hpcbench sends the login node run
in bash, against a folder that stands for its home (LoginHere, used by
tests/integration/test_slurm_login_processes.py and test_data_preflight_processes.py;
ssh itself is tested in test_ssh_access.py and, against a real sshd, in tests/e2e)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hpcbench import cli
from hpcbench.core.errors import UsageError
from hpcbench.core.ssh import Reply, SshAccess
from hpcbench.launchers.parse import parse_login
from hpcbench.measure import scale_options


@pytest.fixture(autouse=True)
def _own_state(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("login.ai.lrz.de", (None, "login.ai.lrz.de", 22)),
        ("me@glogin.hlrn.de:2222", ("me", "glogin.hlrn.de", 2222)),
        ("di12abc@10.0.0.5", ("di12abc", "10.0.0.5", 22)),
    ],
)
def test_a_login_node_is_user_host_and_port(text, parsed):
    assert parse_login(text) == parsed


@pytest.mark.parametrize(
    "text", ["", "-oProxyCommand=x", "me@", "host:0", "host:70000", "a b", "me@host;rm", "@h"]
)
def test_anything_else_is_refused_in_one_line(text):
    with pytest.raises(UsageError, match=r"--slurm-login: .* is not \[user@\]host\[:port\]"):
        parse_login(text)


def _scale(tmp_path: Path, *extra: str) -> int:
    argv = [
        "scale",
        "--env",
        "slurm",
        "--nodes",
        "1",
        "--batch",
        "8",
        "--model",
        "resnet18",
        "--backend",
        "ddp",
        "--repeats",
        "1",
        "--no-probe",
        "--out",
        str(tmp_path / "out"),
        "--dry-run",
        *extra,
    ]
    return cli.main(argv)


def test_a_login_node_without_container_or_python_is_refused(tmp_path, capsys):
    assert _scale(tmp_path, "--slurm-login", "login.example.org") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "hpcbench: error: --slurm-login without --container-image needs "
        "--slurm-python: the stack's Python on the cluster (a venv or conda "
        "environment)"
    ]
    assert not (tmp_path / "out").exists()


def test_the_dry_run_shows_sbatch_on_the_login_node_with_the_clusters_paths(tmp_path, capsys):
    code = _scale(
        tmp_path,
        "--slurm-login",
        "me@login.example.org",
        "--slurm-python",
        "/home/me/envs/hb/bin/python",
        "--slurm-setup",
        "module load anaconda3",
        "--partition",
        "grete",
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "# `sbatch --parsable` on the login node me@login.example.org, " in out
    assert "#SBATCH --partition=grete" in out
    assert "exec /home/me/envs/hb/bin/python train.py" in out
    # ~/ is resolved on the login node before the first job: the dry run marks its home.
    home_rel = scale_options.REMOTE_BENCH_DIR.removeprefix("~")
    assert f"cd @SUBMIT:home@{home_rel} && exec" in out
    job_rel = scale_options.REMOTE_JOB_DIR.removeprefix("~")
    assert f"#SBATCH -o @SUBMIT:home@{job_rel}/hpcbench-@SUBMIT:random@-%j.out" in out
    # the user's line after the profile (if needed), in the script's shell, then set -u
    assert "\n{\nmodule load anaconda3\n} >" in out
    assert out.index(". /etc/profile") < out.index("module load anaconda3") < out.index("set -u")


def test_the_login_connection_is_one_multiplexed_one_with_host_keys_checked(tmp_path):
    access = SshAccess(host="login", user="me", multiplex=str(tmp_path / "ssh"))
    argv = access.argv()
    assert "StrictHostKeyChecking=yes" in argv and "ControlMaster=auto" in argv
    assert f'ControlPath="{tmp_path / "ssh"}/%C"' in argv  # quoted: ssh_config's syntax
    assert (tmp_path / "ssh").stat().st_mode & 0o077 == 0  # the socket's folder: owner only


class LoginHere:
    """ssh.call and ssh.send, run in bash on this machine with HOME as the login node's
    home: the very lines the target sends, executed."""

    def __init__(self, home: Path) -> None:
        self.home, self.commands = home, []

    def run(self, command: str, data: bytes | None = None) -> Reply:
        self.commands.append(command)
        proc = subprocess.run(
            ["bash", "-c", command],
            input=data,
            capture_output=True,
            env={"HOME": str(self.home), "PATH": "/usr/bin:/bin"},
        )
        out = proc.stdout.decode()
        return Reply(out) if proc.returncode == 0 else Reply(out, proc.stderr.decode())
