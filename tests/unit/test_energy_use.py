"""hpcbench.measure.energy_use: which figure a run's joules per sample comes from, with its
source or why it is unknown; Slurm's ConsumedEnergy as sacct prints it, read by the
Slurm scheduler after the job."""

from __future__ import annotations

import pytest

from hpcbench.measure import energy_use, sweep
from hpcbench.schedulers import slurm
from hpcbench.schedulers.base import Outcome


def run(device: str = "cpu", unit: str = "images", **energy) -> dict:
    return {
        "status": "ok",
        "device": device,
        "unit": unit,
        "window_times": [2.0, 2.0],
        "energy": {"samples": 1000, "unit": unit, **energy},
    }


def test_a_gpu_run_takes_nvmls_counter_a_cpu_run_rapl():
    gpu = run("cuda", nvml={"joules": 500.0, "gpus": 2}, rapl={"joules": 9.0, "hosts": 1})
    assert energy_use.of_run(gpu) == (0.5, "NVML energy counter of 2 GPU(s), the GPUs alone")
    cpu = run("cpu", rapl={"joules": 250.0, "hosts": 2}, nvml={"unknown": "no GPU"})
    value, source = energy_use.of_run(cpu)
    assert value == 0.25 and source.startswith("RAPL of 2 host(s)")


def test_without_a_reading_the_figure_is_unknown_with_the_reason():
    cpu = run("cpu", rapl={"unknown": "/sys/class/powercap is absent"})
    assert energy_use.of_run(cpu) == (None, "unknown: RAPL: /sys/class/powercap is absent")
    assert energy_use.of_run({"status": "ok"}) == (
        None,
        "unknown: the run recorded no energy reading",
    )
    assert energy_use.of_run(run("cpu")) == (None, "unknown: RAPL: not recorded")


def test_slurms_job_energy_is_prorated_to_the_timed_windows():
    r = run("cpu", rapl={"unknown": "root only"})
    r["slurm_energy"] = {"joules": 10_000.0, "seconds": 100.0}
    value, source = energy_use.of_run(r)
    assert value == pytest.approx(10_000 * (4 / 100) / 1000)
    assert source.startswith("Slurm ConsumedEnergy of the job, prorated")
    r["slurm_energy"] = {"unknown": "sacct's ConsumedEnergy is 0"}
    assert energy_use.of_run(r)[1] == (
        "unknown: RAPL: root only; Slurm: sacct's ConsumedEnergy is 0"
    )


def test_a_configuration_averages_the_runs_with_a_figure_and_says_how_many():
    known = run("cuda", unit="tokens", nvml={"joules": 100.0, "gpus": 1})
    missing = run("cuda", unit="tokens", nvml={"unknown": "Not Supported"})
    value, source, unit = energy_use.summary([known, dict(known), missing])
    assert value == 0.1 and unit == "token"
    assert source == "NVML energy counter of 1 GPU(s), the GPUs alone (2 of 3 runs)"
    none, why, _ = energy_use.summary([missing])
    assert none is None and why == "unknown: NVML: Not Supported"
    assert energy_use.summary([]) == (None, None, None)


@pytest.mark.parametrize(
    ("stdout", "stderr", "expected"),
    [
        ("2500000|1200\n", "", {"joules": 2.5e6, "seconds": 1200.0, "exclusive_only": True}),
        (
            "0|1200\n",
            "",
            {
                "unknown": "sacct's ConsumedEnergy is 0: the cluster gathers no "
                "energy (AcctGatherEnergyType)"
            },
        ),
        (
            "",
            "sacct: error: Slurm accounting storage is disabled\n",
            {
                "unknown": "sacct gives no ConsumedEnergy: sacct: error: Slurm accounting "
                "storage is disabled"
            },
        ),
        (
            "|\n",
            "",
            {
                "unknown": "sacct's ConsumedEnergy is 0: the cluster gathers no "
                "energy (AcctGatherEnergyType)"
            },
        ),
    ],
)
def test_sacct_output_read_as_sacct_prints_it(stdout, stderr, expected):
    assert slurm.sacct_energy(stdout, stderr) == expected


def test_the_sweep_keeps_the_jobs_energy_and_the_workloads_in_the_run_record():
    workload = {
        "workers": 2,
        "steps": 1,
        "window_times": [1.0],
        "energy": {"samples": 64, "unit": "images", "rapl": {"unknown": "root only"}},
        "fabric": {"transport": "IB", "gdr": True, "nics": ["mlx5_0:1"]},
        "mllog": ['{"key": "run_stop"}'],
    }
    job = {"joules": 5000.0, "seconds": 50.0, "exclusive_only": True}
    outcome = Outcome([0], [workload], [], launched_at=0.0, duration_s=1.0, job_energy=job)
    record = sweep.complete({"workers": 2, "steps": 1, "fingerprint": {}}, outcome)
    assert record["slurm_energy"] == job
    assert record["energy"] == workload["energy"] and record["fabric"] == workload["fabric"]
    assert record["mllog"] == workload["mllog"]
    assert "slurm_energy" not in sweep.complete(
        {"workers": 2, "steps": 1, "fingerprint": {}},
        Outcome([0], [workload], [], launched_at=0.0, duration_s=1.0),
    )
