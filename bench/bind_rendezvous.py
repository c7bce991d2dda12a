"""torchrun or horovodrun with its rendezvous listening on one address, not all.

    python bind_rendezvous.py torchrun --master-addr A --master-port P ... train.py ...
    python bind_rendezvous.py horovodrun -np N -H h1:s,h2:s --gloo ... python train.py ...

Runs the launcher in this process, as its own console script does, with one change:

- torchrun: the static rendezvous's store on node rank 0 (torch 2.15,
  distributed/elastic/rendezvous/static_tcp_rendezvous.py:67, `TCPStore(master_addr,
  port, ..., is_master)`) listens on `::`, every interface, whatever its host, and torchrun
  has no option for it (its --local-addr names the node in the c10d/etcd rendezvous
  only). TCPStore takes a socket already listening (`master_listen_fd`): here it gets
  one bound to the --master-addr the other nodes connect to.
- horovodrun: its Gloo rendezvous binds ('', port) (horovod 0.28.1,
  runner/util/network.py:84 in find_port, called from runner/http/http_server.py:202);
  here it binds the address horovodrun hands its ranks (`server_ip`, the launching
  node's address on --network-interface, 127.0.0.1 on one host;
  runner/gloo_run.py:205 HOROVOD_GLOO_RENDEZVOUS_ADDR; launch_gloo, :242, gets it).

Where --master-addr is a loopback address on this node but other nodes must reach it
(a host name /etc/hosts maps to 127.0.1.1), or not an address of this node, the store
listens as torchrun's own does, and a line on stderr says so: the run goes on as it
would have. Never imports hpcbench.
"""

from __future__ import annotations

import ipaddress
import socket
import sys
from collections.abc import Callable
from typing import Any


def _note(text: str) -> None:
    print(f"bind_rendezvous: {text}", file=sys.stderr, flush=True)


def listening(host: str, port: int, nodes: int) -> socket.socket | None:
    """A socket listening on `host`'s address at `port`, or None (with a note) where
    the other nodes could not reach it there."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except OSError as err:
        _note(f"cannot resolve {host} ({err.strerror}): not bound")
        return None
    if nodes > 1 and ipaddress.ip_address(address[0]).is_loopback:
        _note(f"{host} is {address[0]} here, which the other nodes cannot reach: not bound")
        return None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as TCPStore's own does
    try:
        sock.bind(address)
        sock.listen(socket.SOMAXCONN)
    except OSError as err:
        sock.close()
        _note(f"cannot listen on {address[0]}:{port} ({err.strerror}): not bound")
        return None
    return sock


def torchrun(args: list[str]) -> Any:
    from torch.distributed import TCPStore
    from torch.distributed.elastic.rendezvous import static_tcp_rendezvous
    from torch.distributed.run import main

    def store(host_name: str, port: int, nodes: int, is_master: bool, *rest: Any, **kw: Any):
        if is_master:
            sock = listening(host_name, port, nodes)
            if sock is not None:
                kw["master_listen_fd"] = sock.detach()  # the store owns it from here
        return TCPStore(host_name, port, nodes, is_master, *rest, **kw)

    static_tcp_rendezvous.TCPStore = store
    sys.argv = ["torchrun", *args]
    return main()


def horovodrun(args: list[str]) -> Any:
    from horovod.runner import gloo_run
    from horovod.runner.http import http_server
    from horovod.runner.launch import run_commandline

    launch_gloo, find_port = gloo_run.launch_gloo, http_server.find_port

    def bound(address: str) -> Callable[[Callable[[tuple[str, int]], Any]], Any]:
        return lambda factory: find_port(lambda addr: factory((address, addr[1])))

    def launch(command: Any, exec_command: Any, settings: Any, nics: Any, env: Any, server_ip: str):
        http_server.find_port = bound(server_ip)
        return launch_gloo(command, exec_command, settings, nics, env, server_ip)

    gloo_run.launch_gloo = launch
    sys.argv = ["horovodrun", *args]
    return run_commandline()


LAUNCHERS = {"torchrun": torchrun, "horovodrun": horovodrun}


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in LAUNCHERS:
        sys.exit(f"usage: bind_rendezvous.py {'|'.join(LAUNCHERS)} ARGS...")
    sys.exit(LAUNCHERS[sys.argv[1]](sys.argv[2:]))
