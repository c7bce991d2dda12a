"""The testbed firewall (ansible/roles/node_firewall): the testbed's nodes reach
every port of each other, the controller reaches sshd (and JupyterLab), and
nobody else reaches anything.

What it must keep out is a training rendezvous: horovodrun's rendezvous and
task services bind a random port in 1024-65535 on every interface
(horovod/runner/util/network.py, find_port) and torchrun's store listens on
all interfaces too; both take pickles. The checks start such a listener on the
head (a random high port, all interfaces) and connect to it from a worker,
from this machine (the controller) and from a stranger on the testbed network.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.infra.conftest import Stranger

# Accepts and closes connections on every interface until `timeout` ends it.
LISTENER = (
    "import socket,sys\n"
    "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('', int(sys.argv[1]))); s.listen()\n"
    "while True: s.accept()[0].close()\n"
)


def reaches(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=5):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def head(testbed):
    if not testbed.var("enable_firewall", testbed.head):
        pytest.skip("enable_firewall is false: no testbed firewall configured")
    return testbed.head


@pytest.fixture(scope="module")
def listener(testbed, head):
    """(address, port) of a listener on the head, bound to every interface."""
    node = testbed.host(head)
    port = random.randint(20000, 60000)
    marker = f"hpcbench-fw-{uuid.uuid4().hex[:8]}"
    node.run(
        "setsid -f timeout 120 python3 -c %s %s %s </dev/null >/dev/null 2>&1",
        LISTENER,
        str(port),
        marker,
    )
    for _ in range(40):  # bounded: 20 s
        if node.socket(f"tcp://0.0.0.0:{port}").is_listening:
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"the listener on {head} did not come up on port {port}")
    yield testbed.address(head), port
    node.run("pkill -f %s", marker)


def test_rules_in_force(host, testbed, name):
    if not testbed.var("enable_firewall", name):
        pytest.skip("enable_firewall is false: no testbed firewall configured")
    with host.sudo():
        chain = json.loads(host.check_output("nft --json list chain inet hpcbench input"))
        base = next(o["chain"] for o in chain["nftables"] if "chain" in o)
        assert (base.get("hook"), base.get("policy")) == ("input", "drop"), base
        for node in testbed.nodes:  # bounded: the node list
            family = "nodes_v6" if ":" in node["address"] else "nodes_v4"
            got = host.run("nft get element inet hpcbench %s { %s }", family, node["address"])
            assert got.rc == 0, f"{name} does not admit testbed node {node['name']}: {got.stderr}"


def test_a_node_reaches_any_port_of_another(testbed, head, listener):
    address, port = listener
    workers = [h for h in testbed.hosts if h != head]
    if not workers:
        pytest.skip("one node: no other node to connect from")
    for worker in workers:  # bounded: the node list
        got = testbed.host(worker).run(
            "timeout 10 bash -c %s", f"exec 3<>/dev/tcp/{address}/{port}"
        )
        assert got.rc == 0, f"{worker} cannot reach {address}:{port} on {head}: {got.stderr}"


def test_the_controller_reaches_sshd_and_not_the_rendezvous(testbed, head, listener):
    address, port = listener
    # The port sshd listens on, as the node sees it (the controller's side
    # may be a published or forwarded port).
    seen = testbed.host(head).check_output("printenv SSH_CONNECTION").split()
    sshd = int(seen[3])
    if not reaches(address, sshd):
        pytest.skip(
            f"this machine has no route to {address}:{sshd} (the testbed is reached through "
            "a jump host): the refusal below would prove nothing"
        )
    assert not reaches(address, port), (
        f"this machine (not a testbed node) reaches {address}:{port}, "
        f"a rendezvous-like port on {head}"
    )


# Every target at once: a dropped port answers nothing, so each costs its whole timeout.
STRANGER = r"""
for target in "$@"; do
  if [ "$target" = ping ]; then ping -c 1 -W 3 "$ADDR" >/dev/null 2>&1; echo "ping=$?"; continue; fi
  { timeout 5 bash -c "exec 3<>/dev/tcp/$ADDR/$target" 2>/dev/null; echo "$target=$?"; } &
done
wait
"""


def test_a_stranger_on_the_testbed_network_reaches_nothing(testbed, head, listener):
    address, port = listener
    stranger = Stranger(testbed, head)
    out = stranger.run("stranger", f"ADDR={address}; {STRANGER}", "ping", "22", str(port))
    got = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    assert got.get("ping") == "0", f"{stranger.ip} cannot ping {address}: proves nothing ({out})"
    assert got.get("22") not in (None, "0"), f"a container at {stranger.ip} reaches sshd on {head}"
    assert got.get(str(port)) not in (None, "0"), (
        f"a container at {stranger.ip} reaches {address}:{port}, a rendezvous-like port on {head}"
    )


def _dropped(node) -> int:
    """Packets the firewall's last rule (the counter before the drop policy) has seen."""
    with node.sudo():
        chain = json.loads(node.check_output("nft --json list chain inet hpcbench input"))
    rules = [o["rule"] for o in chain["nftables"] if "rule" in o]
    counters = [e["counter"]["packets"] for r in rules for e in r["expr"] if "counter" in e]
    assert counters, "the input chain has no drop counter"
    return counters[-1]


def test_a_host_routing_the_testbed_subnet_through_here_reaches_nothing(testbed, head, listener):
    """Docker before 28 forwards packets from another host to a published
    container port (docs/testbeds.md): a host on the LAN that routes the
    testbed subnet through this machine, played by a network namespace, must
    still be dropped at the node. The node's drop counter proves the packets
    got there."""
    address, port = listener
    if testbed.var("node_kind", head) != "container" or not testbed.var("testbed_network", head):
        pytest.skip("not a local Docker testbed: no subnet routed through this machine")
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2 on this machine to play a LAN host in a namespace")
    if Path("/proc/sys/net/ipv4/ip_forward").read_text().strip() != "1":
        pytest.skip("IP forwarding is off here: no host can route through this machine")
    subnet = address.rsplit(".", 1)[0] + ".0/24"
    tag = uuid.uuid4().hex[:6]
    ns, outer, inner = f"hpcbench-fw-{tag}", f"hfw{tag}a", f"hfw{tag}b"
    lan = f"10.{random.randint(200, 250)}.{random.randint(0, 255)}"

    def sh(*cmd: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30)

    node = testbed.host(head)
    try:
        for cmd in (
            ["ip", "netns", "add", ns],
            ["ip", "link", "add", outer, "type", "veth", "peer", "name", inner],
            ["ip", "link", "set", inner, "netns", ns],
            ["ip", "addr", "add", f"{lan}.1/30", "dev", outer],
            ["ip", "link", "set", outer, "up"],
            ["ip", "-n", ns, "addr", "add", f"{lan}.2/30", "dev", inner],
            ["ip", "-n", ns, "link", "set", inner, "up"],
            ["ip", "-n", ns, "route", "add", subnet, "via", f"{lan}.1"],
        ):
            made = sh(*cmd)
            assert made.returncode == 0, f"{' '.join(cmd)}: {made.stderr}"
        before = _dropped(node)
        # Both at once: a dropped port answers nothing, so each costs its whole timeout.
        tries = {
            target: subprocess.Popen(
                ["ip", "netns", "exec", ns, "timeout", "5", "bash", "-c"]
                + [f"exec 3<>/dev/tcp/{address}/{target}"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for target in (22, port)
        }
        for target, attempt in tries.items():
            assert attempt.wait(timeout=30) != 0, (
                f"a LAN host {lan}.2 reaches {address}:{target} on {head}"
            )
        assert _dropped(node) > before, (
            f"no packet from {lan}.2 reached {head}: the refusals above prove nothing"
        )
    finally:
        sh("ip", "netns", "del", ns)
        sh("ip", "link", "del", outer)
