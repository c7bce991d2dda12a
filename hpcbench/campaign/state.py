"""Where a campaign's testbed keeps its state, and what it still holds.

Every testbed lives in a state folder of its own under
`<state>/campaigns/<campaign>-<digest of its out folder>/<testbed>/` (never the
user's `.hpcbench/<env>`), so a campaign neither reuses nor destroys a testbed
the user deployed by hand, two testbeds of one environment (GPULab 1x10 and
10x1) never share state, and two campaign files of one name with different
`out:` folders never see each other's testbeds.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from hpcbench import leases, paths
from hpcbench.campaign.campaign_file import Campaign, TestbedPlan
from hpcbench.terraform import TerraformEnv


def state_root(campaign: Campaign, tb: TestbedPlan, base: Path | None = None) -> Path:
    """Where one testbed of a campaign keeps its Terraform state, keys and inventory:
    keyed by the campaign's name and its `out` folder, as its journal is. A folder by
    the name alone (earlier versions of hpcbench) is still used while it exists: what it
    holds is found and released."""
    root = (base or paths.state_root()) / "campaigns"
    legacy = root / campaign.name / tb.name
    if legacy.is_dir():
        return legacy
    where = hashlib.sha256(str(campaign.out.resolve()).encode()).hexdigest()[:8]
    return root / f"{campaign.name}-{where}" / tb.name


@contextlib.contextmanager
def testbed_state(root: Path) -> Iterator[None]:
    """hpcbench.paths, and every child (Terraform's scripts, testinfra), see `root` as
    the state folder while a testbed of the campaign is handled."""
    before = os.environ.get("HPCBENCH_STATE")
    os.environ["HPCBENCH_STATE"] = str(root)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("HPCBENCH_STATE", None)
        else:
            os.environ["HPCBENCH_STATE"] = before


def held(env: str) -> list[str]:
    """What a testbed still holds in the current state folder: machines in Terraform's
    state, leases of paid resources (empty: nothing)."""
    out = []
    if TerraformEnv(env, {}).has_resources():
        out.append("machines in Terraform's state")
    out += [lease.what for lease in leases.held(paths.env_state(env))]
    return out
