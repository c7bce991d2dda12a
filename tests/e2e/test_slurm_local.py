"""ENV=local with Slurm: deploy 2 nodes with enable_slurm, verify the Slurm checks,
sweep 1-2 nodes on the CPU through sbatch/srun (Horovod over Gloo and DDP), and
find the runs in the results store and the report.

Its own testbed (name, subnet, ports, state folder), so that it never touches
the one of test_local_testbed.py or the user's.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import Testbed, var_args

pytestmark = pytest.mark.e2e

SLURM_VARS = {
    "name": "hpcbench-e2e-slurm",
    "subnet": "172.30.10.0/24",
    "ssh_port_base": "22950",
    "jupyter_port": "28998",
    "node_count": "2",
    "cpus_per_node": "1",
    "link_rate": "",
    "enable_slurm": "true",
}
TINY = [
    "--model",
    "resnet18",
    "--image-size",
    "32",
    "--batch",
    "4",
    "--warmup",
    "1",
    "--windows",
    "2",
    "--steps",
    "2",
    "--repeats",
    "1",
    "--data-workers",
    "0",
    "--device",
    "cpu",
    "--timeout",
    "300",
    "--slurm-queue-wait",
    "300",
]


@pytest.fixture(scope="module")
def slurm_bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        pytest.fail("no Docker engine answers: `make tools` starts one")
    state = tmp_path_factory.mktemp("slurm-state")
    bed = Testbed(state, {**os.environ, "HPCBENCH_STATE": str(state)})
    yield bed
    bed.hpcbench("destroy", "--env", "local", timeout=600)


def test_deploy_with_slurm(slurm_bed: Testbed) -> None:
    proc = slurm_bed.hpcbench("deploy", "--env", "local", *var_args(**SLURM_VARS))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "TASK [slurm : Run a job step on every node]" in proc.stdout


def test_verify_runs_the_slurm_checks(slurm_bed: Testbed) -> None:
    proc = slurm_bed.hpcbench("verify", "--env", "local", "--", "-k", "slurm", "-rs")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "SKIPPED" not in proc.stdout, proc.stdout[-3000:]


@pytest.mark.parametrize("backend", ["horovod", "ddp"])
def test_sweep_through_sbatch_lands_in_the_store_and_report(slurm_bed: Testbed, backend) -> None:
    out = slurm_bed.state / f"results-{backend}"
    proc = slurm_bed.hpcbench(
        "scale",
        "--env",
        "local",
        "--launcher",
        "slurm",
        "--nodes",
        "1-2",
        "--backend",
        backend,
        "--no-probe",
        *TINY,
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-4000:]
    runs = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    runs = [r for r in runs if r["kind"] == "run"]
    assert sorted((r["nodes"], r["workers"]) for r in runs) == [(1, 1), (2, 2)]
    for r in runs:
        assert r["status"] == "ok" and r["launcher"] == "slurm", r.get("error")
        assert r["weights_in_sync"] and r["images_per_sec"] > 0
        assert r["gpu"] == {"skipped": "no GPU: the run is on the cpu"}
    two = next(r for r in runs if r["nodes"] == 2)
    assert sorted(two["fingerprint"]["hosts"]) == ["node1", "node2"]
    report = slurm_bed.hpcbench("report", "--out", str(out), timeout=300)
    assert report.returncode == 0, report.stderr
    text = (out / "report.md").read_text()
    assert backend in text and "local" in text
