"""What a testbed costs: its `price:` in the campaign file, the plan's cost per testbed
and per campaign, and the report's cost per million samples at each worker count.

    testbeds:
      - name: gpu-partition
        slurm: {partition: gpu}
        price: {amount: 2.5, currency: EUR, per: gpu-hour}

`per` is node-hour or gpu-hour. The plan multiplies the price by the node-hours or
GPU-hours it forecasts for the testbed (campaign/estimate.py: what the testbed books),
and sums each currency apart; no rate converts one currency into another. The report
prices one hour of a configuration (its nodes, or its workers' GPUs: one GPU per
worker) and divides by the measured throughput: the cost of a million images or
tokens at that worker count. Nothing is assumed where no price is given.

Currencies are ISO 4217's codes (hpcbench/data/currencies.json names its source).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from hpcbench.campaign import checks
from hpcbench.campaign.checks import Problem
from hpcbench.measure.analysis import ConfigSummary

PRICE_KEYS = ("amount", "currency", "per")
PER = ("node-hour", "gpu-hour")
MAX_AMOUNT = 1e9
# A number as YAML 1.2 reads one (its core schema's float, spec 1.2.2 section 10.3.2,
# which takes every int too). PyYAML reads YAML 1.1, whose float needs a dot and an
# exponent's sign (PyYAML 6.0.3 lib/yaml/resolver.py:179-183): `amount: 1e9` comes as
# the text '1e9' and `amount: 1.0e+9` as a number, both the same price.
YAML_NUMBER = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?", re.ASCII)
CURRENCIES = Path(__file__).resolve().parents[1] / "data" / "currencies.json"
# The campaign report's cost columns (configurations.json and .csv).
FIELDS = ("price", "currency", "cost_per_hour", "cost_per_million_samples")


@cache
def currencies() -> dict[str, str]:
    """ISO 4217 code -> the currency's name."""
    return dict(json.loads(CURRENCIES.read_text())["codes"])


@dataclass(frozen=True)
class Price:
    amount: float
    currency: str
    per: str  # node-hour or gpu-hour

    def __str__(self) -> str:
        return f"{self.amount:g} {self.currency} per {self.per}"


def price(value: Any, path: str) -> Price | None:
    """A testbed's `price:`, checked (None where none is given)."""
    if value is None:
        return None
    value = checks.mapping(value, path, PRICE_KEYS)
    missing = [k for k in PRICE_KEYS if k not in value]
    if missing:
        example = "{amount: 2.5, currency: EUR, per: node-hour}"
        raise Problem(path, f"needs {', '.join(missing)}: e.g. {example}")
    return Price(
        _amount(value["amount"], f"{path}.amount"),
        _currency(value["currency"], f"{path}.currency"),
        _per(value["per"], f"{path}.per"),
    )


def _amount(value: Any, path: str) -> float:
    """A price, 0 to MAX_AMOUNT: a number, or text that YAML 1.2 reads as one (1e9)."""
    if isinstance(value, str) and YAML_NUMBER.fullmatch(value.strip()):
        shown, number = value.strip(), float(value)  # 1e400: inf, out of range below
    elif isinstance(value, int | float) and not isinstance(value, bool):
        # A 400-digit int has no float form to print with :g.
        shown, number = (f"{value:g}" if isinstance(value, float) else str(value)), value
    else:
        raise Problem(path, f"{str(value)[:40]!r} is not a number: give the price like 2.5")
    if math.isnan(number):
        raise Problem(path, f"{shown} is not a number: give the price like 2.5")
    if number < 0:
        raise Problem(path, f"{shown[:40]} is negative: a price is 0 or more")
    if number > MAX_AMOUNT:
        raise Problem(path, f"{shown[:40]} is out of range: use 0 to {MAX_AMOUNT:g}")
    return float(number)


def _currency(value: Any, path: str) -> str:
    code = checks.text(value, path, None, "EUR").strip().upper()
    if code not in currencies():
        raise Problem(
            path, f"{str(value)[:20]!r} is not an ISO 4217 currency code, such as EUR, USD or CHF"
        )
    return code


def _per(value: Any, path: str) -> str:
    if not isinstance(value, str) or value not in PER:
        raise Problem(path, f"{str(value)[:40]!r}: use {' or '.join(PER)}")
    return value


# ------------------------------------------------------------------ the plan
def booked(p: Price, node_hours: float, gpu_hours: float | None) -> float | None:
    """What the testbed's booked hours cost (None: GPU-hours unknown)."""
    hours = node_hours if p.per == "node-hour" else gpu_hours
    return None if hours is None else p.amount * hours


def plan_line(p: Price | None, node_hours: float, gpu_hours: float | None) -> str | None:
    """The plan's cost line of one testbed, or None without a price."""
    if p is None:
        return None
    cost = booked(p, node_hours, gpu_hours)
    if cost is None:
        return f"cost unknown: {p}, and the GPU-hours are unknown"
    hours = node_hours if p.per == "node-hour" else gpu_hours
    return f"cost about {cost:,.2f} {p.currency} ({hours:.1f} {p.per}s at {p})"


def totals_line(costs: list[tuple[Price | None, float | None]]) -> str | None:
    """The campaign's cost, per currency (None where no testbed has a price)."""
    priced = [(p, c) for p, c in costs if p is not None]
    if not priced:
        return None
    sums: dict[str, float] = {}
    for p, c in priced:
        if c is not None:
            sums[p.currency] = sums.get(p.currency, 0.0) + c
    unpriced = len(costs) - len(priced)
    unknown = sum(1 for _, c in priced if c is None)
    parts = [f"{amount:,.2f} {currency}" for currency, amount in sorted(sums.items())]
    notes = []
    if unpriced:
        notes.append(f"{unpriced} testbed(s) without a price")
    if unknown:
        notes.append(f"{unknown} whose GPU-hours are unknown")
    note = f" (not counting {' and '.join(notes)})" if notes else ""
    return f"cost: about {' + '.join(parts) or 'unknown'}{note}"


# ---------------------------------------------------------------- the report
def hourly(p: Price, s: ConfigSummary, device: str | None) -> float | None:
    """What one hour of the configuration costs: its nodes, or its workers' GPUs (None
    where a GPU-hour price meets a run without GPUs)."""
    if p.per == "node-hour":
        return p.amount * s.nodes
    return None if device != "cuda" else p.amount * s.workers


def fields(p: Price | None, s: ConfigSummary, device: str | None) -> dict[str, Any]:
    """The campaign report's cost columns of one configuration (None without a price)."""
    if p is None:
        return dict.fromkeys(FIELDS)
    per_hour = hourly(p, s, device)
    rate = s.throughput
    per_million = per_hour / (rate * 3600) * 1e6 if per_hour is not None and rate else None
    return {
        "price": str(p),
        "currency": p.currency,
        "cost_per_hour": per_hour,
        "cost_per_million_samples": per_million,
    }
