"""A testbed's `price:`: bad values are one line and exit status 2 with nothing created;
`campaign plan` gives each testbed's cost and the campaign's per currency; the
campaign report gives the cost per million samples at each worker count."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcbench import cli
from hpcbench.campaign import campaign_file, comparison, cost
from hpcbench.campaign.checks import Problem
from hpcbench.measure.store import Store
from tests.unit.summaries import summary
from tests.unit.test_campaign import base, fake_run

EUR = {"amount": 2.5, "currency": "EUR", "per": "node-hour"}

BAD = [
    ("amount", {**EUR, "amount": -1}, "-1 is negative: a price is 0 or more"),
    ("amount", {**EUR, "amount": "-2.5"}, "-2.5 is negative: a price is 0 or more"),
    ("amount", {**EUR, "amount": "two euros"}, "'two euros' is not a number: give the price like"),
    ("amount", {**EUR, "amount": "2,5"}, "'2,5' is not a number: give the price like 2.5"),
    ("amount", {**EUR, "amount": "1e10"}, "1e10 is out of range: use 0 to 1e+09"),
    ("amount", {**EUR, "amount": True}, "'True' is not a number: give the price like 2.5"),
    ("amount", {**EUR, "amount": [1]}, "is not a number"),
    ("amount", {**EUR, "amount": 1e12}, "out of range"),
    ("currency", {**EUR, "currency": "EURO"}, "'EURO' is not an ISO 4217 currency code"),
    ("currency", {**EUR, "currency": "XXX"}, "is not an ISO 4217 currency code"),
    ("currency", {**EUR, "currency": 978}, "must be text"),
    ("per", {**EUR, "per": "hour"}, "'hour': use node-hour or gpu-hour"),
    ("", {"amount": 1, "currency": "EUR"}, "needs per: e.g. {amount: 2.5"),
    ("colour", {**EUR, "colour": "red"}, "unknown key; use one of amount, currency, per"),
    ("", "2.5 EUR", "must be a mapping of key: value"),
]


@pytest.mark.parametrize(("key", "price", "says"), BAD, ids=[f"{b[0]}-{b[1]}" for b in BAD])
def test_a_bad_price_is_one_line_naming_its_key_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, price: Any, says: str
) -> None:
    path = base(tmp_path, **{"testbeds.1.price": price})
    where = "testbeds[1].price" + (f".{key}" if key else "")
    for action in ("plan", "run", "status"):
        assert cli.main(["campaign", action, str(path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "Traceback" not in err[0], err
        assert f"{path}: {where}: " in err[0] and says in err[0], err[0]
    assert not (tmp_path / "out").exists()


VALUES = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        VALUES,
        st.dictionaries(
            st.sampled_from(["amount", "currency", "per", "x"]),
            VALUES | st.sampled_from(["EUR", "usd", "node-hour", "gpu-hour", "1.5"]),
        ),
    )
)
def test_any_price_value_gives_a_price_or_a_problem(value: Any) -> None:
    try:
        checked = cost.price(value, "testbeds[0].price")
    except Problem as problem:
        assert problem.path.startswith("testbeds[0].price") and problem.message
        return
    assert checked is None or (checked.amount >= 0 and checked.currency in cost.currencies())


@settings(max_examples=200, deadline=None)
@given(
    st.floats(0, cost.MAX_AMOUNT),
    st.sampled_from(["{:e}", "{:E}", "{:.3e}", "{!r}", "{:f}"]),
    st.sampled_from(["", "+"]),
)
def test_an_amount_yaml_1_2_reads_as_a_number_is_that_price(number: float, form: str, sign: str):
    """PyYAML reads `amount: 1e9` as text (YAML 1.1's float needs a dot and a signed
    exponent) and `amount: 1.0e+9` as a number: each is the price it reads as."""
    text = sign + form.format(number)
    checked = cost.price({**EUR, "amount": text}, "testbeds[0].price")
    assert checked is not None and checked.amount == float(text)


def test_a_plan_prices_an_amount_written_1e9(tmp_path: Path, capsys) -> None:
    path = base(tmp_path, **{"testbeds.0.price": {**EUR, "amount": 2.5}})
    text = path.read_text()
    assert "amount: 2.5" in text
    path.write_text(text.replace("amount: 2.5", "amount: 1e9"))  # unquoted: text to PyYAML
    assert cli.main(["campaign", "plan", str(path)]) == 0
    assert "at 1e+09 EUR per node-hour)" in capsys.readouterr().out
    assert not (tmp_path / "out").exists()


def test_the_currency_list_is_iso_4217_and_says_where_it_comes_from() -> None:
    names = cost.currencies()
    assert names["EUR"] == "Euro" and names["CHF"] == "Swiss Franc" and "XXX" not in names
    source = json.loads(cost.CURRENCIES.read_text())["source"]
    assert "ISO 4217" in source and "iso-codes" in source


def test_the_plan_gives_each_testbeds_cost_and_the_total_per_currency(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = base(
        tmp_path,
        **{
            "testbeds.0.price": EUR,
            "testbeds.0.expect": {"images_per_s": 10, "deploy": "3m", "verify": "1m"},
            "testbeds.1.expect": {"images_per_s": 10, "deploy": "3m", "verify": "1m"},
        },
    )
    assert cli.main(["campaign", "plan", str(path)]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("  cost about "))
    found = re.fullmatch(
        r"  cost about ([\d.]+) EUR \(([\d.]+) node-hours at 2\.5 EUR per node-hour\)", line
    )
    assert found, line
    amount, hours = map(float, found.groups())  # hours as shown: to 0.1
    assert abs(amount - 2.5 * hours) <= 2.5 * 0.05 + 0.005
    assert "cost: about" in out and "EUR (not counting 1 testbed(s) without a price)" in out
    # Two currencies are summed apart; nothing converts one into the other.
    usd = {"amount": 1, "currency": "usd", "per": "node-hour"}
    path = base(tmp_path, **{"testbeds.0.price": EUR, "testbeds.1.price": usd})
    assert cli.main(["campaign", "plan", str(path)]) == 0
    total = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("cost:"))
    assert " EUR + " in total and total.endswith(" USD")
    assert not (tmp_path / "out").exists()


def test_without_a_price_the_plan_assumes_no_cost(tmp_path: Path, capsys) -> None:
    assert cli.main(["campaign", "plan", str(base(tmp_path))]) == 0
    assert "cost" not in capsys.readouterr().out


def test_a_gpu_hour_price_costs_one_gpu_per_worker_and_nothing_for_cpu_runs() -> None:
    p = cost.Price(4.0, "EUR", "gpu-hour")
    s = summary(nodes=2, workers=8, throughput=2000.0)
    fields = cost.fields(p, s, "cuda")
    assert fields["cost_per_hour"] == 32.0
    assert fields["cost_per_million_samples"] == pytest.approx(32.0 / (2000 * 3600) * 1e6)
    assert cost.fields(p, s, "cpu")["cost_per_hour"] is None
    node = cost.fields(cost.Price(3.0, "CHF", "node-hour"), s, "cpu")
    assert node["cost_per_hour"] == 6.0 and node["price"] == "3 CHF per node-hour"
    assert cost.fields(None, s, "cuda") == dict.fromkeys(cost.FIELDS)


def test_the_campaign_report_gives_the_cost_per_million_samples(tmp_path: Path) -> None:
    path = base(tmp_path, **{"testbeds.0.price": EUR})
    campaign = campaign_file.load(path)
    for tb in campaign.testbeds:
        store = Store(campaign.testbed_out(tb))
        for cell in tb.cells:
            run: dict[str, Any] = fake_run(
                tb.env, cell.batch, cell.nodes, cell.workers, cell.gpus_per_node
            )
            run["device"] = "cpu"
            store.append(run)
    comparison.build(campaign)
    records = json.loads((campaign.out / "configurations.json").read_text())["configurations"]
    priced = [r for r in records if r["testbed"] == "a"]
    for r in priced:
        hourly = 2.5 * r["nodes"]
        assert r["price"] == "2.5 EUR per node-hour" and r["cost_per_hour"] == hourly
        expected = hourly / (r["images_per_sec"] * 3600) * 1e6
        assert r["cost_per_million_samples"] == pytest.approx(expected)
    assert all(r["cost_per_million_samples"] is None for r in records if r["testbed"] == "b")
    with open(campaign.out / "configurations.csv", newline="") as f:
        header = next(csv.reader(f))
    assert set(cost.FIELDS) <= set(header)
    page = (campaign.out / "report.md").read_text()
    assert "## Energy and cost" in page and "no price given" in page
    assert "2.5 EUR per node-hour" in page
