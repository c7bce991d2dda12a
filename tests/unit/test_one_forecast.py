"""One cell, one forecast: `predict`, the campaign's forecast and the report's prediction
beside a measurement gather their inputs their own way (the command line; a campaign
file and its store; a results store) and get the same point and band from them
(hpcbench/performance/plans.py), whatever the parallelism."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from hpcbench import cli
from hpcbench.campaign import campaign_file, forecast
from hpcbench.measure import analysis
from hpcbench.measure.store import Store
from hpcbench.performance import allreduce_model, plans

LATENCY_S, BUSBW = 1e-4, 1.2e8  # the probe's link: 100 us, 120 MB/s


def _probe(env: str, workers: int) -> dict[str, Any]:
    link = allreduce_model.LinkModel(workers, LATENCY_S, BUSBW)
    sizes = (1 << 16, 1 << 20, 1 << 24)
    return {
        "kind": "probe",
        "status": "ok",
        "env": env,
        "backend": "ddp",
        "nodes": 2,
        "workers": workers,
        "results": [{"bytes": s, "time_s": link.allreduce_time(s), "busbw": BUSBW} for s in sizes],
    }


def _run(env: str, model: str, workers: int, per_node: int, window: float, **extra: Any) -> dict:
    return {
        "kind": "run",
        "status": "ok",
        "env": env,
        "model": model,
        "backend": "ddp",
        "batch": 2,
        "image_size": 32 if model == "resnet18" else 0,
        "data": "synthetic",
        "nodes": max(1, workers // per_node),
        "workers": workers,
        "gpus_per_node": per_node,
        "repeat": 0,
        "steps": 10,
        "window_times": [window, window],
        "method": "m",
        "amp": False,
        "fingerprint": {"device": "cpu"},
        "launched_at": float(workers),
        **extra,
    }


CASES = [
    # model, parallel, workers per node, shard group, layout (tp, K, checkpointing)
    ("resnet18", "ddp", 1, 0, (1, 1, "none")),
    ("gpt-tiny", "ddp", 1, 0, (1, 1, "none")),
    ("gpt-tiny", "fsdp2", 1, 0, (1, 1, "none")),
    ("gpt-tiny", "hsdp", 2, 2, (1, 1, "none")),
    ("gpt-tiny", "fsdp2", 2, 0, (2, 2, "none")),
    ("gpt-tiny", "ddp", 1, 0, (1, 3, "full")),
]


@pytest.mark.parametrize(("model", "parallel", "per_node", "group", "layout"), CASES)
def test_predict_the_campaign_and_the_report_give_one_cell_one_point_and_band(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    model: str,
    parallel: str,
    per_node: int,
    group: int,
    layout: tuple[int, int, str],
) -> None:
    tp, k, checkpoint = layout
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))
    transformer = model != "resnet18"
    sweep = {"model": model, "backend": "ddp", "batch": [2], "nodes": [1, 2], "repeats": 1}
    sweep |= {"device": "cpu", "gpus_per_node": [per_node]}
    if transformer:
        sweep |= {"parallel": parallel, "seq_len": 64}
    else:
        sweep |= {"image_size": 32}
    if group:
        sweep["shard_group"] = group
    if layout != (1, 1, "none"):
        sweep |= {"tp": tp, "grad_accum": k, "activation_checkpoint": checkpoint}
    path = tmp_path / "c.yaml"
    hosts = [f"h1:{per_node}", f"h2:{per_node}"]
    path.write_text(
        textwrap.dedent(
            f"""\
            name: one
            out: {tmp_path / "out"}
            sweep: {json.dumps(sweep)}
            testbeds:
              - {{name: h, hosts: {json.dumps(hosts)}}}
            """
        )
    )
    campaign = campaign_file.load(path)
    [tb] = campaign.testbeds
    workers = 2 * per_node
    seq = {"seq_len": 64, "parallel": parallel, "shard_group": group} if transformer else {}
    if layout != (1, 1, "none"):  # as the workload records them (the baseline without TP)
        seq |= {"grad_accum": k, "activation_checkpoint": checkpoint}
    store = campaign.testbed_store(tb)
    for record in (
        _probe(tb.env, workers),
        _run(tb.env, model, 1, per_node, 1.0, **seq),
        _run(tb.env, model, workers, per_node, 1.6, **seq, tp=tp),
    ):
        store.append(record)

    # The campaign's forecast of the cell across two nodes, from this store.
    [cell] = [f for f in forecast.testbed_forecast(campaign, tb) if f.cell.workers == workers]
    campaign_says = (cell.efficiency, cell.efficiency_low, cell.efficiency_high)

    # The report's prediction beside the measurement of that cell.
    summaries = analysis.summarise(store.runs(), store.probes())
    [measured] = [s for s in summaries if s.workers == workers]
    report_says = (
        measured.predicted_efficiency,
        measured.predicted_efficiency_low,
        measured.predicted_efficiency_high,
    )

    # predict, told the same: the baseline's step (as one plain micro-batch's: predict
    # takes that and adds the layout, plans.step_in_layout), the probe's link, CPU nodes.
    step = 1.0 / 10 / k / (1 + plans.recompute_share(model, 64, checkpoint))
    argv = [
        "predict",
        "--model",
        model,
        "--batch",
        "2",
        "--workers",
        str(workers),
        "--gpus-per-node",
        str(per_node),
        "--step-time",
        f"{step:.9f}",  # predict takes at most nine decimals (bench/units.py)
        "--busbw",
        repr(BUSBW / 1e9),
        "--latency-us",
        repr(LATENCY_S * 1e6),
        "--collectives",
        "gloo",
        "--json",
    ]
    if transformer:
        argv += ["--parallel", parallel, "--seq-len", "64"]
        if group:
            argv += ["--shard-group", str(group)]
        argv += ["--tp", str(tp), "--grad-accum", str(k), "--activation-checkpoint", checkpoint]
    else:
        argv += ["--image-size", "32"]
    capsys.readouterr()
    assert cli.main(argv) == 0
    [row] = json.loads(capsys.readouterr().out)
    predict_says = (row["efficiency"], row["efficiency_low"], row["efficiency_high"])

    assert all(v is not None for v in (*campaign_says, *report_says)), (campaign_says, report_says)
    assert campaign_says == pytest.approx(report_says, abs=1e-9)
    assert predict_says == pytest.approx(report_says, rel=1e-6)


def test_a_cnns_campaign_forecast_and_report_replay_the_baselines_measured_gradients(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))
    path = tmp_path / "c.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            name: one
            out: {tmp_path / "out"}
            sweep: {{model: resnet18, image_size: 32, backend: ddp, batch: [2], nodes: [1, 2],
                     repeats: 1, device: cpu}}
            testbeds:
              - {{name: h, hosts: ["h1:1", "h2:1"]}}
            """
        )
    )
    campaign = campaign_file.load(path)
    [tb] = campaign.testbeds
    store = campaign.testbed_store(tb)
    # 12 MB of gradients, most of it late in backward: more is exposed than the layers say.
    timeline = [[0.05, 1e6], [0.09, 11e6]]
    for record in (
        _probe(tb.env, 2),
        _run(tb.env, "resnet18", 1, 1, 1.0, grad_timeline=timeline),
        _run(tb.env, "resnet18", 2, 1, 1.6),
    ):
        store.append(record)
    [cell] = [f for f in forecast.testbed_forecast(campaign, tb) if f.cell.workers == 2]
    [measured] = [s for s in analysis.summarise(store.runs(), store.probes()) if s.workers == 2]
    assert cell.efficiency == pytest.approx(measured.predicted_efficiency)
    assert "measured gradients" in cell.link_source
    without = Store(tmp_path / "plain")
    for record in (_probe(tb.env, 2), _run(tb.env, "resnet18", 1, 1, 1.0)):
        without.append(record)
    [layers] = [
        s
        for s in analysis.summarise(
            [*without.runs(), _run(tb.env, "resnet18", 2, 1, 1.6)], without.probes()
        )
        if s.workers == 2
    ]
    assert layers.predicted_efficiency != pytest.approx(cell.efficiency)


def test_a_transformers_forecast_takes_its_shape_not_the_baselines_gradients(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transformer's lone worker records its gradients' timeline too; its forecast
    comes from the model's blocks (sharded_model), and says no replay."""
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))
    lm = {"seq_len": 64, "unit": "tokens", "tokens_per_step": 128}
    timeline = [[0.05, 1e6], [0.09, 11e6]]

    def two_workers(name: str, **extra: Any) -> forecast.CellForecast:
        path = tmp_path / f"{name}.yaml"
        path.write_text(
            textwrap.dedent(
                f"""\
                name: {name}
                out: {tmp_path / name}
                sweep: {{model: gpt-tiny, seq_len: 64, backend: ddp, batch: [2],
                         nodes: [1, 2], repeats: 1, device: cpu}}
                testbeds:
                  - {{name: h, hosts: ["h1:1", "h2:1"]}}
                """
            )
        )
        campaign = campaign_file.load(path)
        [tb] = campaign.testbeds
        for record in (_probe(tb.env, 2), _run(tb.env, "gpt-tiny", 1, 1, 1.0, **lm, **extra)):
            campaign.testbed_store(tb).append(record)
        [cell] = [f for f in forecast.testbed_forecast(campaign, tb) if f.cell.workers == 2]
        return cell

    replayed, plain = two_workers("timed", grad_timeline=timeline), two_workers("plain")
    assert replayed.efficiency is not None
    assert "measured gradients" not in replayed.link_source, replayed.link_source
    assert replayed.efficiency == pytest.approx(plain.efficiency)
