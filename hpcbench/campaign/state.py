"""Where a campaign's testbed keeps its state, and what it still holds.

Every testbed lives in a state folder of its own under
`<state>/campaigns/<campaign>-<digest of its out folder>/<testbed>/` (never the
user's `.hpcbench/<env>`), so a campaign neither reuses nor destroys a testbed
the user deployed by hand, two testbeds of one environment (GPULab 1x10 and
10x1) never share state, and two campaign files of one name with different
`out:` folders never see each other's testbeds.

The campaign's folder carries an owner marker (`owner.json`: the campaign's name
and its out folder), written before its first testbed is deployed and checked
before the folder is used: a folder that names another campaign is refused, so a
campaign never takes, nor destroys, another's testbeds.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from collections.abc import Iterator
from pathlib import Path

from hpcbench import files, leases, paths
from hpcbench.campaign.campaign_file import Campaign, TestbedPlan, out_digest, resolved
from hpcbench.errors import UsageError, one_line
from hpcbench.terraform import TerraformEnv

OWNER_FILE = "owner.json"


def campaign_folder(campaign: Campaign, base: Path | None = None) -> Path:
    """The folder of every testbed's state of a campaign. A folder by the name alone
    (hpcbench before the digest) is not looked for: `dep-c81ab131` is both such a
    folder of campaign `dep-c81ab131` and this layout's folder of campaign `dep`."""
    root = (base or paths.state_root()) / "campaigns"
    return root / f"{campaign.name}-{out_digest(campaign.out)}"


def state_root(campaign: Campaign, tb: TestbedPlan, base: Path | None = None) -> Path:
    """Where one testbed of a campaign keeps its Terraform state, keys and inventory:
    keyed by the campaign's name and its `out` folder, as its journal is; the folder's
    owner checked first (check_owner)."""
    folder = campaign_folder(campaign, base)
    check_owner(campaign, folder)
    root = folder.parent.parent
    if files.present(folder / tb.name, root):  # a link planted there is never taken
        os.close(files.open_folder(folder / tb.name, root))
    return folder / tb.name


def _owner(campaign: Campaign) -> dict[str, str]:
    return {"campaign": campaign.name, "out": str(resolved(campaign.out))}


def check_owner(campaign: Campaign, folder: Path) -> None:
    """The campaign's folder is this campaign's, or absent: one UsageError line (exit
    status 2) otherwise, with nothing created or removed.

    - A marker that names another campaign or out folder, or that cannot be read as
      one: refused.
    - No marker (a folder hpcbench made before markers, or someone else's): refused
      while it holds state (a Terraform state file, a lease), as nothing says whose
      testbed that is; the line says how to release it by hand. One that holds none
      is taken, and `claim` marks it before anything is deployed there."""
    root = folder.parent.parent  # the state folder: no link is followed below it
    if not files.present(folder, root):
        return
    os.close(files.open_folder(folder, root))  # a link or a file there: one line naming it
    marker = folder / OWNER_FILE
    try:
        data = files.read_bounded(marker, files.OWNER, root)
    except FileNotFoundError:
        _unmarked(campaign, folder)
        return
    except OSError as err:
        raise UsageError(
            f"{marker}: cannot read it ({err.strerror or errno.errorcode.get(err.errno or 0)})"
        ) from None
    try:
        owner = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        owner = None
    if owner == _owner(campaign):
        return
    if isinstance(owner, dict) and isinstance(owner.get("campaign"), str):
        who = one_line(f"campaign {owner['campaign']!r} (out {owner.get('out')!s:.200})", 300)
    else:
        who = "an owner it does not name readably"
    raise UsageError(
        f"{folder} holds the testbeds' state of {who}, not of campaign {campaign.name!r} "
        f"({campaign.out}): give this campaign another name or `out:`"
    )


def _unmarked(campaign: Campaign, folder: Path) -> None:
    """A folder without a marker: refused while it holds state."""
    holding = sorted(folder.glob("*/*/terraform.tfstate")) + sorted(
        folder.glob("*/*/leases/*.json")
    )
    if holding:
        first = holding[0]
        env_dir = first.parent if first.name == "terraform.tfstate" else first.parent.parent
        raise UsageError(
            f"{folder} holds testbed state ({holding[0]}) but no {OWNER_FILE} naming its "
            f"campaign, so campaign {campaign.name!r} does not take it: release it with "
            f"`HPCBENCH_STATE={env_dir.parent} python -m hpcbench destroy --env "
            f"{env_dir.name}`, then remove {folder}"
        )


def claim(campaign: Campaign, base: Path | None = None) -> None:
    """Mark the campaign's folder as its own (checked first), before a testbed's
    state is made there; written atomically, so a marker is whole or absent."""
    folder = campaign_folder(campaign, base)
    check_owner(campaign, folder)
    root = folder.parent.parent
    marker = folder / OWNER_FILE
    if files.present(marker, root):  # read and found this campaign's by check_owner
        return
    paths.private_dir(folder, root)
    files.write_atomic(marker, json.dumps(_owner(campaign)) + "\n", 0o600, root)


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
