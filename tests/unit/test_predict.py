"""The point prediction (one step replayed) and `hpcbench predict`."""

import json

import pytest

from hpcbench import cli, predict, prediction
from hpcbench.prediction import Message


def test_gradients_are_ready_in_reverse_layer_order_by_flops():
    # Three layers; the last one's backward runs first.
    grads = prediction.gradient_timeline([(4.0, 1.0), (0.0, 2.0), (8.0, 1.0)], backward_s=4.0)
    assert grads == [Message(8.0, 1.0), Message(4.0, 4.0)]  # the middle one has no weights


def test_ddp_buckets_fill_to_the_cap_with_a_small_first_bucket():
    mib = 1024**2
    grads = [Message(0.6 * mib, t) for t in (1, 2, 3, 4, 5)]
    buckets = prediction.ddp_buckets(grads, cap=1.5 * mib, first_cap=1 * mib)
    assert [(round(b.bytes / mib, 1), b.ready_s) for b in buckets] == [
        (1.2, 2), (1.8, 5)]  # fmt: skip


def test_horovod_fuses_what_is_ready_in_one_cycle_up_to_the_threshold():
    grads = [Message(10, 0.0001), Message(10, 0.0002), Message(10, 0.0015), Message(30, 0.0016)]
    fused = prediction.Grouping("horovod", message_bytes=35, cycle_s=1e-3)(grads)
    assert [(m.bytes, m.ready_s) for m in fused] == [(20, 1e-3), (10, 2e-3), (30, 2e-3)]
    alone = prediction.Grouping("horovod", message_bytes=0, cycle_s=1e-3)(grads)
    assert [(m.bytes, m.ready_s) for m in alone] == [(10, 1e-3), (10, 1e-3), (10, 2e-3), (30, 2e-3)]


def test_replay_queues_messages_on_one_link():
    link = prediction.LinkModel(2, 0.0, 10.0)  # ring factor 1: 10 bytes per second
    assert prediction.replay([Message(10, 0.0), Message(10, 0.5)], link) == 2.0
    assert prediction.replay([Message(10, 0.0), Message(10, 5.0)], link) == 6.0


def test_point_lies_in_the_band_when_messages_add_no_latency():
    layers = [(4e6, 1.0)] * 25  # 100 MB in 25 equal layers
    link = prediction.LinkModel(8, 0.0, 1e9)
    p = prediction.predict_point(0.3, layers, link, "ddp")
    assert p.efficiency_low <= p.efficiency <= p.efficiency_high
    assert p.step_s == pytest.approx(0.3 + p.exposed_s)
    # Backward is 0.2 s; all-reduce of 100 MB on 8 workers takes 0.175 s, and the last
    # bucket can only start when backward ends: some communication stays exposed.
    assert p.allreduce_s == pytest.approx(1.75 * 100e6 / 1e9)
    assert 0 < p.exposed_s < p.allreduce_s
    alone = prediction.predict_point(0.3, layers, prediction.LinkModel(1, 0, 1), "ddp")
    assert alone.efficiency == 1 and alone.exposed_s == 0


def test_least_squares_fit_uses_every_size():
    truth = prediction.LinkModel(4, 30e-6, 2e9)
    sizes = [4096, 1 << 16, 1 << 20, 1 << 24]
    results = []
    for i, s in enumerate(sizes):  # +-5% noise, alternating
        t = truth.allreduce_time(s) * (1.05 if i % 2 else 0.95)
        results.append({"bytes": s, "time_s": t, "busbw": prediction.busbw(s, t, 4)})
    fitted = prediction.link_model({"workers": 4, "results": results})
    assert fitted.busbw == pytest.approx(2e9, rel=0.08)
    assert fitted.latency_s == pytest.approx(30e-6, rel=0.15)


def test_resnet50_layers_from_the_meta_device():
    layers = predict.model_layers("resnet50", 224)
    params = sum(g for g, _ in layers) / 4
    assert params == 25_557_032  # torchvision's ResNet-50
    gflops = sum(f for _, f in layers) / 1e9
    assert 7.5 < gflops < 8.5  # about 4.1 G multiply-adds per 224 px image


def test_predict_json(capsys):
    argv = ["predict", "--model", "resnet18", "--workers", "1,2,8", "--gpus-per-node", "2",
            "--step-time", "0.1", "--link", "10gbit", "--json"]  # fmt: skip
    assert cli.main(argv) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["workers"] for r in rows] == [1, 2, 8]
    for r in rows:
        assert {"workers", "efficiency", "efficiency_low", "efficiency_high",
                "allreduce_s"} <= r.keys()  # fmt: skip
    assert rows[0]["efficiency"] == rows[1]["efficiency"] == 1.0  # one node: no network
    assert 0 < rows[2]["efficiency"] < 1 and rows[2]["allreduce_s"] > 0


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--link", "10gbit"], "one of --single-worker-ips or --step-time"),
        (["--step-time", "0.1"], "one of --link"),
        (["--step-time", "-1", "--link", "1gbit"], "--step-time: '-1' is not a number"),
        (["--step-time", "nan", "--link", "1gbit"], "--step-time: 'nan' is not a number"),
        (["--step-time", "0.1", "--link", "fast"], "--link 'fast': write a line rate"),
        (["--step-time", "0.1", "--link", "0gbit"], "out of range"),
        (["--step-time", "0.1", "--busbw", "0", ], "--busbw: 0 is out of range"),
        (["--step-time", "0.1", "--link", "1gbit", "--workers", "1-10000000000"], "out of range"),
        (["--step-time", "0.1", "--link", "1gbit", "--model", "nosuch"], "not a torchvision"),
        (["--step-time", "0.1", "--link", "1gbit", "--batch", "0"], "--batch: 0 is out of range"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(extra, message, capsys):
    assert cli.main(["predict", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_grouping_follows_the_frameworks_settings():
    mib = 1024**2
    # 30 MiB within 3 ms, none on a cycle's boundary
    grads = [Message(mib, 0.0001 * i - 0.00005) for i in range(1, 31)]
    assert len(prediction.Grouping("horovod")(grads)) == 3  # one message per 1 ms cycle
    assert len(prediction.Grouping("horovod", cycle_s=5e-3)(grads)) == 1
    assert len(prediction.Grouping("horovod", message_bytes=0)(grads)) == 30
    assert len(prediction.Grouping("horovod", 10 * mib, 5e-3)(grads)) == 3
    assert [m.bytes / mib for m in prediction.Grouping("ddp")(grads)] == [1, 25, 4]
    assert [m.bytes / mib for m in prediction.Grouping("ddp", 10 * mib)(grads)] == [1, 10, 10, 9]
    alone = prediction.Grouping("horovod", 0, 5e-3)
    assert alone.describe() == "Horovod, each tensor alone every 5 ms"
    assert prediction.Grouping("ddp").describe() == "DDP buckets of 25 MiB"


def test_one_message_per_tensor_pays_the_latency_per_tensor():
    layers = [(4e5, 1.0)] * 100  # 40 MB in 100 tensors, ready within 33 ms of backward
    link = prediction.LinkModel(32, 50e-6, 1e9)  # 2(N-1) a = 3.1 ms per all-reduce
    grads = prediction.gradient_timeline(layers, 0.05 * prediction.BACKWARD_SHARE)
    messages = len(prediction.Grouping("horovod")(grads))
    fused = prediction.predict_point(0.05, layers, link, prediction.Grouping("horovod"))
    alone = prediction.predict_point(0.05, layers, link, prediction.Grouping("horovod", 0))
    assert messages < 100
    # Both queues run past backward; fused, they carry at most `messages` latencies (fewer:
    # what became ready while the link was busy travels together), alone 100.
    assert alone.step_s - fused.step_s >= (100 - messages) * 62 * 50e-6 * 0.999


def test_horovod_fuses_what_became_ready_while_the_link_was_busy():
    link = prediction.LinkModel(2, 0.05, 10.0)  # 0.1 s per message + 1 s per 10 bytes
    grads = [Message(10, 0.0001), Message(10, 0.0002), Message(10, 0.5), Message(10, 0.6)]
    fusion = prediction.Grouping("horovod", message_bytes=1e9, cycle_s=1e-3)
    # The first cycle (1 ms) takes the first two: 2.1 s on the link. The other two became
    # ready meanwhile and go together at once: 2.1 s more. Fused per cycle beforehand they
    # would be three messages, ending at 4.301.
    dynamic = prediction.replay(grads, link, fusion=fusion)
    assert dynamic == pytest.approx(0.001 + 2.1 + 2.1)
    static = prediction.replay(fusion(grads), link)
    assert static == pytest.approx(4.301)
    alone = prediction.replay(grads, link, fusion=prediction.Grouping("horovod", 0, 1e-3))
    assert alone == pytest.approx(0.001 + 4 * 1.1)


@pytest.mark.parametrize("argv, message", [
    (["--backend", "ddp", "--fusion-threshold-mb", "64"], "--fusion-threshold-mb is Horovod's"),
    (["--backend", "horovod", "--bucket-cap-mb", "25"], "--bucket-cap-mb is DDP's"),
    (["--backend", "ddp", "--cycle-time-ms", "5"], "--cycle-time-ms is Horovod's"),
])  # fmt: skip
def test_framework_settings_of_the_other_backend_are_refused(argv, message, capsys):
    base = ["predict", "--model", "resnet18", "--step-time", "0.1", "--link", "1gbit"]
    assert cli.main([*base, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_published_rows_reproduce_with_their_quoted_numbers():
    """evaluation/published.json: each row's numbers appear in its source's quotes."""
    from pathlib import Path

    data = json.loads((Path(__file__).parents[2] / "evaluation/published.json").read_text())
    assert len(data["rows"]) >= 6
    for row in data["rows"]:
        quotes = " ".join(data["sources"][row["source"]]["quotes"]).replace(",", "")
        for key in ("single_ips", "multi_ips"):
            assert f"{row[key]:g}" in quotes or f"{row[key]:.2f}" in quotes or \
                f"{row[key]:.3f}" in quotes, (row, key)  # fmt: skip
