"""ENV=local end to end: bad input is refused before anything exists, then
deploy (with Slurm) -> verify -> re-deploy changes nothing -> sweeps through
horovodrun and through sbatch/srun land in the store and the report ->
destroy leaves nothing. The tests run in this order on one testbed."""

from __future__ import annotations

import json
import re

import pytest

from hpcbench.measure import analysis
from tests.e2e.conftest import E2E_VARS, TINY_RUN, DeployedTestbed, var_args

pytestmark = pytest.mark.e2e


@pytest.mark.stage("undeployed")
@pytest.mark.parametrize("count", ["0", "17"])
def test_bad_node_count_is_refused_before_anything_exists(
    testbed: DeployedTestbed, count: str
) -> None:
    proc = testbed.hpcbench("deploy", "--env", "local", *var_args(node_count=count), timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    error = proc.stderr.strip().splitlines()
    assert len(error) == 1 and "node_count" in error[0] and "1 to 16" in error[0], error
    assert testbed.docker_names("container") == []
    assert testbed.docker_names("network") == []


@pytest.mark.stage("undeployed")
def test_unknown_env_lists_the_known_ones(testbed: DeployedTestbed) -> None:
    proc = testbed.hpcbench("deploy", "--env", "nosuch")
    assert proc.returncode == 2
    assert "local" in proc.stderr and "nosuch" in proc.stderr


@pytest.mark.stage("deploy")
def test_deploy_creates_and_configures_every_node(testbed: DeployedTestbed) -> None:
    proc = testbed.hpcbench("deploy", "--env", "local", *var_args())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    nodes = int(E2E_VARS["node_count"])
    assert len(testbed.docker_names("container")) == nodes
    assert (testbed.state / "local" / "inventory.yml").is_file()
    assert re.search(rf"deployed local: {nodes} nodes", proc.stdout)
    assert "TASK [slurm : Run a job step on all nodes of each partition]" in proc.stdout
    assert "TASK [slurm : Check that each partition is up and holds its nodes]" in proc.stdout


@pytest.mark.stage("deployed")
def test_verify_passes_on_the_deployed_testbed(testbed: DeployedTestbed) -> None:
    testbed.sqsh.wait()  # its pyxis check starts a container of the stack's .sqsh
    proc = testbed.hpcbench("verify", "--env", "local", "--", "-rs")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert re.search(r"\d+ passed", proc.stdout)
    assert " failed" not in proc.stdout.splitlines()[-1]
    # Slurm is enabled here: its testbed checks run rather than skip; GPU checks skip,
    # and so do the checks of the roles themselves, which `make test` runs without a
    # testbed (tests/infra/test_slurm_partitions.py: "not the testbed").
    skipped = [line for line in proc.stdout.splitlines() if line.startswith("SKIPPED")]
    on_the_testbed = [line for line in skipped if "not the testbed" not in line]
    assert not [line for line in on_the_testbed if "slurm" in line], skipped


@pytest.mark.stage("deployed")
def test_second_deploy_changes_nothing(testbed: DeployedTestbed) -> None:
    # No --var: the settings of the first deploy are remembered.
    proc = testbed.hpcbench("deploy", "--env", "local")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "No changes." in proc.stdout or "0 added, 0 changed, 0 destroyed" in proc.stdout
    assert "ansible changed=0 failed=0" in proc.stdout


@pytest.mark.stage("deployed")
def test_sweep_on_the_testbed_lands_in_the_store_and_the_report(testbed: DeployedTestbed) -> None:
    out = testbed.state / "results"
    proc = testbed.hpcbench(
        # The probe up to 1 MiB messages, as test_campaign.py has it (64M: 35 s at 1 Gbit/s).
        "scale",
        "--env",
        "local",
        "--nodes",
        "1,3",
        *TINY_RUN,
        "--probe-max-bytes",
        "1M",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    runs = {r["nodes"]: r for r in records if r.get("status") == "ok"}
    assert set(runs) == {1, 3}, [(r.get("nodes"), r.get("status"), r.get("error")) for r in records]
    assert runs[3]["workers"] == 3 and runs[3]["weights_in_sync"] is True
    assert analysis.run_stats(runs[3])["throughput"] > 0 and runs[3]["env"] == "local"
    assert runs[3]["fingerprint"]["link_rate"] == E2E_VARS["link_rate"]
    proc = testbed.hpcbench("report", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    report = (out / "report.md").read_text()
    assert "local" in report and list(out.rglob("*.png"))


@pytest.mark.stage("deployed")
@pytest.mark.parametrize("backend", ["horovod", "ddp"])
def test_sweep_through_sbatch_lands_in_the_store_and_report(
    testbed: DeployedTestbed, backend: str
) -> None:
    out = testbed.state / f"results-slurm-{backend}"
    proc = testbed.hpcbench(
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
        *TINY_RUN,
        "--slurm-queue-wait",
        "300",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-4000:]
    runs = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    runs = [r for r in runs if r["kind"] == "run"]
    assert sorted((r["nodes"], r["workers"]) for r in runs) == [(1, 1), (2, 2)]
    for r in runs:
        assert r["status"] == "ok" and r["launcher"] == "slurm", r.get("error")
        assert r["weights_in_sync"] and analysis.run_stats(r)["throughput"] > 0
        assert r["gpu"] == {"skipped": "no GPU: the run is on the cpu"}
    two = next(r for r in runs if r["nodes"] == 2)
    assert sorted(two["fingerprint"]["hosts"]) == ["node1", "node2"]
    report = testbed.hpcbench("report", "--out", str(out), timeout=300)
    assert report.returncode == 0, report.stderr
    text = (out / "report.md").read_text()
    assert backend in text and "local" in text


@pytest.mark.stage("destroy")
def test_destroy_leaves_nothing(testbed: DeployedTestbed) -> None:
    proc = testbed.hpcbench("destroy", "--env", "local", timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert testbed.docker_names("container") == []
    assert testbed.docker_names("network") == []
    assert testbed.docker_names("volume") == []
    assert not (testbed.state / "local").exists()
