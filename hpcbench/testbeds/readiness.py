"""Whether a cluster hpcbench did not deploy is ready: before anything is submitted,
and on one of its nodes.

- preflight: nothing runs. A Slurm partition must exist, be up and accept a job
  of the sweep's shape with its account and qos (SlurmScheduler.preflight);
  hosts must answer over SSH (Target.prepare).
- check: bench/check_stack.py on one node, launched as the sweep's runs are
  (sbatch for Slurm, over SSH for hosts): the stack imports, the GPUs and driver,
  the shared folder, the collective backend. What a campaign records as the
  verify phase of a Slurm partition or a host list, where a deployed testbed
  runs its testinfra checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hpcbench.launchers.base import RunSpec
from hpcbench.launchers.specs import WorkloadSpec
from hpcbench.testbeds import kinds
from hpcbench.testbeds.target import Target

CHECK_SCRIPT = "check_stack.py"
CHECK_TIMEOUT_S = 300  # once it runs; Slurm's queue wait is bounded apart


@dataclass
class CheckResult:
    ok: bool
    why: str = ""  # the failed checks, or why no record came back
    checks: list[dict] = field(default_factory=list)
    queue_wait_s: float | None = None


def check_spec_args(target: Target, workload: WorkloadSpec) -> list[str]:
    """check_stack.py's options for this target: its backend, device, GPUs per node and
    (Slurm) the job folder on the shared file system."""
    args = ["--backend", target.backend, "--device", workload.device]
    gpus = target.scheduler.job_gpus(target.gpus_per_node or 0)
    if shared := target.scheduler.shared_job_dir():
        args += ["--shared", shared]
    if gpus and workload.device != "cpu":
        args += ["--gpus", str(min(gpus, 1))]  # the check runs one worker: one GPU
    return args


def preflight(target: Target) -> None:
    """UsageError naming what to fix, before anything is submitted or started: as the
    testbed's kind asks (a partition accepts the sweep's largest job, hosts answer)."""
    most = max(target.node_counts)  # the largest job of the sweep must be accepted
    largest = target.spec(CHECK_SCRIPT, [], most, target.workers(most))
    kinds.of(target.testbed).preflight(target, largest)


def check_spec(target: Target, workload: WorkloadSpec) -> RunSpec:
    """The check as a run: one worker on one node."""
    return target.spec(CHECK_SCRIPT, check_spec_args(target, workload), 1, 1, CHECK_TIMEOUT_S)


def check(target: Target, workload: WorkloadSpec) -> CheckResult:
    """The stack check on one node (bench/ placed there first, where it is copied)."""
    target.prepare()
    outcome = target.run(check_spec(target, workload), timeout_s=CHECK_TIMEOUT_S)
    records = [r for r in outcome.records if r.get("kind") == "check"]
    if not records:  # the job's own error line, where its -e file has one
        why = outcome.error().splitlines()[0]
        return CheckResult(
            False,
            why if outcome.cause else f"no check record: {why}",
            queue_wait_s=outcome.queue_wait_s,
        )
    checks = records[-1].get("checks") or []
    failed = [f"{c.get('name')}: {c.get('detail')}" for c in checks if not c.get("ok")]
    return CheckResult(
        not failed and bool(records[-1].get("ok")), "; ".join(failed), checks, outcome.queue_wait_s
    )
