"""The environments hpcbench deploys (`make deploy ENV=...`, environments/<name>/):
their nodes read from the inventory OpenTofu renders, a copy of bench/ on each node,
the testbed busy while one sweep measures. One class per environment folder, for what
its own machines add: a lease that ends by itself, a forecast hint."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hpcbench.core import files, paths
from hpcbench.core.errors import Problem, UsageError
from hpcbench.core.secrets import looks_secret
from hpcbench.launchers.specs import TargetSpec
from hpcbench.testbeds import deploy, here, nodeset
from hpcbench.testbeds.kinds.base import Given, KeyChecks, Kind, LeaseRule, for_env, register
from hpcbench.testbeds.nodeset import Testbed

VARIABLE = re.compile(r"[a-z_][a-z0-9_]{0,63}", re.ASCII)  # a Terraform or Ansible name
TOPOLOGY = re.compile(r"([1-9][0-9]*)x([1-9][0-9]*)", re.ASCII)
WHOLE = re.compile(r"[0-9]{1,18}", re.ASCII)  # not str.isdigit: it takes '²', int() does not


@register
class Deployed(Kind):
    name = "deployed"
    reported_as = "deployed"
    campaign_key = "env"
    beside = ("settings", "ansible")
    described = "a testbed hpcbench deploys"
    gives_nodes = "the settings give"
    from_folder = True
    # Deployed for the campaign's turn, checked by testinfra, destroyed after; the
    # seconds each phase is assumed to take before one was measured.
    phases = {"deploy": 600.0, "verify": 300.0, "destroy": 120.0}
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

    def checks_bench_copy(self) -> bool:
        return True  # deploy placed a copy of bench/ on each node

    # ------------------------------------------------------------ its campaign keys
    def read_keys(self, raw: dict[str, Any], path: str, checks: KeyChecks) -> Given:
        """env: (an environment folder) with its Terraform settings and Ansible
        variables, each checked; read as the environment's own kind (its lease, its
        hints, its settings' shape)."""
        env = checks.text(raw.get("env"), f"{path}.env", "an environment")
        try:
            kind = for_env(env)
        except UsageError as err:
            raise Problem(f"{path}.env", str(err)) from None
        settings: dict[str, str] = {}
        for key, value in checks.mapping(raw.get("settings"), f"{path}.settings").items():
            where = f"{path}.settings.{key}"
            if not VARIABLE.fullmatch(key):
                raise Problem(where, "a Terraform variable name: lower-case letters, digits, _")
            if looks_secret(key):
                raise Problem(
                    where,
                    "looks like a secret, which never goes in a file: export it "
                    "as its module documents (docs/testbeds.md)",
                )
            settings[key] = checks.setting(key, value, where)
        ansible = checks.mapping(raw.get("ansible"), f"{path}.ansible")
        for key, value in ansible.items():
            where = f"{path}.ansible.{key}"
            if not VARIABLE.fullmatch(key):
                raise Problem(where, "an Ansible variable name: lower-case letters, digits, _")
            if looks_secret(key):
                raise Problem(where, "looks like a secret, which never goes in a file")
            checks.plain(value, where)
        nodes, slots, said = (kind if isinstance(kind, Deployed) else self).shape(settings)
        identity = {"env": env, "settings": settings, "ansible": ansible}
        return Given(kind, env, ["--env", env], identity, nodes, slots, said, "", settings, ansible)

    def shape(self, settings: dict[str, str]) -> tuple[int | None, int | None, str]:
        """Nodes and GPUs per node where the settings say (`node_count`,
        `gpus_per_node`), and what says the GPUs."""
        count, gpus = settings.get("node_count", ""), settings.get("gpus_per_node", "")
        return (
            int(count) if WHOLE.fullmatch(count) else None,
            int(gpus) if WHOLE.fullmatch(gpus) else None,
            "settings.gpus_per_node",
        )

    # ---------------------------------------------------------------- its booking
    def booked_line(self, where: str, env: str, nodes: int, gpus: int | None) -> str:
        booked = "GPUs per node not in its settings" if gpus is None else f"{gpus} GPU(s) booked"
        return f"env {env}, {nodes} node(s), {booked}"

    def node_hours(self, nodes: int, wall_s: float, jobs_node_s: float) -> float:
        return nodes * wall_s / 3600  # its nodes for the campaign's whole turn on it

    def gpu_hours(self, gpus: int | None, wall_s: float, jobs_gpu_s: float) -> float | None:
        return None if gpus is None else gpus * wall_s / 3600

    def nodes_known(self, env: str) -> bool:
        return files.present(paths.inventory_path(env), paths.state_root())

    booking_check = "terraform plan"  # the plan `deploy` makes

    def check_booking(
        self, env: str, settings: tuple[tuple[str, str], ...]
    ) -> tuple[here.NodeLimits, ...]:
        return self.node_limits(deploy.check(deploy.DeployRequest(env, settings)))

    def node_limits(self, plan: dict[str, Any]) -> tuple[here.NodeLimits, ...]:
        """From the plan (`terraform show -json`), every node's image and limits where
        its nodes would be this machine's cores; here they are not."""
        return ()

    def acquire(self, env: str, settings: tuple[tuple[str, str], ...]) -> None:
        deploy.deploy(deploy.DeployRequest(env, settings))

    def verify(self, env: str) -> int | None:
        return deploy.verify(deploy.VerifyRequest(env))  # its testinfra checks

    def release(self, env: str) -> int:
        return deploy.destroy(deploy.EnvRequest(env))

    def held(self, env: str) -> list[str]:
        return deploy.held(env)

    def given_settings(self, env: str, settings: tuple[tuple[str, str], ...]) -> dict[str, Any]:
        """Its variant's file (environments/<env>/<variant>.tfvars.json), then its
        settings; Terraform's own defaults are not read."""
        values: dict[str, Any] = {}
        var_file = paths.env_layout(env).var_file
        if var_file is not None:
            values.update(json.loads(var_file.read_text()))
        values.update(dict(settings))
        return values

    def defaults_of(self, env: str) -> str | None:
        return paths.env_layout(env).root.name  # a variant's is its folder's


@register
class Local(Deployed):
    """Containers on this machine (environments/local)."""

    name = "local"
    same_cores_same_speed = True  # every node is this machine's cores
    # Its Docker objects are named by this setting (environments/local checks
    # ^[a-z][a-z0-9-]{1,30}$): a campaign gives each of its testbeds a name of its own.
    named_by = "name"

    def node_limits(self, plan: dict[str, Any]) -> tuple[here.NodeLimits, ...]:
        return here.planned_nodes(plan)


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

    def shape(self, settings: dict[str, str]) -> tuple[int | None, int | None, str]:
        """A `topology` <jobs>x<GPUs per job> (terraform/modules/gpulab/variables.tf)
        gives both; else as the others."""
        topology = settings.get("topology")
        match = TOPOLOGY.fullmatch(topology) if topology is not None else None
        if match:
            return int(match[1]), int(match[2]), f"topology {topology}"
        return super().shape(settings)


@register
class OpenStack(Deployed):
    """Instances of an OpenStack cloud (environments/openstack)."""

    name = "openstack"
