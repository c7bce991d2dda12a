import os
import shlex
import sys
from pathlib import Path

import pytest

from hpcbench import launchers
from hpcbench.core import paths
from hpcbench.core.errors import UsageError
from hpcbench.core.ssh import SshAccess
from hpcbench.launchers import Placement, RunSpec
from hpcbench.launchers.horovodrun import HorovodrunLauncher
from hpcbench.launchers.local import LocalLauncher
from hpcbench.launchers.specs import TargetSpec
from hpcbench.launchers.torchrun import TorchrunLauncher

HEAD = SshAccess(host="10.1.0.5", port=2222, user="hpc", key_file="/keys/id")
PY = "/opt/hpcbench/venv/bin/python"
LEASH = [PY, "/opt/hpcbench/bench/leash.py"]
# The launchers run bound to the nodes' meeting address (bench/bind_rendezvous.py).
HOROVODRUN = [PY, "/opt/hpcbench/bench/bind_rendezvous.py", "horovodrun"]
TORCHRUN = [PY, "/opt/hpcbench/bench/bind_rendezvous.py", "torchrun"]


def _spec(placements, iface="", limit=0):
    return RunSpec(
        script="train.py",
        args=("--model", "resnet18", "--batch", "32"),
        python="/opt/hpcbench/venv/bin/python",
        workdir="/opt/hpcbench/bench",
        placements=tuple(placements),
        master_addr="10.0.0.1",
        master_port=29511,
        iface=iface,
        time_limit_s=limit,
    )


def _remote(n, slots=1):
    return [
        Placement(f"node{i}", slots, SshAccess(host="10.1.0.5", port=2220 + i, user="hpc"))
        for i in range(n)
    ]


def test_horovodrun_local():
    spec = _spec([Placement("localhost", 2)])
    [cmd] = HorovodrunLauncher().commands(spec)
    assert cmd.local_argv() == [
        *LEASH,
        "--stdin",
        "--",
        *HOROVODRUN,
        "-np",
        "2",
        "-H",
        "localhost:2",
        "--gloo",
        *LEASH,
        "--",
        "/opt/hpcbench/venv/bin/python",
        "train.py",
        "--model",
        "resnet18",
        "--batch",
        "32",
    ]
    assert cmd.cwd == "/opt/hpcbench/bench" and cmd.local_env() == {}


def test_horovodrun_on_the_head_over_ssh_with_interface():
    spec = _spec(_remote(3, slots=4), iface="eth0", limit=600)
    [cmd] = HorovodrunLauncher().commands(spec)
    argv = cmd.local_argv()
    assert argv[0] == "ssh" and "hpc@10.1.0.5" in argv and "2220" in argv
    remote = shlex.split(argv[-1])
    # cd into the staged bench/, on the leash, environment on the command line.
    assert remote[:3] == ["cd", "/opt/hpcbench/bench", "&&"]
    assert remote[3] == "exec" and remote[4:5] == ["env"]
    i = remote.index(LEASH[1])
    assert remote[i - 1 : i + 5] == [*LEASH, "--stdin", "--time-limit", "600", "--"]
    # The ranks horovodrun starts on the other nodes are leashed too (no stdin there).
    j = remote.index(LEASH[1], i + 1)
    assert remote[j + 1 : j + 4] == ["--time-limit", "600", "--"]
    assert "HOROVOD_GLOO_IFACE=eth0" in remote and "NCCL_SOCKET_IFNAME=eth0" in remote
    tail = remote[remote.index(HOROVODRUN[1]) - 1 :]
    assert tail[:8] == [
        *HOROVODRUN,
        "-np",
        "12",
        "-H",
        "node0:4,node1:4,node2:4",
        "--gloo",
    ]
    assert tail[8:12] == ["-p", "22", "--network-interface", "eth0"]
    assert cmd.local_env() == {}  # over SSH the environment travels in the command line


def test_horovodrun_on_one_remote_node_leaves_the_interface_to_loopback():
    # horovodrun runs a single host's ranks over 127.0.0.1 and refuses an
    # interface without that address ("No interface is found for address 127.0.0.1").
    spec = _spec(_remote(1, slots=1), iface="eth0", limit=600)
    [cmd] = HorovodrunLauncher().commands(spec)
    assert "--network-interface" not in shlex.split(cmd.local_argv()[-1])


def test_horovodrun_mpi_controller_and_backend_check():
    [cmd] = HorovodrunLauncher(controller="mpi").commands(_spec([Placement("localhost", 2)]))
    assert "--mpi" in cmd.argv and "--gloo" not in cmd.argv
    assert "cannot start ddp" in HorovodrunLauncher().check(_spec(_remote(2)), "ddp")
    with pytest.raises(ValueError):
        HorovodrunLauncher(controller="nccl")


def test_torchrun_single_node_is_a_static_rendezvous_not_standalone():
    """--standalone's c10d rendezvous unpickles what its store holds; the store listens
    on every interface (hpcbench.launchers.torchrun)."""
    [cmd] = TorchrunLauncher().commands(_spec([Placement("localhost", 2)]))
    assert cmd.argv == (
        *LEASH,
        "--stdin",
        "--",
        *TORCHRUN,
        "--nproc-per-node",
        "2",
        "--nnodes",
        "1",
        "--node-rank",
        "0",
        "--master-addr",
        "10.0.0.1",
        "--master-port",
        "29511",
        "train.py",
        "--model",
        "resnet18",
        "--batch",
        "32",
    )


def test_torchrun_one_command_per_node_with_static_rendezvous():
    cmds = TorchrunLauncher().commands(_spec(_remote(3, slots=2), iface="ib0"))
    assert len(cmds) == 3
    for rank, cmd in enumerate(cmds):
        remote = shlex.split(cmd.local_argv()[-1])
        assert str(2220 + rank) in cmd.local_argv()
        i = remote.index(TORCHRUN[1]) - 1
        assert remote[i : i + 15] == [
            *TORCHRUN,
            "--nproc-per-node",
            "2",
            "--nnodes",
            "3",
            "--node-rank",
            str(rank),
            "--master-addr",
            "10.0.0.1",
            "--master-port",
            "29511",
            "train.py",
            "--model",
        ]
        assert "GLOO_SOCKET_IFNAME=ib0" in remote


def test_torchrun_refuses_uneven_nodes():
    spec = _spec([Placement("a", 2, HEAD), Placement("b", 1, HEAD)])
    assert "same number of workers" in TorchrunLauncher().check(spec, "ddp")


def test_torchrun_here_goes_through_the_same_wrapper_on_loopback():
    """The GPU checks' and tests' own ranks: the run's static rendezvous, its store
    bound to 127.0.0.1 by bench/bind_rendezvous.py, not on every interface."""
    argv = launchers.torchrun.here(2)
    assert argv[:3] == [sys.executable, str(paths.BENCH_DIR / "bind_rendezvous.py"), "torchrun"]
    assert Path(argv[1]).is_file()
    assert argv[argv.index("--master-addr") + 1] == "127.0.0.1" and "--standalone" not in argv
    assert argv[argv.index("--nproc-per-node") + 1] == "2"


def test_local_launcher_sets_env_per_rank():
    spec = _spec([Placement("localhost", 3)])
    cmds = LocalLauncher().commands(spec)
    assert [c.env["RANK"] for c in cmds] == ["0", "1", "2"]
    assert all(c.env["WORLD_SIZE"] == "3" and c.env["MASTER_PORT"] == "29511" for c in cmds)
    assert cmds[0].argv[:5] == (*LEASH, "--stdin", "--", "/opt/hpcbench/venv/bin/python")
    assert cmds[0].argv[5] == "train.py"
    assert LocalLauncher().check(spec, "ddp") is None
    assert "one worker only" in LocalLauncher().check(spec, "horovod")
    assert LocalLauncher().check(_spec([Placement("localhost", 1)]), "horovod") is None
    assert "this machine only" in LocalLauncher().check(_spec(_remote(2)), "ddp")


def test_registry():
    assert isinstance(
        launchers.get(TargetSpec("localhost", (1,), backend="horovod")), HorovodrunLauncher
    )
    assert isinstance(launchers.get(TargetSpec("localhost", (1,), backend="ddp")), TorchrunLauncher)
    assert (
        launchers.get(
            TargetSpec("localhost", (1,), launcher="horovodrun", horovod_controller="mpi")
        ).controller
        == "mpi"
    )
    with pytest.raises(UsageError, match="unknown launcher 'srun'"):
        launchers.get(TargetSpec("localhost", (1,), backend="ddp", launcher="srun"))


def test_quoting():
    cmd = launchers.Command(("echo", "a b", "$HOME"), env={"X": "1 2"}, access=HEAD)
    remote = cmd.local_argv()[-1]
    assert shlex.split(remote) == ["exec", "env", "X=1 2", "echo", "a b", "$HOME"]


@pytest.mark.parametrize("launcher", [HorovodrunLauncher(), TorchrunLauncher(), LocalLauncher()])
@pytest.mark.parametrize("remote", [False, True])
def test_every_command_starts_on_the_leash_with_the_time_limit(launcher, remote):
    """Local ranks get the run's time limit too; remote ones watch the harness's stdin."""
    placements = _remote(2) if remote else [Placement("localhost", 2)]
    spec = _spec(placements, limit=300)
    if launcher.check(spec, launcher.backends[-1]):
        pytest.skip("this launcher does not run this spec")
    for cmd in launcher.commands(spec):
        argv = shlex.split(cmd.local_argv()[-1]) if remote else list(cmd.local_argv())
        i = argv.index(LEASH[1])
        assert argv[i + 1 : i + 5] == ["--stdin", "--time-limit", "300", "--"]


def test_the_launch_environment_passes_named_variables_only(monkeypatch) -> None:
    from hpcbench.launchers.base import launch_environ

    kept = {
        "PATH": "/bin",
        "PYTHONPATH": "/src",
        "PYTHONUNBUFFERED": "1",
        "PYTHONHASHSEED": "0",
        "NCCL_DEBUG": "INFO",
        "OMP_NUM_THREADS": "2",
        "LC_ALL": "C.UTF-8",
    }
    dropped = {
        "PYTHONSTARTUP": "/tmp/s.py",
        "PYTHONINSPECT": "1",
        "PYTHONHOME": "/elsewhere",
        "PYTHONBREAKPOINT": "pdb.set_trace",
        "PYTHON_KEYRING_PASSWORD": "s3cret",
        "TORCH_HUB_TOKEN": "s3cret",
        "NCCL_API_KEY": "s3cret",
        "HPCBENCH_PEM_PASSWORD": "s3cret",
        "AWS_SECRET_ACCESS_KEY": "s3cret",
    }
    for name in list(os.environ):
        monkeypatch.delenv(name)
    for name, value in {**kept, **dropped}.items():
        monkeypatch.setenv(name, value)
    assert launch_environ({"RANK": "0"}) == {**kept, "RANK": "0"}
