"""The stack check's own options (hpcbench/testbeds/readiness.py): the check job asks for
what the sweep's jobs get, as each launcher says it, so that it proves the stack where
the runs will be."""

from __future__ import annotations

import pytest

from hpcbench.launchers.slurm import SlurmOptions
from hpcbench.launchers.specs import TargetSpec, WorkloadSpec
from hpcbench.testbeds import readiness
from hpcbench.testbeds.target import Target


@pytest.fixture(autouse=True)
def _own_state(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))


def check_args(spec: TargetSpec, device: str) -> list[str]:
    target = Target.resolve(spec)
    return readiness.check_spec_args(target, WorkloadSpec("resnet18", 32, device=device))


def partition(gpus: int, job_dir: str) -> TargetSpec:
    options = SlurmOptions(partition="gpu", gpus_per_node=gpus, job_dir=job_dir)
    return TargetSpec(env="slurm", node_counts=(1, 2), backend="ddp", slurm=options)


def test_a_partitions_check_books_one_of_its_gpus_and_writes_to_the_job_folder() -> None:
    args = check_args(partition(4, "/scratch/me/jobs"), "cuda")
    assert args == [
        "--backend",
        "ddp",
        "--device",
        "cuda",
        "--shared",
        "/scratch/me/jobs",
        "--gpus",
        "1",
    ]


def test_a_cpu_check_asks_for_no_gpu_even_where_the_partition_books_them() -> None:
    args = check_args(partition(4, "/scratch/me/jobs"), "cpu")
    assert "--gpus" not in args
    assert args[-2:] == ["--shared", "/scratch/me/jobs"]


def test_a_partition_without_gpus_or_job_folder_adds_neither() -> None:
    assert check_args(partition(0, ""), "auto") == ["--backend", "ddp", "--device", "auto"]


def test_processes_here_take_the_testbeds_gpus_and_share_no_folder() -> None:
    spec = TargetSpec(env="localhost", node_counts=(1,), gpus_per_node=2, backend="horovod")
    assert check_args(spec, "cuda") == [
        "--backend",
        "horovod",
        "--device",
        "cuda",
        "--gpus",
        "1",
    ]
    assert check_args(spec, "cpu") == ["--backend", "horovod", "--device", "cpu"]
