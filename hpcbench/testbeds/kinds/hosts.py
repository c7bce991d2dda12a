"""Machines you have (`--hosts`, a campaign's `hosts:`), reached with your own SSH set-up;
they see this checkout's bench/ and Python at the same paths through a shared file
system, as on most clusters. Nothing is booked; nothing but a run is started there."""

from __future__ import annotations

from typing import Any

from hpcbench.core.errors import Problem, UsageError
from hpcbench.core.ssh import SshAccess
from hpcbench.launchers.base import RunSpec
from hpcbench.launchers.parse import HostSlots, parse_hosts
from hpcbench.launchers.specs import TargetSpec
from hpcbench.testbeds.kinds.base import Given, KeyChecks, Kind, Target, register
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

    def read_keys(self, raw: dict[str, Any], path: str, checks: KeyChecks) -> Given:
        """Machines you have, as `scale --hosts` takes them: host:slots (workers)."""
        value, path = raw[self.campaign_key], f"{path}.{self.campaign_key}"
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            text = ",".join(value)
        elif isinstance(value, str):
            text = value
        else:
            raise Problem(path, "must be a list of host:slots such as [node1:4, node2:4]")
        try:
            hosts = parse_hosts(text)
        except UsageError as err:
            raise Problem(path, str(err).removeprefix("--hosts: ")) from None
        listed = ",".join(f"{h.name}:{h.slots}" for h in hosts)
        return Given(
            self,
            self.name,
            ["--hosts", listed],
            {self.campaign_key: listed},
            len(hosts),
            min(h.slots for h in hosts),
            f"{self.campaign_key}: gpus_per_node",
            f"hosts {listed}",
        )

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
