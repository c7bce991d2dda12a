"""A transformer's layout in the forecast (hpcbench/performance/scaling_model.py,
sharded_model.py): K micro-batches that reduce on the last, a TP group's collectives on
the node's link, the recompute of checkpointing; memory per GPU beside the accelerator's;
and the layouts `predict` refuses in one line."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcbench import cli
from hpcbench.performance import plans, scaling_model, sharded_model

BASE = [
    "predict", "--model", "llama3.1-8b", "--batch", "1", "--gpus-per-node", "8",
    "--single-worker-tps", "7000", "--link", "100gbit", "--transport", "rdma",
    "--intra-node", "nvlink4", "--json",
]  # fmt: skip


def rows(capsys: pytest.CaptureFixture[str], *extra: str) -> list[dict]:
    assert cli.main([*BASE, *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_accumulation_reduces_once_a_step_and_gathers_every_micro_batch(capsys):
    for parallel in ("ddp", "fsdp2"):
        [one] = rows(capsys, "--workers", "32", "--parallel", parallel)
        [four] = rows(capsys, "--workers", "32", "--parallel", parallel, "--grad-accum", "4")
        # The gradients cross the nodes once for four micro-batches: less of the step waits.
        assert four["efficiency"] > one["efficiency"], parallel
        assert four["tokens_per_s"] > one["tokens_per_s"]
        if parallel == "fsdp2":  # but every micro-batch gathers its parameters again
            assert one["allreduce_s"] < four["allreduce_s"] < 4 * one["allreduce_s"]


def test_a_tp_groups_collectives_are_the_blocks_activations_on_the_nodes_link():
    config = sharded_model.shape("llama3.1-8b")
    assert config is not None
    inside = sharded_model.Hop(5e-6, 450e9)
    # Four all-reduces' worth a block, five and a half under full recompute, two
    # outside the blocks (tests/unit/test_layout.py counts them in the workload).
    for checkpoint, per_block in (("none", 4), ("full", 5.5)):
        seconds = sharded_model.tp_seconds(config, 8192, 1, 4, 2, inside, checkpoint)
        volume = 8192 * config.dim * 2  # one micro-batch's activations, bf16
        one = 2 * 3 * 5e-6 + 2 * 3 / 4 * volume / 450e9  # a ring all-reduce over 4
        assert seconds == pytest.approx((config.layers * per_block + 2) * one)
    assert sharded_model.tp_seconds(config, 8192, 1, 1, 2, inside, "full") == 0


def test_full_checkpointing_recomputes_the_blocks_but_their_last_selective_a_part_of_that():
    job = plans.Job("llama3.1-8b", 1, grad_accum=2, seq_len=8192)
    assert plans.step_in_layout(3.0, job) == 6.0
    # Full: each block's forward but w2 (torch.utils.checkpoint stops early), nothing
    # outside the blocks: a quarter of Llama 3.1 8B's step, not the whole forward's third.
    full = plans.step_in_layout(3.0, replace(job, activation_checkpoint="full"))
    assert full == pytest.approx(6.0 * 1.250, abs=0.01)
    # Selective: wk, wo and w3 of each block again (tests/unit/test_layout.py counts
    # the workload's FLOPs against the share): about a tenth of Llama 3.1 8B's step.
    selective = plans.step_in_layout(3.0, replace(job, activation_checkpoint="selective"))
    assert 6.0 < selective < full
    assert selective == pytest.approx(
        6.0 * (1 + plans.recompute_share("llama3.1-8b", 8192, "selective"))
    )
    assert plans.recompute_share("llama3.1-8b", 8192, "selective") == pytest.approx(
        0.088, abs=0.001
    )


def test_one_tp_group_per_node_trains_a_tp_th_of_the_tokens_at_the_rate_of_its_compute(capsys):
    [plain] = rows(capsys, "--workers", "8", "--parallel", "fsdp2")
    [tp] = rows(capsys, "--workers", "8", "--parallel", "fsdp2", "--tp", "2")
    # Each worker computes half a step; the node's link carries the TP collectives.
    assert tp["tp_s"] > 0 and plain["tp_s"] == 0
    assert 0 < tp["efficiency"] < 1 and tp["tokens_per_s"] > 0


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.sampled_from(["ddp", "fsdp2", "hsdp"]),
    st.sampled_from([1, 2, 4]),
    st.sampled_from([1, 2, 8]),
    st.sampled_from(["none", "selective", "full"]),
    st.integers(1, 8),
    st.floats(1e8, 1e11),
)
def test_every_layouts_point_lies_in_its_band(parallel, tp, k, checkpoint, nodes, busbw):
    per_node = 8
    if parallel == "ddp":
        tp = 1
    workers = nodes * per_node
    plan = scaling_model.Plan(
        model="llama3.1-8b", image_size=0, batch=1, workers=[workers], gpus_per_node=per_node,
        step_time_s=1.0 * k, busbw=busbw, latency_s=5e-6, backend="ddp",
        grouping=plans.Job("llama3.1-8b", 1).grouping(), seq_len=8192, parallel=parallel,
        shard_group=per_node if parallel == "hsdp" else 0, param_bytes=2, nccl=True, tp=tp,
        grad_accum=k, checkpoint=checkpoint, act_bytes=2,
    )  # fmt: skip
    [row] = scaling_model.predictions(plan)
    low, point, high = row["efficiency_low"], row["efficiency"], row["efficiency_high"]
    assert low <= point * (1 + 1e-9) and point <= high * (1 + 1e-9), (low, point, high)
    assert high <= 1 + 1e-9


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--workers", "8", "--parallel", "fsdp2", "--tp", "3"], "--tp 3"),
        (["--workers", "8", "--parallel", "ddp", "--tp", "2"], "--parallel ddp"),
        (["--workers", "16", "--parallel", "fsdp2", "--tp", "16"], "--tp 16"),
        (["--workers", "8", "--parallel", "fsdp2", "--accelerator", "x\ny"], "--accelerator"),
    ],
)
def test_a_layout_that_cannot_run_is_one_line(capsys, extra, says):
    assert cli.main([*BASE, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and "\n" not in err and "Traceback" not in err


def test_a_cnns_layout_options_are_refused():
    argv = ["predict", "--model", "resnet50", "--single-worker-ips", "400", "--link", "10gbit"]
    for extra in (["--tp", "2"], ["--grad-accum", "2"], ["--accelerator", "H100"]):
        assert cli.main([*argv, *extra]) == 2


def test_a_model_too_large_for_its_gpus_is_said_so_with_the_layout_that_fits(capsys):
    [row] = rows(
        capsys, "--workers", "8", "--parallel", "fsdp2", "--batch", "2",
        "--accelerator", "NVIDIA H100 80GB HBM3",
    )  # fmt: skip
    assert row["memory_bytes"] > 80e9 and row["memory_fits"] is False
    assert row["memory_verdict"].startswith("does not fit in 80 GB; fits with ")
    assert "--tp" in row["memory_verdict"] or "--activation-checkpoint" in row["memory_verdict"]
    assert row["mfu"] is not None and 0 < row["mfu"] < 1


def test_a_model_no_layout_of_the_asked_node_holds_is_said_so_with_the_gpus_that_would(
    capsys,
):
    """A 70B under plain FSDP2 on one node of 8 x 80 GB: its fp32 master weights and
    AdamW moments alone are 16 bytes a parameter, 141 GB a GPU; the answer names the
    layout and the GPU count that fit, past the node asked (MEMORY_SEARCH_NODES)."""
    config = "tests/fixtures/llama-3-70b/config.json"
    argv = [*BASE, "--workers", "8", "--parallel", "fsdp2", "--seq-len", "8192"]
    argv[argv.index("llama3.1-8b")] = config
    assert cli.main([*argv, "--accelerator", "NVIDIA H100 80GB HBM3"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["memory_fits"] is False and row["memory_bytes"] > 141e9
    verdict = row["memory_verdict"]
    found = int(verdict.split(" on ")[-1].split(" GPUs")[0])
    assert verdict.startswith("does not fit in 80 GB; fits with ") and found % 8 == 0, verdict
    # And that layout does fit: asked for as the verdict spells it, on its GPUs.
    options = verdict.split("fits with ")[1].split(" on ")[0].split()
    argv[argv.index("--workers") + 1] = str(found)
    assert cli.main([*argv, *options, "--accelerator", "NVIDIA H100 80GB HBM3"]) == 0
    [there] = json.loads(capsys.readouterr().out)
    assert there["memory_fits"] is True, there["memory_verdict"]


@pytest.mark.parametrize("layout", [(1, 1), (2, 1), (1, 4), (2, 4)])
def test_a_layouts_replay_taken_apart_gives_its_point_at_any_interference(layout):
    # The fit tries interferences without replaying (scaling_model._Parts): step = compute
    # + exposed + interference x hidden must give the row's own point.
    tp, k = layout
    plan = scaling_model.Plan(
        model="llama3.1-8b", image_size=0, batch=1, workers=[32], gpus_per_node=8,
        step_time_s=2.0 * k, busbw=5e9, latency_s=5e-6, backend="ddp",
        grouping=plans.Job("llama3.1-8b", 1).grouping(), seq_len=8192, parallel="fsdp2",
        param_bytes=2, nccl=True, tp=tp, grad_accum=k, act_bytes=2,
    )  # fmt: skip
    for interference in (0.0, 0.3, 1.0):
        [row] = scaling_model.predictions(replace(plan, interference=interference), False)
        parts = scaling_model._replay_parts(plan, 32)
        assert parts.point(interference) == pytest.approx(row["efficiency"], rel=1e-9)
