"""`hpcbench predict` on plain inputs: the defaults for the set-up details a user does not
give, the assumptions it names with E under the other common choice, and the wider band."""

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from hpcbench import cli
from hpcbench.performance import allreduce_model, scaling_model
from tests.unit.test_predict import _plan

# What a user planning a booking knows: model, batch, workers, GPUs per node, one worker's
# images/s and the link.
PLAIN = [
    "predict",
    "--model",
    "resnet50",
    "--batch",
    "64",
    "--workers",
    "16",
    "--gpus-per-node",
    "4",
    "--single-worker-ips",
    "250",
    "--link",
    "40gbit",
    "--backend",
    "horovod",
]
# The same with every set-up detail stated.
SETUP = [
    *PLAIN,
    "--transport",
    "tcp",
    "--collectives",
    "gloo",
    "--intra-node",
    "pcie3",
    "--node-loss",
    "0.0075",
    "--fusion-threshold-mb",
    "128",
    "--cycle-time-ms",
    "1",
]


def _rows(argv, capsys):
    assert cli.main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_one_node_loses_a_share_per_further_busy_gpu():
    assert scaling_model.node_factor(0.01, 1, 8) == 1.0
    assert scaling_model.node_factor(0.01, 4, 8) == pytest.approx(1 / 1.03)
    # A count across nodes fills each node: its nodes' GPUs all share.
    assert scaling_model.node_factor(0.01, 64, 8) == pytest.approx(1 / 1.07)
    assert scaling_model.node_factor(0.01, 64, 1) == 1.0
    assert scaling_model.node_factor(0.0, 64, 8) == 1.0


def test_a_plan_told_nothing_takes_the_fitted_defaults():
    plan = _plan([16], 4)
    assert plan.nccl is None and plan.node_loss is None
    assert plan.tree is scaling_model.DEFAULT_TREE
    assert plan.loss == scaling_model.NODE_LOSS
    row = scaling_model.predictions(plan)[0]
    told = scaling_model.predictions(
        replace(plan, nccl=scaling_model.DEFAULT_TREE, node_loss=scaling_model.NODE_LOSS)
    )[0]
    assert row["efficiency"] == pytest.approx(told["efficiency"])
    bare = scaling_model.predictions(replace(plan, node_loss=0.0))[0]
    assert row["efficiency"] == pytest.approx(
        bare["efficiency"] * scaling_model.node_factor(scaling_model.NODE_LOSS, 16, 4)
    )
    assert row["images_per_s"] == pytest.approx(16 * 32 / row["step_s"])


def test_the_plain_defaults_are_fitted_back_from_points_they_made():
    """fit_plain finds the node loss and NCCL's algorithm that made a set of points, and
    a band that holds what is left (nothing here)."""
    found = scaling_model.Fit({"tcp": 0.5}, 0.2, 0.0)
    cases: dict[bool, list[scaling_model.Case]] = {False: [], True: []}
    for workers, g in ((8, 4), (16, 4), (32, 8), (64, 8)):
        plan = replace(_plan([workers], g), node_loss=0.0)
        for tree in (False, True):
            cases[tree].append(scaling_model.Case(replace(plan, nccl=tree), 1e10, 0.0, "tcp"))
    truth = [
        scaling_model.case_point(k, 0.5, 0.2) * scaling_model.node_factor(0.02, *_counts(k))
        for k in cases[True]
    ]
    cases = {
        t: [replace(k, measured=m) for k, m in zip(ks, truth, strict=True)]
        for t, ks in cases.items()
    }
    plain = scaling_model.fit_plain(cases, found)
    assert plain.node_loss == pytest.approx(0.02) and plain.tree is True
    assert plain.mean_abs == pytest.approx(0.0, abs=1e-9)
    assert plain.band == (0.0, 0.0)


def test_plain_inputs_name_each_assumption_that_moves_e_with_the_other_answer(capsys):
    rows = _rows(PLAIN, capsys)
    named = {a["detail"]: a for a in rows[-1]["assumptions"]}
    assert {"node", "collectives", "transport"} <= set(named)
    # Each other answer is what predict gives with that choice stated.
    for detail, option in (
        ("node", ["--node-loss", "0"]),
        ("collectives", ["--collectives", "nccl" if not scaling_model.DEFAULT_TREE else "gloo"]),
        ("transport", ["--transport", "rdma"]),
    ):
        assert named[detail]["option"] == " ".join(option)
        other = _rows([*PLAIN, *option], capsys)[-1]["efficiency"]
        assert named[detail]["efficiency"] == pytest.approx(other)
        assert abs(other - rows[-1]["efficiency"]) >= scaling_model.ASSUMPTION_MIN
    assert cli.main(PLAIN) == 0
    text = capsys.readouterr().out
    lines = [line for line in text.splitlines() if line.startswith("assumed: ")]
    assert len(lines) == len(named)
    transport = next(line for line in lines if "--transport rdma" in line)
    assert f"{named['transport']['efficiency']:.2f} under rdma" in transport


def test_a_call_that_states_its_set_up_names_nothing(capsys):
    rows = _rows(SETUP, capsys)
    assert rows[-1]["assumptions"] == []
    plain = _rows(PLAIN, capsys)[-1]
    # The defaults are those choices: the same point, told or assumed.
    assert rows[-1]["efficiency"] == pytest.approx(plain["efficiency"])
    assert cli.main(SETUP) == 0
    assert "assumed: " not in capsys.readouterr().out


def test_a_detail_that_does_not_move_e_is_not_named(capsys):
    # One worker per node (no node to share, nothing inside one) with the transport and
    # NCCL's algorithm stated: Horovod's release moves a large batch's E by less than
    # ASSUMPTION_MIN, so nothing is named and the band is the model's own.
    argv = [*PLAIN, "--gpus-per-node", "1", "--batch", "256", "--transport", "tcp"]
    argv += ["--collectives", "gloo"]
    rows = _rows(argv, capsys)
    assert rows[-1]["assumptions"] == []
    fused = _rows([*argv, "--fusion-threshold-mb", "64", "--cycle-time-ms", "5"], capsys)
    assert abs(fused[-1]["efficiency"] - rows[-1]["efficiency"]) < scaling_model.ASSUMPTION_MIN
    bare = scaling_model.predictions(
        replace(
            _plan([16], 1),
            nccl=False,
            step_time_s=256 / 250,
            batch=256,
            model="resnet50",
            image_size=224,
            busbw=40e9 / 8 * 0.64,
        ),
        assumptions=False,
    )[0]
    assert rows[-1]["efficiency_low"] == pytest.approx(bare["efficiency_low"])


def test_the_plain_band_is_wider_and_holds_the_published_spread_around_the_point(capsys):
    plain = _rows(PLAIN, capsys)[-1]
    told = _rows(SETUP, capsys)[-1]
    assert plain["efficiency"] == pytest.approx(told["efficiency"])
    assert plain["efficiency_low"] < told["efficiency_low"] or (
        plain["efficiency_high"] > told["efficiency_high"]
    )
    assert plain["efficiency_low"] <= told["efficiency_low"]
    assert plain["efficiency_high"] >= told["efficiency_high"]
    low, high = scaling_model.PLAIN_BAND
    assert plain["efficiency_low"] <= plain["efficiency"] + low + 1e-9
    assert plain["efficiency_high"] >= min(1.0, plain["efficiency"] + high) - 1e-9
    # It holds each other choice's answer.
    for a in plain["assumptions"]:
        assert plain["efficiency_low"] <= a["efficiency"] <= plain["efficiency_high"]
    # Inside one node nothing across nodes is assumed: the model's own band.
    one = _rows([*PLAIN[:6], "4", *PLAIN[7:]], capsys)[-1]
    assert one["nodes"] == 1 and one["efficiency_low"] > one["efficiency"] + low


def test_plain_band_is_the_union_of_the_model_band_and_the_spread():
    assert scaling_model.plain_band(0.8, 0.75, 0.85, (-0.1, 0.05)) == pytest.approx((0.7, 0.85))
    assert scaling_model.plain_band(0.8, 0.5, 0.99, (-0.1, 0.05)) == (0.5, 0.99)
    assert scaling_model.plain_band(0.98, 0.9, 0.99, (-0.1, 0.05)) == (pytest.approx(0.88), 1.0)


def test_horovod_defaults_by_release_are_named_where_they_move_e(capsys):
    # A step of a few milliseconds: the older release's 5 ms cycle matters.
    argv = [*SETUP[: SETUP.index("--fusion-threshold-mb")], "--model", "resnet18"]
    argv += ["--batch", "8", "--single-worker-ips", "2000", "--link", "100gbit"]
    named = {a["detail"]: a for a in _rows(argv, capsys)[-1]["assumptions"]}
    assert set(named) == {"fusion"}
    (_, size, cycle) = allreduce_model.HOROVOD_RELEASES[1]
    option = ["--fusion-threshold-mb", f"{size / 1024**2:g}", "--cycle-time-ms", f"{cycle * 1e3:g}"]
    assert named["fusion"]["option"] == " ".join(option)
    other = _rows([*argv, *option], capsys)[-1]["efficiency"]
    assert named["fusion"]["efficiency"] == pytest.approx(other)


def test_the_campaign_forecast_gets_the_same_defaults_through_predictions():
    """The plan's forecast builds a Plan without the set-up details (grouping at the
    backend's defaults, NCCL's algorithm and the node's loss unsaid) and reads
    predictions(): it gets the fitted defaults and the wider band."""
    plan = _plan([16], 4)
    row = scaling_model.predictions(plan)[0]
    assert row["node_factor"] == pytest.approx(
        scaling_model.node_factor(scaling_model.NODE_LOSS, 16, 4)
    )
    assert row["assumptions"]
    bare = scaling_model.predictions(plan, assumptions=False)[0]
    assert row["efficiency"] == bare["efficiency"]
    assert row["efficiency_high"] - row["efficiency_low"] >= (
        bare["efficiency_high"] - bare["efficiency_low"]
    )


def test_the_campaign_plan_names_what_it_assumed_and_the_other_answer(tmp_path, capsys):
    """gwdg.yaml gives no node sharing: the plan's line for the cells across nodes
    says what it assumed and E under the other common choice."""
    data = (Path(__file__).parents[2] / "campaigns" / "gwdg.yaml").read_text()
    path = tmp_path / "gwdg.yaml"
    path.write_text(data.replace("out: results/gwdg", f"out: {tmp_path / 'out'}"))
    assert cli.main(["campaign", "plan", str(path)]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if "E across workers" in x]
    assumed = [x for x in lines if "; assumed a node's GPUs share its NIC" in x]
    assert assumed, lines
    assert all(" under a node that loses nothing inside)" in x for x in assumed)


def test_published_rows_are_scored_with_plain_inputs_only(monkeypatch):
    evaluation = Path(__file__).parents[2] / "evaluation"
    monkeypatch.syspath_prepend(str(evaluation))
    import published

    data = published.load()
    row = next(r for r in data["rows"] if published.node_based(r))
    argv = published.plain_argv(row)
    for option in (
        "--intra-node",
        "--collectives",
        "--fusion-threshold-mb",
        "--cycle-time-ms",
        "--node-loss",
        "--link-efficiency",
        "--interference",
    ):
        assert option not in argv
    assert argv[argv.index("--workers") + 1] == str(row["workers"])  # no measured node
    setup = published.predict_argv(row)
    assert "--node-loss" in setup and "--collectives" in setup
    for name in ("published", "cli"):  # evaluation's, not hpcbench's
        sys.modules.pop(name, None)


def _counts(k):
    return k.plan.workers[0], k.plan.gpus_per_node
