"""Killing a sweep mid-run leaves no rank running on any node (docs/method.md,
"Runs die with their sweep").

The sweep is killed with SIGKILL, the case where the harness stops nothing
itself: its ranks must still go, on the head that horovodrun or torchrun runs
on and on the node horovodrun reaches over its own ssh, within seconds.

Runs on the shared e2e testbed when it is up (tests/e2e/conftest.py); else
(pytest runs this module before test_local_testbed.py) on a 2-node testbed of
its own, with its own name, subnet, ports and state folder, destroyed at the end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import E2E_VARS, REPO, DeployedTestbed, containers

pytestmark = [pytest.mark.e2e, pytest.mark.stage("kill")]

KILL_VARS = {
    "name": "hpcbench-kill",
    "subnet": "172.30.19.0/24",
    "ssh_port_base": "22940",
    "jupyter_port": "28997",
    "node_count": "2",
    "cpus_per_node": "0.6",
    "link_rate": "1gbit",
    "enable_slurm": "false",
}
# Warm-up long enough that the run is still in its steps when it is killed.
HANGING_RUN = [
    "--model",
    "resnet18",
    "--image-size",
    "32",
    "--batch",
    "4",
    "--warmup",
    "100000",
    "--windows",
    "1",
    "--steps",
    "1",
    "--repeats",
    "1",
    "--data-workers",
    "0",
    "--device",
    "cpu",
    "--no-probe",
    "--timeout",
    "900",
]
RANKS_START_S = 300  # torch's import on 0.6 of a core per node
RANKS_GONE_S = 30


def ranks(container: str) -> list[str]:
    """The workload's processes in a node container (docker top: no tools needed inside)."""
    out = subprocess.run(
        ["docker", "top", container, "-eo", "pid,args"], capture_output=True, text=True, timeout=60
    ).stdout
    return [line for line in out.splitlines()[1:] if "train.py" in line]


def running(nodes: list[str]) -> dict[str, list[str]]:
    """The nodes that have workload processes, with them."""
    found = {n: ranks(n) for n in nodes}
    return {n: r for n, r in found.items() if r}


def remove(prefix: str) -> None:
    names = containers(prefix)
    if names:
        subprocess.run(["docker", "rm", "-f", *names], capture_output=True, timeout=300)


@pytest.fixture(scope="module")
def bed(
    testbed: DeployedTestbed, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[DeployedTestbed, str]]:
    if (testbed.state / "local" / "inventory.yml").is_file():
        yield testbed, E2E_VARS["name"]  # the shared testbed is up: use it
        return
    state = tmp_path_factory.mktemp("kill-state")
    own = DeployedTestbed(state, {**os.environ, "HPCBENCH_STATE": str(state)}, testbed.sqsh)
    remove(KILL_VARS["name"])  # a killed earlier run's containers
    var_args = [x for k, v in KILL_VARS.items() for x in ("--var", f"{k}={v}")]
    try:
        proc = own.hpcbench("deploy", "--env", "local", *var_args, timeout=1500)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        yield own, KILL_VARS["name"]
    finally:
        own.hpcbench("destroy", "--env", "local", timeout=600)
        remove(KILL_VARS["name"])


def baseline_record(tb: DeployedTestbed, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> dict:
    """The 1-worker baseline of the sweep `argv` would run, as if already in the store:
    --resume goes straight to the 2-node run (a sweep runs its baselines first). Built
    from the same specs the sweep builds, so its key (method included) matches."""
    from hpcbench import cli
    from hpcbench.measure import scale_options, sweep
    from hpcbench.testbeds.target import Target

    args = cli.build_parser().parse_args(argv)
    monkeypatch.setenv("HPCBENCH_STATE", tb.environ["HPCBENCH_STATE"])
    target = Target.resolve(scale_options.target_spec(args))
    workload, spec = scale_options.workload_spec(args), scale_options.sweep_spec(args)
    base = next(c for c, _ in sweep.plan(target, spec.batches, 1, spec.seed) if c.workers == 1)
    record = sweep.base_record(target, workload, spec.seed, base, 0)
    return {"schema": 1, **record, "status": "ok", "window_times": [1.0]}


@pytest.mark.parametrize("backend", ["horovod", "ddp"])
def test_a_killed_sweep_leaves_no_rank_on_any_node(
    bed: tuple[DeployedTestbed, str],
    tmp_path: Path,
    backend: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tb, prefix = bed
    # Every node of the testbed, not a guess at which two the run lands on: docker ps
    # lists newest first, and the shared testbed has four.
    nodes = containers(prefix)
    out = tmp_path / "out"
    out.mkdir()
    argv = [
        "scale",
        "--env",
        "local",
        "--nodes",
        "2",
        "--backend",
        backend,
        *HANGING_RUN,
        "--out",
        str(out),
        "--resume",
    ]
    (out / "results.jsonl").write_text(json.dumps(baseline_record(tb, argv, monkeypatch)) + "\n")
    sweep = subprocess.Popen(
        [sys.executable, "-m", "hpcbench", *argv],
        cwd=REPO,
        env=tb.environ,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        text=True,
    )
    try:
        deadline = time.monotonic() + RANKS_START_S
        while time.monotonic() < deadline and len(running(nodes)) < 2:
            assert sweep.poll() is None, f"the sweep ended early: {sweep.stderr.read()[-3000:]}"
            time.sleep(1)
        assert len(running(nodes)) == 2, running(nodes)  # a rank on each of 2 nodes
        time.sleep(3)  # into the collectives
        sweep.kill()  # SIGKILL: the harness cleans nothing up itself
        sweep.wait(30)
        killed = time.monotonic()
        while time.monotonic() - killed < RANKS_GONE_S and running(nodes):
            time.sleep(0.5)
        left = running(nodes)
        print(f"{backend}: ranks gone {time.monotonic() - killed:.1f} s after SIGKILL")
        assert not left, f"ranks outlived the sweep by {RANKS_GONE_S} s: {left}"
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
