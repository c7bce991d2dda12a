"""The shared testbed's e2e tests run in the order their stages declare
(tests/e2e/conftest.py STAGES), whatever the tests and their modules are named."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import GROUPS
from tests.e2e import conftest as e2e

TESTBED = GROUPS["testbed"]


@dataclass
class Item:
    """What the ordering hook reads of a pytest item: its node id and its stage mark."""

    nodeid: str
    stage: str | None

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        assert name == "stage"
        return pytest.mark.stage(self.stage).mark if self.stage else None


def ordered(items: list[Item]) -> list[Item]:
    items = list(items)
    e2e.pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    return items


def collected(tests: list[tuple[str, str, str]]) -> list[Item]:
    """Items as pytest collects them: modules by path, tests as defined."""
    by_module = sorted(range(len(tests)), key=lambda n: tests[n][0])  # stable: definition
    return [Item(f"{tests[n][0]}::{tests[n][1]}", tests[n][2]) for n in by_module]


# A test: its module (one of the testbed group's), its name, its stage.
TESTS = st.lists(
    st.tuples(
        st.sampled_from(TESTBED),
        st.from_regex(r"test_[a-z]{1,8}", fullmatch=True),
        st.sampled_from(e2e.STAGES),
    ),
    min_size=1,
    max_size=30,
    unique_by=lambda t: (t[0], t[1]),
)


@settings(max_examples=200, deadline=None)
@given(TESTS, st.randoms(use_true_random=False))
def test_renaming_tests_and_modules_leaves_the_order_as_declared(
    tests: list[tuple[str, str, str]], rnd: random.Random
) -> None:
    before = ordered(collected(tests))
    stages = [e2e.STAGES.index(i.stage) for i in before if i.stage]
    assert stages == sorted(stages)
    # Rename every test, and give each module a new name that sorts elsewhere: the new
    # module names stand where the old ones stood in GROUPS.
    shuffled = list(TESTBED)
    rnd.shuffle(shuffled)
    new_module = {old: f"tests/e2e/test_{k:02d}.py" for k, old in enumerate(shuffled)}
    new_name = {(m, t): f"test_{rnd.randrange(10**9)}_{n}" for n, (m, t, _) in enumerate(tests)}
    renamed = [(new_module[m], new_name[(m, t)], s) for m, t, s in tests]
    with pytest.MonkeyPatch.context() as mp:  # the one GROUPS both conftests read
        mp.setitem(GROUPS, "testbed", tuple(new_module[m] for m in TESTBED))
        after = ordered(collected(renamed))
    back = {f"{new_module[m]}::{new_name[(m, t)]}": f"{m}::{t}" for m, t, _ in tests}
    assert [back[i.nodeid] for i in after] == [i.nodeid for i in before]


def test_a_testbed_test_without_a_stage_stops_the_run_at_collection() -> None:
    items = [Item(f"{TESTBED[0]}::test_a", "deploy"), Item(f"{TESTBED[1]}::test_b", None)]
    with pytest.raises(pytest.UsageError, match="test_b: it declares none of STAGES"):
        ordered(items)
    with pytest.raises(pytest.UsageError, match="its stage 'deployd' is not one"):
        ordered([Item(f"{TESTBED[0]}::test_a", "deployd")])


def test_tests_outside_the_testbed_group_keep_their_places() -> None:
    other = Item("tests/unit/test_x.py::test_u", None)
    late = Item(f"{TESTBED[0]}::test_destroy", "destroy")
    early = Item(f"{TESTBED[-1]}::test_refused", "undeployed")
    assert [i.nodeid for i in ordered([late, other, early])] == [
        early.nodeid,
        other.nodeid,
        late.nodeid,
    ]


@dataclass
class Session:
    items: list[Item]


@dataclass
class RunItem:
    """What the priority hook reads of a pytest item: its node id and its session's."""

    nodeid: str
    session: Session


@pytest.mark.parametrize(
    ("first", "others", "niced"),
    [
        # The worker beside the testbed's group yields; the group's own does not.
        ("tests/unit/test_x.py::test_a", [f"{TESTBED[0]}::test_b"], [5]),
        (f"{TESTBED[0]}::test_b", ["tests/unit/test_x.py::test_a"], []),
        # A run without the group (`pytest -n 2 tests/unit`): nobody yields.
        ("tests/unit/test_x.py::test_a", ["tests/unit/test_y.py::test_c"], []),
    ],
)
def test_the_worker_beside_the_testbed_group_yields_the_cpu_once(
    monkeypatch: pytest.MonkeyPatch, first: str, others: list[str], niced: list[int]
) -> None:
    from tests import conftest

    calls: list[int] = []
    monkeypatch.setattr(conftest.os, "nice", lambda n: calls.append(n) or n)
    monkeypatch.setattr(conftest, "_beside", {})
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    session = Session([Item(n, None) for n in [first, *others]])
    for nodeid in [first, *others]:  # later tests change nothing
        conftest.pytest_runtest_setup(RunItem(nodeid, session))  # type: ignore[arg-type]
    assert calls == niced


def test_no_worker_yields_without_xdist(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import conftest

    monkeypatch.setattr(conftest.os, "nice", lambda n: pytest.fail("niced"))
    monkeypatch.setattr(conftest, "_beside", {})
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    session = Session([Item(f"{TESTBED[0]}::test_b", None)])
    conftest.pytest_runtest_setup(RunItem("tests/unit/test_x.py::test_a", session))  # type: ignore[arg-type]
