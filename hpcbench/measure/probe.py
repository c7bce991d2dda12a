"""`hpcbench probe`: all-reduce bus bandwidth over a size sweep on the sweep's nodes.

The records go to the same results store as the sweep; the analysis fits the
ring all-reduce model's latency and bandwidth from them to predict efficiency.

Each probe has a time budget (--probe-budget): bench/allreduce.py starts no
message size once it is spent and keeps the sizes it completed, and the
harness kills it 120 s after the budget, as a run is killed at
--timeout. In a sweep the default is a share of the sweep's own limit.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hpcbench.launchers import RunSpec
from hpcbench.launchers.specs import ProbeSpec, TargetSpec
from hpcbench.measure import fingerprint
from hpcbench.measure.store import Store
from hpcbench.performance import allreduce_model
from hpcbench.schedulers.base import stop_on_signals
from hpcbench.testbeds.target import Target

# A CPU-work figure within twice its noise (allreduce_model.cpu_work_seen).
_HIDDEN = (
    "; not told from its noise (a slow link hides it): no forecast of another testbed takes it"
)

# Beyond its budget, what a probe may still take before it is killed: the launch before
# its clock starts, the size under way, the CPU-work phase (bench/allreduce.py, about
# 3 x its 3 s, slower beside a busy backend) and the result.
GRACE_S = 120
# A sweep's probes together get this share of the sweep's limit, each at least
# BUDGET_FLOOR_S (enough for the small and middle sizes on slow nodes) and at most
# --timeout (what any run of the sweep may take).
BUDGET_SHARE = 0.10
BUDGET_FLOOR_S = 120
SWEEP_DEFAULT_HELP = (
    f"{BUDGET_SHARE:.0%} of --budget (else of the planned runs x --timeout) shared by the "
    f"node counts probed, at least {BUDGET_FLOOR_S} s each and at most --timeout"
)


def default_budget_s(sweep_budget_s: int | None, runs: int, timeout_s: int, probes: int) -> int:
    """Each probe's budget in a sweep with no --probe-budget: SWEEP_DEFAULT_HELP. The
    sweep's limit is --budget, else the longest its planned runs may take."""
    limit = sweep_budget_s if sweep_budget_s is not None else runs * timeout_s
    share = BUDGET_SHARE * limit / max(1, probes)
    return min(timeout_s, max(BUDGET_FLOOR_S, round(share)))


def budget_line(record: dict) -> str | None:
    """The one line that says a probe's budget stopped it (None: it was not)."""
    if record.get("status") != "ok" or not record.get("stopped_early"):
        return None
    return (
        f"probe on {record['workers']} workers stopped at {record['results'][-1]['bytes']} B "
        f"within its budget of {record.get('budget_s')} s (--probe-budget); the prediction "
        "uses the sizes it measured"
    )


def probe_spec(target: Target, nodes: int, probe: ProbeSpec) -> RunSpec:
    """The probe of all workers of `nodes` nodes as a run (what --dry-run prints)."""
    workers = target.workers(nodes)
    budget = probe.budget_s if probe.budget_s is not None else probe.timeout_s
    script_args = [
        "--backend",
        target.backend,
        "--device",
        probe.device,
        "--threads",
        str(probe.threads),
        "--max-bytes",
        probe.max_bytes,
        "--budget-s",
        str(budget),
        "--collectives",
        ",".join(probe.collectives),
    ]
    return target.spec("allreduce.py", script_args, nodes, workers, budget + GRACE_S)


def run_probe(target: Target, nodes: int, probe: ProbeSpec) -> dict:
    """Probe all workers of `nodes` nodes; returns the record to store (ok or failed).
    It is killed GRACE_S after its budget (probe.budget_s, else --timeout)."""
    workers = target.workers(nodes)
    budget = probe.budget_s if probe.budget_s is not None else probe.timeout_s
    outcome = target.run(probe_spec(target, nodes, probe), timeout_s=budget + GRACE_S)
    tb = target.testbed
    record: dict[str, Any] = {
        "kind": "probe",
        "env": tb.env,
        "nodes": nodes,
        "workers": workers,
        "backend": target.backend,
        "launched_at": outcome.launched_at,
        "duration_s": outcome.duration_s,
        "status": "ok" if outcome.ok else "failed",
        "budget_s": budget,
        "fingerprint": fingerprint.controller(tb.env, tb.link_rate, tb.iface, target.launcher.name),
    }
    if outcome.ok:
        result = outcome.records[-1]
        record["results"] = result["results"]
        record["device"] = result["device"]
        record["cpus"] = result.get("cpus")  # the nodes' CPU quota (bench/allreduce.py)
        record["cpu_period_s"] = result.get("cpu_period_s")  # and its CFS period
        # CPU nodes: the all-reduce's work told from its waiting (None on GPUs).
        record["cpu_work"] = result.get("cpu_work")
        # True: the budget ran out before --probe-max-bytes; results hold what completed.
        record["stopped_early"] = bool(result.get("stopped_early"))
        # FSDP's collectives where asked (the same sizes, while the budget lasts), and what
        # the backend ran for each (Gloo carries out a reduce-scatter as an all-reduce).
        for name in ("all_gather", "reduce_scatter"):
            if name in result:
                record[name] = result[name]
        record["collectives"] = result.get("collectives")
        record["fingerprint"] = {**result["fingerprint"], **record["fingerprint"]}
    else:
        record["error"] = outcome.error()
    return record


def format_probe(record: dict) -> str:
    head = (
        f"all-reduce on {record['workers']} workers ({record['nodes']} nodes), {record['backend']}"
    )
    if record["status"] != "ok":
        return f"{head}: FAILED\n{record.get('error', '')}"
    lines = [
        head,
        f"{'bytes':>12} {'time us':>11} {'algbw GB/s':>11} {'busbw GB/s':>11} {'CPU us':>11}",
    ]
    for r in record["results"]:
        cpu = f"{r['cpu_s'] * 1e6:>11.1f}" if "cpu_s" in r else f"{'-':>11}"
        lines.append(
            f"{r['bytes']:>12} {r['time_s'] * 1e6:>11.1f} "
            f"{r['algbw'] / 1e9:>11.3f} {r['busbw'] / 1e9:>11.3f} {cpu}"
        )
    work = record.get("cpu_work")
    if work:
        seen = allreduce_model.cpu_work_seen(record)
        known = seen is not None and seen.noise is not None  # older probes: no noise
        noise = f" ± {seen.noise * 1e9:.2f}" if seen and seen.noise is not None else ""
        # Against the computation without the backend's threads (cpu_work_seen).
        lost = seen.s_per_byte if seen else work["lost_s_per_byte"]
        lines.append(
            f"CPU work: computation beside {work['allreduces']} all-reduces of {work['bytes']} B"
            f" lost {lost * 1e9:.2f}{noise} ns per byte (ranks' mean)"
            + (_HIDDEN if known and seen and not seen.resolved else "")
        )
        if work.get("background_share") is not None:  # probes from before lack it
            lines.append(
                f"background: the running backend's threads took {work['background_share']:.1%}"
                " of the computation's cores between all-reduces (ranks' mean)"
            )
    stopped = budget_line(record)
    if stopped:
        lines.append(stopped)
    return "\n".join(lines)


def run(target_spec: TargetSpec, probe: ProbeSpec, out: Path) -> int:
    stop_on_signals()
    target = Target.resolve(target_spec)
    store = Store(out)
    store.check_writable()  # before the probe runs on the nodes, not after
    target.prepare()
    with target.exclusive():  # as a sweep: one at a time on a testbed and in a store
        store.lock()
        try:
            failed = _probe_all(target, probe, store)
        finally:
            store.release()
    print(f"records appended to {store.path}", file=sys.stderr)
    return 1 if failed else 0


def _probe_all(target: Target, probe: ProbeSpec, store: Store) -> int:
    """Each node count's probe, stored as it lands; how many failed."""
    failed = 0
    for n in target.node_counts:
        if target.workers(n) < 2:
            print(f"skipping {n} node(s): one worker has nothing to all-reduce", file=sys.stderr)
            continue
        record = run_probe(target, n, probe)
        store.append(record)
        failed += record["status"] != "ok"
        print(format_probe(record))
    return failed
