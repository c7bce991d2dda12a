"""Where a run's rendezvous and collectives listen (docs/testbeds.md, "What a run
exposes on the network").

What hpcbench can bind, it binds: Gloo's and NCCL's sockets to the testbed's
interface (loopback for `--env localhost`), horovodrun's ranks with
--network-interface, the Slurm job's Gloo rendezvous to MASTER_ADDR
(test_slurm_scheduler), and torchrun's store and horovodrun's Gloo rendezvous through
bench/bind_rendezvous.py (tests/integration/test_rendezvous_bound.py starts them). What
the launchers bind themselves still listens on every interface, which is why the
wrapper is there; the last two tests check that this is still so, on loopback only:
if one fails, the launcher binds its host itself, and the wrapper can go.
"""

from __future__ import annotations

import shlex
import socket
import sys

import pytest

from hpcbench.core import paths
from hpcbench.launchers import TorchrunLauncher
from hpcbench.launchers.base import free_port
from hpcbench.launchers.horovodrun import HorovodrunLauncher
from hpcbench.launchers.specs import TargetSpec
from hpcbench.testbeds.target import Target

PINNED = {"GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo", "HOROVOD_GLOO_IFACE": "lo"}


@pytest.mark.parametrize(
    ("launcher", "backend"), [("torchrun", "ddp"), ("local", "ddp"), ("horovodrun", "horovod")]
)
def test_a_run_on_this_machine_pins_gloo_and_nccl_to_loopback(launcher: str, backend: str) -> None:
    target = Target.resolve(
        TargetSpec(env="localhost", node_counts=(2,), backend=backend, launcher=launcher)
    )
    spec = target.spec("train.py", [], 2, target.workers(2))
    assert spec.iface == "lo" and spec.master_addr == "127.0.0.1"
    for command in target.launcher.commands(spec):
        assert PINNED.items() <= command.environ().items()


def test_the_command_lines_carry_the_testbeds_interface_and_master_address() -> None:
    from tests.unit.test_launchers import _remote, _spec

    spec = _spec(_remote(2, slots=1), iface="eth1")
    [hvd] = HorovodrunLauncher().commands(spec)
    assert "--network-interface eth1" in hvd.local_argv()[-1]
    for command in TorchrunLauncher().commands(spec):
        remote = shlex.split(command.local_argv()[-1])
        assert remote[remote.index("--master-addr") + 1] == spec.master_addr
        assert "GLOO_SOCKET_IFNAME=eth1" in remote and "NCCL_SOCKET_IFNAME=eth1" in remote


@pytest.mark.parametrize("env", ["localhost", "hosts", "deployed"])
def test_torchrun_and_horovodrun_run_bound_to_the_address_the_nodes_meet_at(env: str) -> None:
    """Every command line of both launchers starts them through bench/bind_rendezvous.py,
    on this machine and on remote nodes alike; torchrun's store binds its --master-addr,
    horovodrun's rendezvous the address it gives its ranks (bench/bind_rendezvous.py)."""
    from tests.unit.test_launchers import _remote, _spec

    if env == "localhost":
        target = Target.resolve(TargetSpec(env="localhost", node_counts=(2,), backend="ddp"))
        spec = target.spec("train.py", [], 2, 2)
    else:
        spec = _spec(_remote(2, slots=2), iface="eth1" if env == "deployed" else "")
    wrapper = [spec.python, f"{spec.workdir}/bind_rendezvous.py"]
    for launcher in (TorchrunLauncher(), HorovodrunLauncher()):
        for command in launcher.commands(spec):
            remote = command.access is not None
            argv = shlex.split(command.local_argv()[-1]) if remote else list(command.argv)
            at = argv.index(wrapper[1]) - 1
            assert argv[at : at + 3] == [*wrapper, launcher.name], argv
            if launcher.name == "torchrun":
                assert argv[argv.index("--master-addr") + 1] == spec.master_addr
            assert not any(a.endswith(("/torchrun", "/horovodrun")) for a in argv)


def _bind_rendezvous():
    sys.path.insert(0, str(paths.BENCH_DIR))
    try:
        import bind_rendezvous
    finally:
        sys.path.remove(str(paths.BENCH_DIR))
    return bind_rendezvous


def test_the_store_is_bound_to_the_master_address_when_it_is_this_nodes(capsys) -> None:
    sock = _bind_rendezvous().listening("127.0.0.1", free_port(), nodes=1)
    assert sock is not None
    with sock:
        assert sock.getsockname()[0] == "127.0.0.1"
        assert not _reached_on_another_loopback_address(sock.getsockname()[1])
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("host", "nodes", "why"),
    [
        # A host name that /etc/hosts maps to 127.0.1.1 on its own node (Debian's):
        # bound there, the other nodes could not reach the store.
        ("127.0.1.1", 2, "127.0.1.1 here, which the other nodes cannot reach"),
        ("192.0.2.1", 1, "cannot listen on 192.0.2.1"),  # TEST-NET-1: no address of ours
    ],
)
def test_where_the_store_cannot_be_bound_it_listens_as_torchruns_own_and_says_so(
    capsys, host: str, nodes: int, why: str
) -> None:
    assert _bind_rendezvous().listening(host, free_port(), nodes) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and why in err[0] and err[0].endswith("not bound")


def _reached_on_another_loopback_address(port: int) -> bool:
    """Whether a listener meant for 127.0.0.1 answers on 127.0.0.2: it does only when it
    listens on every interface (127.0.0.2 is this machine too, not 127.0.0.1)."""
    try:
        socket.create_connection(("127.0.0.2", port), timeout=5).close()
    except OSError:
        return False
    return True


def test_a_listener_bound_to_127_0_0_1_is_not_reached_on_127_0_0_2() -> None:
    """The check below can fail: a socket bound to one address is not reached on another."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert not _reached_on_another_loopback_address(server.getsockname()[1])


def test_torchs_store_still_listens_on_every_interface_whatever_its_host() -> None:
    """torchrun's rendezvous store (TCPStore, is_master on rank 0's node) binds ::, not its
    host_name, and torchrun has no option for it (docs/testbeds.md)."""
    dist = pytest.importorskip("torch.distributed")
    store = dist.TCPStore("127.0.0.1", 0, 1, True, multi_tenant=True)
    assert _reached_on_another_loopback_address(store.port)


def test_horovodruns_rendezvous_still_listens_on_every_interface() -> None:
    """horovodrun's Gloo rendezvous binds ('', port) (horovod/runner/util/network.py:84)."""
    http_server = pytest.importorskip("horovod.runner.http.http_server")
    server = http_server.RendezvousServer()
    port = server.start()
    try:
        assert _reached_on_another_loopback_address(port)
    finally:
        server.stop()
