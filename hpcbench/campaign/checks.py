"""The checks of one value of a campaign file at its key path
(`testbeds[2].settings.link_rate`): each returns the value as the campaign keeps it
or raises a Problem naming the path and what to write instead, which
campaign_file.load turns into one UsageError line."""

from __future__ import annotations

import datetime
import json
import math
import re
import sys
from typing import Any

from hpcbench.campaign.yaml_loader import TooLong
from hpcbench.core.errors import Problem as Problem  # what every check here raises
from hpcbench.core.errors import UsageError
from hpcbench.launchers.parse import duration_s, parse_int_list
from hpcbench.performance.allreduce_model import tc_rate
from hpcbench.performance.scaling_model import parse_link

NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,39}", re.ASCII)  # a campaign's or a testbed's label
SETTING_MAX = 4096  # as `deploy --var`


def no_number_too_long(node: Any, path: str = "") -> None:
    """A number too long for Python to convert, named by its key path."""
    if isinstance(node, TooLong):
        raise Problem(
            path,
            f"a number of {node.digits} digits, over the {sys.get_int_max_str_digits()} "
            "Python reads, and far over any count or size here",
        )
    if isinstance(node, dict):
        for key, value in node.items():
            where = f"{path}.{key}" if path else str(key)
            no_number_too_long(key, path)
            no_number_too_long(value, where)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            no_number_too_long(value, f"{path}[{i}]")


def encodable(value: str, path: str) -> None:
    """Text that files, pages and terminals can hold: UTF-8, so no lone surrogate
    (YAML's "\\uDCFF" escape makes one)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise Problem(path, "holds a lone surrogate (\\uD800-\\uDFFF): not text") from None


# A budget of tokens or samples: a trillion tokens is a large run today (Llama 3 trained
# on 15T); beyond this is a typo.
MAX_BUDGET = 1e16


def budget(value: Any, path: str) -> float:
    """A number of tokens or samples above 0 and at most MAX_BUDGET."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_BUDGET:
        raise Problem(path, f"must be a number above 0 and at most {MAX_BUDGET:.0e}, such as 2e10")
    return float(value)


def mapping(value: Any, path: str, keys: tuple[str, ...] | None = None) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Problem(path, "must be a mapping of key: value")
    for key in value:
        if not isinstance(key, str):
            raise Problem(path, f"key {key!r} is not text")
        if keys is not None and key not in keys:
            raise Problem(
                f"{path}.{key}" if path else key, f"unknown key; use one of {', '.join(keys)}"
            )
    return value


def text(value: Any, path: str, pattern: re.Pattern[str] | None = None, example: str = "") -> str:
    if not isinstance(value, str) or not value.strip():
        raise Problem(
            path, yaml_only(value) or f"must be text{f' like {example}' if example else ''}"
        )
    if any(ord(c) < 32 and c not in "\t" for c in value) or len(value) > SETTING_MAX:
        raise Problem(path, f"must be one line of at most {SETTING_MAX} characters")
    encodable(value, path)
    if pattern is not None and not pattern.fullmatch(value):
        raise Problem(path, f"{value[:40]!r} is not {example}")
    return value


# YAML's types beyond JSON's, as PyYAML's SafeLoader builds them, and what to write.
_NOT_PLAIN: tuple[tuple[type | tuple[type, ...], str], ...] = (
    ((datetime.date, datetime.datetime), "is a date (YAML reads 2026-01-31 as one): quote it"),
    ((set, frozenset), "is a set (!!set): write a list"),
    ((bytes, bytearray), "is binary (!!binary): write text"),
)


def plain(value: Any, path: str) -> Any:
    """Data that JSON and YAML both hold as it is (an Ansible variable, written as
    group_vars and hashed as JSON into the testbed's fingerprint): mappings of text
    keys, lists, text, finite numbers, true/false and null. A key 1 and a key '1' would
    hash alike, and a date, a set or binary has no JSON form: each refused by name.
    (yaml_loader bounds how deep a document nests, and refuses one that holds itself.)"""
    if isinstance(value, dict):
        for key, inner in value.items():
            if not isinstance(key, str):
                raise Problem(path, f"key {_shown(key)} is not text: quote it")
            encodable(key, path)
            plain(inner, f"{path}.{key}")
    elif isinstance(value, list):
        if any(isinstance(inner, tuple) for inner in value):  # how PyYAML builds them
            raise Problem(path, "is an ordered map (!!omap, !!pairs): write a mapping")
        for i, inner in enumerate(value):
            plain(inner, f"{path}[{i}]")
    elif isinstance(value, str):
        encodable(value, path)
    elif isinstance(value, float) and not math.isfinite(value):
        raise Problem(path, f"{value} is not a finite number")
    elif value is not None and not isinstance(value, bool | int | float):
        raise Problem(
            path, yaml_only(value) or "must be text, a number, true/false, a list or a mapping"
        )
    return value


def yaml_only(value: Any) -> str | None:
    """What to write instead of a value of a type YAML has and JSON lacks (a date, a
    set, binary); None for any other value."""
    return next((why for kind, why in _NOT_PLAIN if isinstance(value, kind)), None)


def _shown(value: Any) -> str:
    """A value as a message shows it: short, one line."""
    return repr(value)[:40]


def flag(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise Problem(path, "must be true or false")
    return value


def int_list(value: Any, path: str, maximum: int) -> list[int]:
    """A number, a list of numbers, or text like '1-4,8'."""
    if isinstance(value, bool):
        raise Problem(path, "must be a number, a list of numbers or a range like 1-4")
    if isinstance(value, int):
        text = str(value)
    elif (
        isinstance(value, list)
        and value
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        text = ",".join(str(v) for v in value)
    elif isinstance(value, str):
        text = value
    else:
        raise Problem(path, "must be a number, a list of numbers or a range like 1-4")
    try:
        return parse_int_list(text, path, maximum)
    except UsageError as err:
        raise Problem(path, str(err).removeprefix(f"{path}: ")) from None


def word_list(value: Any, path: str, choices: tuple[str, ...]) -> list[str]:
    """One of `choices`, or a list of them, each once, in the order given."""
    words = value if isinstance(value, list) else [value]
    said = f"must be one of {', '.join(choices)}, or a list of them"
    if not words or not all(isinstance(w, str) and w in choices for w in words):
        raise Problem(path, yaml_only(value) or said)
    if len(set(words)) < len(words):
        raise Problem(path, f"names a value twice: {said}")
    return list(words)


def setting(value: Any, path: str) -> str:
    """A Terraform variable's value as `deploy --var` takes it (lists and maps as JSON)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and abs(value) < 10**18:
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return str(value)
    if isinstance(value, list | dict):
        try:  # JSON as Terraform reads it: no NaN, no infinity, no number past 18 digits
            text = json.dumps(value, separators=(",", ":"), allow_nan=False)
        except (ValueError, TypeError):
            raise Problem(path, "must hold finite numbers, text and true/false") from None
        if len(text) <= SETTING_MAX and not _huge_int(value):
            return text
    if isinstance(value, str) and "\x00" not in value and len(value) <= SETTING_MAX:
        encodable(value, path)
        return value
    raise Problem(
        path,
        yaml_only(value)
        or f"must be text, a number of at most 18 digits, true/false or a list "
        f"(at most {SETTING_MAX} characters)",
    )


# link_capacity_mbps as the Virtual Wall module takes it: a whole number of Mbit/s,
# 1 to 100000 (terraform/modules/virtualwall/variables.tf, its validation).
CAPACITY_MBPS = (1, 100_000)


def link(key: str, text: str, where: str) -> str:
    """A testbed's nominal link in its settings, as the plan reads it
    (forecast.link_rate_bits), kept as the testbed takes it: a line rate within what
    scaling_model.parse_link takes, in tc's spelling ('10 Gbit' is kept as '10gbit':
    Terraform and the link_shaping role take no other); an empty link_rate leaves a
    local testbed unshaped, as "" does a node of node_link_rates."""
    if key == "link_rate" and text:
        return _rate(text, where)
    if key == "node_link_rates":
        try:
            rates = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: "[[[..." past Python's depth
            rates = None
        if not isinstance(rates, dict):
            raise Problem(where, "must map node names to line rates, as {node3: 200mbit}")
        kept = {}
        for name, rate in rates.items():
            at = f"{where}[{name[:40]!r}]"
            if not isinstance(rate, str):
                raise Problem(at, 'must be a line rate such as 200mbit, or "" for no shaping')
            kept[name] = rate and _rate(rate, at)
        return text if kept == rates else json.dumps(kept, separators=(",", ":"))
    if key == "link_capacity_mbps":
        low, high = CAPACITY_MBPS
        try:
            mbps = float(text)
        except ValueError:
            mbps = math.nan
        if not (math.isfinite(mbps) and mbps.is_integer() and low <= mbps <= high):
            raise Problem(
                where,
                f"{text[:40]!r} is not a whole number of Mbit/s from {low} to {high} "
                "(1000 is 1 Gbit/s)",
            )
    return text


def _rate(text: str, where: str) -> str:
    """A line rate in tc's spelling (allreduce_model.tc_rate), within parse_link's range."""
    spelled = tc_rate(text)
    try:
        parse_link(text)
    except UsageError:
        spelled = None
    if spelled is None:
        raise Problem(
            where, f"{text[:40]!r} is not a line rate from 1kbit to 10000gbit such as 1gbit"
        )
    return spelled


def _huge_int(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_huge_int(v) for v in value.values())
    if isinstance(value, list):
        return any(_huge_int(v) for v in value)
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**18


def duration(value: Any, path: str) -> int:
    if not isinstance(value, int | str) or isinstance(value, bool):
        raise Problem(path, "must be a duration such as 90s, 10m or 1h")
    try:
        return duration_s(str(value))
    except ValueError as err:
        raise Problem(path, f"{err}: write a duration such as 90s, 10m or 1h") from None
