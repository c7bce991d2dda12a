"""The environments hpcbench deploys (`make deploy ENV=...`, environments/<name>/):
their nodes read from the inventory OpenTofu renders, a copy of bench/ on each node,
the testbed busy while one sweep measures. One class per environment folder, for what
its own machines add: a lease that ends by itself, a forecast hint."""

from __future__ import annotations

from pathlib import Path

from hpcbench.core import files, paths
from hpcbench.core.errors import UsageError
from hpcbench.launchers.specs import TargetSpec
from hpcbench.testbeds import nodeset
from hpcbench.testbeds.kinds.base import Kind, LeaseRule, register
from hpcbench.testbeds.nodeset import Testbed


@register
class Deployed(Kind):
    name = "deployed"
    reported_as = "deployed"
    campaign_key = "env"
    described = "a testbed hpcbench deploys"
    gives_nodes = "the settings give"
    deployed = True
    releasing = "destroying what this testbed holds"

    def testbed(self, spec: TargetSpec) -> Testbed:
        env = spec.env
        inventory = paths.inventory_path(env)
        if not files.present(inventory, paths.state_root()):  # a FIFO there: read says so
            raise UsageError(
                f"environment {env} is not deployed ({inventory} missing): "
                f"run make deploy ENV={env}"
            )
        testbed = nodeset.load_inventory(inventory, paths.state_root())
        testbed.env = testbed.env or env
        testbed.kind = self.name
        return testbed

    def lock_files(self, tb: Testbed) -> list[Path]:
        """The environment's lock in its state folder, whatever its nodes."""
        return [paths.env_state(tb.env) / "testbed.lock"]


@register
class Local(Deployed):
    """Containers on this machine (environments/local)."""

    name = "local"
    same_cores_same_speed = True  # every node is this machine's cores
    # Its Docker objects are named by this setting (environments/local checks
    # ^[a-z][a-z0-9-]{1,30}$): a campaign gives each of its testbeds a name of its own.
    named_by = "name"


@register
class VirtualWall(Deployed):
    """imec Virtual Wall machines booked through jFed (environments/virtualwall)."""

    name = "virtualwall"
    # terraform/modules/virtualwall/variables.tf: expire_time_min, 60-10080.
    lease = LeaseRule("expire_time_min", 60, 10080, "{}")


@register
class GpuLab(Deployed):
    """imec GPULab jobs (environments/gpulab)."""

    name = "gpulab"
    # terraform/modules/gpulab/variables.tf: max_duration, GPULab's job maxDuration, at
    # least a minute.
    lease = LeaseRule("max_duration", 1, None, "{}m")


@register
class OpenStack(Deployed):
    """Instances of an OpenStack cloud (environments/openstack)."""

    name = "openstack"
