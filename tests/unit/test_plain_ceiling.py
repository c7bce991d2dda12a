"""What plain-input predictions can reach, and how sure the figures are: predict's plain
defaults as `published.py --fit` fits them, their band from sources held out, `--ceiling`
(the least median any of predict's constants reach on a set of rows fitted to those rows
themselves) and the intervals of the scores."""

from dataclasses import replace

import pytest

from hpcbench.performance import scaling_model
from tests.unit.test_predict import _plan


@pytest.fixture
def published(evaluation):
    return evaluation("published")


def _cases(truth: dict[str, float], interference: float, loss: float):
    """Plain cases of both NCCL choices whose measured E is what NCCL's tree, the link
    efficiencies `truth`, `interference` and one node's `loss` make of them."""
    out = []
    for workers, g, transport in (
        (8, 4, "tcp"),
        (16, 4, "rdma"),
        (32, 8, "tcp"),
        (64, 8, "rdma"),
        (16, 8, "tcp"),
        (32, 4, "rdma"),
    ):
        plan = replace(_plan([workers], g), node_loss=0.0)
        both = {
            tree: scaling_model.Case(replace(plan, nccl=tree), 2e9, 0.0, transport)
            for tree in (False, True)
        }
        k = both[True]
        e = scaling_model.case_parts(k, truth[transport]).point(interference)
        e *= scaling_model.node_factor(loss, workers, g)
        out.append({tree: replace(c, measured=e) for tree, c in both.items()})
    return out


def test_the_ceiling_finds_constants_that_made_the_rows(published):
    made = _cases({"tcp": 0.5, "rdma": 0.9}, 0.2, 0.01)
    c = published.ceiling(made)
    assert c.median == pytest.approx(0.0, abs=1e-9)
    assert c.bias == pytest.approx(0.0, abs=1e-9) and c.above == 0
    assert c.efficiency["rdma"] >= c.efficiency["tcp"]


def test_the_ceiling_never_takes_rdma_slower_than_tcp(published):
    """Rows that only an RDMA link slower than TCP's would fit are not fitted exactly:
    the ceiling keeps RDMA's efficiency at TCP's or above, as any default must be."""
    slow_rdma = _cases({"tcp": 0.9, "rdma": 0.2}, 0.2, 0.01)
    c = published.ceiling(slow_rdma)
    assert c.efficiency["rdma"] >= c.efficiency["tcp"]
    assert c.median > 0.005


def test_predicts_plain_defaults_are_what_the_fit_gives(published):
    """NODE_LOSS, DEFAULT_TREE and PLAIN_BAND (and the link's constants) are the fit of
    `published.py --fit` on the rows the repository holds: a row added without refitting
    fails here."""
    found, plain = published.PlainFolds(published.load()).fit(set())
    assert found.efficiency == scaling_model.LINK_EFFICIENCY
    assert found.interference == scaling_model.DEFAULT_INTERFERENCE
    assert plain.node_loss == scaling_model.NODE_LOSS
    assert plain.tree == scaling_model.DEFAULT_TREE
    assert plain.band == scaling_model.PLAIN_BAND
    # Held out, the band is wider than what the same fit leaves in sample.
    inner = published.fit_plain(published.load(), found)
    assert plain.band[0] <= inner.band[0] and plain.band[1] >= inner.band[1]
    assert plain.band != inner.band


def test_intervals_resample_source_groups_not_rows(published):
    """Rows of one source are not independent draws: two sources whose rows agree among
    themselves but not with each other leave the mean anywhere between them, where a
    resample of rows would pin it near the middle."""
    errors = [("a", 0.0)] * 10 + [("b", 0.1)] * 10
    low, high = published.interval(errors, published.statistics.mean)
    assert low == pytest.approx(0.0) and high == pytest.approx(0.1)
    assert published.interval(errors, published.statistics.mean) == (low, high)  # seeded
    # One source: its rows are resampled.
    one = [("a", e / 100) for e in range(20)]
    low, high = published.interval(one, published.statistics.mean)
    assert 0.06 < low < 0.095 < high < 0.13
    line = published.errors_line(one)
    assert line.startswith("median |point - published| 0.095 (") and "bias" in line


def test_node_sharing_fits_back_each_form_from_points_it_made(published):
    """evaluation/node_sharing.py: each form of one node's sharing is fitted back from
    points that form made, and the two forms part where steps and models differ."""
    import node_sharing

    found = scaling_model.Fit({"tcp": 0.5, "rdma": 0.9}, 0.2, 0.0)
    cases = _cases({"tcp": 0.5, "rdma": 0.9}, 0.2, 0.0)  # measured: no node loss
    for form, value in (("a share per GPU", 0.02), ("a cost per gradient byte", 2e-11)):
        point = node_sharing.FORMS[form][0]
        made = []
        for c in cases:  # measured: what NCCL's tree and the form's value make
            k = c[True]
            e = point(k, scaling_model.case_parts(k, found.efficiency[k.transport]), 0.2, value)
            made.append({t: replace(other, measured=e) for t, other in c.items()})
        # A cache per set of cases: it is keyed by their ids, as published.py's are.
        assert node_sharing.fit(form, made, found, {}) == (True, value)
    # A step twice as long halves the per-byte form's loss, not the per-GPU one's.
    k = cases[0][True]
    longer = replace(k, plan=replace(k.plan, step_time_s=2 * k.plan.step_time_s))
    parts = scaling_model.case_parts(k, 0.5)
    slow = scaling_model.case_parts(longer, 0.5)
    for form, value, ratio in (
        ("a cost per gradient byte", 2e-11, 0.5),
        ("a share per GPU", 0.02, 1),
    ):
        point = node_sharing.FORMS[form][0]
        loss = [p.point(0.2) / point(c, p, 0.2, value) - 1 for c, p in ((k, parts), (longer, slow))]
        assert loss[0] > 0 and loss[1] == pytest.approx(loss[0] * ratio)
