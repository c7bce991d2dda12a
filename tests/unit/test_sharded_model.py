"""The transformers' scaling model: FSDP units, the rings their collectives take, one
step replayed with one layer of prefetch, Gloo's blocking collectives, and
`hpcbench predict` for a transformer."""

import json

import pytest

from hpcbench import cli
from hpcbench.core.bench import transformer_configs as tc
from hpcbench.performance import allreduce_model, scaling_model, sharded_model
from hpcbench.performance.sharded_model import Hop, Ring, Sharding, Unit

SHAPES = {**tc.CONFIGS, **sharded_model.PUBLISHED_SHAPES}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_units_add_up_to_the_model_and_its_flops_per_token(name):
    config = SHAPES[name]
    for seq_len in (128, config.seq_len):
        blocks, root = sharded_model.units(config, seq_len)
        assert len(blocks) == config.layers
        params = sum(u.params for u in (*blocks, root))
        assert params == tc.param_counts(config)["total"]
        flops = sum(u.flops_per_token for u in (*blocks, root))
        assert flops == tc.flops_per_token(config, seq_len)


@pytest.mark.parametrize(
    "name,params",
    [
        # mosaicml/llm-foundry scripts/train/benchmarking/README.md, NumParams at seq 2048.
        ("mpt-350m", 355_985_408),
        ("mpt-760m", 760_470_528),
        ("mpt-3b", 2_651_837_440),
        ("mpt-7b", 6_658_859_008),
        ("mpt-13b", 12_853_954_560),
        # Llama 3.1 8B: 8.03 B parameters, the output projection not tied.
        ("llama3.1-8b", 8_030_261_248),
    ],
)
def test_published_shapes_have_their_sources_parameter_counts(name, params):
    config = sharded_model.PUBLISHED_SHAPES[name]
    assert tc.param_counts(config)["total"] == params
    assert len(config.source) > 40


def test_ddp_layers_put_a_tied_token_tables_gradient_last_in_backward():
    config = tc.CONFIGS["gpt2-small"]
    layers = sharded_model.ddp_layers(config, 1024, 4)
    assert sum(b for b, _ in layers) == 4 * tc.param_counts(config)["total"]
    assert sum(f for _, f in layers) == tc.flops_per_token(config, 1024)
    # Forward order: the tables (no FLOPs) first, so backward makes their gradient last.
    assert layers[0] == (4.0 * tc.param_counts(config)["embedding"], 0.0)
    grads = allreduce_model.gradient_timeline(layers, backward_s=1.0)
    assert grads[-1].bytes == layers[0][0] and grads[-1].ready_s == pytest.approx(1.0)


def test_a_ring_pays_p_minus_1_steps_and_its_share_of_the_bytes():
    ring = Ring(4, Hop(10e-6, 1e9))
    assert ring.gather(8e6) == pytest.approx(3 * 10e-6 + 0.75 * 8e6 / 1e9)
    assert ring.allreduce(8e6) == pytest.approx(2 * ring.gather(8e6))
    assert Ring(1, Hop(1.0, 1.0)).gather(1e9) == 0 == Ring(1, Hop(1.0, 1.0)).allreduce(1e9)


def test_rings_follow_the_mesh_onto_nodes():
    links = sharded_model.Links({"all_reduce": Hop(5e-6, 10e9)}, Hop(1e-6, 100e9))
    # FSDP2 over 8 workers, 4 a node: one ring through both nodes, one edge per NIC.
    fsdp = sharded_model.rings(8, 4, 8, links)
    assert fsdp["all_gather"] == Ring(8, Hop(5e-6, 10e9), across=True)
    assert fsdp["all_reduce"].ranks == 1
    # HSDP, a node's 4 per group: gathers inside the node; each of the node's 4 workers
    # all-reduces its shard with its peer on the other node, 4 rings on one NIC.
    hsdp = sharded_model.rings(8, 4, 4, links)
    assert hsdp["reduce_scatter"] == Ring(4, Hop(1e-6, 100e9))
    assert hsdp["all_reduce"] == Ring(2, Hop(5e-6, 10e9 / 4), across=True)
    # Groups of 2 on nodes of 4: the replica rings of shards 0 and 1 share each NIC.
    assert sharded_model.rings(8, 4, 2, links)["all_reduce"].hop.busbw == 10e9 / 2
    # A probe's all-gather across nodes replaces the all-reduce's link for it.
    probed = sharded_model.Links({**links.across, "all_gather": Hop(7e-6, 3e9)}, links.inside)
    got = sharded_model.rings(8, 4, 8, probed)
    assert got["all_gather"].hop == Hop(7e-6, 3e9)
    assert got["reduce_scatter"].hop == Hop(5e-6, 10e9)


# Two blocks of 8 parameters and one FLOP each, a root of neither; a step of 3 s: 0.5 s
# of forward and 1 s of backward per block. Two ranks at 10 bytes/s, no latency:
# a block's all-gather in 2-byte parameters takes 0.5 x 16 / 10 = 0.8 s, its
# reduce-scatter in 1-byte gradients 0.4 s.
BLOCKS, ROOT = [Unit(8, 1.0), Unit(8, 1.0)], Unit(0, 0.0)
PAIR = {
    "all_gather": Ring(2, Hop(0.0, 10.0)),
    "reduce_scatter": Ring(2, Hop(0.0, 10.0)),
    "all_reduce": Ring(1, Hop(0.0, 10.0)),
}


def test_one_layer_of_prefetch_by_hand():
    # Forward: block 0's gather 0-0.8, compute 0.8-1.3; block 1's, issued at 0.8, ends
    # 1.6, compute 1.6-2.1. Backward: block 1's gather 2.1-2.9, compute 2.9-3.9 while
    # block 0's gather (issued at 2.9) runs 2.9-3.7; block 1's reduce-scatter 3.9-4.3;
    # block 0 computes 3.9-4.9 and its reduce-scatter ends at 5.3.
    p = sharded_model.sharded_point(3.0, BLOCKS, ROOT, PAIR, Sharding(2, 2, 1), 0.5)
    # Inside the computation: 0.5 (forward) + 0.8 + 0.4 (backward) of the link's time.
    assert p.exposed_s == pytest.approx(5.3 - 3.0)
    assert p.slowdown_s == pytest.approx(0.5 * 1.7)
    assert p.step_s == pytest.approx(5.3 + 0.85)
    assert p.allreduce_s == pytest.approx(4 * 0.8 + 2 * 0.4)
    assert (p.efficiency_low, p.efficiency_high) == pytest.approx((3 / 7.0, 3 / 4.0))
    # Gathered once (ZeRO-2): no gathers in backward, block 1 computes from 2.1.
    once = sharded_model.sharded_point(
        3.0, BLOCKS, ROOT, PAIR, Sharding(2, 2, 1, reshard_after_forward=False)
    )
    assert once.step_s == pytest.approx(2.1 + 2.0 + 0.4)


def test_hsdp_all_reduces_each_shard_after_its_reduce_scatter_on_the_link_between_nodes():
    # The pair above is one node's shard group; its replica is on another node. A shard
    # of 4 bytes all-reduced between 2 replicas at 10 bytes/s takes 0.4 s.
    rings = {**PAIR, "all_reduce": Ring(2, Hop(0.0, 10.0), across=True)}
    p = sharded_model.sharded_point(3.0, BLOCKS, ROOT, rings, Sharding(2, 2, 1))
    # Block 1's all-reduce 4.3-4.7 runs beside block 0's backward; block 0's 5.3-5.7.
    assert p.workers == 4 and p.exposed_s == pytest.approx(5.7 - 3.0)


def test_gloo_blocks_so_the_step_is_one_workers_plus_every_collective():
    gloo = Sharding(2, 2, 1, gloo=True)
    p = sharded_model.sharded_point(3.0, BLOCKS, ROOT, PAIR, gloo, interference=0.5)
    # Four gathers of 0.8 s; a reduce-scatter that Gloo runs as an all-reduce: 0.8 s.
    assert p.step_s == pytest.approx(3.0 + 4 * 0.8 + 2 * 0.8) and p.slowdown_s == 0
    # No overlap; the band's low end adds FSDP2's own CPU work at the most measured.
    own = sharded_model.GLOO_OWN_WORK_UP_TO * 3.0
    assert p.efficiency_low == pytest.approx(3.0 / (p.step_s + own))
    assert p.efficiency_low < p.efficiency
    # A probe that timed the reduce-scatter already holds what Gloo ran: its own formula.
    timed = Sharding(2, 2, 1, gloo=True, reduce_scatter_timed=True)
    assert sharded_model.sharded_point(3.0, BLOCKS, ROOT, PAIR, timed).step_s == pytest.approx(
        3.0 + 4 * 0.8 + 2 * 0.4
    )
    # The backend's background share stretches the computation (as for the CNNs).
    cpu = allreduce_model.CpuWork(background_share=0.25)
    slow = sharded_model.sharded_point(3.0, BLOCKS, ROOT, PAIR, gloo, cpu=cpu)
    assert slow.step_s == pytest.approx(4.0 + 4.8) and slow.background_s == pytest.approx(1.0)


def test_one_worker_trains_alone():
    alone = {k: Ring(1, r.hop) for k, r in PAIR.items()}
    p = sharded_model.sharded_point(3.0, BLOCKS, ROOT, alone, Sharding(1))
    assert (p.step_s, p.efficiency, p.exposed_s) == (3.0, 1.0, 0.0)


def test_a_faster_link_never_makes_the_step_longer():
    config = tc.CONFIGS["gpt2-small"]
    blocks, root = sharded_model.units(config, 1024)
    steps = []
    for busbw in (1e8, 1e9, 1e10, 1e11):
        links = sharded_model.Links({"all_reduce": Hop(20e-6, busbw)}, Hop(5e-6, 100e9))
        rings = sharded_model.rings(16, 4, 16, links)
        steps.append(
            sharded_model.sharded_point(0.4, blocks, root, rings, Sharding(16, 2, 4), 0.2).step_s
        )
    assert steps == sorted(steps, reverse=True) and steps[-1] < 0.45


def test_the_probes_all_gather_is_fitted_with_its_own_formula():
    truth = Ring(4, Hop(30e-6, 2e9))
    sizes = [4096, 1 << 16, 1 << 20, 1 << 24]
    records = [
        {"bytes": s, "time_s": truth.gather(s) * (1.05 if i % 2 else 0.95)}
        for i, s in enumerate(sizes)
    ]
    fitted = allreduce_model.collective_model({"workers": 4, "all_gather": records}, "all_gather")
    assert fitted is not None
    assert fitted.busbw == pytest.approx(2e9, rel=0.08)
    assert fitted.latency_s == pytest.approx(30e-6, rel=0.15)
    assert allreduce_model.collective_model({"workers": 4}, "reduce_scatter") is None
    assert (
        allreduce_model.collective_model({"workers": 1, "all_gather": records}, "all_gather")
        is None
    )


def test_the_probe_says_whether_gloo_emulated_the_reduce_scatter():
    gloo = {"collectives": {"reduce_scatter": {"ran": ["gloo:all_reduce"], "emulated": True}}}
    assert sharded_model.reduce_scatter_emulated(gloo) is True
    assert sharded_model.reduce_scatter_emulated({"collectives": None}) is None
    assert sharded_model.reduce_scatter_emulated(None) is None


FSDP = [
    "predict",
    "--model",
    "gpt2-small",
    "--parallel",
    "fsdp2",
    "--seq-len",
    "1024",
    "--batch",
    "8",
    "--workers",
    "1,4,16",
    "--gpus-per-node",
    "4",
    "--single-worker-tps",
    "20000",
    "--link",
    "100gbit",
]


def test_predict_a_transformer_in_tokens_with_every_figures_source(capsys):
    assert cli.main([*FSDP, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["workers"] for r in rows] == [1, 4, 16]
    assert rows[0]["tokens_per_s"] == pytest.approx(20000) and rows[0]["efficiency"] == 1
    for r in rows:
        assert r["unit"] == "tokens" and "images_per_s" not in r
        assert r["efficiency_low"] <= r["efficiency"] <= r["efficiency_high"] <= 1
        assert r["tokens_per_s"] == pytest.approx(r["workers"] * 20000 * r["efficiency"])
        assert "--single-worker-tps" in r["sources"]["single"]
        assert "tcp default" in r["sources"]["link"]
        assert "0.855 GFLOP per token" in r["sources"]["flops"]
    assert rows[2]["efficiency"] < rows[1]["efficiency"]  # 4 nodes pay the NIC
    assert cli.main(FSDP) == 0
    text = capsys.readouterr().out
    assert "tokens/s" in text and "FSDP2 over all workers" in text and "bf16" in text


def test_predict_gloo_gathers_in_fp32_and_hsdp_names_its_group(capsys):
    assert cli.main([*FSDP, "--collectives", "gloo", "--json"]) == 0
    gloo = json.loads(capsys.readouterr().out)
    assert "gathered in fp32" in gloo[-1]["sources"]["parallel"]
    assert "blocking" in gloo[-1]["sources"]["parallel"]
    hsdp = [*FSDP[:4], "hsdp", *FSDP[5:], "--shard-group", "2", "--json"]
    assert cli.main(hsdp) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["shard_group"] for r in rows[1:]] == [2, 2]
    ddp = [*FSDP[:4], "ddp", *FSDP[5:], "--json"]
    assert cli.main(ddp) == 0
    assert "DDP" in json.loads(capsys.readouterr().out)[-1]["sources"]["parallel"]


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--model", "gpt-huge"], "'gpt-huge' is not one"),
        (["--single-worker-ips", "30"], "give --single-worker-tps"),
        (["--image-size", "64"], "--image-size is for the CNNs"),
        (["--backend", "horovod"], "use --backend ddp"),
        (["--seq-len", "4096"], "takes at most 1024 tokens"),
        (["--parallel", "ddp", "--param-dtype", "bf16"], "--param-dtype is FSDP's"),
        (["--shard-group", "2"], "--shard-group is HSDP's"),
        (["--parallel", "hsdp", "--shard-group", "3"], "must divide the 4 workers"),
        (["--step-time", "0.2"], "give one of --single-worker-tps or --step-time"),
        # Options that would change nothing: a transformer's rows have no node factor,
        # FSDP2 reduce-scatters each unit whole (no buckets), Gloo has no 8-bit float.
        (["--node-loss", "0.05"], "--node-loss is for the CNNs"),
        (["--bucket-cap-mb", "50"], "--bucket-cap-mb is DDP's gradient buckets"),
        (["--parallel", "hsdp", "--bucket-cap-mb", "50"], "--parallel hsdp reduce-scatters"),
        (["--param-dtype", "fp8", "--collectives", "gloo"], "Gloo has no 8-bit float"),
    ],
)
def test_bad_transformer_input_is_one_line(argv, message, capsys):
    assert cli.main([*FSDP, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--parallel", "fsdp2"], "--parallel fsdp2 is for the transformers"),
        (["--seq-len", "128"], "--seq-len is for the transformers"),
        (["--single-worker-tps", "10"], "--single-worker-tps is for the transformers"),
        (["--reduce-dtype", "bf16"], "--reduce-dtype is for the transformers"),
    ],
)
def test_transformer_options_on_a_cnn_are_one_line(argv, message, capsys):
    base = ["predict", "--model", "resnet18", "--step-time", "0.1", "--link", "1gbit"]
    assert cli.main([*base, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_the_options_that_do_change_a_transformers_prediction_are_taken(capsys):
    ddp = [*FSDP[:4], "ddp", *FSDP[5:]]
    for argv in (
        [*ddp, "--bucket-cap-mb", "50"],
        [*FSDP, "--param-dtype", "fp8"],
        [*FSDP, "--collectives", "gloo", "--param-dtype", "bf16"],
    ):
        assert cli.main([*argv, "--json"]) == 0, capsys.readouterr().err
    capsys.readouterr()


def test_a_plans_transformer_rows_come_from_the_sharded_model():
    plan = scaling_model.Plan(
        model="llama3.1-8b",
        image_size=0,
        batch=2,
        workers=[8, 16],
        gpus_per_node=8,
        step_time_s=2 * 8192 / 5762,
        busbw=3200e9 / 8 * 0.92,
        latency_s=5e-6,
        backend="ddp",
        grouping=allreduce_model.Grouping("ddp"),
        intra_busbw=scaling_model.INTRA_NODE["nvlink4"],
        seq_len=8192,
        parallel="fsdp2",
        param_bytes=2,
    )
    node, across = scaling_model.predictions(plan)
    assert node["nodes"] == 1 and across["nodes"] == 2
    assert 0.9 < across["efficiency"] <= node["efficiency"] <= 1
    assert across["tokens_per_s"] == pytest.approx(16 * 5762 * across["efficiency"])


def test_calibrate_leaves_transformer_runs_out(tmp_path, capsys):
    """--calibrate replays the CNNs' gradient timeline: a store of transformer runs gives
    it nothing to fit, said in one line."""
    from tests.unit.test_predict import _store

    lm = {"model": "gpt-tiny", "image_size": 0, "seq_len": 64, "parallel": "fsdp2"}
    _store(tmp_path, {2: 0.8, 4: 0.7}, **lm)
    assert cli.main(["predict", "--calibrate", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "two node counts or more" in err and "\n" not in err


def test_the_units_flops_add_up_to_the_models_where_the_heads_are_narrower_than_it():
    # A config.json's head_dim need not be dim / heads (Mistral-Nemo's 128 of 5120 / 32).
    import dataclasses

    config = dataclasses.replace(
        sharded_model.shape("llama3.1-8b"), explicit_head_dim=96, name="narrow"
    )
    blocks, root = sharded_model.units(config, 512)
    total = sum(u.flops_per_token for u in (*blocks, root))
    assert total == pytest.approx(tc.flops_per_token(config, 512))
