"""The sharded model's rings in closed form, and its band: the rings of every set-up are
the ones a rank-by-rank count finds, predict's work grows linearly with the workers, and
every generated set-up's point lies inside its own band (DDP, FSDP2, HSDP)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcbench.performance import allreduce_model, scaling_model, sharded_model
from hpcbench.performance.sharded_model import Hop, Links, Ring

Plan = scaling_model.Plan


# ------------------------------------------------------------------ the reference
# The rings as hpcbench 0.1.0 (commit f9d93ca) counted them, rank by rank: what the
# closed forms of sharded_model.rings must give for every set-up.
def _reference_ring(
    members: list[int], groups: list[list[int]], per_node: int, links: Links, name: str
) -> Ring:
    nodes = {r // per_node for r in members}
    if len(nodes) <= 1:
        return Ring(len(members), links.inside)
    crossing = [g for g in groups if len({r // per_node for r in g}) > 1]
    sharing = max(sum(1 for g in crossing if any(r // per_node == n for r in g)) for n in nodes)
    net = links.hop(name)
    return Ring(
        len(members), Hop(net.latency_s, min(net.busbw / sharing, links.inside.busbw)), True
    )


def reference_rings(
    workers: int, per_node: int, group: int, links: Links, tp: int = 1
) -> dict[str, Ring]:
    """The same over every rank of the world: `workers` data-parallel ranks of each of tp
    TP ranks, a TP group's tp consecutive ranks on one node (bench/lm.py's (dp, tp)
    mesh: rank = dp x tp + its TP rank), per_node data-parallel ranks a node."""

    def world(ranks: list[int], t: int) -> list[int]:
        return [d * tp + t for d in ranks]

    shards = [list(range(s, s + group)) for s in range(0, workers, group)]
    replicas = [list(range(j, workers, group)) for j in range(group)]
    every_shard = [world(g, t) for g in shards for t in range(tp)]
    every_replica = [world(g, t) for g in replicas for t in range(tp)]
    node = per_node * tp
    out = {
        name: _reference_ring(world(shards[0], 0), every_shard, node, links, name)
        for name in ("all_gather", "reduce_scatter")
    }
    out["all_reduce"] = _reference_ring(
        world(replicas[0], 0), every_replica, node, links, "all_reduce"
    )
    return out


# The link between nodes slower and faster than the NIC's share of the node's link, and
# a probe's all-gather of its own: every branch of the hop's bandwidth.
LINKS = [
    Links({"all_reduce": Hop(5e-6, 10e9)}, Hop(1e-6, 100e9)),
    Links({"all_reduce": Hop(5e-6, 400e9), "all_gather": Hop(7e-6, 300e9)}, Hop(1e-6, 100e9)),
]


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def test_the_rings_in_closed_form_are_the_rank_by_rank_counts_of_every_set_up():
    checked = 0
    for links in LINKS:
        for workers in range(1, 65):
            for per_node in range(1, 10):
                for group in _divisors(workers):
                    got = sharded_model.rings(workers, per_node, group, links)
                    want = reference_rings(workers, per_node, group, links)
                    assert got == want, (workers, per_node, group)
                    checked += 1
    assert checked > 4000


def test_with_tensor_parallelism_every_tp_rank_s_rings_share_the_nic():
    """Each TP rank's data-parallel rings cross the same nodes at once: the NIC's
    sharing is tp times one TP rank's, as counted over every rank of the world."""
    checked = 0
    for links in LINKS:
        for tp in (2, 4):
            for workers in range(1, 17):
                for per_node in range(1, 5):
                    for group in _divisors(workers):
                        got = sharded_model.rings(workers, per_node, group, links, tp)
                        want = reference_rings(workers, per_node, group, links, tp)
                        assert got == want, (tp, workers, per_node, group)
                        checked += 1
    # Two nodes, a TP pair on each, FSDP2 over the two pairs: two rings on the one NIC.
    one = sharded_model.rings(2, 1, 2, LINKS[0])["all_gather"]
    two = sharded_model.rings(2, 1, 2, LINKS[0], 2)["all_gather"]
    assert two.hop.busbw == one.hop.busbw / 2
    assert checked > 500


def _plan(parallel: str, model: str, per_node: int, workers: list[int], **fields) -> Plan:
    config = sharded_model.shape(model)
    assert config is not None
    return scaling_model.Plan(
        model=model,
        image_size=0,
        batch=2,
        workers=workers,
        gpus_per_node=per_node,
        step_time_s=0.5,
        busbw=12.5e9 * 0.7,
        latency_s=20e-6,
        backend="ddp",
        grouping=allreduce_model.Grouping("ddp"),
        intra_busbw=scaling_model.INTRA_NODE["nvlink3"],
        seq_len=config.seq_len,
        parallel=parallel,
        param_bytes=2,
        **fields,
    )


@pytest.mark.parametrize(
    ("parallel", "model", "per_node", "shard_group"),
    [
        ("fsdp2", "gpt2-small", 4, 0),
        ("fsdp2", "llama3.1-8b", 8, 0),
        ("hsdp", "gpt2-small", 4, 0),
        ("hsdp", "mpt-350m", 8, 2),
        ("hsdp", "llama-1b", 2, 4),
    ],
)
def test_predicts_figures_are_those_of_the_rank_by_rank_rings(
    monkeypatch, parallel, model, per_node, shard_group
):
    workers = [n for n in range(1, 49) if not shard_group or n == 1 or n % shard_group == 0]
    if not shard_group:
        workers = [n for n in workers if parallel == "fsdp2" or n == 1 or n % per_node == 0]
    plan = _plan(parallel, model, per_node, workers, shard_group=shard_group)
    new = scaling_model.predictions(plan)
    monkeypatch.setattr(sharded_model, "rings", reference_rings)
    assert new == scaling_model.predictions(plan)


def _lines_run(work: Callable[[], object]) -> int:
    """The lines of hpcbench's code that `work` executes: its work, counted, not timed."""
    count = 0

    def trace(frame, event, _arg):
        nonlocal count
        if "hpcbench" not in frame.f_code.co_filename:
            return None
        if event == "line":
            count += 1
        return trace

    sys.settrace(trace)
    try:
        work()
    finally:
        sys.settrace(None)
    return count


@pytest.mark.parametrize("parallel", ["fsdp2", "hsdp"])
def test_predicts_work_grows_linearly_with_the_workers(parallel):
    """Twice as many worker counts: twice the work (it was three to four times: every
    count's rings walked every rank of every node)."""

    def lines(most: int) -> int:
        workers = list(range(1, most + 1))
        if parallel == "hsdp":
            workers = [1, *range(2, most + 1, 2)]
        plan = _plan(parallel, "gpt2-small", 2, workers)
        return _lines_run(lambda: scaling_model.predictions(plan))

    small, large = lines(64), lines(128)
    assert large <= 2.1 * small, (small, large)


# ------------------------------------------------------------------ the band
MODELS = ["gpt-tiny", "gpt2-small", "llama-1b", "mpt-350m", "llama3.1-8b"]


@st.composite
def setups(draw: st.DrawFn) -> Plan:
    """A transformer's plan as predict builds one: any model, parallelism, node, shard
    group, links and dtypes, at one worker count its shard group divides."""
    parallel = draw(st.sampled_from(["ddp", "fsdp2", "hsdp"]))
    per_node = draw(st.sampled_from([1, 2, 4, 8]))
    nodes = draw(st.integers(1, 16))
    workers = nodes * per_node
    group = 0
    if parallel == "hsdp":
        group = draw(st.sampled_from(_divisors(workers)))
    gloo = draw(st.booleans()) and parallel != "ddp"
    model = draw(st.sampled_from(MODELS))
    config = sharded_model.shape(model)
    assert config is not None
    # fp8 parameters are NCCL's: Gloo has no 8-bit float (predict refuses them).
    dtypes = [b for b in sharded_model.DTYPE_BYTES.values() if b > 1 or not gloo]
    return replace(
        _plan(parallel, model, per_node, [workers], shard_group=group),
        seq_len=draw(st.sampled_from(sorted({128, config.seq_len}))),
        step_time_s=draw(st.floats(0.005, 5.0)),
        busbw=draw(st.floats(1e7, 5e11)),
        latency_s=draw(st.floats(0.0, 1e-4)),
        intra_busbw=draw(st.floats(1e9, 1e12)),
        interference=draw(st.floats(0.0, 1.0)),
        param_bytes=draw(st.sampled_from(dtypes)),
        reduce_bytes=draw(st.sampled_from([2, 4])),
        reshard_after_forward=draw(st.booleans()),
        gloo=gloo,
        nccl=not gloo,
        # CPU nodes: what a probe measured of the backend's own work (none on GPUs).
        cpu=(
            allreduce_model.CpuWork(
                draw(st.floats(0.0, 1e-8)), draw(st.floats(0.0, 0.9)), draw(st.floats(1.0, 3.0))
            )
            if gloo
            else allreduce_model.CpuWork()
        ),
    )


@settings(max_examples=400, deadline=None, derandomize=True)
@given(setups())
def test_every_set_ups_point_lies_inside_its_own_band(plan):
    (row,) = scaling_model.predictions(plan)
    low, point, high = row["efficiency_low"], row["efficiency"], row["efficiency_high"]
    assert low <= point * (1 + 1e-9) and point <= high * (1 + 1e-9), (low, point, high)


def test_hsdps_band_tops_at_the_busier_of_its_two_queues():
    """A node's shard group gathers and scatters inside the node while its shards are
    all-reduced between nodes: the two queues run side by side, so full overlap is the
    busier queue, not their sum."""
    blocks, root = [sharded_model.Unit(8, 1.0)] * 2, sharded_model.Unit(0, 0.0)
    rings = {
        "all_gather": Ring(2, Hop(0.0, 10.0)),
        "reduce_scatter": Ring(2, Hop(0.0, 10.0)),
        "all_reduce": Ring(2, Hop(0.0, 1.6), across=True),
    }
    p = sharded_model.sharded_point(1.0, blocks, root, rings, sharded_model.Sharding(2, 2, 1))
    # Inside the node: four gathers of 0.8 s, two scatters of 0.4 s (4 s); between nodes
    # two all-reduces of a 4-byte shard at 1.6 bytes/s (2.5 s each, 5 s).
    assert p.allreduce_s == pytest.approx(4.0 + 5.0)
    assert (p.efficiency_low, p.efficiency_high) == pytest.approx((1 / 10.0, 1 / 5.0))
    assert p.efficiency_low <= p.efficiency <= p.efficiency_high
