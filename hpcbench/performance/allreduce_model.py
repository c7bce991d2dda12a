"""Predicted scaling efficiency from the ring all-reduce (alpha-beta) model.

    T_ar = 2(N-1) a + 2(N-1)/N * S / B

S: bytes all-reduced per step (the model's gradients), N: workers, B: measured
bus bandwidth (nccl-tests definition, busbw = algbw * 2(N-1)/N), a: per-message
latency. With single-worker step time T1 the step time at N workers lies
between max(T1, T_ar) (communication fully hidden behind backward) and
T1 + T_ar (no overlap), so E(N) = T1 / T_N lies in [T1/(T1+T_ar), T1/max(T1,T_ar)].
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard

# A line rate as a testbed takes it: a decimal number and one of tc's SI units of
# bits/s, lower case as tc(8) writes them (RATES: bit, kbit, mbit, gbit, tbit; iproute2
# ee2a4a86 man/man8/tc.8:518-540, read for tbf by get_rate64, lib/utils_math.c:17-102),
# so 1gbit is 10^9 bit/s. tc reads more (any case, strtod's "1e9", "+1" and " 1", IEC
# kibit, bytes as mbps, a bare number its man page once called bytes): nothing a person
# means by a link's rate, and the testbed records the text as given, which
# nominal_bytes_per_s reads back. Stated once here: Terraform's validations and the
# link_shaping role hold this very pattern (tests/unit/test_link_rate_grammar.py).
RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
_NUMBER = "[0-9]+(?:[.][0-9]+)?"  # [.]: no backslash to escape in HCL, YAML or Jinja
_UNIT = "|".join(RATE_UNITS)
TC_RATE = f"({_NUMBER})({_UNIT})"
_TC_RATE = re.compile(TC_RATE)
# A person may write capitals and spaces (" 10 Gbit "): what they mean is plain, so
# the tool reads it, and keeps it in tc's spelling (tc_rate) before it reaches a testbed.
_WRITTEN = re.compile(rf"\s*({_NUMBER})\s*({_UNIT})\s*", re.IGNORECASE | re.ASCII)


def is_tc_rate(text: str) -> bool:
    """Whether text is a line rate in tc's spelling ('10gbit', '2.5mbit'), the grammar
    every testbed takes."""
    return _TC_RATE.fullmatch(text) is not None


def _line_rate(text: str) -> tuple[float, str] | None:
    """A line rate's bits/s and tc's spelling of it ('10 Gbit' -> 1e10, '10gbit'); None
    for anything that is not a line rate."""
    match = _WRITTEN.fullmatch(text)
    if not match:
        return None
    unit = match[2].lower()
    return float(match[1]) * RATE_UNITS[unit], f"{match[1]}{unit}"


def line_rate_bits(text: str) -> float | None:
    """A line rate as a person writes it ('10gbit', '10 Gbit') -> bits/s; None for
    anything else."""
    rate = _line_rate(text)
    return rate[0] if rate else None


def tc_rate(text: str) -> str | None:
    """A line rate as a person writes it in tc's spelling ('10 Gbit' -> '10gbit'), which
    the testbeds take (is_tc_rate); None for anything else."""
    rate = _line_rate(text)
    return rate[1] if rate else None


def nominal_bytes_per_s(rate: str | None) -> float | None:
    """A recorded link rate, as tc writes it: '1gbit' -> 1.25e8 bytes/s; None for
    anything else ('', 'unshaped', '1 Gbit')."""
    parsed = _line_rate(rate) if rate is not None and is_tc_rate(rate) else None
    return parsed[0] / 8 if parsed else None


def ring_factor(workers: int) -> float:
    """Bus bandwidth over algorithm bandwidth for a ring all-reduce: 2(N-1)/N."""
    return 2 * (workers - 1) / workers


def busbw(size_bytes: float, seconds: float, workers: int) -> float:
    """nccl-tests' bus bandwidth in bytes/s: algbw * 2(N-1)/N with algbw = S/t."""
    return size_bytes / seconds * ring_factor(workers)


@dataclass(frozen=True)
class LinkModel:
    """Alpha-beta parameters measured by the all-reduce probe on some workers."""

    workers: int
    latency_s: float  # a: per-message latency
    busbw: float  # B: bytes/s, at the largest probed size

    def allreduce_time(self, size_bytes: float) -> float:
        n = self.workers
        if n <= 1:
            return 0.0
        return 2 * (n - 1) * self.latency_s + ring_factor(n) * size_bytes / self.busbw


class Link(Protocol):
    """What the replay needs of a network: how many workers, and one all-reduce's time."""

    @property
    def workers(self) -> int: ...

    def allreduce_time(self, size_bytes: float) -> float: ...


@dataclass(frozen=True)
class TwoLevelLink:
    """Workers on nodes: one node's workers share its NIC and reach each other over an
    intra-node link (PCIe or NVLink); each level has its own alpha (latency_s) and beta
    (1/busbw).

    Ring (every backend): one ring through all N workers, node by node. Each of its
    2(N-1) steps waits for the slowest hop, an inter-node one once the ring spans nodes,
    and every NIC carries one ring edge each way, 2(N-1)/N x S bytes, so

        T_ring = 2(N-1) a_hop + 2(N-1)/N x S / min(B_net, B_intra).

    Tree (NCCL >= 2.4, tree=True): a chain inside each node and a double binary tree
    across nodes; its depth, not N, sets the latency, and each NIC sends about 2 S
    (half the data up and down each of two trees), so

        T_tree = 2(g-1) a_intra + 2 ceil(log2 nodes) a_net + 2 S / B_net,

    and NCCL takes the faster of the two for each message (the tree wins on small
    messages, the ring on large ones)."""

    workers: int
    nodes: int
    latency_s: float  # a_net: per step across nodes
    busbw: float  # B_net: bytes/s one NIC achieves
    intra_latency_s: float  # a_intra: per step inside a node
    intra_busbw: float  # B_intra: bytes/s between two workers of one node
    tree: bool = False

    def ring_time(self, size_bytes: float) -> float:
        n = self.workers
        if n <= 1:
            return 0.0
        if self.nodes <= 1:
            return 2 * (n - 1) * self.intra_latency_s + ring_factor(n) * size_bytes / (
                self.intra_busbw
            )
        bw = min(self.busbw, self.intra_busbw)
        return 2 * (n - 1) * self.latency_s + ring_factor(n) * size_bytes / bw

    def tree_time(self, size_bytes: float) -> float:
        per_node = math.ceil(self.workers / max(1, self.nodes))
        depth = math.ceil(math.log2(self.nodes)) if self.nodes > 1 else 0
        bw = self.busbw if self.nodes > 1 else self.intra_busbw
        latency = 2 * (per_node - 1) * self.intra_latency_s + 2 * depth * self.latency_s
        return latency + 2 * size_bytes / bw

    def allreduce_time(self, size_bytes: float) -> float:
        if self.workers <= 1:
            return 0.0
        ring = self.ring_time(size_bytes)
        return min(ring, self.tree_time(size_bytes)) if self.tree else ring


def link_model(probe: dict[str, Any]) -> LinkModel | None:
    """Fit a and B to every size of a probe's sweep by least squares.

    t = 2(N-1) a + 2(N-1)/N S/B is linear in a and 1/B (see _fit_nonnegative).
    """
    points = [p for p in probe.get("results") or [] if p["time_s"] > 0]
    workers = int(probe.get("workers") or 0)
    if workers < 2 or not points:
        return None
    c, r = 2 * (workers - 1), ring_factor(workers)
    latency, inv_bw = _fit_nonnegative([(c, r * p["bytes"], p["time_s"]) for p in points])
    return LinkModel(workers=workers, latency_s=latency, busbw=1 / inv_bw)


def collective_model(probe: dict[str, Any], name: str) -> LinkModel | None:
    """a and B of one collective from the probe's records of it, fitted as link_model
    fits the all-reduce. all_gather and reduce_scatter (bench/allreduce.py: bytes = the
    whole gathered or scattered tensor, busbw = algbw (N-1)/N): t = (N-1) a + (N-1)/N S/B.
    Whatever the backend ran for it is in the times (Gloo's reduce-scatter is an
    all-reduce, whose B comes out about half the all-gather's). None where the probe
    has no record of it."""
    if name == "all_reduce":
        return link_model(probe)
    records = probe.get(name)
    workers = int(probe.get("workers") or 0)
    if not isinstance(records, list) or workers < 2:
        return None
    points = [
        (float(workers - 1), (workers - 1) / workers * float(r["bytes"]), float(r["time_s"]))
        for r in records
        if isinstance(r, dict)
        and isinstance(r.get("bytes"), int | float)
        and isinstance(r.get("time_s"), int | float)
        and r["time_s"] > 0
        and r["bytes"] > 0
    ]
    if not points:
        return None
    latency, inv_bw = _fit_nonnegative(points)
    return LinkModel(workers=workers, latency_s=latency, busbw=1 / inv_bw)


def _fit_nonnegative(points: list[tuple[float, float, float]]) -> tuple[float, float]:
    """(a, b) of t = a u + b v over points (u, v, t), by least squares on relative
    errors (weights 1/t: the sweep's times span orders of magnitude, and plain least
    squares would let the largest message decide alone). A negative a is clamped to 0
    and b refitted alone; b comes out positive."""
    rows = [(u / t, v / t) for u, v, t in points]  # each row ~ 1 at the fit
    if len(rows) >= 2:
        saa = sum(x * x for x, _ in rows)
        sab = sum(x * y for x, y in rows)
        sbb = sum(y * y for _, y in rows)
        sa1, sb1 = sum(x for x, _ in rows), sum(y for _, y in rows)
        det = saa * sbb - sab * sab
        if det > 0:
            a = (sa1 * sbb - sb1 * sab) / det
            b = (saa * sb1 - sab * sa1) / det
            if a >= 0 and b > 0:
                return a, b
    return 0.0, sum(y for _, y in rows) / sum(y * y for _, y in rows)


# The CFS period a quota is counted over where a probe does not say (probes before
# cpu_period_s): the kernel's default, 100 ms (Documentation/scheduler/sched-bwc.rst,
# "The default values are: cpu.cfs_period_us=100ms"), which Docker's --cpus keeps.
CFS_PERIOD_S = 0.1
# A node whose all-reduces took this share of its quota or more burnt all of it.
QUOTA_FILLED = 0.9


def throttled_s(probe: dict[str, Any]) -> float:
    """How long in each CFS period the probe's nodes stood still while they all-reduced,
    in s: a node of less than a core whose all-reduce of the largest size took its whole
    quota wants that core (a backend that polls: Horovod's background thread, 0.50 CPU
    s a second on the local half-core nodes, where Gloo's wait took 0.01-0.05) and the
    kernel stops it for the rest of each period (sched-bwc.rst: "throttled and not
    allowed to run again until the next period"); 0 where it was not short of a core."""
    cpus, results = probe.get("cpus"), _items(probe.get("results"))
    largest = results[-1] if results and isinstance(results[-1], dict) else {}
    used, wall = largest.get("cpu_s"), largest.get("time_s")
    if not (_finite(cpus) and _finite(used) and _finite(wall)) or not 0 < cpus < 1 or wall <= 0:
        return 0.0
    if used / wall < QUOTA_FILLED * cpus:
        return 0.0
    return (1 - cpus) * cfs_period_s(probe)


def cfs_period_s(probe: dict[str, Any]) -> float:
    """The CFS period of the probe's nodes' quota (CFS_PERIOD_S where it is not said)."""
    period = probe.get("cpu_period_s")
    return float(period) if _finite(period) and period > 0 else CFS_PERIOD_S


def throttled_share(probe: dict[str, Any], share: float, rate: float, to_rate: float) -> float:
    """The share of the line rate `to_rate` (bytes/s) the probe's nodes reach where they
    reached `share` of `rate`, both with the nodes stopped throttled_s() of each period
    P. While a node stands still the link drains what its sockets hold, D bytes, then
    idles: the share is 1 - max(0, t - D/R)/P. The probe's share gives D; on half-core
    Horovod nodes 0.66 of 200 Mbit/s gives 0.53 of 1 Gbit/s, where the 1 Gbit/s nodes'
    own probe measured 0.40-0.54 (the fit and the largest size) and a share carried
    unchanged said 0.66. `share` itself where the nodes were not throttled, or where
    the probe lost more than the stops explain (then no buffer is seen, and the share
    is taken as the link's)."""
    stopped, period = throttled_s(probe), cfs_period_s(probe)
    idle = (1 - share) * period
    if stopped <= 0 or rate <= 0 or to_rate <= 0 or not 0 < idle < stopped:
        return share
    drained = (stopped - idle) * rate  # D: what the link sent while the node stood still
    return 1 - max(0.0, stopped - drained / to_rate) / period


def efficiency_band(step_time_1: float, allreduce_s: float) -> tuple[float, float]:
    """(low, high) predicted efficiency: no overlap, full overlap."""
    if step_time_1 <= 0:
        raise ValueError("single-worker step time must be positive")
    low = step_time_1 / (step_time_1 + allreduce_s)
    high = step_time_1 / max(step_time_1, allreduce_s)
    return low, high


def predict(step_time_1: float, grad_bytes: float, model: LinkModel) -> dict[str, float]:
    t_ar = model.allreduce_time(grad_bytes)
    low, high = efficiency_band(step_time_1, t_ar)
    return {
        "allreduce_s": t_ar,
        "efficiency_low": low,
        "efficiency_high": high,
        "busbw": model.busbw,
        "latency_s": model.latency_s,
    }


# ------------------------------------------------------------------ point prediction
# The band above says where the step time must lie; the replay below says where
# it lies for one model: gradients become ready one layer at a time during
# backward, the framework groups them into messages, and the messages queue on
# the link one after another while backward goes on.

# DDP's defaults: 25 MiB buckets (bucket_cap_mb in torch/nn/parallel/distributed.py)
# and a first bucket of 1 MiB (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES), so
# that communication starts early.
DDP_BUCKET_BYTES = 25 * 1024**2
DDP_FIRST_BUCKET_BYTES = 1024**2
# Horovod >= 0.21 defaults (release notes of v0.21.0, horovod#2468): every 1 ms
# cycle the tensors ready by then are fused into messages of up to 128 MB.
HOROVOD_FUSION_BYTES = 128 * 1024**2
HOROVOD_CYCLE_S = 1e-3
# Horovod's fusion threshold and cycle by release, newest first: (releases, bytes,
# seconds). Before v0.21.0 every release fuses up to 64 MiB every 5 ms
# (horovod/common/operations.cc at v0.15.2, 42c0977: 'int64_t tensor_fusion_threshold =
# 64 * 1024 * 1024;' and 'double cycle_time_ms = 5;'); v0.21.0 raised both defaults
# (horovod#2468, above). DDP's bucket_cap_mb has one default, 25 MiB, in every release
# the published rows ran (torch/nn/parallel/distributed.py), so it has no table.
HOROVOD_RELEASES = (
    ("Horovod 0.21 and later", HOROVOD_FUSION_BYTES, HOROVOD_CYCLE_S),
    ("Horovod before 0.21", 64 * 1024**2, 5e-3),
)
# A background taking more of the computation's cores than this leaves it no time
# worth predicting from; the share is capped here rather than dividing by ~0.
MAX_BACKGROUND_SHARE = 0.9
# How a single-worker step divides: backward costs about twice the forward
# pass's FLOPs (one product for the inputs' gradient, one for the weights').
BACKWARD_SHARE = 2 / 3


@dataclass(frozen=True)
class Message:
    """One all-reduce: its bytes and when, after backward starts, it can begin."""

    bytes: float
    ready_s: float


def gradient_timeline(layers: list[tuple[float, float]], backward_s: float) -> list[Message]:
    """Gradients in the order backward produces them.

    layers: (gradient bytes, forward FLOPs) in forward order; backward runs
    them in reverse, each taking its share of backward_s by FLOPs, and a
    layer's gradient is ready when its backward is done.
    """
    total = sum(flops for _, flops in layers) or 1.0
    out, clock = [], 0.0
    for grad_bytes, flops in reversed(layers):
        clock += backward_s * flops / total
        if grad_bytes > 0:
            out.append(Message(grad_bytes, clock))
    return out


def ddp_buckets(
    grads: list[Message], cap: float = DDP_BUCKET_BYTES, first_cap: float = DDP_FIRST_BUCKET_BYTES
) -> list[Message]:
    """DDP: consecutive gradients (in backward order) fill buckets up to the cap;
    a bucket is all-reduced once its last gradient is ready."""
    out: list[Message] = []
    size, ready, limit = 0.0, 0.0, first_cap
    for g in grads:
        size, ready = size + g.bytes, g.ready_s
        if size >= limit:
            out.append(Message(size, ready))
            size, limit = 0.0, cap
    if size:
        out.append(Message(size, ready))
    return out


def replay(messages: list[Message], link: Link, fusion: Grouping | None = None) -> float:
    """When the last all-reduce ends (after backward starts): the messages queue on one
    link, in order.

    fusion (Horovod): messages are the gradients themselves, fused as the queue runs:
    each cycle after the link is free takes every gradient ready by then, up to the
    fusion threshold, as one all-reduce; while one all-reduce runs, the gradients that
    become ready wait and travel together in the next (Horovod's background loop starts
    its next cycle at once when the last took longer than a cycle). Without fusion the
    messages are already grouped (DDP's buckets are fixed when the model is wrapped)."""
    return _sent(messages, link.allreduce_time, fusion)[1]


def _sent(
    messages: list[Message],
    cost: Callable[[float], float],
    fusion: Grouping | None,
    stretch: float = 1.0,
    until: float = 0.0,
) -> tuple[list[Message], float, float]:
    """The all-reduces as they go on the link (bytes, start), when the last ends, and
    how long one is in flight before `until` (backward's end); cost: seconds on the
    link for so many bytes; before `until` an all-reduce goes `stretch` times slower
    (_overlapped)."""
    queue = sorted(messages, key=lambda m: m.ready_s) if fusion else messages
    sent: list[Message] = []
    free, inflight, i = 0.0, 0.0, 0
    while i < len(queue):
        start = max(free, queue[i].ready_s)
        size = queue[i].bytes
        i += 1
        if fusion is not None:
            cycle = fusion.cycle
            if cycle > 0 and start > free:  # an idle loop wakes on its next cycle
                start = (math.floor(start / cycle) + 1) * cycle
            while (
                i < len(queue)
                and queue[i].ready_s <= start
                and (size + queue[i].bytes <= fusion.threshold)
            ):
                size += queue[i].bytes
                i += 1
        sent.append(Message(size, start))
        free = start + _overlapped(cost(size), start, stretch, until)
        inflight += max(0.0, min(free, until) - start)
    return sent, free, inflight


def _overlapped(cost: float, start: float, stretch: float, until: float) -> float:
    """How long an all-reduce of `cost` seconds alone takes from `start` when it goes
    `stretch` times slower until `until` (while backward computes beside it) and at its
    own speed after."""
    if stretch <= 1.0 or start >= until:
        return cost
    slow = until - start  # seconds of it beside backward
    return stretch * cost if stretch * cost <= slow else slow + cost - slow / stretch


@dataclass(frozen=True)
class Point:
    """Predicted step at some workers: the point, the band, and where time goes."""

    workers: int
    step_s: float
    efficiency: float
    efficiency_low: float
    efficiency_high: float
    allreduce_s: float  # the whole gradient as one message
    exposed_s: float  # communication left after backward ends
    # What communication overlapped with backward costs backward (interference x the
    # link's busy time before backward ends).
    slowdown_s: float = 0.0
    # CPU nodes: the all-reduces' own work (the probe's lost compute per byte x the
    # step's bytes), which comes out of the node's CPU quota like backward.
    cpu_work_s: float = 0.0
    # CPU nodes: what the backend's background work (the share of the computation's
    # cores its threads take between all-reduces) adds to the step's computation.
    background_s: float = 0.0


@dataclass(frozen=True)
class Grouping:
    """How a backend turns gradients into all-reduces: DDP's buckets (bucket_cap_mb) or
    Horovod's fusion (HOROVOD_FUSION_THRESHOLD, 0 sends each tensor alone, every
    HOROVOD_CYCLE_TIME), at the framework's defaults where a size or cycle is None."""

    backend: str
    message_bytes: float | None = None
    cycle_s: float | None = None

    @property
    def threshold(self) -> float:
        """Horovod's fusion threshold in bytes (0: every tensor alone)."""
        return HOROVOD_FUSION_BYTES if self.message_bytes is None else self.message_bytes

    @property
    def cycle(self) -> float:
        """Horovod's cycle in seconds."""
        return HOROVOD_CYCLE_S if self.cycle_s is None else self.cycle_s

    def describe(self) -> str:
        mib = 1024**2
        if self.backend == "ddp":
            cap = DDP_BUCKET_BYTES if self.message_bytes is None else self.message_bytes
            return f"DDP buckets of {cap / mib:g} MiB"
        what = (
            "each tensor alone"
            if not self.threshold
            else (f"fused up to {self.threshold / mib:g} MiB")
        )
        return f"Horovod, {what} every {self.cycle * 1e3:g} ms"

    def __call__(self, grads: list[Message]) -> list[Message]:
        if self.backend == "ddp":
            cap = DDP_BUCKET_BYTES if self.message_bytes is None else self.message_bytes
            return ddp_buckets(grads, cap=cap, first_cap=min(cap, DDP_FIRST_BUCKET_BYTES))
        # Fused per cycle as if the link took no time: what replay() sends when the
        # link is never busy.
        return _sent(grads, lambda _: 0.0, self)[0]


@dataclass(frozen=True)
class CpuWork:
    """What the probe measured of the backend's CPU work on CPU nodes (cpu_work()); the
    defaults: none measured (GPUs)."""

    # Compute lost per byte all-reduced, against the computation without the backend's
    # threads (cpu_work_seen). The step cannot be shorter than all of its CPU work, T1
    # plus that of every byte all-reduced, whatever the link allows: where that floor is
    # the longer, the all-reduce is bound by the CPU and the link waits.
    s_per_byte: float = 0.0
    # The share of the computation's cores the backend's own threads take between
    # all-reduces: the computation stretches by 1 / (1 - share) while none is in flight.
    background_share: float = 0.0
    # How many times longer an all-reduce takes beside the computation than alone; it
    # goes that much slower until backward ends, and at its own speed after.
    overlap_stretch: float = 1.0


def _replayed(
    step_time_1: float,
    grads: list[Message],
    backward_end: float,
    link: Link,
    backend: str | Grouping,
    interference: float = 0.0,
    cpu: CpuWork = CpuWork(),
) -> Point:
    """One step at link.workers workers: the gradients' all-reduces (DDP buckets or
    Horovod's fused messages) queue on the link; what runs past backward_end is exposed.
    interference: the share of the link's busy time during backward that backward loses
    (NCCL kernels take GPU cycles and memory bandwidth, TCP copies take CPU), added to
    the step to first order.
    cpu: what the probe measured of the backend's CPU work on CPU nodes (CpuWork has
    each figure's meaning)."""
    group = backend if isinstance(backend, Grouping) else Grouping(backend)
    sent: list[Message] = []
    comm_end = inflight = 0.0
    if link.workers > 1:
        fusion = group if group.backend == "horovod" else None
        sent, comm_end, inflight = _sent(
            grads if fusion else group(grads),
            link.allreduce_time,
            fusion,
            cpu.overlap_stretch,
            backward_end,
        )
    exposed = max(0.0, comm_end - backward_end)
    costs = [(m.ready_s, link.allreduce_time(m.bytes)) for m in sent]
    hidden = sum(max(0.0, min(start + cost, backward_end) - start) for start, cost in costs)
    slowdown = interference * hidden
    total_bytes = sum(g.bytes for g in grads)
    cpu_work = max(0.0, cpu.s_per_byte) * total_bytes if link.workers > 1 else 0.0
    share = min(max(0.0, cpu.background_share), MAX_BACKGROUND_SHARE) if link.workers > 1 else 0.0
    # While an all-reduce is in flight the backend's threads run it, not their cycle
    # between all-reduces: the probe's figures per byte beside all-reduces come out
    # the same at 200 Mbit/s and 1 Gbit/s only so (docs/method.md, "CPU nodes").
    compute = step_time_1 + share / (1.0 - share) * max(0.0, step_time_1 - inflight)
    step = max(compute + exposed + slowdown, compute + cpu_work)
    t_ar = link.allreduce_time(total_bytes)
    # The band from the messages as sent (each pays its own latency), around the
    # computation as the backend's CPU work stretches it: none of them overlapped (and
    # no shorter than the replay), or all of them hidden behind the step. One message of
    # every gradient when nothing is sent (one worker).
    busy = sum(cost for _, cost in costs) if costs else t_ar
    own = compute + cpu_work
    low = step_time_1 / max(step, own + busy)
    high = step_time_1 / max(own, busy)
    return Point(
        link.workers,
        step,
        step_time_1 / step,
        low,
        high,
        t_ar,
        exposed,
        slowdown,
        cpu_work,
        compute - step_time_1,
    )


def predict_point(
    step_time_1: float,
    layers: list[tuple[float, float]],
    link: Link,
    backend: str | Grouping,
    interference: float = 0.0,
    cpu: CpuWork = CpuWork(),
) -> Point:
    """Replays one step against a timeline made from the model's layers (backward takes
    BACKWARD_SHARE of the step, shared among layers by their FLOPs); backend: a name
    (its defaults) or a Grouping with the run's own bucket or fusion settings; cpu: what
    a probe on CPU nodes measured of the backend's own work (none on GPUs)."""
    backward_s = step_time_1 * BACKWARD_SHARE
    grads = gradient_timeline(layers, backward_s)
    return _replayed(step_time_1, grads, backward_s, link, backend, interference, cpu)


def cpu_work(probe: dict[str, Any]) -> CpuWork:
    """The probe's three CPU-work figures (defaults where it measured none)."""
    return CpuWork(cpu_work_per_byte(probe), background_share(probe), overlap_stretch(probe))


def predict_measured(
    step_time_1: float,
    timeline: list[tuple[float, float]],
    link: Link,
    backend: str | Grouping,
    allreduce_bytes: float | None = None,
    cpu: CpuWork = CpuWork(),
    interference: float = 0.0,
) -> Point:
    """The point prediction from a measured single-worker step: timeline holds (seconds
    after the step started, bytes) per gradient as backward made them (bench/train.py);
    communication past the last gradient is exposed. allreduce_bytes rescales the
    gradients to what travels (fp16 compression halves it); backend, interference and
    cpu as predict_point takes them."""
    total = sum(b for _, b in timeline) or 1.0
    scale = (allreduce_bytes or total) / total
    grads = [Message(b * scale, t) for t, b in sorted(timeline)]
    last = max((g.ready_s for g in grads), default=0.0)
    return _replayed(step_time_1, grads, last, link, backend, interference, cpu)


def cpu_work_per_byte(probe: dict[str, Any]) -> float:
    """The compute an all-reduce costs per byte on the probe's nodes (cpu_work_seen's
    figure, at least 0; 0 where none was measured: GPUs, or a probe from before)."""
    seen = cpu_work_seen(probe)
    return 0.0 if seen is None else max(0.0, seen.s_per_byte)


def background_share(probe: dict[str, Any]) -> float:
    """The share of the computation's cores the running backend's threads take between
    all-reduces on the probe's nodes (bench/allreduce.py: their CPU time while the
    computation runs alone; 0 where it was not measured: GPUs, older probes, or a
    first version's noise below 0). _replayed caps it."""
    return _cpu_work_figure(probe, "background_share")


def overlap_stretch(probe: dict[str, Any]) -> float:
    """How many times longer the probe's all-reduces of the largest size took beside the
    computation than alone (bench/allreduce.py's middle phase: its wall time against
    their number times the size sweep's time for that size), the ranks' mean; 1 where
    it was not measured (GPUs, older probes) or came out below 1. On nodes of half a
    core (CFS quota) the backend's threads wait for the quota the computation takes:
    1.95 at 1 Gbit/s (docs/method.md, "CPU nodes")."""
    work = probe.get("cpu_work") or {}
    count, size = work.get("allreduces"), work.get("bytes")
    alone = [r.get("time_s") for r in probe.get("results") or [] if r.get("bytes") == size]
    if not count or not alone or not isinstance(alone[0], int | float) or alone[0] <= 0:
        return 1.0
    walls = [
        r["wall_s"] for r in work.get("per_rank") or [] if isinstance(r.get("wall_s"), int | float)
    ]
    if not walls:
        return 1.0
    return max(1.0, sum(walls) / len(walls) / (count * alone[0]))


def _cpu_work_figure(probe: dict[str, Any], key: str) -> float:
    """One figure of the probe's CPU-work record, 0 where it is missing or below 0."""
    value = (probe.get("cpu_work") or {}).get(key)
    return max(0.0, float(value)) if isinstance(value, int | float) else 0.0


# How many times its noise a CPU-work figure must stand above 0 to count as seen, and
# what it adds to the figure for the largest value the record allows.
CPU_WORK_NOISES = 2.0


@dataclass(frozen=True)
class CpuWorkSeen:
    """A probe's CPU work per byte as it measured it (the ranks' mean, below 0 where
    noise put it there) and that figure's noise in s/byte (None: the record cannot
    tell, it has no per-rank figures)."""

    s_per_byte: float
    noise: float | None

    @property
    def resolved(self) -> bool:
        """Whether the figure stands clear of its noise. Behind a slow link it does not:
        the noise is a share of the middle phase's wall time, per byte."""
        return self.noise is not None and self.s_per_byte > CPU_WORK_NOISES * self.noise

    @property
    def largest(self) -> float | None:
        """The largest CPU work per byte the record allows (at least 0); None: no noise
        known, so no bound."""
        if self.noise is None:
            return None
        largest = max(0.0, self.s_per_byte + CPU_WORK_NOISES * self.noise)
        return largest if math.isfinite(largest) else None


def cpu_work_seen(probe: dict[str, Any]) -> CpuWorkSeen | None:
    """The probe's CPU work per byte with its noise, from every rank's figures
    (bench/allreduce.py measure_cpu_work); None where it measured none (GPUs, older
    probes).

    A rank's figure is against the computation without the backend's threads: its alone
    phases ran beside them (the background share b of its cores), while beside an
    all-reduce the threads run the all-reduce instead. Lost l (against the alone speed)
    over the middle phase's wall W is then l (1 - b) + b W of the computation's own
    time; on one-core nodes at 200 Mbit/s the record's l came to -6.6 ns a byte with
    b = 0.17, and this to 1.5-1.7, as at 1 Gbit/s (+0.1 and 1.4-1.8) and as Gloo's
    DDP probes (b = 0: 1.1-1.8). The figure is the ranks' weighted by their own noise
    (_weighted); its noise the larger of two the record holds: how far the ranks'
    figures scatter (half their range), and how far a rank's figure would move had its
    slower alone phase been taken for the computation's speed (the ranks' mean): the
    host's own noise over the bytes all-reduced, which grows with the time each byte
    takes on the link."""
    work = probe.get("cpu_work")
    work = work if isinstance(work, dict) else {}
    value = work.get("lost_s_per_byte")
    if not _finite(value):
        return None
    count, size = work.get("allreduces"), work.get("bytes")
    ranks = [r for r in _items(work.get("per_rank")) if isinstance(r, dict)]
    if not (_finite(count) and _finite(size)) or count * size <= 0:
        return CpuWorkSeen(float(value), None)
    total = float(count * size)
    figures: list[float] = []
    speed: list[float | None] = []  # each figure's own noise (None: not known)
    for r in ranks:
        if not _finite(r.get("lost_s")):
            continue
        b = r.get("background")
        b = min(max(0.0, b), MAX_BACKGROUND_SHARE) if _finite(b) else 0.0
        wall = float(r["wall_s"]) if _finite(r.get("wall_s")) else 0.0
        figures.append((r["lost_s"] * (1 - b) + b * wall) / total)
        alone = [x for x in _items(r.get("alone_per_s")) if _finite(x) and x > 0]
        own = None
        if len(alone) > 1 and _finite(r.get("pieces")):
            own = abs(r["pieces"]) * (1 / min(alone) - 1 / max(alone)) * (1 - b) / total
        speed.append(own if own is None or math.isfinite(own) else None)
    noises = [(max(figures) - min(figures)) / 2] if len(figures) > 1 else []
    known = [n for n in speed if n is not None]
    if known:
        noises.append(sum(known) / len(known))
    finite = [n for n in noises if math.isfinite(n)]
    return CpuWorkSeen(_weighted(figures, speed, float(value)), max(finite) if finite else None)


def _weighted(figures: list[float], noises: list[float | None], otherwise: float) -> float:
    """The ranks' figures averaged by their own noise (inverse variance), where every
    one is known and above 0; else their plain mean (otherwise: no figure). Under a
    load beside the nodes one rank's alone phases differed by 60% and gave 16.4 ns a
    byte where the other's, within 1%, gave 1.5: the plain mean took 8.9."""
    if not figures:
        return otherwise
    if len(noises) == len(figures) and all(n is not None and n > 0 for n in noises):
        weights = [1 / (n or 1.0) ** 2 for n in noises]
        return sum(w * f for w, f in zip(weights, figures, strict=True)) / sum(weights)
    return sum(figures) / len(figures)


def _finite(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _items(value: object) -> list[Any]:
    return value if isinstance(value, list) else []
