"""This machine: worker processes, one per core at most, on loopback."""

from __future__ import annotations

import os

from hpcbench.launchers.specs import TargetSpec
from hpcbench.testbeds.kinds.base import Kind, register
from hpcbench.testbeds.nodeset import LOCALHOST, Node, Testbed


@register
class Localhost(Kind):
    name = "localhost"
    reported_as = "localhost"

    def testbed(self, spec: TargetSpec) -> Testbed:
        return testbed()


def testbed(cores: int | None = None) -> Testbed:
    """Each 'node' is one process of this machine, up to one per core."""
    cores = cores or os.cpu_count() or 1
    nodes = [Node(LOCALHOST, "127.0.0.1", 0, None) for _ in range(cores)]
    return Testbed(env=Localhost.name, nodes=nodes, head=LOCALHOST, kind=Localhost.name, iface="lo")
