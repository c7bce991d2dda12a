"""A testbed's kind, the first step of reading a testbed: which registered kind's key
(env: a testbed hpcbench deploys, slurm: a partition, hosts: machines you have, ...) it
gives, and that kind's keys, read by the kind itself (Kind.read_keys) with the
campaign's checks, resolved into a Place: `scale`'s options for it, what identifies it
(hashed into the testbed's fingerprint), its nodes and GPUs per node where its keys
say, and a line for the plan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hpcbench.campaign import checks
from hpcbench.campaign.checks import Problem
from hpcbench.campaign.sweep_keys import parse, strip_prefix
from hpcbench.core.errors import UsageError
from hpcbench.testbeds import kinds
from hpcbench.testbeds.kinds import Kind
from hpcbench.testbeds.kinds.base import Given


def by_key() -> dict[str, Kind]:
    """The key that gives each registered kind (env: the deployed ones), in the order
    they were registered (the error names them so)."""
    found: dict[str, Kind] = {}
    for kind in kinds.registered().values():
        if kind.campaign_key:
            found.setdefault(kind.campaign_key, kind)
    return found


@dataclass(frozen=True)
class Place(Given):
    """Where a testbed's sweep runs, as its kind's keys say."""

    key: str = ""  # the file's key that gave the kind: env, slurm, hosts, ...


def kind_of(raw: dict[str, Any], path: str) -> str:
    """Which kind's key a testbed gives (exactly one); the keys beside it that another
    kind reads (settings:, ansible:) only with that kind's."""
    known = by_key()
    given = [k for k in known if k in raw]
    if len(given) != 1:
        said = [f"{key}: ({kind.described})" for key, kind in known.items()]
        raise Problem(path, f"give one of {', '.join(said[:-1])} or {said[-1]}")
    own = known[given[0]]
    for kind in known.values():
        for key in (k for k in kind.beside if k not in own.beside and k in raw):
            raise Problem(
                f"{path}.{key}",
                f"is for testbeds of {kind.campaign_key}: ({kind.described}), not {given[0]}:",
            )
    return given[0]


def resolve(key: str, raw: dict[str, Any], path: str) -> Place:
    """The kind's keys (key: what kind_of found) checked by the kind, each error
    naming its key."""
    given = by_key()[key].read_keys(raw, path, CHECKS)
    return Place(**{f: getattr(given, f) for f in Given.__dataclass_fields__}, key=key)


class _Checks:
    """The campaign's checks, as a kind reads its keys with them (kinds.base.KeyChecks)."""

    mapping = staticmethod(checks.mapping)
    duration = staticmethod(checks.duration)
    int_list = staticmethod(checks.int_list)
    plain = staticmethod(checks.plain)

    @staticmethod
    def text(value: Any, path: str, example: str = "") -> str:
        return checks.text(value, path, None, example)

    @staticmethod
    def setting(key: str, value: Any, path: str) -> str:
        return checks.link(key, checks.setting(value, path), path)

    @staticmethod
    def scale(argv: list[str], path: str) -> None:
        try:
            parse(argv, ["--out", "results"])
        except UsageError as err:
            raise Problem(path, strip_prefix(str(err))) from None


CHECKS = _Checks()
