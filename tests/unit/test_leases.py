"""hpcbench.testbeds.leases: the contract with the module scripts, the lease files as
read (the cancel commands run: tests/integration/test_leases_processes.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcbench.testbeds import leases


def test_no_leases(tmp_path: Path) -> None:
    assert leases.held(tmp_path) == [] and leases.cancel_leftovers(tmp_path) == []


@pytest.mark.parametrize(
    "body",
    [
        "{broken",
        json.dumps({"what": "x"}),
        json.dumps({"what": "x", "cancel": []}),
        json.dumps({"what": "x", "cancel": "gpulab-cli cancel 1"}),
    ],
    ids=["syntax", "no-cancel", "empty", "string"],
)
def test_unreadable_lease_counts_as_held(tmp_path: Path, body: str) -> None:
    folder = leases.lease_dir(tmp_path)
    folder.mkdir()
    (folder / "job0.json").write_text(body)
    [(lease, why)] = leases.cancel_leftovers(tmp_path)
    assert "unreadable lease job0.json" in lease.what and str(lease.path) in lease.by_hand()
    assert why == "no cancel command in the lease"


LEASE_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "what": st.one_of(st.text(max_size=20), st.integers(), st.none()),
        "created": st.one_of(st.text(max_size=20), st.lists(st.integers(), max_size=2)),
        "cancel": st.one_of(
            st.lists(st.text(max_size=8), max_size=3), st.text(max_size=8), st.none()
        ),
    },
)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    body=st.one_of(
        st.binary(max_size=200),
        LEASE_FIELDS.map(lambda d: json.dumps(d).encode()),
        st.integers(min_value=0, max_value=3).map(lambda k: b"[" * (k * 4000)),
    )
)
def test_whatever_a_lease_file_holds_it_is_read_as_one_lease_held(
    tmp_path: Path, body: bytes
) -> None:
    state = tmp_path / "state" / "env"
    folder = leases.lease_dir(state)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "job0.json").write_bytes(body)
    [lease] = leases.held(state)
    assert lease.path == folder / "job0.json" and lease.what
    if lease.cancel:  # only a lease of the contract's shape has a command to run
        data = json.loads(body)
        assert list(lease.cancel) == data["cancel"] and lease.what == data["what"]
    else:
        assert lease.what.startswith("unreadable lease job0.json") or not json.loads(body).get(
            "cancel"
        )


@given(what=st.text(min_size=1, max_size=80), created=st.text(max_size=40))
def test_a_held_lease_is_said_in_one_printable_line_whatever_its_file_says(
    what: str, created: str
) -> None:
    """A line break or a terminal escape in a lease file's text cannot split or colour
    the line that says what is still held."""
    line = leases.Lease(Path("/s/leases/x.json"), what, created, ("scancel", "7")).by_hand()
    assert "\n" not in line and line.isprintable()
    assert line.startswith("still held: ") and line.endswith("cancel it by hand: scancel 7")
