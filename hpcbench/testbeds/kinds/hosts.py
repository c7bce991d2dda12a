"""Machines you have (`--hosts`, a campaign's `hosts:`), reached with your own SSH set-up;
they see this checkout's bench/ and Python at the same paths through a shared file
system, as on most clusters. Nothing is booked; nothing but a run is started there."""

from __future__ import annotations

from hpcbench.core.ssh import SshAccess
from hpcbench.launchers.base import RunSpec
from hpcbench.launchers.parse import HostSlots
from hpcbench.launchers.specs import TargetSpec
from hpcbench.testbeds.kinds.base import Kind, Target, register
from hpcbench.testbeds.nodeset import LOCALHOST, Node, Testbed


@register
class Hosts(Kind):
    name = "hosts"
    reported_as = "hosts"
    campaign_key = "hosts"
    described = "machines you have"
    gives_nodes = "hosts: gives"

    def testbed(self, spec: TargetSpec) -> Testbed:
        return testbed(list(spec.hosts))

    def preflight(self, target: Target, largest: RunSpec) -> None:
        self.prepare(target)  # nothing is submitted: the hosts must answer now


def testbed(hosts: list[HostSlots], user: str | None = None) -> Testbed:
    nodes = [
        Node(
            h.name,
            h.name,
            h.slots,
            None if h.name == LOCALHOST else SshAccess(host=h.name, user=user),
        )
        for h in hosts
    ]
    return Testbed(env=Hosts.name, nodes=nodes, head=hosts[0].name, kind=Hosts.name)
