import dataclasses

import pytest

from hpcbench import cli
from hpcbench.core import paths
from hpcbench.core.errors import UsageError
from hpcbench.launchers import specs
from hpcbench.launchers.parse import (
    HostSlots,
    check_node_counts,
    parse_batch,
    parse_hosts,
    parse_nodes,
)
from hpcbench.measure import scale_options
from hpcbench.testbeds import kinds


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("1-10", list(range(1, 11))),
        ("1,2,4,8", [1, 2, 4, 8]),
        ("8,1,4,4", [1, 4, 8]),
        ("1-3,8", [1, 2, 3, 8]),
        (" 2 - 3 ", [2, 3]),
        ("5", [5]),
    ],
)
def test_nodes_accepts_ranges_and_lists(spec, expected):
    assert parse_nodes(spec) == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("0", "out of range"),
        ("5-2", "runs backwards"),
        ("abc", "not a whole number"),
        ("1,,2", "'1,,2' has an empty item between commas"),
        ("4,", "'4,' has an empty item between commas"),
        ("", "empty"),
        ("-3", "is not a number from 1 to 4096 or a range like 1-4"),
        ("3-", "is not a number from 1 to 4096 or a range like 1-4"),
        ("1.5", "not a whole number"),
    ],
)
def test_nodes_rejects_bad_input_with_one_line(spec, message):
    with pytest.raises(UsageError, match=message) as err:
        parse_nodes(spec)
    assert "\n" not in str(err.value)
    assert "--nodes" in str(err.value)


def test_nodes_bounded_by_testbed():
    assert parse_nodes("1-4", available=4) == [1, 2, 3, 4]
    with pytest.raises(UsageError, match="asks for 5 nodes but the testbed has 4"):
        parse_nodes("1-5", available=4)


def test_batch():
    assert parse_batch("32,64,96") == [32, 64, 96]
    with pytest.raises(UsageError, match="--batch: 'abc' is not a whole number"):
        parse_batch("abc")
    with pytest.raises(UsageError, match="--batch"):
        parse_batch("0")


def test_hosts():
    assert parse_hosts("h1:4,h2:4") == [HostSlots("h1", 4), HostSlots("h2", 4)]
    assert parse_hosts("node-1.example.org") == [HostSlots("node-1.example.org", 1)]
    for bad, message in [
        ("h1:x", "not a whole number"),
        ("h1:0", "use 1 to 1024"),
        ("localhost:100000", "out of range; use 1 to 1024"),  # 100000 processes otherwise
        ("h1,h1", "listed twice"),
        (":4", "not host:slots"),
        ("", "empty"),
        ("-Fevil", "not host:slots"),  # ssh would read it as an option
        ("-oProxyCommand=x:1", "not host:slots"),
        ("user@h1:2", "not host:slots"),
        ("h1;reboot:1", "not host:slots"),
        ("[::1]:2", "not host:slots"),
    ]:
        with pytest.raises(UsageError, match=message):
            parse_hosts(bad)


# The CLI edge: the Namespace becomes frozen specs once; nothing below takes it.


def _args(command: str, *argv: str):
    return cli.build_parser().parse_args([command, *argv])


def test_target_spec_from_the_command_line(tmp_path):
    spec = scale_options.target_spec(
        _args(
            "scale",
            "--env",
            "slurm",
            "--nodes",
            "1-2",
            "--gpus-per-node",
            "4",
            "--out",
            str(tmp_path),
        )
    )
    assert kinds.for_target(spec).name == "slurm" and spec.node_counts == (1, 2)
    assert spec.slurm.gpus_per_node == 4 and not spec.slurm.pin_nodes
    assert spec.slurm.job_dir == str(tmp_path.resolve() / "slurm")
    cpu = scale_options.target_spec(
        _args(
            "probe",
            "--hosts",
            "a:2,b:2",
            "--gpus-per-node",
            "2",
            "--device",
            "cpu",
            "--horovod-controller",
            "mpi",
        )
    )
    assert kinds.for_target(cpu).name == "hosts"
    assert cpu.hosts == (HostSlots("a", 2), HostSlots("b", 2))
    assert cpu.slurm.gpus_per_node == 0 and cpu.slurm.mpi == "pmix" and cpu.slurm.pin_nodes
    here = scale_options.target_spec(_args("probe", "--env", "localhost"))
    assert kinds.for_target(here).name == "localhost"
    local = scale_options.target_spec(_args("probe", "--env", "local"))
    assert kinds.for_target(local).from_folder
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.node_counts = (4,)  # type: ignore[misc]


def test_env_defaults_to_hpcbench_env(monkeypatch):
    monkeypatch.setenv("HPCBENCH_ENV", "virtualwall")
    assert scale_options.target_spec(_args("scale")).env == "virtualwall"


def test_workload_and_sweep_specs_from_the_command_line():
    args = _args("scale", "--model", "resnet18", "--batch", "8,16", "--no-probe", "--amp", "on")
    workload = scale_options.workload_spec(args)
    assert workload.model == "resnet18" and workload.image_size == 224 and workload.amp == "on"
    sweep = scale_options.sweep_spec(args)
    assert sweep.batches == (8, 16) and sweep.probe is None and sweep.repeats == 3
    assert scale_options.sweep_spec(_args("scale")).probe == specs.ProbeSpec("64M", "auto", 0, 1800)
    with pytest.raises(UsageError, match="--probe-max-bytes: 'x' is not a size"):
        scale_options.sweep_spec(_args("scale", "--probe-max-bytes", "x"))
    with pytest.raises(UsageError, match="--windows: 0 is out of range: use 1 to 10000"):
        scale_options.workload_spec(_args("scale", "--windows", "0"))


def test_node_counts_bounded_by_the_resolved_testbed():
    assert check_node_counts((1, 2, 3), available=3) == [1, 2, 3]
    with pytest.raises(UsageError, match="--nodes 1-3,8: asks for 8 nodes but the testbed has 4"):
        check_node_counts((1, 2, 3, 8), available=4)


def test_nothing_below_the_cli_takes_the_namespace():
    below = [
        "measure/sweep",
        "measure/probe",
        "measure/fingerprint",
        "testbeds/target",
        "testbeds/nodeset",
        "testbeds/manifest",
        "testbeds/kinds",
        *(
            f"core/{m}"
            for m in ("bounded", "files", "locks", "paths", "progress", "secrets", "ssh")
        ),
        "performance",
        "launchers",
        "schedulers",
    ]
    for name in below:
        root = paths.REPO / "hpcbench" / name
        files = sorted(root.rglob("*.py")) if root.is_dir() else [root.with_suffix(".py")]
        assert files and all(f.is_file() for f in files), name
        for path in files:
            assert "import argparse" not in path.read_text(), path


def test_real_slurm_values_pass_the_checks(tmp_path):
    """What sites actually write: checked, and passed on unchanged."""
    args = _args(
        "scale",
        "--env",
        "slurm",
        "--nodes",
        "1-2",
        "--out",
        str(tmp_path),
        "--container-image",
        "nvcr.io#nvidia/pytorch:23.10-py3",
        "--container-mounts",
        "/data:/data,/scratch/u1:/scratch:ro",
        "--partition",
        "gpu,gpu-long",
        "--account",
        "proj-1_x",
        "--qos",
        "normal",
        "--slurm-mpi",
        "pmix_v3",
        "--sbatch=--exclusive",
        "--sbatch=--mem=0",
        "--slurm-job-dir",
        "/home/u1/jobs",
    )
    slurm = scale_options.target_spec(args).slurm
    assert slurm.container_image == "nvcr.io#nvidia/pytorch:23.10-py3"
    assert slurm.container_mounts == ("/data:/data", "/scratch/u1:/scratch:ro")
    assert (slurm.partition, slurm.account, slurm.qos, slurm.mpi) == (
        "gpu,gpu-long",
        "proj-1_x",
        "normal",
        "pmix_v3",
    )
    assert slurm.extra == ("--exclusive", "--mem=0") and slurm.job_dir == "/home/u1/jobs"
