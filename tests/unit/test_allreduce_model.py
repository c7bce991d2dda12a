import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpcbench.performance import allreduce_model
from hpcbench.performance.allreduce_model import CpuWork, Grouping


def test_busbw_follows_nccl_tests_definition():
    # 8 workers, 100 MB in 0.1 s: algbw 1 GB/s, busbw 2*7/8 = 1.75 GB/s.
    assert allreduce_model.busbw(100e6, 0.1, 8) == pytest.approx(1.75e9)
    assert allreduce_model.ring_factor(2) == 1.0


def test_resnet50_on_1gbit_ring_of_10_matches_the_reference_estimate():
    # docs/method.md, "Reference numbers": ~102 MB of gradients, 10 nodes, 1 Gbit/s -> ~1.5 s.
    model = allreduce_model.LinkModel(workers=10, latency_s=0.0, busbw=1e9 / 8)
    assert model.allreduce_time(102e6) == pytest.approx(1.47, abs=0.02)
    assert allreduce_model.LinkModel(10, 0.0, 10e9 / 8).allreduce_time(102e6) == pytest.approx(
        0.147, abs=0.002
    )


def test_latency_term():
    model = allreduce_model.LinkModel(workers=4, latency_s=1e-3, busbw=1e12)
    assert model.allreduce_time(0) == pytest.approx(6e-3)
    assert allreduce_model.LinkModel(1, 1.0, 1.0).allreduce_time(1e9) == 0.0


def test_efficiency_band():
    # Communication shorter than compute: full overlap hides it entirely.
    assert allreduce_model.efficiency_band(1.0, 0.5) == pytest.approx((1 / 1.5, 1.0))
    # Communication longer than compute: even full overlap leaves T_ar.
    assert allreduce_model.efficiency_band(1.0, 2.0) == pytest.approx((1 / 3, 0.5))
    with pytest.raises(ValueError):
        allreduce_model.efficiency_band(0.0, 1.0)


def _probe(workers, points):
    results = [
        {"bytes": s, "time_s": t, "busbw": allreduce_model.busbw(s, t, workers)} for s, t in points
    ]
    return {"kind": "probe", "status": "ok", "workers": workers, "results": results}


def test_link_model_from_probe_recovers_alpha_and_beta():
    a, bw, n = 50e-6, 1e9, 4
    truth = allreduce_model.LinkModel(n, a, bw)
    sizes = [1024, 1 << 20, 1 << 24, 1 << 27]
    probe = _probe(n, [(s, truth.allreduce_time(s)) for s in sizes])
    fitted = allreduce_model.link_model(probe)
    assert fitted.latency_s == pytest.approx(a, rel=0.01)
    # The largest message still pays 6 latencies: busbw there is slightly below B.
    assert fitted.busbw == pytest.approx(bw, rel=0.01)
    assert allreduce_model.link_model(_probe(1, [(1024, 1e-5)])) is None
    assert allreduce_model.link_model({"workers": 4, "results": []}) is None


def test_predict_combines_the_pieces():
    p = allreduce_model.predict(0.2, 100e6, allreduce_model.LinkModel(2, 0.0, 1e9))
    assert p["allreduce_s"] == pytest.approx(0.1)
    assert p["efficiency_low"] == pytest.approx(0.2 / 0.3)
    assert p["efficiency_high"] == 1.0


def test_point_prediction_from_a_measured_gradient_timeline():
    # Backward makes 3 gradients of 10 MB at 0.6, 0.8 and 1.0 s of a 1.2 s step; a ring of
    # 4 on a link of 100 MB/s bus bandwidth and no latency: 10 MB take 0.15 s.
    timeline = [(0.6, 10e6), (0.8, 10e6), (1.0, 10e6)]
    link = allreduce_model.LinkModel(workers=4, latency_s=0.0, busbw=100e6)
    # Horovod fuses what is ready in each 1 ms cycle: three messages, each 0.15 s, the last
    # ready at 1.001 s and done at 1.151 s: 0.151 s exposed.
    p = allreduce_model.predict_measured(1.2, timeline, link, "horovod")
    assert abs(p.exposed_s - 0.151) < 1e-9 and abs(p.efficiency - 1.2 / 1.351) < 1e-9
    # fp16 compression halves what travels: done at 1.001 + 0.075 s.
    half = allreduce_model.predict_measured(1.2, timeline, link, "horovod", allreduce_bytes=15e6)
    assert abs(half.exposed_s - 0.076) < 1e-9
    # A link ten times faster hides all but the last message's tail.
    fast = allreduce_model.LinkModel(workers=4, latency_s=0.0, busbw=1e9)
    assert allreduce_model.predict_measured(1.2, timeline, fast, "horovod").efficiency > 0.98
    # DDP: one 1 MiB first bucket, then 25 MiB buckets; one worker needs no all-reduce.
    solo = allreduce_model.LinkModel(workers=1, latency_s=0.0, busbw=1.0)
    assert allreduce_model.predict_measured(1.2, timeline, solo, "ddp").efficiency == 1.0


def test_cpu_work_sets_a_floor_under_the_step_on_cpu_nodes():
    # The same step and a fast link (the messages hide behind backward: E about 0.99).
    timeline = [(0.6, 10e6), (0.8, 10e6), (1.0, 10e6)]
    fast = allreduce_model.LinkModel(workers=4, latency_s=0.0, busbw=1e9)
    link_only = allreduce_model.predict_measured(1.2, timeline, fast, "horovod")
    # 10 ns of CPU per byte: 0.3 s of work for the 30 MB, which the node's CPU does on
    # top of the 1.2 s step whatever the link could carry.
    bound = allreduce_model.predict_measured(
        1.2, timeline, fast, "horovod", cpu=CpuWork(s_per_byte=1e-8)
    )
    assert bound.cpu_work_s == pytest.approx(0.3)
    assert bound.step_s == pytest.approx(1.5) and bound.efficiency == pytest.approx(0.8)
    assert link_only.efficiency > 0.98 and link_only.cpu_work_s == 0.0
    # A slow link (1.5 s per message) outlasts that floor: the link decides.
    slow = allreduce_model.LinkModel(workers=4, latency_s=0.0, busbw=1e7)
    slow_bound = allreduce_model.predict_measured(
        1.2, timeline, slow, "horovod", cpu=CpuWork(s_per_byte=1e-8)
    )
    slow_link = allreduce_model.predict_measured(1.2, timeline, slow, "horovod")
    assert slow_bound.step_s == slow_link.step_s > 1.5
    # One worker all-reduces nothing and does no such work.
    solo = allreduce_model.LinkModel(workers=1, latency_s=0.0, busbw=1.0)
    assert (
        allreduce_model.predict_measured(
            1.2, timeline, solo, "horovod", cpu=CpuWork(s_per_byte=1e-8)
        ).efficiency
        == 1.0
    )


@pytest.mark.parametrize(
    "probe, expected",
    [
        ({"cpu_work": {"lost_s_per_byte": 2e-9}}, 2e-9),
        ({"cpu_work": {"lost_s_per_byte": -1e-10}}, 0.0),  # noise below zero: no work
        ({"cpu_work": None}, 0.0),  # a GPU node's probe
        ({}, 0.0),  # a probe from before the measurement
        ({"cpu_work": {"lost_s_per_byte": "x"}}, 0.0),
    ],
)
def test_cpu_work_per_byte_from_a_probe_record(probe, expected):
    assert allreduce_model.cpu_work_per_byte(probe) == expected


# The probe's CPU-work phase at its largest size (bench/allreduce.py measure_cpu_work).
CPU_WORK_BYTES = 64 * 2**20


def cpu_work_record(
    lost_s_per_byte: list[float],
    alone: tuple[float, float] = (20_000.0, 20_000.0),
    allreduces: int = 5,
    pieces: int = 40_000,
    background: float = 0.13,
) -> dict:
    """measure_cpu_work's record: each rank's computation lost lost_s_per_byte[i] of its
    own time per byte all-reduced, and its two alone phases ran `alone` pieces a second.
    The record's lost_s is against the alone phases, which the backend's threads slowed
    by `background` (a share of the core) while the middle phase, 3 s, did without
    them: (w x bytes - background x 3 s) / (1 - background)."""
    total = allreduces * CPU_WORK_BYTES
    lost = [(w * total - background * 3.0) / (1 - background) for w in lost_s_per_byte]
    ranks = [
        {
            "wall_s": 3.0,
            "pieces": pieces,
            "lost_s": lost_s,
            "alone_per_s": list(alone),
            "background": background,
        }
        for lost_s in lost
    ]
    return {
        "bytes": CPU_WORK_BYTES,
        "allreduces": allreduces,
        "per_rank": ranks,
        "lost_s_per_byte": sum(lost) / len(lost) / total,
        "background_share": background,
    }


# Behind 200 Mbit/s one 64 MiB all-reduce lasts the whole phase: the host's noise over
# its bytes is 1.6 ns per byte, and the ranks' mean came out below 0.
HIDDEN = cpu_work_record([-1.0e-9, -2.8e-9], alone=(19_000.0, 20_000.0), allreduces=1)
# Behind 1 Gbit/s five run, and the ranks agree.
RESOLVED = cpu_work_record([1.1e-9, 1.3e-9], alone=(20_000.0, 20_100.0))


def test_a_cpu_work_figure_counts_as_seen_only_clear_of_its_noise():
    seen = allreduce_model.cpu_work_seen({"cpu_work": RESOLVED})
    assert seen is not None and seen.resolved
    assert seen.s_per_byte == pytest.approx(1.2e-9)
    # The ranks scatter by 0.1 ns around their mean; the alone phases by less.
    assert seen.noise == pytest.approx(0.1e-9)
    hidden = allreduce_model.cpu_work_seen({"cpu_work": HIDDEN})
    assert hidden is not None and not hidden.resolved
    # 40,000 pieces at 19,000 rather than 20,000 a second: 0.105 s over 64 MiB, of which
    # the computation's own time is the share the background left it.
    noise = 40_000 * (1 / 19_000 - 1 / 20_000) * (1 - 0.13) / CPU_WORK_BYTES
    assert hidden.noise == pytest.approx(noise)
    assert hidden.largest == pytest.approx(-1.9e-9 + 2 * noise)
    # Above 0 but within twice its noise (the ranks disagree): not seen either.
    within = allreduce_model.cpu_work_seen({"cpu_work": cpu_work_record([-0.5e-9, 2.5e-9])})
    assert within is not None and not within.resolved
    assert within.largest == pytest.approx(1e-9 + 2 * 1.5e-9)
    # Noise that puts the figure far below 0 bounds it at 0, never below.
    low = allreduce_model.cpu_work_seen({"cpu_work": cpu_work_record([-9e-9, -9e-9])})
    assert low is not None and low.largest == 0.0 and not low.resolved


def test_cpu_work_is_counted_against_the_computation_without_the_backends_threads():
    # One-core nodes at 200 Mbit/s (a probe of evaluation/forecast_variants.py's pinned
    # variant): the alone phases ran beside Horovod's cycle (b = 0.15 and 0.19 of the
    # core), the middle phase beside one all-reduce, which its threads ran instead.
    ranks = [
        {
            "wall_s": 2.855,
            "lost_s": -0.360,
            "background": 0.148,
            "pieces": 60_000,
            "alone_per_s": [21338.9, 20833.5],
        },
        {
            "wall_s": 2.854,
            "lost_s": -0.522,
            "background": 0.185,
            "pieces": 57_000,
            "alone_per_s": [20064.9, 20163.1],
        },
    ]
    work = {
        "bytes": CPU_WORK_BYTES,
        "allreduces": 1,
        "per_rank": ranks,
        "lost_s_per_byte": -6.57e-9,
        "background_share": 0.167,
    }
    seen = allreduce_model.cpu_work_seen({"cpu_work": work})
    assert seen is not None
    # Against the alone phases the computation gained 6.6 ns a byte; its own time lost
    # 1.7 and 1.5 (the 1 Gbit/s probe of the same nodes: 1.4 and 1.8).
    own = [(r["lost_s"] * (1 - r["background"]) + r["background"] * r["wall_s"]) for r in ranks]
    assert own[0] / CPU_WORK_BYTES == pytest.approx(1.73e-9, abs=0.01e-9)
    assert 1.5e-9 < seen.s_per_byte < 1.75e-9
    assert allreduce_model.cpu_work_per_byte({"cpu_work": work}) == seen.s_per_byte


def test_the_ranks_figures_count_by_their_own_noise():
    # Beside a load one rank's alone phases differed by 60%, the other's by 1%: the
    # figure leans on the steady rank; the noise still holds how far they scatter.
    steady = {
        "wall_s": 2.96,
        "lost_s": 1.48e-9 * CPU_WORK_BYTES,
        "pieces": 37_000,
        "alone_per_s": [12571.0, 12717.0],
    }
    noisy = {
        "wall_s": 2.94,
        "lost_s": 16.4e-9 * CPU_WORK_BYTES,
        "pieces": 40_000,
        "alone_per_s": [16706.0, 10406.0],
    }
    work = {
        "bytes": CPU_WORK_BYTES,
        "allreduces": 1,
        "per_rank": [steady, noisy],
        "lost_s_per_byte": 8.9e-9,
    }
    seen = allreduce_model.cpu_work_seen({"cpu_work": work})
    assert seen is not None and seen.noise is not None
    assert seen.s_per_byte < 1.6e-9
    assert seen.noise >= (16.4e-9 - 1.48e-9) / 2 and not seen.resolved
    # Where a rank's noise is not known the ranks count alike.
    blind = {**work, "per_rank": [steady, {**noisy, "alone_per_s": [16706.0]}]}
    plain = allreduce_model.cpu_work_seen({"cpu_work": blind})
    assert plain is not None and plain.s_per_byte == pytest.approx((1.48e-9 + 16.4e-9) / 2)


@pytest.mark.parametrize(
    "work",
    [
        {"lost_s_per_byte": 1e-9},  # no per-rank figures: no noise known
        {"lost_s_per_byte": 1e-9, "allreduces": 5, "bytes": 64, "per_rank": [{"wall_s": 1.0}]},
        {"lost_s_per_byte": 1e-9, "allreduces": 0, "bytes": 64, "per_rank": []},
    ],
)
def test_a_cpu_work_figure_without_its_noise_is_neither_seen_nor_bounded(work):
    seen = allreduce_model.cpu_work_seen({"cpu_work": work})
    assert seen is not None and not seen.resolved and seen.largest is None


@pytest.mark.parametrize("probe", [{}, {"cpu_work": None}, {"cpu_work": {"lost_s_per_byte": "x"}}])
def test_a_probe_without_a_cpu_work_figure_has_none_to_see(probe):
    assert allreduce_model.cpu_work_seen(probe) is None


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=3),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
)


@given(
    st.fixed_dictionaries(
        {
            "lost_s_per_byte": st.floats(-1.0, 1.0),
            "allreduces": _VALUES,
            "bytes": _VALUES,
            "per_rank": st.lists(
                st.one_of(
                    _VALUES,
                    st.fixed_dictionaries(
                        {
                            "lost_s": _VALUES,
                            "pieces": _VALUES,
                            "alone_per_s": st.one_of(_VALUES, st.lists(_VALUES, max_size=3)),
                        }
                    ),
                ),
                max_size=4,
            ),
        }
    )
)
def test_any_cpu_work_record_gives_a_finite_figure_and_bound_or_none(work):
    seen = allreduce_model.cpu_work_seen({"cpu_work": work})
    assert seen is not None
    assert seen.noise is None or (math.isfinite(seen.noise) and seen.noise >= 0)
    largest = seen.largest
    assert largest is None or (math.isfinite(largest) and largest >= 0)
    assert not seen.resolved or seen.s_per_byte > 0


def test_an_all_reduce_beside_backward_goes_slower_until_backward_ends():
    # 1 MB at 1 MB/s (no latency) alone takes 1 s.
    link = allreduce_model.LinkModel(workers=2, latency_s=0.0, busbw=1e6)
    cost = link.allreduce_time
    assert cost(1e6) == pytest.approx(1.0)
    sent = [allreduce_model.Message(1e6, 0.2)]
    assert allreduce_model._sent(sent, cost, None)[1] == pytest.approx(1.2)
    # Beside 0.6 s of backward (until 0.8 s) at half speed it does 0.3 s of its work,
    # and the other 0.7 s at its own speed after.
    assert allreduce_model._sent(sent, cost, None, 2.0, 0.8)[1] == pytest.approx(0.2 + 0.6 + 0.7)
    # Wholly beside backward: k times as long; wholly after it: its own time.
    assert allreduce_model._overlapped(0.1, 0.0, 3.0, 1.0) == pytest.approx(0.3)
    assert allreduce_model._overlapped(0.1, 1.0, 3.0, 1.0) == pytest.approx(0.1)
    # The point: what runs after the last gradient (backward's end) is not slowed.
    timeline = [(0.2, 1e6)]
    plain = allreduce_model.predict_measured(1.0, timeline, link, "ddp")
    assert (
        allreduce_model.predict_measured(
            1.0, timeline, link, "ddp", cpu=CpuWork(overlap_stretch=2.0)
        ).step_s
        == plain.step_s
    )


@pytest.mark.parametrize(
    "probe, expected",
    [
        # 5 all-reduces of 64 MiB that took 1.0 s each alone; beside the computation the
        # ranks' middle phases lasted 9 and 11 s: twice as long.
        (
            {
                "results": [{"bytes": 1024, "time_s": 0.001}, {"bytes": 67108864, "time_s": 1.0}],
                "cpu_work": {
                    "allreduces": 5,
                    "bytes": 67108864,
                    "per_rank": [{"wall_s": 9.0}, {"wall_s": 11.0}],
                },
            },
            2.0,
        ),
        (
            {
                "results": [{"bytes": 67108864, "time_s": 1.0}],
                "cpu_work": {"allreduces": 5, "bytes": 67108864, "per_rank": [{"wall_s": 4.5}]},
            },
            1.0,
        ),  # faster by noise: 1
        ({"results": [{"bytes": 67108864, "time_s": 1.0}]}, 1.0),  # GPU, or an older probe
        (
            {
                "results": [],
                "cpu_work": {"allreduces": 5, "bytes": 64, "per_rank": [{"wall_s": 9.0}]},
            },
            1.0,
        ),
    ],
)
def test_overlap_stretch_from_a_probe_record(probe, expected):
    assert allreduce_model.overlap_stretch(probe) == pytest.approx(expected)


def test_background_stretches_the_computation_of_more_than_one_worker():
    link = allreduce_model.LinkModel(workers=2, latency_s=0.0, busbw=1e15)  # takes no time
    timeline = [(0.5, 1e6), (0.9, 1e6)]
    plain = allreduce_model.predict_measured(1.0, timeline, link, "ddp")
    taxed = allreduce_model.predict_measured(
        1.0, timeline, link, "ddp", cpu=CpuWork(background_share=0.2)
    )
    assert plain.efficiency == pytest.approx(1.0) and plain.background_s == 0.0
    # A fifth of the core gone: 1 s of computation takes 1.25 s.
    assert taxed.step_s == pytest.approx(1.25) and taxed.background_s == pytest.approx(0.25)
    assert taxed.efficiency == pytest.approx(0.8)
    # It adds to the all-reduces' own work, which comes out of the same core.
    both = allreduce_model.predict_measured(
        1.0, timeline, link, "ddp", cpu=CpuWork(s_per_byte=1e-7, background_share=0.2)
    )
    assert both.step_s == pytest.approx(1.25 + 0.2)  # 2 MB at 100 ns a byte
    # One worker runs no backend beside it; a share near the whole core is capped.
    alone = dataclasses.replace(link, workers=1)
    assert (
        allreduce_model.predict_measured(
            1.0, timeline, alone, "ddp", cpu=CpuWork(background_share=0.2)
        ).step_s
        == 1.0
    )
    capped = allreduce_model.predict_measured(
        1.0, timeline, link, "ddp", cpu=CpuWork(background_share=5.0)
    )
    assert capped.step_s == pytest.approx(1.0 / (1 - allreduce_model.MAX_BACKGROUND_SHARE))


def test_background_takes_the_cores_only_between_all_reduces():
    # One tensor's all-reduce in flight from 0.2 s to 0.7 s of a 1 s step: the
    # backend's threads run it then, and take a fifth of the core the other 0.5 s.
    link = allreduce_model.LinkModel(workers=2, latency_s=0.0, busbw=2e6)
    each = Grouping("horovod", message_bytes=0, cycle_s=0.0)
    timeline = [(0.2, 1e6), (0.9, 1e3)]
    taxed = allreduce_model.predict_measured(
        1.0, timeline, link, each, cpu=CpuWork(background_share=0.2)
    )
    assert taxed.background_s == pytest.approx(0.5 * 0.25)
    assert taxed.step_s == pytest.approx(1.0 + 0.125 + 0.0005)
    # Held back beside backward (overlap stretch 2), it is in flight until backward ends
    # at 0.9 s: 0.3 s of the step without one.
    held = allreduce_model.predict_measured(
        1.0, timeline, link, each, cpu=CpuWork(background_share=0.2, overlap_stretch=2.0)
    )
    assert held.background_s == pytest.approx(0.3 * 0.25)


@pytest.mark.parametrize(
    ("probe", "expected"),
    [
        ({"cpu_work": {"background_share": 0.25}}, 0.25),
        ({"cpu_work": {"background_share": -0.03}}, 0.0),  # noise below zero: none
        ({"cpu_work": {"background_share": None}}, 0.0),  # no rank measured it
        ({"cpu_work": {"lost_s_per_byte": 1e-9}}, 0.0),  # a probe from before it was measured
        ({"cpu_work": None}, 0.0),
    ],  # a GPU node's probe
)
def test_background_share_from_a_probe_record(probe, expected):
    assert allreduce_model.background_share(probe) == pytest.approx(expected)


def test_one_line_rate_parser_reads_what_a_person_writes_and_what_a_record_holds():
    """A person may write a line rate with capitals and spaces; a record holds tc's
    spelling, and anything else in a record is no rate."""
    assert allreduce_model.line_rate_bits(" 10 Gbit ") == 10e9
    assert allreduce_model.line_rate_bits("1.5mbit") == 1.5e6
    for text in ("10\u212abit", "\uff11gbit", "10gbits", "gbit", "1kibit", ""):
        assert allreduce_model.line_rate_bits(text) is None
    assert allreduce_model.nominal_bytes_per_s("1gbit") == 1.25e8
    assert allreduce_model.nominal_bytes_per_s("2.5mbit") == 2.5e6 / 8
    for recorded in ("1 gbit", "1Gbit", " 1gbit", "1gbit\n", "", None, "unshaped"):
        assert allreduce_model.nominal_bytes_per_s(recorded) is None


@given(
    st.floats(0.01, 2.0),
    st.lists(st.tuples(st.floats(0.0, 1.0), st.floats(1e3, 1e8)), min_size=1, max_size=30),
    st.floats(1e6, 1e10),
    st.floats(0.0, 1e-3),
    st.sampled_from(["ddp", "horovod"]),
    st.floats(0.0, 1.0),
    st.floats(0.0, 1e-8),
    st.floats(0.0, 0.9),
    st.floats(1.0, 3.0),
)
def test_the_point_lies_in_its_band_whatever_the_cpu_work_and_background_share(
    step, timeline, busbw, latency, backend, interference, per_byte, share, stretch
):
    # On CPU nodes the backend's background threads stretch the computation and its CPU
    # work per byte adds to it: the band is taken around that computation, so that the
    # point the replay gives is never outside it.
    link = allreduce_model.LinkModel(4, latency, busbw)
    cpu = CpuWork(per_byte, share, stretch)
    times = [(t * step, b) for t, b in timeline]
    for p in (
        allreduce_model.predict_measured(step, times, link, backend, None, cpu, interference),
        allreduce_model.predict_point(
            step, [(b, 1.0) for _, b in times], link, backend, interference, cpu
        ),
    ):
        assert p.efficiency_low <= p.efficiency * (1 + 1e-9)
        assert p.efficiency <= p.efficiency_high * (1 + 1e-9)
        assert p.efficiency_high <= 1.0 + 1e-12


def _swept(cpus, cpu_s_per_s, period_s=None):
    """A probe record of `cpus` cores whose all-reduce of the largest size took
    cpu_s_per_s CPU seconds a second (the half-core Horovod probes: 0.50)."""
    record = {
        "cpus": cpus,
        "results": [{"bytes": 2**26, "time_s": 3.3, "cpu_s": 3.3 * cpu_s_per_s}],
    }
    return record if period_s is None else {**record, "cpu_period_s": period_s}


def test_a_node_short_of_a_core_whose_backend_polls_stands_still_the_rest_of_each_period():
    assert allreduce_model.throttled_s(_swept(0.5, 0.50)) == pytest.approx(0.05)
    assert allreduce_model.throttled_s(_swept(0.2, 0.199, period_s=0.05)) == pytest.approx(0.04)
    # Gloo waits (0.01-0.05 CPU s a second on the same nodes): never throttled.
    assert allreduce_model.throttled_s(_swept(0.5, 0.05)) == 0.0
    # A whole core or more: the polling thread has its core.
    assert allreduce_model.throttled_s(_swept(1.0, 0.99)) == 0.0
    # No quota said, no CPU time, or none of it finite: nothing is known to stop.
    assert allreduce_model.throttled_s({"results": _swept(0.5, 0.5)["results"]}) == 0.0
    assert allreduce_model.throttled_s({"cpus": 0.5, "results": [{"time_s": 1.0}]}) == 0.0
    assert allreduce_model.throttled_s(_swept(0.5, math.nan)) == 0.0


def test_a_throttled_share_is_carried_to_another_rate_through_what_the_sockets_hold():
    """The half-core Horovod nodes: 0.655 of 200 Mbit/s (the fit of their probe) gives
    0.531 of 1 Gbit/s; carried unchanged it said 0.655, the 1 Gbit/s nodes' own probe
    measured 0.40 (fit) to 0.54 (largest size)."""
    half = _swept(0.5, 0.50)
    slow, fast = 200e6 / 8, 1e9 / 8
    share = allreduce_model.throttled_share(half, 0.655, slow, fast)
    assert share == pytest.approx(0.531, abs=0.001)
    # The same rate gives the share back; back from 1 Gbit/s gives 0.655 again.
    assert allreduce_model.throttled_share(half, 0.655, slow, slow) == pytest.approx(0.655)
    assert allreduce_model.throttled_share(half, share, fast, slow) == pytest.approx(0.655)
    # Not throttled, or slower than the stops explain: the share as probed.
    assert allreduce_model.throttled_share(_swept(1.0, 0.99), 0.9, slow, fast) == 0.9
    assert allreduce_model.throttled_share(half, 0.4, slow, fast) == 0.4
    assert allreduce_model.throttled_share(half, 1.0, slow, fast) == 1.0


@given(
    st.floats(0.05, 0.95),
    st.floats(0.0, 1.0),
    st.floats(1e5, 1e11),
    st.floats(1e5, 1e11),
    st.sampled_from([None, 0.001, 0.1, 1.0]),
)
def test_a_carried_share_never_rises_with_the_rate_and_stays_between_quota_and_one(
    cpus, share, rate, to_rate, period
):
    record = _swept(cpus, cpus, period)
    carried = allreduce_model.throttled_share(record, share, rate, to_rate)
    assert 0.0 <= carried <= 1.0
    if share > cpus:  # the stops explain the loss: the share moves within 1 - quota
        assert cpus - 1e-9 <= carried <= 1.0
        faster = allreduce_model.throttled_share(record, share, rate, to_rate * 2)
        assert faster <= carried + 1e-9
