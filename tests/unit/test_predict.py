"""The point prediction (one step replayed) and `hpcbench predict`."""

import json
import re
from dataclasses import replace

import pytest

from hpcbench import cli
from hpcbench.measure.store import Store
from hpcbench.performance import allreduce_model, scaling_model
from hpcbench.performance.allreduce_model import Message
from tests.unit.conftest import EVALUATION


def test_gradients_are_ready_in_reverse_layer_order_by_flops():
    # Three layers; the last one's backward runs first.
    grads = allreduce_model.gradient_timeline([(4.0, 1.0), (0.0, 2.0), (8.0, 1.0)], backward_s=4.0)
    assert grads == [Message(8.0, 1.0), Message(4.0, 4.0)]  # the middle one has no weights


def test_ddp_buckets_fill_to_the_cap_with_a_small_first_bucket():
    mib = 1024**2
    grads = [Message(0.6 * mib, t) for t in (1, 2, 3, 4, 5)]
    buckets = allreduce_model.ddp_buckets(grads, cap=1.5 * mib, first_cap=1 * mib)
    assert [(round(b.bytes / mib, 1), b.ready_s) for b in buckets] == [(1.2, 2), (1.8, 5)]


def test_horovod_fuses_what_is_ready_in_one_cycle_up_to_the_threshold():
    grads = [Message(10, 0.0001), Message(10, 0.0002), Message(10, 0.0015), Message(30, 0.0016)]
    fused = allreduce_model.Grouping("horovod", message_bytes=35, cycle_s=1e-3)(grads)
    assert [(m.bytes, m.ready_s) for m in fused] == [(20, 1e-3), (10, 2e-3), (30, 2e-3)]
    alone = allreduce_model.Grouping("horovod", message_bytes=0, cycle_s=1e-3)(grads)
    assert [(m.bytes, m.ready_s) for m in alone] == [(10, 1e-3), (10, 1e-3), (10, 2e-3), (30, 2e-3)]


def test_replay_queues_messages_on_one_link():
    link = allreduce_model.LinkModel(2, 0.0, 10.0)  # ring factor 1: 10 bytes per second
    assert allreduce_model.replay([Message(10, 0.0), Message(10, 0.5)], link) == 2.0
    assert allreduce_model.replay([Message(10, 0.0), Message(10, 5.0)], link) == 6.0


def test_point_lies_in_the_band_when_messages_add_no_latency():
    layers = [(4e6, 1.0)] * 25  # 100 MB in 25 equal layers
    link = allreduce_model.LinkModel(8, 0.0, 1e9)
    p = allreduce_model.predict_point(0.3, layers, link, "ddp")
    assert p.efficiency_low <= p.efficiency <= p.efficiency_high
    assert p.step_s == pytest.approx(0.3 + p.exposed_s)
    # Backward is 0.2 s; all-reduce of 100 MB on 8 workers takes 0.175 s, and the last
    # bucket can only start when backward ends: some communication stays exposed.
    assert p.allreduce_s == pytest.approx(1.75 * 100e6 / 1e9)
    assert 0 < p.exposed_s < p.allreduce_s
    alone = allreduce_model.predict_point(0.3, layers, allreduce_model.LinkModel(1, 0, 1), "ddp")
    assert alone.efficiency == 1 and alone.exposed_s == 0


def test_least_squares_fit_uses_every_size():
    truth = allreduce_model.LinkModel(4, 30e-6, 2e9)
    sizes = [4096, 1 << 16, 1 << 20, 1 << 24]
    results = []
    for i, s in enumerate(sizes):  # +-5% noise, alternating
        t = truth.allreduce_time(s) * (1.05 if i % 2 else 0.95)
        results.append({"bytes": s, "time_s": t, "busbw": allreduce_model.busbw(s, t, 4)})
    fitted = allreduce_model.link_model({"workers": 4, "results": results})
    assert fitted.busbw == pytest.approx(2e9, rel=0.08)
    assert fitted.latency_s == pytest.approx(30e-6, rel=0.15)


def test_resnet50_layers_from_the_meta_device():
    layers = scaling_model.model_layers("resnet50", 224)
    params = sum(g for g, _ in layers) / 4
    assert params == 25_557_032  # torchvision's ResNet-50
    gflops = sum(f for _, f in layers) / 1e9
    assert 7.5 < gflops < 8.5  # about 4.1 G multiply-adds per 224 px image


def test_predict_json(capsys):
    argv = [
        "predict",
        "--model",
        "resnet18",
        "--workers",
        "1,2,8",
        "--gpus-per-node",
        "2",
        "--step-time",
        "0.1",
        "--link",
        "10gbit",
        "--json",
    ]
    assert cli.main(argv) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["workers"] for r in rows] == [1, 2, 8]
    for r in rows:
        assert {
            "workers",
            "efficiency",
            "efficiency_low",
            "efficiency_high",
            "allreduce_s",
        } <= r.keys()
    assert rows[0]["efficiency"] == 1.0
    # One node: the intra-node link only (PCIe 3 by default), far faster than the network.
    assert 0.97 < rows[1]["efficiency"] < 1.0 and rows[1]["allreduce_s"] < 0.01
    assert 0 < rows[2]["efficiency"] < rows[1]["efficiency"] and rows[2]["allreduce_s"] > 0.01
    assert "tcp default" in rows[2]["link"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--link", "10gbit"], "one of --single-worker-ips or --step-time"),
        (["--step-time", "0.1"], "one of --link"),
        (["--step-time", "-1", "--link", "1gbit"], "--step-time: '-1' is not a number"),
        (["--step-time", "nan", "--link", "1gbit"], "--step-time: 'nan' is not a number"),
        (["--step-time", "0.1", "--link", "fast"], "--link 'fast': write a line rate"),
        (["--step-time", "0.1", "--link", "0gbit"], "out of range"),
        (
            [
                "--step-time",
                "0.1",
                "--busbw",
                "0",
            ],
            "--busbw: 0 is out of range",
        ),
        (["--step-time", "0.1", "--link", "1gbit", "--workers", "1-10000000000"], "out of range"),
        (["--step-time", "0.1", "--link", "1gbit", "--model", "nosuch"], "not a torchvision"),
        (["--step-time", "0.1", "--link", "1gbit", "--batch", "0"], "--batch: 0 is out of range"),
        (
            ["--step-time", "0.1", "--busbw", "1", "--link-efficiency", "0.5"],
            "--link-efficiency scales --link",
        ),
        (["--step-time", "0.1", "--link", "1gbit", "--link-efficiency", "1.5"], "out of range"),
        (["--step-time", "0.1", "--link", "1gbit", "--interference", "2"], "out of range"),
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
    assert len(allreduce_model.Grouping("horovod")(grads)) == 3  # one message per 1 ms cycle
    assert len(allreduce_model.Grouping("horovod", cycle_s=5e-3)(grads)) == 1
    assert len(allreduce_model.Grouping("horovod", message_bytes=0)(grads)) == 30
    assert len(allreduce_model.Grouping("horovod", 10 * mib, 5e-3)(grads)) == 3
    assert [m.bytes / mib for m in allreduce_model.Grouping("ddp")(grads)] == [1, 25, 4]
    assert [m.bytes / mib for m in allreduce_model.Grouping("ddp", 10 * mib)(grads)] == [
        1,
        10,
        10,
        9,
    ]
    alone = allreduce_model.Grouping("horovod", 0, 5e-3)
    assert alone.describe() == "Horovod, each tensor alone every 5 ms"
    assert allreduce_model.Grouping("ddp").describe() == "DDP buckets of 25 MiB"


def test_one_message_per_tensor_pays_the_latency_per_tensor():
    layers = [(4e5, 1.0)] * 100  # 40 MB in 100 tensors, ready within 33 ms of backward
    link = allreduce_model.LinkModel(32, 50e-6, 1e9)  # 2(N-1) a = 3.1 ms per all-reduce
    grads = allreduce_model.gradient_timeline(layers, 0.05 * allreduce_model.BACKWARD_SHARE)
    messages = len(allreduce_model.Grouping("horovod")(grads))
    fused = allreduce_model.predict_point(0.05, layers, link, allreduce_model.Grouping("horovod"))
    alone = allreduce_model.predict_point(
        0.05, layers, link, allreduce_model.Grouping("horovod", 0)
    )
    assert messages < 100
    # Both queues run past backward; fused, they carry at most `messages` latencies (fewer:
    # what became ready while the link was busy travels together), alone 100.
    assert alone.step_s - fused.step_s >= (100 - messages) * 62 * 50e-6 * 0.999


def test_horovod_fuses_what_became_ready_while_the_link_was_busy():
    link = allreduce_model.LinkModel(2, 0.05, 10.0)  # 0.1 s per message + 1 s per 10 bytes
    grads = [Message(10, 0.0001), Message(10, 0.0002), Message(10, 0.5), Message(10, 0.6)]
    fusion = allreduce_model.Grouping("horovod", message_bytes=1e9, cycle_s=1e-3)
    # The first cycle (1 ms) takes the first two: 2.1 s on the link. The other two became
    # ready meanwhile and go together at once: 2.1 s more. Fused per cycle beforehand they
    # would be three messages, ending at 4.301.
    dynamic = allreduce_model.replay(grads, link, fusion=fusion)
    assert dynamic == pytest.approx(0.001 + 2.1 + 2.1)
    static = allreduce_model.replay(fusion(grads), link)
    assert static == pytest.approx(4.301)
    alone = allreduce_model.replay(grads, link, fusion=allreduce_model.Grouping("horovod", 0, 1e-3))
    assert alone == pytest.approx(0.001 + 4 * 1.1)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--backend", "ddp", "--fusion-threshold-mb", "64"], "--fusion-threshold-mb is Horovod's"),
        (["--backend", "horovod", "--bucket-cap-mb", "25"], "--bucket-cap-mb is DDP's"),
        (["--backend", "ddp", "--cycle-time-ms", "5"], "--cycle-time-ms is Horovod's"),
    ],
)
def test_framework_settings_of_the_other_backend_are_refused(argv, message, capsys):
    base = ["predict", "--model", "resnet18", "--step-time", "0.1", "--link", "1gbit"]
    assert cli.main([*base, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def _rows_hold_their_quoted_numbers(data: dict) -> None:
    """Each row's numbers appear in its source's quotes (or, for one worker's, in those of
    the source it names), and every source says where it is and how E is derived."""
    for key, source in data["sources"].items():
        assert source["url"].startswith("https://") and source["efficiency_from"], key
    for row in data["rows"]:
        quoted = {row["source"], row.get("single_ips_from", row["source"])}
        quotes = " ".join(q for s in quoted for q in data["sources"][s]["quotes"])
        if row.get("seq_len") is not None:  # a derived per-GPU rate is in its derivation
            quotes += " " + data["sources"][row["source"]]["efficiency_from"]
            assert row["multi_tps_per_worker"] and row["single_tps"], row
            assert row["node_tps_per_worker"] == row["single_tps"], row  # the base's E is 1
        quotes = quotes.replace(",", "")
        numbers = ["single_ips", "multi_ips", "multi_ips_per_worker", "node_ips"]
        numbers += ["node_ips_per_worker", "single_tps", "multi_tps_per_worker"]
        for key in (k for k in numbers if row.get(k) is not None):
            assert (
                f"{row[key]:g}" in quotes
                or f"{row[key]:.2f}" in quotes
                or f"{row[key]:.3f}" in quotes
            ), (row, key)
        if row.get("efficiency") is not None:  # a source that states only the efficiency
            assert row.get("multi_ips") is None and f"{row['efficiency']:.0%}" in quotes, row
        elif row.get("seq_len") is None:
            assert (row.get("multi_ips") is None) != (row.get("multi_ips_per_worker") is None)


def test_published_rows_reproduce_with_their_quoted_numbers():
    """evaluation/published.json: each row's numbers appear in its source's quotes, and
    every source says where it is and how its efficiency is derived."""
    data = json.loads((EVALUATION / "published.json").read_text())
    groups = {s.get("group", key) for key, s in data["sources"].items()}
    assert len(data["rows"]) >= 25 and len(groups) >= 6
    _rows_hold_their_quoted_numbers(data)


def test_unseen_rows_are_quoted_pinned_and_none_is_a_published_row():
    """evaluation/unseen.json: rows no fit has seen, each quoted like published.json's, its
    GitHub source pinned to a commit, its set-up marked standard or not, and no row one
    that published.json holds."""
    published = json.loads((EVALUATION / "published.json").read_text())
    unseen = json.loads((EVALUATION / "unseen.json").read_text())
    _rows_hold_their_quoted_numbers(unseen)
    for key, source in unseen["sources"].items():
        assert isinstance(source["standard"], bool), key
        if source["url"].startswith("https://github.com/"):
            assert re.search(r"/blob/[0-9a-f]{40}/", source["url"]), key
    standard = [r for r in unseen["rows"] if unseen["sources"][r["source"]]["standard"]]
    groups = {unseen["sources"][r["source"]]["group"] for r in standard}
    assert len(standard) >= 10 and len(groups) >= 2

    def seen(data: dict, row: dict) -> tuple:
        url = data["sources"][row["source"]]["url"]
        return (url, row["workers"], row.get("single_ips"), row.get("multi_ips"))

    assert not {seen(unseen, r) for r in unseen["rows"]} & {
        seen(published, r) for r in published["rows"]
    }


def test_unseen_summary_gives_the_standard_rows_and_each_group_apart(evaluation):
    """`published.py --unseen`: beside all rows, the figures of the rows whose set-up a user
    would plan, and of each source group."""
    published = evaluation("published")

    sources = {
        "a": {"group": "one", "standard": True},
        "b": {"group": "one", "standard": False},
        "c": {"group": "two", "standard": True},
    }

    def scored(source: str, measured: float, point: float) -> "published.Scored":
        row = {"source": source}
        return published.Scored(row, sources[source]["group"], measured, point, 0, 1, 0.9, 0.2)

    results = [scored("a", 0.9, 0.95), scored("b", 0.9, 0.7), scored("c", 0.8, 0.85)]
    lines = published.unseen_figures("run", results, sources)
    assert lines[0].startswith("run (3 rows)")
    assert lines[1].startswith("run, standard set-ups (2 rows): median |point - published| 0.050")
    assert "point above published in 2" in lines[1]
    assert [line.split(" (")[0] for line in lines[2:]] == ["  run: one", "  run: two"]
    # One group, every row standard: the summary is the one line.
    assert len(published.unseen_figures("run", results[2:], sources)) == 1


def test_two_level_link_charges_each_level_its_own_alpha_and_beta():
    one_node = allreduce_model.TwoLevelLink(4, 1, 50e-6, 1e9, 5e-6, 10e9)
    # Inside a node: 2(N-1) intra steps and the intra bandwidth.
    assert one_node.allreduce_time(1e6) == pytest.approx(6 * 5e-6 + 1.5 * 1e6 / 10e9)
    # 2 nodes x 4: each of 14 steps waits for the NIC; each NIC carries 2(N-1)/N x S.
    ring = allreduce_model.TwoLevelLink(8, 2, 50e-6, 1e9, 5e-6, 10e9)
    assert ring.allreduce_time(1e8) == pytest.approx(14 * 50e-6 + 1.75 * 1e8 / 1e9)
    # A slow intra-node link bounds the ring too.
    assert allreduce_model.TwoLevelLink(8, 2, 0.0, 1e9, 0.0, 0.5e9).allreduce_time(1e8) == (
        pytest.approx(1.75 * 1e8 / 0.5e9)
    )
    # NCCL's tree: log2(nodes) steps across nodes, so it wins on small messages only.
    wide = dict(
        workers=64, nodes=16, latency_s=50e-6, busbw=1e9, intra_latency_s=5e-6, intra_busbw=10e9
    )
    flat, nccl = (
        allreduce_model.TwoLevelLink(**wide),
        allreduce_model.TwoLevelLink(**wide, tree=True),
    )
    small, large = 4096, 1e8
    assert nccl.allreduce_time(small) == pytest.approx(nccl.tree_time(small))
    assert nccl.allreduce_time(small) < flat.allreduce_time(small) / 5
    # On 2 nodes the ring's bandwidth term (2(N-1)/N S, not 2 S) wins a large message.
    pair = allreduce_model.TwoLevelLink(8, 2, 50e-6, 1e9, 5e-6, 10e9, tree=True)
    assert pair.allreduce_time(large) == pytest.approx(pair.ring_time(large))
    assert pair.ring_time(large) < pair.tree_time(large)


def test_interference_slows_backward_by_its_share_of_the_overlapped_communication():
    layers = [(4e6, 1.0)] * 25  # 100 MB in 25 layers; backward 0.2 s
    link = allreduce_model.LinkModel(8, 0.0, 1e9)
    free = allreduce_model.predict_point(0.3, layers, link, "ddp")
    taxed = allreduce_model.predict_point(0.3, layers, link, "ddp", interference=0.5)
    assert free.slowdown_s == 0 and taxed.slowdown_s > 0
    assert taxed.exposed_s == pytest.approx(free.exposed_s)  # first order: the queue stays
    assert taxed.step_s == pytest.approx(free.step_s + taxed.slowdown_s)
    # The link is busy during backward for at most backward: the slowdown is bounded.
    assert taxed.slowdown_s <= 0.5 * 0.2 + 1e-12


def test_every_output_says_which_link_efficiency_it_used(capsys):
    base = ["predict", "--model", "resnet18", "--workers", "2", "--step-time", "0.1", "--json"]
    assert cli.main([*base, "--link", "10gbit"]) == 0
    default = json.loads(capsys.readouterr().out)[0]
    assert f"x {scaling_model.TCP_EFFICIENCY:.2f} (tcp default)" in default["link"]
    assert default["busbw"] == pytest.approx(10e9 / 8 * scaling_model.TCP_EFFICIENCY)
    assert cli.main([*base, "--link", "10gbit", "--transport", "rdma"]) == 0
    assert "(rdma default)" in json.loads(capsys.readouterr().out)[0]["link"]
    assert cli.main([*base, "--link", "10gbit", "--link-efficiency", "0.9"]) == 0
    given = json.loads(capsys.readouterr().out)[0]
    assert "x 0.90 (--link-efficiency)" in given["link"]
    assert given["efficiency"] > default["efficiency"]
    assert cli.main([*base, "--busbw", "1.2"]) == 0
    assert "measured, --busbw" in json.loads(capsys.readouterr().out)[0]["link"]
    assert cli.main([*base[:-1], "--link", "10gbit"]) == 0
    assert "(tcp default)" in capsys.readouterr().out


def _store(tmp_path, efficiencies: dict[int, float], link_rate: str = "1gbit", **fields):
    """A results store: one worker's step of 0.5 s, and at each node count a run whose
    step gives that efficiency (each run with `fields` over resnet18's)."""
    store = Store(tmp_path)
    for nodes, e in {1: 1.0, **efficiencies}.items():
        step = 0.5 / e
        store.append(
            {
                "kind": "run",
                "env": "local",
                "model": "resnet18",
                "backend": "ddp",
                "batch": 8,
                "image_size": 32,
                "data": "synthetic",
                "nodes": nodes,
                "workers": nodes,
                "gpus_per_node": 1,
                "repeat": 0,
                "status": "ok",
                "steps": 2,
                "window_times": [2 * step, 2 * step],
                "link_rate": link_rate,
                **fields,
            }
        )
    return store


def test_calibrate_recovers_the_parameters_that_made_the_runs(tmp_path, capsys):
    truth = {}
    for nodes in (2, 4):
        plan = scaling_model.Plan(
            model="resnet18",
            image_size=32,
            batch=8,
            workers=[nodes],
            gpus_per_node=1,
            step_time_s=0.5,
            busbw=1e9 / 8,
            latency_s=50e-6,
            backend="ddp",
            grouping=allreduce_model.Grouping("ddp"),
            nccl=True,
        )
        truth[nodes] = scaling_model.case_point(scaling_model.Case(plan, 1e9, 0.0), 0.4, 0.3)
    _store(tmp_path, truth)
    assert cli.main(["predict", "--calibrate", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["link_efficiency"] == pytest.approx(0.4)
    assert out["interference"] == pytest.approx(0.3)
    assert out["pass"] == "--link-efficiency 0.40 --interference 0.30"
    assert [r["nodes"] for r in out["rows"]] == [2, 4]
    assert all(abs(r["point"] - r["measured"]) < 1e-6 for r in out["rows"])
    assert cli.main(["predict", "--calibrate", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "link efficiency 0.40" in text and "--link-efficiency 0.40 --interference 0.30" in text


def test_calibrate_needs_two_node_counts_and_a_store(tmp_path, capsys):
    _store(tmp_path / "one", {2: 0.8})
    for argv, message in [
        (["--calibrate", str(tmp_path / "one")], "two node counts or more"),
        (["--calibrate", str(tmp_path / "none")], "no results store there"),
        (["--calibrate", "a\nb"], "no results store there"),
    ]:
        assert cli.main(["predict", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err


def test_each_published_source_is_scored_with_constants_fitted_without_it(evaluation, monkeypatch):
    """published.py leaves one source group out at a time: a CNN group's fit sees all the
    other CNN groups' rows, a transformer group's all the other groups' rows, none sees
    the held-out group's, and every row is scored once."""
    published = evaluation("published")

    data = published.load()
    key = {id(r): (r["source"], r["model"], r["workers"], r["network"]) for r in data["rows"]}
    group = {key[id(r)]: published.group_of(data, r) for r in data["rows"]}
    cases = {}
    real_case = published.case

    def case(row):
        k = real_case(row)
        cases[id(k)] = key[id(row)]
        return k

    seen = []

    def fit_constants(train, cache=None):
        seen.append({group[cases[id(k)]] for k in train})
        return scaling_model.Fit({"tcp": 0.9, "rdma": 1.0}, 0.3, 0.0)

    real_bare = published.bare

    def bare(k):
        b = real_bare(k)
        cases[id(b)] = cases[id(k)]
        return b

    monkeypatch.setattr(published, "bare", bare)
    plain_seen = []
    real_fit_plain = published.fit_plain

    def fit_plain(data, found, groups=None, cache=None, cases=None):
        plain_seen.append(set(groups))
        return real_fit_plain(data, found, groups, cache, cases)

    monkeypatch.setattr(published, "case", case)
    monkeypatch.setattr(published, "fit_constants", fit_constants)
    monkeypatch.setattr(published, "fit_plain", fit_plain)
    results, fits, users, plains = published.leave_one_source_out(data)
    everyone = set(group.values())
    sharded = {published.group_of(data, r) for r in data["rows"] if published.transformer(r)}
    cnn_groups = everyone - sharded
    # The fits of the plain band leave out one CNN group more (below); the others are
    # the fits the rows are scored with.
    band_fits = [s for s in seen if len(cnn_groups - s) == 2]
    seen = [s for s in seen if len(cnn_groups - s) != 2]
    assert len(band_fits) == len(cnn_groups) * (len(cnn_groups) - 1)
    assert len(sharded) >= 3 and len(seen) == len(everyone) == len(fits)
    left = [everyone - s for s in seen]  # each fit's groups not seen
    cnn = [g for g in left if len(g) > 1]  # one CNN group and every transformer group
    assert all(g >= sharded for g in cnn)
    assert sorted(tuple(g - sharded) for g in cnn) == sorted((g,) for g in everyone - sharded)
    assert sorted(tuple(g) for g in left if len(g) == 1) == sorted((g,) for g in sharded)
    assert sorted(key[id(s.row)] for s in results) == sorted(key.values())
    assert all(s.group == group[key[id(s.row)]] for s in results)
    # Scored as a user calls predict: the plain-input defaults are fitted on the other
    # CNN groups only, and every CNN row is scored once so. Their band is what those
    # groups miss by, each predicted by a fit without it too: a fold's fits, the one it
    # scores with and then one per other group, never see the group held out.
    fold = len(cnn_groups)
    assert len(plain_seen) == fold * fold
    outer = []
    for i in range(0, len(plain_seen), fold):
        (g,) = cnn_groups - plain_seen[i]
        outer.append(g)
        inner = [cnn_groups - s for s in plain_seen[i + 1 : i + fold]]
        assert all(g in m and len(m) == 2 for m in inner)
        assert sorted(h for m in inner for h in m - {g}) == sorted(cnn_groups - {g})
    assert sorted(outer) == sorted(cnn_groups)
    assert set(plains) == cnn_groups
    assert sorted(key[id(s.row)] for s in users) == sorted(
        k for k, g in group.items() if g in cnn_groups
    )


def _plan(workers, gpus_per_node, **kw):
    return scaling_model.Plan(
        model="resnet18",
        image_size=64,
        batch=32,
        workers=workers,
        gpus_per_node=gpus_per_node,
        step_time_s=0.1,
        busbw=1.25e9,
        latency_s=50e-6,
        backend="horovod",
        grouping=allreduce_model.Grouping("horovod"),
        **kw,
    )


def test_a_measured_node_rescales_the_point_and_band_across_nodes():
    node, across = scaling_model.predictions(_plan([4, 16], 4))
    out = scaling_model.rescaled_to_node(across, node, 0.8)
    k = 0.8 / node["efficiency"]
    assert out["node_factor"] == pytest.approx(k) and k < 1
    assert out["efficiency"] == pytest.approx(across["efficiency"] * k)
    assert out["efficiency_low"] == pytest.approx(across["efficiency_low"] * k)
    assert out["efficiency_high"] == pytest.approx(min(1.0, across["efficiency_high"] * k))
    # A node measured better than the model says never lifts the band's top above 1.
    assert scaling_model.rescaled_to_node(across, node, 1.0)["efficiency_high"] <= 1.0


def test_the_fit_scores_a_case_with_a_measured_node_as_rescaled():
    plan = _plan([16], 4)
    case = scaling_model.Case(plan, 1e10, 0.7, "tcp", node_efficiency=0.9)
    share, inter = 0.5, 0.3
    tried = replace(plan, workers=[4, 16], busbw=1e10 / 8 * share, interference=inter)
    node, across = scaling_model.predictions(tried, assumptions=False)
    want = scaling_model.rescaled_to_node(across, node, 0.9)
    assert scaling_model.case_point(case, share, inter) == pytest.approx(want["efficiency"])
    low, high = scaling_model.case_band(case, share, inter)
    assert (low, high) == pytest.approx((want["efficiency_low"], want["efficiency_high"]))
    # Without a measured node (or within one node) the point is the model's own.
    alone = replace(case, node_efficiency=None)
    assert scaling_model.case_point(alone, share, inter) == pytest.approx(across["efficiency"])
    # A source that measured 2 of the node's 4 GPUs: rescaled by what 2 workers on one
    # node were predicted, not 4.
    half = replace(case, node_workers=2)
    two, _ = scaling_model.predictions(replace(tried, workers=[2, 16]), assumptions=False)
    want = scaling_model.rescaled_to_node(across, two, 0.9)
    assert scaling_model.case_point(half, share, inter) == pytest.approx(want["efficiency"])
    assert two["efficiency"] != node["efficiency"]


def test_published_commands_give_the_points_the_defaults_score(evaluation):
    """A row's printed predict command, with predict's defaults, gives the point that the
    in-sample figures count (rescaled to its measured node where it has one)."""
    published = evaluation("published")

    data = published.load()
    node_rows = [r for r in data["rows"] if published.node_based(r)]
    ring_rows = [r for r in data["rows"] if r.get("collectives") == "ring"]
    assert node_rows and ring_rows
    for row in (node_rows[0], ring_rows[0]):
        k = published.case(row)
        share = scaling_model.LINK_EFFICIENCY[row["transport"]]
        want = scaling_model.case_point(k, share, scaling_model.DEFAULT_INTERFERENCE)
        assert published.predicted(row)["efficiency"] == pytest.approx(want)
    row = node_rows[0]
    argv = published.predict_argv(row)
    assert argv[argv.index("--workers") + 1] == f"{row['gpus_per_node']},{row['workers']}"
    assert "gloo" in published.predict_argv(ring_rows[0])  # NCCL before trees: rings only
