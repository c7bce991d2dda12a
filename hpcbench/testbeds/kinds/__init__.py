"""Testbed kinds (layer testbeds), registered by name and found by name (as ReFrame
registers its back ends): the environments hpcbench deploys, one class per environment
folder (local, virtualwall, gpulab, openstack), a Slurm partition, machines you have
(hosts), and this machine (localhost).

A kind owns what differs between them: how its node set is found, which launcher its
runs take, what must answer before anything starts, what marks it busy while it
measures, and what a campaign books, says and forecasts for it. The rest of hpcbench
asks the kind and names none; adding one is a module here, registered with `@register`,
and its tests (CONTRIBUTING.md, "Adding a testbed kind")."""

from hpcbench.testbeds.kinds import deployed, hosts, localhost, slurm  # noqa: F401  (registers them)
from hpcbench.testbeds.kinds.base import (
    Kind,
    for_env,
    for_target,
    named,
    of,
    register,
    registered,
    unregister,
)

__all__ = [
    "Kind",
    "for_env",
    "for_target",
    "named",
    "of",
    "register",
    "registered",
    "unregister",
]
