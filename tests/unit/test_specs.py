import pytest

from hpcbench.errors import UsageError
from hpcbench.specs import HostSlots, parse_batch, parse_hosts, parse_nodes


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("1-10", list(range(1, 11))),
        ("1,2,4,8", [1, 2, 4, 8]),
        ("8,1,4,4", [1, 4, 8]),
        ("1-3,8", [1, 2, 3, 8]),
        (" 2 - 3 ", [2, 3]),
        ("5", [5]),
    ],
)
def test_nodes_accepts_ranges_and_lists(spec, expected):
    assert parse_nodes(spec) == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("0", "out of range"),
        ("5-2", "runs backwards"),
        ("abc", "not a whole number"),
        ("1,,2", "not a whole number"),
        ("", "empty"),
        ("-3", "not a whole number"),
        ("1.5", "not a whole number"),
    ],
)
def test_nodes_rejects_bad_input_with_one_line(spec, message):
    with pytest.raises(UsageError, match=message) as err:
        parse_nodes(spec)
    assert "\n" not in str(err.value)
    assert "--nodes" in str(err.value)


def test_nodes_bounded_by_testbed():
    assert parse_nodes("1-4", available=4) == [1, 2, 3, 4]
    with pytest.raises(UsageError, match="asks for 5 nodes but the testbed has 4"):
        parse_nodes("1-5", available=4)


def test_batch():
    assert parse_batch("32,64,96") == [32, 64, 96]
    with pytest.raises(UsageError, match="--batch: 'abc' is not a whole number"):
        parse_batch("abc")
    with pytest.raises(UsageError, match="--batch"):
        parse_batch("0")


def test_hosts():
    assert parse_hosts("h1:4,h2:4") == [HostSlots("h1", 4), HostSlots("h2", 4)]
    assert parse_hosts("node-1.example.org") == [HostSlots("node-1.example.org", 1)]
    for bad, message in [
        ("h1:x", "not a whole number"),
        ("h1:0", "at least 1"),
        ("h1,h1", "listed twice"),
        (":4", "not host:slots"),
        ("", "empty"),
    ]:
        with pytest.raises(UsageError, match=message):
            parse_hosts(bad)
