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
campaign never takes, nor destroys, another's testbeds. Beside it, `campaign_file`
names the file the campaign was last run from, so that a folder found later
(`hpcbench destroy` lists them: kept()) says which command releases and removes it.
`campaign destroy` removes the folder once none of its testbeds holds anything.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hpcbench.campaign.campaign_file import Campaign, TestbedPlan, out_digest, resolved
from hpcbench.core import files, paths
from hpcbench.core.errors import UsageError, one_line
from hpcbench.testbeds.deploy import held

OWNER_FILE = "owner.json"
FILE_NOTE = "campaign_file"  # the campaign file's path, a line


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
    owner = _marker(data)
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


def _marker(data: bytes) -> Any:
    """An owner marker's JSON; None where it is none."""
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


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
    note = f"{resolved(campaign.path)}\n"
    if not files.present(marker, root):  # one there was read and found this campaign's
        paths.private_dir(folder, root)
        files.write_atomic(marker, json.dumps(_owner(campaign)) + "\n", 0o600, root)
    if _campaign_file(folder) != note.strip():
        files.write_atomic(folder / FILE_NOTE, note, 0o600, root)


def _campaign_file(folder: Path) -> str | None:
    """The campaign file the folder's campaign was last run from (its note), one line;
    None where the note is missing or is no path."""
    try:
        data = files.read_bounded(folder / FILE_NOTE, files.CAMPAIGN_NOTE, folder.parent.parent)
    except (OSError, UsageError):
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text.endswith("\n") or "\n" in text[:-1]:
        return None
    return text[:-1] or None


@contextlib.contextmanager
def testbed_state(root: Path) -> Iterator[None]:
    """hpcbench.core.paths, and every child (Terraform's scripts, testinfra), see `root` as
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


def holding(campaign: Campaign, base: Path | None = None) -> dict[str, list[str]]:
    """Each testbed of the campaign that still holds something, and what."""
    out = {}
    for tb in campaign.testbeds:
        with testbed_state(state_root(campaign, tb, base)):
            what = tb.kind.held(tb.env)
        if what:
            out[tb.name] = what
    return out


def remove_if_released(campaign: Campaign, base: Path | None = None) -> str:
    """The campaign's state folder removed where none of its testbeds holds anything
    (its owner checked first); what was done, in a line ('' where there is none)."""
    folder = campaign_folder(campaign, base)
    if not folder.exists():
        return ""
    still = holding(campaign, base)
    if still:
        what = "; ".join(f"testbed {name} holds {', '.join(w)}" for name, w in still.items())
        return f"kept {folder}: {what}"
    shutil.rmtree(folder)
    return f"removed {folder}: no testbed of campaign {campaign.name} holds anything"


def _folder_holds(folder: Path) -> list[tuple[Path, str, list[str]]]:
    """(testbed folder, environment, what it holds) of each testbed that holds
    something in a campaign's folder, found by its layout (<testbed>/<env>/)."""
    envs = set(paths.environments())
    found = []
    for tb_dir in sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()):
        for env in sorted(e for e in envs if (tb_dir / e).is_dir()):
            with testbed_state(tb_dir):
                try:
                    what = held(env)
                except UsageError as err:  # an unreadable state: held, as far as is known
                    what = [one_line(str(err), 200)]
            if what:
                found.append((tb_dir, env, what))
    return found


def kept(base: Path | None = None) -> list[str]:
    """Every campaign state folder under `<state>/campaigns`, a line each: whose it is,
    what its testbeds still hold, and the command that releases and removes it."""
    root = (base or paths.state_root()) / "campaigns"
    if root.is_symlink() or not root.is_dir():
        return []
    lines = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()):
        try:
            owner = _marker(files.read_bounded(folder / OWNER_FILE, files.OWNER, root.parent))
        except (OSError, UsageError):
            owner = None
        holds = _folder_holds(folder)
        said = "; ".join(f"testbed {d.name} holds {', '.join(w)}" for d, _, w in holds)
        if isinstance(owner, dict) and isinstance(owner.get("campaign"), str):
            note = _campaign_file(folder)
            file = shlex.quote(note) if note else f"<the campaign file of {owner['campaign']}>"
            who = f"campaign {owner['campaign']!r} (out {owner.get('out')!s:.200})"
            command = f"`python -m hpcbench campaign destroy {file}`"
            done = "releases it and removes the folder" if holds else "removes it"
            lines.append(f"{folder}: {who}, {said or 'holds nothing'}: {command} {done}")
        elif holds:
            tb_dir, env, _ = holds[0]
            lines.append(
                f"{folder}: no campaign named (no readable {OWNER_FILE}), {said}: release it "
                f"with `HPCBENCH_STATE={tb_dir} python -m hpcbench destroy --env {env}`, "
                "then remove the folder"
            )
        else:
            lines.append(f"{folder}: no campaign named, holds nothing: remove it by hand")
    return [one_line(line) for line in lines]


def say_kept() -> None:
    """The campaigns' state folders beside an environment's, which `destroy --env`
    leaves alone (a campaign's testbeds are its own): each named, with what it holds
    and the command that releases and removes it."""
    try:
        lines = kept()
    except (OSError, UsageError) as err:  # never in the way of the destroy's own outcome
        print(f"hpcbench: campaign state folders not listed: {err}", flush=True)
        return
    if lines:
        print(f"hpcbench: campaign state folders kept, not this environment's ({len(lines)}):")
    for line in lines:
        print(f"  {line}", flush=True)
