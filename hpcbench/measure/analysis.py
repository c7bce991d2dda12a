"""Statistics over the results store: throughput, speedup, efficiency, CIs, jitter.

Definitions (docs/method.md, "Measurement method"): a window's time is the slowest
rank's; throughput X = workers * batch * steps / t, in the workload's unit (unit_of:
images for a CNN; tokens for a transformer, whose batch counts sequences of seq_len
tokens); speedup S(N) = X(N)/X(1);
efficiency E(N) = X(N) / (N * X(1)) with N workers; inter-node efficiency
uses one full node as the base. CIs are Student-t 95% intervals: over
repeats when there are two or more, else over one run's windows; the CIs of
X(N) and X(1) propagate into E to first order.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any

from hpcbench.core.bench import cpu_share, peak_flops, transformer_configs
from hpcbench.core.errors import UsageError
from hpcbench.measure import energy_use
from hpcbench.measure.identity import CONFIG_FIELDS
from hpcbench.performance import plans
from hpcbench.performance.scaling_model import predictions

# Fields that name a scaling series; nodes and workers vary along it.
SERIES_FIELDS = tuple(f for f in CONFIG_FIELDS if f not in ("nodes", "workers"))

# Two-sided 95% Student-t quantiles t(0.975, df) for df = 1..30.
_T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


def t975(df: int) -> float:
    if df < 1:
        raise ValueError("a confidence interval needs at least two values")
    if df <= len(_T975):
        return _T975[df - 1]
    # Beyond the table t approaches the normal quantile; 2.042 at 30, 1.960 at infinity.
    return 1.960 + (2.042 - 1.960) * 30 / df


def mean_ci95(values: list[float]) -> tuple[float, float]:
    """Mean and half-width of its 95% CI (0 for fewer than two values)."""
    if not values:
        raise ValueError("no values")
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, 0.0
    return mean, t975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))


def jitter(values: list[float]) -> float:
    """Robust spread: 1.4826 * median absolute deviation (equals sigma for normal data)."""
    if not values:
        return 0.0
    med = statistics.median(values)
    return 1.4826 * statistics.median(abs(v - med) for v in values)


def median_ci95(values: list[float]) -> tuple[float, float, float] | None:
    """Median and its distribution-free 95% interval (low, high), from order statistics.

    The interval [x(k), x(n-k+1)] covers the median with probability
    1 - 2 P(Binomial(n, 1/2) < k), whatever the distribution; k is the largest
    rank that keeps the coverage at 95% or more. None below 6 values, where no
    such interval exists.
    """
    n = len(values)
    if n < 6:
        return None
    xs = sorted(values)
    k, tail = 0, 0.0
    while tail + math.comb(n, k) / 2**n <= 0.025:
        tail += math.comb(n, k) / 2**n
        k += 1
    return statistics.median(xs), xs[k - 1], xs[n - k]


def settled(values: list[float], low: float, high: float) -> str | None:
    """Whether the 95% CI of the values' mean has settled against [low, high]: 'inside'
    when the whole interval lies within it, 'outside' when the whole interval lies beyond
    one limit, None while it straddles a limit or with fewer than two values (a
    sequential check: more values narrow the interval until it says one or the other)."""
    if len(values) < 2:
        return None
    mean, half = mean_ci95(values)
    if low <= mean - half and mean + half <= high:
        return "inside"
    if mean + half < low or mean - half > high:
        return "outside"
    return None


# Iglewicz and Hoaglin's cut-off for the modified z-score |x - median| / (1.4826 MAD).
OUTLIER_Z = 3.5


def outliers(values: list[float]) -> list[int]:
    """Indices of values far from the rest by the modified z-score (robust to the
    outliers themselves, unlike a z-score over mean and standard deviation)."""
    spread = jitter(values)
    if not spread:
        return []
    med = statistics.median(values)
    return [i for i, v in enumerate(values) if abs(v - med) / spread > OUTLIER_Z]


# What a workload's throughput counts, declared once per workload: bench/train.py's CNNs
# train images, bench/lm.py's transformers tokens (their records say so in `unit`).
IMAGES, TOKENS = "images", "tokens"
UNITS = (IMAGES, TOKENS)


def unit_of(model: Any) -> str:
    """The unit a model's throughput is counted in (a failed run, which recorded none,
    has its model's)."""
    transformer = isinstance(model, str) and transformer_configs.is_transformer(model)
    return TOKENS if transformer else IMAGES


def seq_len_of(record: dict[str, Any]) -> int | None:
    """A transformer run's tokens per sequence (the record's, else its configuration's
    default); None for a CNN, or a read config's run that recorded neither."""
    model = record.get("model")
    if unit_of(model) != TOKENS:
        return None
    config = transformer_configs.recorded(model, record.get("model_shape"))
    return record.get("seq_len") or (config.seq_len if config is not None else None)


def work_per_step(run: dict[str, Any]) -> float:
    """What one step of all the run's workers trains, in its unit: images, or tokens
    (batch sequences of seq_len tokens per worker and micro-batch, a step's K micro-
    batches; a tensor-parallel group of tp workers trains one such stream: bench/layout.py)."""
    layout = _whole(run.get("grad_accum")) / _whole(run.get("tp"))
    return run["workers"] * run["batch"] * (seq_len_of(run) or 1) * layout


def _whole(value: Any) -> int:
    """A layout's count as recorded: 1 where a run recorded none (a CNN, a store from
    before the layouts)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def window_throughputs(run: dict[str, Any]) -> list[float]:
    """Each window's throughput in the run's unit (its spread and outliers: the
    throughput itself is run_stats')."""
    per_window = work_per_step(run) * run["steps"]
    return [per_window / t for t in run["window_times"]]


def run_stats(run: dict[str, Any]) -> dict[str, float]:
    """One run's step (its windows' slowest-rank time over their steps, the mean) and its
    throughput, work per step over that step: the rate the workload prints and its MFU
    counts (bench/train.py, bench/lm.py: work over the windows' summed time), in the run's
    unit (unit_of; the keys keep the CNNs' names); the interval from the windows'."""
    step, ci_step = mean_ci95([t / run["steps"] for t in run["window_times"]])
    rate = work_per_step(run) / step
    return {
        "throughput": rate,
        "ci95": rate * ci_step / step,
        "throughput_per_worker": rate / run["workers"],
        "jitter": jitter(window_throughputs(run)),
        "step_time_s": step,
    }


def ratio_ci(num: float, num_ci: float, den: float, den_ci: float) -> float:
    """Half-width of num/den from independent half-widths (first-order propagation)."""
    if num == 0 or den == 0:
        return 0.0
    return abs(num / den) * math.hypot(num_ci / num, den_ci / den)


@dataclass
class ConfigSummary:
    env: str
    model: str
    backend: str
    batch: int
    image_size: int
    data: str
    gpus_per_node: int
    nodes: int
    workers: int
    runs: int
    failed: int
    method: str | None = None  # identity.method_label of the runs (None: a store from before it)
    # What the throughput counts (unit_of): throughput, ci95, ci95_windows,
    # throughput_per_worker and jitter are in this unit per second (what a record
    # or an export writes names them by the unit: images_per_sec, tokens_per_sec).
    unit: str = IMAGES
    # A transformer's parallelism (ddp, fsdp2, hsdp) and tokens per sequence; None for a CNN.
    parallel: str | None = None
    seq_len: int | None = None
    # A transformer's layout (bench/layout.py): TP workers inside a node, micro-batches
    # a step, activation checkpointing; None for a CNN.
    tp: int | None = None
    grad_accum: int | None = None
    activation_checkpoint: str | None = None
    throughput: float | None = None
    ci95: float | None = None
    ci95_windows: float | None = None
    throughput_per_worker: float | None = None
    jitter: float | None = None
    step_time_s: float | None = None
    # A transformer's model FLOPs utilisation: its tokens/s x FLOPs per token over its
    # workers' peak (at most 1: bench/peak_flops.py); where there is none, why.
    mfu: float | None = None
    mfu_unknown: str | None = None
    # The peak FLOPS of all its workers that MFU divides by (the runs' mean: bench/lm.py).
    peak_flops: float | None = None
    speedup: float | None = None
    efficiency: float | None = None
    efficiency_ci95: float | None = None
    internode_efficiency: float | None = None
    internode_efficiency_ci95: float | None = None
    predicted_efficiency_low: float | None = None
    predicted_efficiency_high: float | None = None
    # The point prediction: the single worker's measured gradient timeline replayed
    # against the probe's link (hpcbench.performance.plans, as `predict` and a campaign forecast).
    predicted_efficiency: float | None = None
    # CPU nodes: the all-reduces' own CPU work per step that the point charged (the
    # probe's compute lost per byte x the bytes; 0 where the probe measured none).
    predicted_cpu_work_s: float | None = None
    # CPU nodes: what the backend's background work added to the step's computation
    # (the probe's background share of its cores; 0 where the probe measured none).
    predicted_background_s: float | None = None
    allreduce_s: float | None = None
    busbw: float | None = None
    data_fraction: float | None = None
    weights_in_sync: bool | None = None
    errors: list[str] | None = None
    outlier_windows: int = 0
    # How ci95 was made: "repeats" (Student t over repeats), "windows" (Student t over
    # one run's windows) or "median" (order statistics, where windows have outliers).
    ci_method: str = ""
    # Where the time went, per step (seconds): the single worker's step is compute (and
    # data); what N workers take beyond it is exposed communication; the predicted
    # all-reduce time not exposed was overlapped with the backward pass.
    compute_s: float | None = None
    data_s: float | None = None
    exposed_comm_s: float | None = None
    overlap_s: float | None = None
    # Stragglers: per window, the slowest rank's lead over the median rank (mean over
    # windows, a share), and the host that was slowest most often.
    straggler_lead: float | None = None
    straggler: str | None = None
    # The nodes over the timed windows (bench/nodemon.py): mean CPU use against the
    # node's limit, how that limit is set, and the busiest interface's bytes/s.
    cpu_util: float | None = None
    cpu_limit: str | None = None
    net_bytes_per_s: float | None = None
    # The least CPUs a node of its runs could use (its monitor's), and torch's threads
    # per worker (the records'): how its workers shared a CPU node (bench/cpu_share.py).
    node_cpus_least: float | None = None
    threads: int | None = None
    link_rate: str | None = None  # the testbed's nominal link ('1gbit'), as recorded
    # Energy per sample over the timed windows (hpcbench.measure.energy_use): the runs' mean, what
    # it was read from (or "unknown: " and why), and its unit (image or token).
    joules_per_sample: float | None = None
    energy_source: str | None = None
    energy_unit: str | None = None

    @property
    def series(self) -> tuple:
        return tuple(getattr(self, f) for f in SERIES_FIELDS)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def relative_ci(self) -> float | None:
        """The 95% interval's half-width as a share of the throughput."""
        if not self.throughput or self.ci95 is None:
            return None
        return self.ci95 / self.throughput


def workload_label(s: ConfigSummary) -> str:
    """What a configuration trains, as labels and chart titles name it: the model, and
    for a transformer its parallelism and sequence ('gpt-tiny fsdp2, seq 128')."""
    if s.unit == TOKENS:
        return f"{s.model} {s.parallel}, seq {s.seq_len}"
    return s.model


def per_sec(s: ConfigSummary) -> str:
    """The unit of its throughput as a table or an axis says it: 'images/s', 'tokens/s'."""
    return f"{s.unit}/s"


def noise_floor(series: list[ConfigSummary]) -> float | None:
    """The relative 95% interval of the series' single-worker baseline: how much
    identical runs vary, so an efficiency change smaller than it is no result."""
    base = next((s for s in series if s.workers == 1 and s.throughput), None)
    return base.relative_ci if base else None


def series_key(record: dict[str, Any]) -> tuple:
    return tuple(record.get(f) for f in SERIES_FIELDS)


def _summarise_config(runs: list[dict[str, Any]]) -> ConfigSummary:
    first = runs[0]
    ok = [r for r in runs if r.get("status") == "ok" and r.get("window_times")]
    series: dict[str, Any] = {f: first.get(f) for f in SERIES_FIELDS}
    summary = ConfigSummary(
        **series,
        nodes=first["nodes"],
        workers=first["workers"],
        runs=len(ok),
        failed=len(runs) - len(ok),
        errors=[r.get("error", "")[-300:] for r in runs if r.get("status") != "ok"] or None,
        link_rate=first.get("link_rate") if isinstance(first.get("link_rate"), str) else None,
        unit=unit_of(first.get("model")),
    )
    if summary.unit == TOKENS:
        parallel = first.get("parallel")
        summary.parallel = parallel if isinstance(parallel, str) else "ddp"
        summary.seq_len = seq_len_of(first)
        summary.tp = _whole(first.get("tp"))
        summary.grad_accum = _whole(first.get("grad_accum"))
        checkpoint = first.get("activation_checkpoint")
        summary.activation_checkpoint = checkpoint if isinstance(checkpoint, str) else "none"
    if not ok:
        return summary
    # One truth: the configuration's step (the mean of its runs'), and its throughput
    # the work of a step over it, so that X(N) / (N X(1)) is the steps' ratio and an MFU
    # is this throughput's; the interval is the step's, over repeats, else windows.
    per_run = [run_stats(r) for r in ok]
    step, ci_step = mean_ci95([s["step_time_s"] for s in per_run])
    ci_method = "repeats"
    windows = [x for r in ok for x in window_throughputs(r)]
    summary.outlier_windows = len(outliers(windows))
    if len(ok) < 2:
        [run] = ok
        steps = [t / run["steps"] for t in run["window_times"]]
        ci_step, ci_method = mean_ci95(steps)[1], "windows"
        by_median = median_ci95(steps) if summary.outlier_windows else None
        if by_median:  # not normal: the median step and its distribution-free interval
            step, low, high = by_median
            ci_step, ci_method = max(step - low, high - step), "median"
    work = work_per_step(first)
    summary.step_time_s, summary.ci_method = step, ci_method
    summary.throughput = work / step
    summary.ci95 = summary.throughput * ci_step / step
    summary.ci95_windows = statistics.fmean(s["ci95"] for s in per_run)
    summary.throughput_per_worker = summary.throughput / summary.workers
    summary.jitter = jitter(windows)
    fractions = [r["data_time_fraction"] for r in ok if r.get("data_time_fraction") is not None]
    summary.data_fraction = statistics.fmean(fractions) if fractions else None
    summary.weights_in_sync = all(r.get("weights_in_sync") is True for r in ok)
    if summary.unit == TOKENS:
        summary.peak_flops, summary.mfu, summary.mfu_unknown = _mfu(ok, summary.throughput)
    _add_stragglers(summary, ok)
    _add_node_use(summary, ok)
    summary.joules_per_sample, summary.energy_source, summary.energy_unit = energy_use.summary(ok)
    return summary


def _mfu(
    ok: list[dict[str, Any]], tokens_per_s: float
) -> tuple[float | None, float | None, str | None]:
    """The runs' peak FLOPS (their mean: a CPU node's is measured by each run) and the
    configuration's MFU from its own tokens/s, by the workload's rule (bench/peak_flops.py
    mfu: never above 1); or None and why: the first run's reason where one has no peak."""
    known = [
        r for r in ok if _positive(r.get("peak_flops")) and _positive(r.get("flops_per_token"))
    ]
    if len(known) < len(ok):
        missing = next(r for r in ok if r not in known)
        why = missing.get("mfu_unknown")
        return None, None, why if isinstance(why, str) and why else "the run recorded no peak"
    peak = statistics.fmean(float(r["peak_flops"]) for r in ok)
    mfu, why = peak_flops.mfu(tokens_per_s * float(ok[0]["flops_per_token"]), peak)
    return peak, mfu, why


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


# A gradient timeline's seconds and bytes stay below this (a petabyte, three years),
# so that the replay's sums of them stay finite; a timeline beyond it is not used.
TIMELINE_MAX = 1e15


def timeline_ok(timeline: Any) -> bool:
    """A gradient timeline as bench/train.py writes it: [[seconds, bytes], ...]."""
    return (
        isinstance(timeline, list)
        and bool(timeline)
        and all(
            isinstance(x, list)
            and len(x) == 2
            and all(isinstance(v, int | float) and 0 <= v <= TIMELINE_MAX for v in x)
            for x in timeline
        )
    )


def _add_stragglers(summary: ConfigSummary, ok: list[dict[str, Any]]) -> None:
    leads: list[float] = []
    slowest: dict[str, int] = defaultdict(int)
    for r in ok:
        ranks = r.get("rank_window_times")
        if not isinstance(ranks, list) or len(ranks) < 2:
            continue
        hosts = (r.get("fingerprint") or {}).get("hosts") or []
        for k in range(min(len(x) for x in ranks)):
            times = [x[k] for x in ranks]
            med = statistics.median(times)
            leads.append((max(times) - med) / med if med > 0 else 0.0)
            rank = times.index(max(times))
            slowest[hosts[rank] if rank < len(hosts) else f"rank {rank}"] += 1
    if leads:
        summary.straggler_lead = statistics.fmean(leads)
        summary.straggler = max(slowest, key=lambda host: slowest[host])


def _add_node_use(summary: ConfigSummary, ok: list[dict[str, Any]]) -> None:
    utils, rates, limits = [], [], set()
    for r in ok:
        for host in (r.get("nodes_use") or {}).get("per_host") or []:
            if isinstance(host.get("cpu_util"), int | float):
                utils.append(float(host["cpu_util"]))
            if host.get("cpu_limit"):
                limits.add(str(host["cpu_limit"]))
            nets = [
                max(v.get("rx_bytes_per_s", 0), v.get("tx_bytes_per_s", 0))
                for v in (host.get("net") or {}).values()
                if isinstance(v, dict)
            ]
            if nets:
                rates.append(max(nets))
    summary.cpu_util = statistics.fmean(utils) if utils else None
    summary.net_bytes_per_s = statistics.fmean(rates) if rates else None
    summary.cpu_limit = "; ".join(sorted(limits)) or None
    summary.node_cpus_least = least_node_cpus(ok)
    summary.threads = recorded_threads(ok) or None


def _node_cpu_figures(runs: list[dict[str, Any]]) -> list[tuple[float, str]]:
    """Each node's CPUs of the ok runs as its own monitor found them (bench/nodemon.py:
    its cgroup quota, else the CPUs it may run on), with what limits it ('' unsaid)."""
    found = []
    for r in runs:
        use = r.get("nodes_use") if r.get("status") == "ok" else None
        hosts = use.get("per_host") if isinstance(use, dict) else None
        for host in hosts if isinstance(hosts, list) else []:
            cpus = host.get("cpus") if isinstance(host, dict) else None
            if isinstance(cpus, bool) or not isinstance(cpus, int | float):
                continue
            if math.isfinite(cpus) and cpus > 0:
                limit = host.get("cpu_limit")
                found.append((float(cpus), limit if isinstance(limit, str) else ""))
    return found


def least_node_cpus(runs: list[dict[str, Any]]) -> float | None:
    """The least CPUs any node of the ok runs could use; None where none recorded one."""
    return min((cpus for cpus, _ in _node_cpu_figures(runs)), default=None)


def recorded_threads(runs: list[dict[str, Any]]) -> int:
    """The torch threads per worker the runs recorded, where they all recorded one and
    the same; else 0 (as --threads 0: not known to be any)."""
    threads = {r.get("threads") for r in runs}
    t = threads.pop() if len(threads) == 1 else None
    return t if isinstance(t, int) and not isinstance(t, bool) and t > 0 else 0


def node_cpus(runs: list[dict[str, Any]]) -> str | None:
    """The CPUs a node may use, as each node's own monitor found them (_node_cpu_figures),
    each distinct figure with what limits it; None where no ok run recorded one. Not the
    fingerprint's `cores` (os.cpu_count), which inside a container counts the host's."""
    found = {
        f"{cpus:g}" + (f" ({limit})" if limit else "") for cpus, limit in _node_cpu_figures(runs)
    }
    return "; ".join(sorted(found)) or None


def _matching_probe(probes: list[dict[str, Any]], s: ConfigSummary) -> dict[str, Any] | None:
    """The latest probe on the same env and worker count, same backend preferred."""
    candidates = [
        p
        for p in probes
        if p.get("status") == "ok" and p.get("env") == s.env and p.get("workers") == s.workers
    ]
    same_backend = [p for p in candidates if p.get("backend") == s.backend]
    chosen = same_backend or candidates
    return chosen[-1] if chosen else None


def _add_scaling(
    series: list[ConfigSummary],
    run: dict[str, Any],
    probes: list[dict[str, Any]],
    timeline: list[list[float]] | None = None,
    shared_base: ConfigSummary | None = None,
) -> None:
    """Speedup, efficiency and the predicted band of every configuration of one series;
    run: one of its runs (what they train, job_of); timeline: its single worker's
    measured gradients; shared_base: the single-worker baseline of a sibling series, for
    a series that has none."""
    base = next((s for s in series if s.workers == 1 and s.throughput), shared_base)
    full_node = max(
        (s for s in series if s.nodes == 1 and s.throughput),
        key=lambda s: s.workers,
        default=None,
    )
    for s in series:
        if not s.throughput:
            continue
        # Both were chosen for a throughput: the checks only tell the type checker.
        if base is not None and base.throughput:
            s.speedup = s.throughput / base.throughput
            s.efficiency = s.speedup / s.workers
            s.efficiency_ci95 = (
                0.0
                if s is base
                else ratio_ci(s.throughput, s.ci95 or 0.0, base.throughput, base.ci95 or 0.0)
                / s.workers
            )
        if full_node is not None and full_node.throughput:
            scale = s.workers / full_node.workers
            s.internode_efficiency = s.throughput / (scale * full_node.throughput)
            s.internode_efficiency_ci95 = (
                0.0
                if s is full_node
                else ratio_ci(
                    s.throughput, s.ci95 or 0.0, full_node.throughput, full_node.ci95 or 0.0
                )
                / scale
            )
        if base is not None and base.step_time_s and s.step_time_s:
            data = (base.data_fraction or 0.0) * base.step_time_s
            s.compute_s, s.data_s = base.step_time_s - data, data
            s.exposed_comm_s = max(0.0, s.step_time_s - base.step_time_s)
        if s.workers == 1 and base is not None:
            s.predicted_efficiency_low = s.predicted_efficiency_high = 1.0
            s.allreduce_s = 0.0
            continue
        probe = _matching_probe(probes, s)
        network = plans.probed(probe) if probe else None
        if network is None or base is None or base.step_time_s is None:
            continue
        # The forecast `predict` and a campaign make of the same cell (hpcbench.performance.plans),
        # over the probe's link, from the baseline's step (each worker's, where several
        # share a CPU node) and, where it recorded them, its measured gradients.
        job = job_of(run)
        stretch, least = _shared_cpu_stretch(job, s, base)
        plan = plans.plan(
            job,
            network,
            [s.workers],
            s.gpus_per_node,
            base.step_time_s * stretch,
            tuple((t, b) for t, b in timeline or ()),
        )
        try:
            [row] = predictions(plan)
        except UsageError:  # a model of no known layers, and no measured gradients
            continue
        # E is against the lone baseline, whose step was the unshared one.
        s.predicted_efficiency = row["efficiency"] / stretch
        s.predicted_efficiency_low = row["efficiency_low"] / stretch
        s.predicted_efficiency_high = row["efficiency_high"] / least
        s.allreduce_s = row["allreduce_s"]
        s.busbw = network.busbw
        s.predicted_cpu_work_s = row.get("cpu_work_s", 0.0)
        s.predicted_background_s = row.get("background_s", 0.0)
        if s.exposed_comm_s is not None and s.compute_s is not None:
            # Hidden communication cannot outlast the computation that hides it.
            s.overlap_s = min(s.compute_s, max(0.0, s.allreduce_s - s.exposed_comm_s))


def _shared_cpu_stretch(
    job: plans.Job, s: ConfigSummary, base: ConfigSummary
) -> tuple[float, float]:
    """How much longer each of a CPU node's workers computed than the lone baseline, in
    proportion to its CPUs and at the least (bench/cpu_share.py), from the CPUs the
    nodes could use and the threads each ran; 1 on GPUs, at one worker a node, or where
    the runs did not record them."""
    q = s.node_cpus_least or base.node_cpus_least
    if job.cuda or s.gpus_per_node <= 1 or q is None:
        return 1.0, 1.0
    return cpu_share.stretches(q, s.gpus_per_node, s.threads or 0, base.threads or 0)


def job_of(run: dict[str, Any]) -> plans.Job:
    """What a run trained and how, as a forecast takes it (plans.Job): its configuration,
    its backend's grouping and compression, a transformer's parallelism, and the device
    and precision it ran with."""
    device = (run.get("fingerprint") or {}).get("device")
    # A model read from a config.json: its recorded shape, known by its name from here
    # on, so that the forecast finds it (plans.Job -> sharded_model.shape).
    transformer_configs.recorded(run.get("model"), run.get("model_shape"))

    def number(key: str) -> float | None:
        value = run.get(key)
        return float(value) if isinstance(value, int | float) and value > 0 else None

    return plans.Job(
        model=str(run.get("model")),
        batch=int(run["batch"]),
        backend=str(run.get("backend")),
        image_size=int(run.get("image_size") or 0),
        seq_len=seq_len_of(run) or 0,
        parallel=str(run.get("parallel") or "ddp"),
        shard_group=int(run.get("shard_group") or 0),
        bucket_cap_mb=number("bucket_cap_mb"),
        fusion_threshold_mb=number("fusion_threshold_mb"),
        fp16_allreduce=run.get("fp16_allreduce") is True,
        cuda=device == "cuda",
        amp="on" if run.get("amp") is True else "off",
        tp=_whole(run.get("tp")),
        grad_accum=_whole(run.get("grad_accum")),
        activation_checkpoint=str(run.get("activation_checkpoint") or "none"),
        # A run that asked for bf16 and trained in fp32: its GPU has none (training_precision).
        bf16_gpu=not (run.get("amp") is True and run.get("precision") in ("fp32", "tf32")),
    )


# A point prediction this close to a measured efficiency counts as a hit.
POINT_CLOSE = 0.05

# Thresholds of the likeliest-cause guess for a measurement off its prediction.
DATA_BOUND = 0.10  # a tenth of the step waiting for input
STRAGGLER_BOUND = 0.20  # the slowest rank 20% behind the median
CPU_BOUND = 0.90  # nodes at 90% of their CPU limit
LINK_BOUND = 0.70  # the busiest interface at 70% of the nominal rate


def inside_band(s: ConfigSummary) -> bool | None:
    """Whether the measured efficiency, its interval included, touches the predicted
    band (None where either is missing)."""
    if s.efficiency is None or s.predicted_efficiency_low is None:
        return None
    ci = s.efficiency_ci95 or 0.0
    high = s.predicted_efficiency_high or 1.0
    return s.efficiency + ci >= s.predicted_efficiency_low and s.efficiency - ci <= high


def off_prediction(s: ConfigSummary, nominal_bytes_per_s: float | None) -> str | None:
    """None where the measurement agrees with its prediction: inside the predicted band
    and within POINT_CLOSE of the point (its interval touching them). Else where it falls
    and the likeliest cause, from the run's own breakdown and node figures."""
    band = inside_band(s)
    efficiency, low = s.efficiency, s.predicted_efficiency_low
    if band is None or efficiency is None or low is None or s.workers == 1:
        return None
    ci = s.efficiency_ci95 or 0.0
    point = s.predicted_efficiency
    if not band:
        where = f"{'below' if efficiency < low else 'above'} the band"
    elif point is not None and abs(efficiency - point) - ci > POINT_CLOSE:
        side = "below" if efficiency < point else "above"
        where = f"{side} the point {point:.2f}"
    else:
        return None
    link = (s.net_bytes_per_s or 0.0) / nominal_bytes_per_s if nominal_bytes_per_s else None
    causes = []
    if (s.data_fraction or 0.0) > DATA_BOUND:
        causes.append(f"input pipeline ({s.data_fraction:.0%} of the step waits for data)")
    if (s.straggler_lead or 0.0) > STRAGGLER_BOUND:
        causes.append(f"straggler {s.straggler} ({s.straggler_lead:.0%} behind the median)")
    if (s.cpu_util or 0.0) > CPU_BOUND:
        # A saturated CPU beside an idle link: the CPU, not the link, sets the pace (how
        # much of it is the all-reduce's own work, the probe's CPU work says).
        idle = (
            f" while the link carries {link:.0%} of its rate"
            if (link is not None and link <= LINK_BOUND)
            else ""
        )
        causes.append(f"CPU (nodes at {s.cpu_util:.0%} of their limit{idle})")
    if link is not None and link > LINK_BOUND:
        causes.append(f"network (link at {link:.0%})")
    return f"{where}: " + ("; ".join(causes) if causes else "no cause stands out")


def _sort_key(key: tuple) -> tuple:
    """Numbers in numeric order, everything else by text (values may be None)."""
    return tuple((0, v, "") if isinstance(v, int | float) else (1, 0, str(v)) for v in key)


# The method fields a single worker does not use: it trains unwrapped (bench/train.py).
UNWRAPPED = ("parallel", "shard_group", "tp")


def shared_baseline_key(series: tuple) -> tuple:
    """A series less what its single-worker baseline does not depend on: the workers
    per node, and the parallelism, shard group and tensor parallelism in its method
    label (identity.method_label writes them as 'parallel=fsdp2', 'shard_group=2',
    'tp=2')."""
    values = dict(zip(SERIES_FIELDS, series, strict=True))
    values.pop("gpus_per_node")
    method = values.get("method")
    if isinstance(method, str):
        values["method"] = " ".join(
            t for t in method.split(" ") if t.split("=", 1)[0] not in UNWRAPPED
        )
    return tuple(values.values())


class LiveSummary:
    """Per-configuration summaries, updated one run at a time.

    The one place derived figures are computed: `report` builds it from the
    whole store, a running sweep seeds it once and adds each run as it lands,
    so a run costs the work of its own configuration and series, not a
    re-read of the store.
    """

    def __init__(
        self, runs: list[dict[str, Any]] | None = None, probes: list[dict[str, Any]] | None = None
    ) -> None:
        self._probes: list[dict[str, Any]] = list(probes or [])
        # series -> (nodes, workers) -> runs; series -> its configuration summaries
        self._runs: dict[tuple, dict[tuple[int, int], list[dict[str, Any]]]] = defaultdict(dict)
        self._summaries: dict[tuple, dict[tuple[int, int], ConfigSummary]] = defaultdict(dict)
        self._latest: dict[tuple, dict[str, Any]] = {}  # each series' latest run
        self._timeline: dict[tuple, list[list[float]]] = {}
        touched: set[tuple] = set()
        for run in runs or []:
            touched.add(self._file(run))
        for series in touched:
            self._rescale(series)

    def _file(self, run: dict[str, Any]) -> tuple:
        """Adds a run to its configuration and re-summarises that configuration only."""
        series = series_key(run)
        config = (run["nodes"], run["workers"])
        config_runs = self._runs[series].setdefault(config, [])
        config_runs.append(run)
        self._latest[series] = run
        if run.get("workers") == 1 and timeline_ok(run.get("grad_timeline")):
            self._timeline[series] = run["grad_timeline"]
        self._summaries[series][config] = _summarise_config(config_runs)
        return series

    def _siblings(self, series: tuple) -> list[tuple]:
        """Series that differ from this one only in workers per node, or in how a
        transformer is parallelised (shared_baseline_key)."""
        own = shared_baseline_key(series)
        return [o for o in self._summaries if o != series and shared_baseline_key(o) == own]

    def _baseline_of(self, series: tuple) -> tuple[tuple, ConfigSummary] | None:
        """The series' single-worker baseline, else a sibling's: one worker on one node is
        the same run whatever the node's other slots do, and it trains unwrapped whatever
        the parallelism, so a sweep of 2, 4 ... GPUs in one node (a campaign's
        `gpus_per_node: 1-10`) or under FSDP2 beside DDP (`parallel: [ddp, fsdp2]`) need
        not measure it again."""
        for key in (series, *self._siblings(series)):
            base = self._summaries[key].get((1, 1))
            if base is not None and base.throughput:
                return key, base
        return None

    def _rescale(self, series: tuple) -> None:
        ordered = sorted(self._summaries[series].values(), key=lambda s: (s.workers, s.nodes))
        found = self._baseline_of(series)
        own = found is not None and found[0] == series
        timeline = self._timeline.get(series) or (self._timeline.get(found[0]) if found else None)
        _add_scaling(
            ordered,
            self._latest[series],
            self._probes,
            timeline,
            None if own or found is None else found[1],
        )

    def add(self, run: dict[str, Any]) -> ConfigSummary:
        """The run's configuration summary after adding it (scaling filled once the
        series' baseline is known)."""
        series = self._file(run)
        self._rescale(series)
        if run["workers"] == 1:  # a baseline other series may lean on
            for sibling in self._siblings(series):
                self._rescale(sibling)
        return self._summaries[series][(run["nodes"], run["workers"])]

    def of(self, run: dict[str, Any]) -> ConfigSummary | None:
        """The summary of the configuration a run record (measured or planned) belongs to."""
        return self._summaries.get(series_key(run), {}).get((run["nodes"], run["workers"]))

    def add_probe(self, probe: dict[str, Any]) -> None:
        self._probes.append(probe)
        for series in self._summaries:
            self._rescale(series)

    def summaries(self) -> list[ConfigSummary]:
        """Every configuration, ordered by series then workers."""
        result: list[ConfigSummary] = []
        for series in sorted(self._summaries, key=_sort_key):
            result.extend(
                sorted(self._summaries[series].values(), key=lambda s: (s.workers, s.nodes))
            )
        return result


def summarise(
    runs: list[dict[str, Any]], probes: list[dict[str, Any]] | None = None
) -> list[ConfigSummary]:
    """One summary per configuration, ordered by series then workers."""
    return LiveSummary(runs, probes).summaries()


def convergence_lines(record: dict[str, Any]) -> list[str]:
    """From a sweep's convergence record (sweep.run): a line per configuration whose
    throughput interval did not meet --target-ci, and why its repeats stopped. An
    interval within the target from one run counts for nothing (sweep._stop_reason
    wants two runs: one run's windows are no repeat), and is said so."""
    target = record["target_ci"]
    lines = []
    for c in record["configs"]:
        if c["stopped"] == "target reached":
            continue
        rel = c.get("relative_ci")  # a record may lack it (the store's schema allows that)
        ci = "no interval" if rel is None else f"CI {rel:.1%}"
        why = {
            "budget": "--budget ran out",
            "max repeats": "--max-repeats reached",
            "node unreachable": "a node it needs was unreachable",
        }[c["stopped"]]
        short = rel is not None and rel <= target
        unmet = (
            f"within --target-ci {target:.1%} but from one run (the target needs two)"
            if short
            else f"wider than --target-ci {target:.1%}"
        )
        lines.append(f"{c['label']}: {ci} after {c['runs']} run(s), {unmet}: {why}")
    return lines
