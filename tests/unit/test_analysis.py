import statistics

import pytest

from hpcbench.measure import analysis
from hpcbench.performance import allreduce_model
from tests.unit.summaries import summary


def test_t_quantiles_and_ci():
    assert analysis.t975(1) == 12.706
    assert analysis.t975(30) == 2.042
    assert 1.96 < analysis.t975(1000) < 1.97
    mean, half = analysis.mean_ci95([10.0, 12.0, 14.0])
    assert mean == 12.0
    assert half == pytest.approx(4.303 * 2.0 / 3**0.5)
    assert analysis.mean_ci95([5.0]) == (5.0, 0.0)
    with pytest.raises(ValueError):
        analysis.mean_ci95([])


def test_jitter_is_robust_to_one_outlier():
    values = [100.0, 101.0, 99.0, 100.0, 1000.0]
    assert analysis.jitter(values) == pytest.approx(1.4826)
    assert statistics.stdev(values) > 300


def _run(nodes, workers, window_times, repeat=0, batch=8, steps=10, **extra):
    # A single worker records its gradients as backward made them (bench/train.py): here
    # all 4 MB at the end of a step of window_times[0] / steps.
    timeline = {"grad_timeline": [[window_times[0] / steps, 4e6]]} if workers == 1 else {}
    return {
        **timeline,
        "kind": "run",
        "status": "ok",
        "env": "e",
        "model": "m",
        "backend": "ddp",
        "batch": batch,
        "image_size": 32,
        "data": "synthetic",
        "gpus_per_node": 1,
        "nodes": nodes,
        "workers": workers,
        "repeat": repeat,
        "steps": steps,
        "window_times": window_times,
        "weights_in_sync": True,
        "allreduce_bytes": 4e6,
        **extra,
    }


def test_run_stats_use_the_slowest_rank_window_times():
    stats = analysis.run_stats(_run(2, 2, [1.0, 1.0, 2.0]))
    # 2 workers * 8 images * 10 steps = 160 images per window: 480 images in 4 s, the
    # rate the workload prints (not the windows' rates averaged, 133).
    assert stats["step_time_s"] == pytest.approx(4 / 3 / 10)
    assert stats["throughput"] == pytest.approx(480 / 4)
    assert stats["throughput_per_worker"] == pytest.approx(120 / 2)


def test_speedup_efficiency_and_propagated_ci():
    runs = [
        _run(1, 1, [1.0, 1.0], repeat=0),
        _run(1, 1, [1.0, 1.0], repeat=1),  # X(1) = 80 img/s exactly, CI 0
        _run(2, 2, [1.25, 1.25], repeat=0),  # X = 128
        _run(2, 2, [1.0, 1.0], repeat=1),  # X = 160
        _run(4, 4, [2.0, 2.0], repeat=0, status="failed", error="Traceback...\nboom"),
    ]
    by_workers = {s.workers: s for s in analysis.summarise(runs)}
    base, two, four = by_workers[1], by_workers[2], by_workers[4]
    assert base.throughput == 80 and base.efficiency == 1.0 and base.efficiency_ci95 == 0
    # Steps of 0.125 s and 0.1 s: the configuration's step is their mean, and its
    # throughput the 16 images of a step over it (not the runs' rates averaged, 144).
    assert two.step_time_s == pytest.approx(0.1125)
    assert two.throughput == pytest.approx(16 / 0.1125)
    assert two.speedup == pytest.approx(0.1 * 2 / 0.1125)
    assert two.efficiency == pytest.approx(0.1 / 0.1125)  # the steps' ratio
    # Repeats give the CI: t(1) * stdev of the steps / sqrt(2), as a share of the step;
    # E's CI scales with it.
    x_ci = 16 / 0.1125 * 12.706 * statistics.stdev([0.125, 0.1]) / 2**0.5 / 0.1125
    assert two.ci95 == pytest.approx(x_ci)
    assert two.efficiency_ci95 == pytest.approx(x_ci / 80 / 2)
    assert four.runs == 0 and four.failed == 1 and "boom" in four.errors[0]
    assert four.efficiency is None


def test_single_repeat_uses_window_ci_and_internode_base_is_a_full_node():
    runs = [
        _run(1, 1, [1.0, 1.0]),
        _run(1, 2, [1.0, 1.1, 0.9], gpus_per_node=2),
        _run(2, 4, [1.0, 1.0], gpus_per_node=2),
    ]
    # Different gpus_per_node are different series; give them all the same for this test.
    for r in runs:
        r["gpus_per_node"] = 2
    s = {x.workers: x for x in analysis.summarise(runs)}
    step, ci = analysis.mean_ci95([t / 10 for t in (1.0, 1.1, 0.9)])
    assert s[2].throughput == pytest.approx(16 / step)
    assert s[2].ci95 == pytest.approx(16 / step * ci / step)
    assert s[4].internode_efficiency == pytest.approx(320 / (2 * s[2].throughput))
    assert s[2].internode_efficiency == 1.0
    assert s[4].efficiency == pytest.approx(320 / (4 * 80))


def test_prediction_band_uses_probe_baseline_step_time_and_gradient_bytes():
    probe_model = allreduce_model.LinkModel(2, 0.0, 1e8)
    probe = {
        "kind": "probe",
        "status": "ok",
        "env": "e",
        "backend": "ddp",
        "workers": 2,
        "results": [
            {"bytes": s, "time_s": probe_model.allreduce_time(s), "busbw": 1e8} for s in (1 << 26,)
        ],
    }
    runs = [_run(1, 1, [1.0]), _run(2, 2, [1.0])]  # T1 = 0.1 s per step
    s = {x.workers: x for x in analysis.summarise(runs, [probe])}
    t_ar = 4e6 / 1e8  # ring factor 1 for 2 workers
    assert s[2].allreduce_s == pytest.approx(t_ar)
    assert s[2].predicted_efficiency_low == pytest.approx(0.1 / (0.1 + t_ar))
    assert s[2].predicted_efficiency_high == 1.0
    assert s[2].busbw == 1e8
    assert s[1].predicted_efficiency_low == s[1].predicted_efficiency_high == 1.0
    # Without a probe on two workers there is no band.
    assert analysis.summarise(runs)[1].predicted_efficiency_low is None


def test_series_are_separate():
    runs = [_run(1, 1, [1.0], batch=8), _run(1, 1, [2.0], batch=16)]
    out = analysis.summarise(runs)
    assert [(s.batch, s.throughput) for s in out] == [(8, 80), (16, 80)]
    assert all(s.efficiency == 1.0 for s in out)


def test_live_summary_added_run_by_run_equals_the_whole_store():
    probe_model = allreduce_model.LinkModel(2, 1e-3, 1e8)
    probe = {
        "kind": "probe",
        "status": "ok",
        "env": "e",
        "backend": "ddp",
        "workers": 2,
        "results": [
            {"bytes": 1 << 26, "time_s": probe_model.allreduce_time(1 << 26), "busbw": 1e8}
        ],
    }
    runs = [
        _run(2, 2, [1.25, 1.2], repeat=0),  # before its baseline: no efficiency yet
        _run(1, 1, [1.0, 1.0], repeat=0),
        _run(1, 1, [1.0, 1.1], repeat=1),
        _run(2, 2, [1.0, 1.1], repeat=1),
        _run(1, 1, [2.0], batch=16),
    ]
    live = analysis.LiveSummary()
    first = live.add(runs[0])
    assert first.throughput == pytest.approx(2 * 2 * 8 * 10 / (1.25 + 1.2))
    assert first.efficiency is None  # its series has no single-worker run yet
    for run in runs[1:]:
        latest = live.add(run)
    assert latest.batch == 16 and latest.efficiency == 1.0
    live.add_probe(probe)
    whole = analysis.summarise(runs, [probe])
    assert [s.as_dict() for s in live.summaries()] == [s.as_dict() for s in whole]
    two = next(s for s in whole if s.workers == 2)
    assert two.efficiency is not None and two.predicted_efficiency_low is not None


def test_median_interval_from_order_statistics():
    assert analysis.median_ci95([1.0] * 5) is None  # no 95% interval below 6 values
    # n = 6: [x(1), x(6)] covers the median with 1 - 2/64 = 96.9%.
    assert analysis.median_ci95([6.0, 1.0, 5.0, 2.0, 4.0, 3.0]) == (3.5, 1.0, 6.0)
    # n = 20: P(Binom(20, 1/2) <= 5) = 2.1% -> [x(6), x(15)].
    assert analysis.median_ci95([float(i) for i in range(1, 21)]) == (10.5, 6.0, 15.0)


def test_outlier_windows_are_flagged_and_a_single_run_uses_the_median_then():
    assert analysis.outliers([100.0, 101.0, 99.0, 100.0, 100.5, 40.0]) == [5]
    assert analysis.outliers([5.0] * 4) == []
    steady = analysis.summarise([_run(1, 1, [1.0, 1.01, 0.99, 1.0, 1.0, 1.02])])[0]
    assert steady.ci_method == "windows" and steady.outlier_windows == 0
    # One window 3x slower (a node throttled, a noisy neighbour): flagged, and the
    # throughput is the median with its distribution-free interval, not the dragged mean.
    hiccup = analysis.summarise([_run(1, 1, [1.0, 1.01, 0.99, 1.0, 1.0, 3.0])])[0]
    assert hiccup.outlier_windows == 1 and hiccup.ci_method == "median"
    assert hiccup.throughput == pytest.approx(80.0)
    assert steady.throughput > hiccup.throughput * 0.99  # the mean would say 69


def test_noise_floor_is_the_baselines_relative_interval():
    runs = [
        _run(1, 1, [1.0, 1.0], repeat=0),
        _run(1, 1, [1.1, 1.1], repeat=1),
        _run(2, 2, [1.0, 1.0]),
    ]
    series = analysis.summarise(runs)
    base = series[0]
    assert analysis.noise_floor(series) == pytest.approx(base.ci95 / base.throughput)
    assert analysis.noise_floor(series[1:]) is None


def test_off_the_band_names_the_likeliest_causes():
    s = summary(
        nodes=4,
        workers=4,
        runs=2,
        efficiency=0.2,
        efficiency_ci95=0.02,
        predicted_efficiency_low=0.5,
        predicted_efficiency_high=0.9,
        cpu_util=0.97,
        net_bytes_per_s=100e6,
        straggler_lead=0.05,
        straggler="n2",
    )
    why = analysis.off_prediction(s, nominal_bytes_per_s=125e6)
    assert why.startswith("below the band:")
    assert "CPU (nodes at 97% of their limit)" in why and "network (link at 80%)" in why
    assert "straggler" not in why
    s.efficiency = 0.49  # its interval reaches the band, and there is no point: agrees
    assert analysis.off_prediction(s, 125e6) is None
    s.efficiency = 0.95  # above
    assert analysis.off_prediction(s, 125e6).startswith("above the band:")


def test_off_the_point_inside_the_band_says_so_with_the_cause():
    # 1 Gbit/s on half-core nodes: inside the band 0.77-1.00 (with its interval) but far
    # below the point 0.997; the CPU is saturated while the link is mostly idle.
    s = summary(
        backend="horovod",
        batch=64,
        image_size=64,
        nodes=2,
        workers=2,
        runs=3,
        efficiency=0.730,
        efficiency_ci95=0.083,
        predicted_efficiency_low=0.766,
        predicted_efficiency_high=1.0,
        predicted_efficiency=0.997,
        cpu_util=1.0,
        net_bytes_per_s=11.5e6,
    )
    why = analysis.off_prediction(s, nominal_bytes_per_s=125e6)
    assert why == (
        "below the point 1.00: CPU (nodes at 100% of their limit while the link "
        "carries 9% of its rate)"
    )
    s.efficiency = 0.97  # within 0.05 of the point once its interval counts: agrees
    s.efficiency_ci95 = 0.0
    assert analysis.off_prediction(s, 125e6) is None
    s.efficiency = 0.94  # 0.057 off, no interval: off
    assert analysis.off_prediction(s, 125e6).startswith("below the point")
    s.cpu_util = 0.5  # nothing stands out
    assert analysis.off_prediction(s, 125e6).endswith(": no cause stands out")


def test_point_prediction_replays_the_baselines_gradient_timeline():
    probe_model = allreduce_model.LinkModel(2, 0.0, 1e8)
    probe = {
        "kind": "probe",
        "status": "ok",
        "env": "e",
        "backend": "ddp",
        "workers": 2,
        "results": [
            {"bytes": s, "time_s": probe_model.allreduce_time(s), "busbw": 1e8} for s in (1 << 26,)
        ],
    }
    # 4 MB of gradients, all ready 0.09 s into a 0.1 s step: two buckets (DDP's first
    # closes at 1 MiB) queue on a 100 MB/s link, 0.04 s in all, all of it past the last
    # gradient: the step takes 0.14 s.
    base = _run(1, 1, [1.0], grad_timeline=[[0.09, 2e6], [0.09, 2e6]])
    s = {x.workers: x for x in analysis.summarise([base, _run(2, 2, [1.0])], [probe])}
    assert s[2].predicted_efficiency == pytest.approx(0.1 / 0.14)
    # Without a timeline the model's layers stand in, as `predict` builds them; a model of
    # no known layers gets no prediction at all.
    bare = _run(1, 1, [1.0])
    del bare["grad_timeline"]
    s = {x.workers: x for x in analysis.summarise([bare, _run(2, 2, [1.0])], [probe])}
    assert s[2].predicted_efficiency is None and s[2].predicted_efficiency_low is None
    known = [{**r, "model": "resnet18"} for r in (bare, _run(2, 2, [1.0]))]
    s = {x.workers: x for x in analysis.summarise(known, [probe])}
    low, point, high = (
        s[2].predicted_efficiency_low,
        s[2].predicted_efficiency,
        s[2].predicted_efficiency_high,
    )
    assert low is not None and point is not None and high is not None
    assert low <= point <= high


def test_settled_says_inside_or_outside_only_when_the_whole_interval_does():
    assert analysis.settled([1.0], 0.97, 1.03) is None  # one value has no interval
    # Mean 1.0, 95% CI +-0.0127 (t 12.7 x sd 0.0014 / sqrt 2): inside 0.97-1.03.
    assert analysis.settled([0.999, 1.001], 0.97, 1.03) == "inside"
    # Mean 0.95 with a CI well below 0.97: outside, however close the values.
    assert analysis.settled([0.949, 0.951, 0.950], 0.97, 1.03) == "outside"
    assert analysis.settled([1.049, 1.051, 1.050], 0.97, 1.03) == "outside"
    # Mean 0.985 but spread 0.90-1.07: the interval straddles 0.97, so not yet.
    assert analysis.settled([0.90, 1.07, 0.95, 1.02], 0.97, 1.03) is None
    # The same spread with more rounds around 1.0 narrows it until it says inside.
    values = [0.99, 1.01] * 10
    assert analysis.settled(values, 0.97, 1.03) == "inside"


def test_a_transformers_mfu_is_its_reported_tokens_per_s_times_its_flops_over_its_peak():
    # Two runs of gpt-tiny (128 tokens a sequence), each with the peak its node measured.
    runs = [
        {**_run(2, 2, [1.0, 1.2], repeat=0), "model": "gpt-tiny", "seq_len": 128},
        {**_run(2, 2, [1.1, 1.1], repeat=1), "model": "gpt-tiny", "seq_len": 128},
    ]
    for r, peak in zip(runs, (4e9, 5e9), strict=True):
        r.update(flops_per_token=1e5, peak_flops=peak, mfu=0.5)  # the run's own, not read
    [s] = analysis.summarise(runs)
    assert s.unit == "tokens"
    # A step of 2 x 8 sequences x 128 tokens over the mean step (0.11 s).
    assert s.throughput == pytest.approx(2 * 8 * 128 / 0.11)
    assert s.peak_flops == pytest.approx(4.5e9)
    assert s.mfu == pytest.approx(s.throughput * 1e5 / s.peak_flops)
    # Above the peak is no MFU: the reason is said instead.
    for r in runs:
        r["peak_flops"] = 1e6
    [s] = analysis.summarise(runs)
    assert s.mfu is None and "exceed the peak" in (s.mfu_unknown or "")
