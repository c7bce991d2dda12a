"""Jobs in containers as pyxis reads them: image and mount forms, folders a job uses
mounted once, CPUs per rank, and the check job's deadline counting the import. The
batch scripts run against a stand-in for srun: tests/integration/test_slurm_containers_processes.py.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcbench import cli
from hpcbench.core.errors import UsageError
from hpcbench.launchers import Placement, RunSpec
from hpcbench.launchers.slurm import (
    SlurmLauncher,
    SlurmOptions,
    image_problem,
    is_image_path,
    mount_problem,
    sbatch_script,
)
from hpcbench.measure.scale_options import sbatch_option
from hpcbench.schedulers import SlurmScheduler


def _spec(workdir: Path, args: tuple[str, ...], nodes: int = 2) -> RunSpec:
    return RunSpec(
        script="-c",
        args=args,
        python="/bin/sh",
        workdir=str(workdir),
        placements=tuple(Placement(f"node{i + 1}", 1, None) for i in range(nodes)),
        master_addr="127.0.0.1",
        master_port=29511,
        time_limit_s=60,
    )


def _folders(tmp: Path) -> tuple[Path, Path, Path]:
    bench, jobs, data = tmp / "bench", tmp / "jobs", tmp / "data"
    for folder in (bench, jobs, data):
        folder.mkdir()
    return bench, jobs, data


def test_a_folder_inside_a_users_mount_is_not_mounted_twice(tmp_path):
    bench, jobs, data = _folders(tmp_path)
    opts = SlurmOptions(
        container_image="/i.sqsh", container_mounts=(f"{tmp_path}:{tmp_path}",), job_dir=str(jobs)
    )
    script = sbatch_script(_spec(bench, ("--data", str(data))), opts, "ddp", job_name="j")
    assert f"--container-mounts={tmp_path}:{tmp_path} " in script


# ------------------------------------------------------- what pyxis reads as meant
@pytest.mark.parametrize(
    "image",
    [
        "nvcr.io#nvidia/pytorch:24.05-py3",
        "ubuntu",
        "nvidia/cuda:12.4.0-base-ubuntu22.04",
        "/dss/images/stack.sqsh",
        "./stack.sqsh",
        "../images/stack.sqsh",
    ],
)
def test_images_pyxis_reads_as_meant_are_accepted(image):
    assert image_problem(image) is None


@pytest.mark.parametrize("image", ["stack.sqsh", "images/stack.sqsh", "~/stack.sqsh", "x.SQSH"])
def test_a_file_pyxis_would_take_for_a_registry_image_is_refused(image, tmp_path, capsys):
    code = cli.main(
        ["scale", "--env", "slurm", "--nodes", "1", "--container-image", image, "--dry-run"]
        + ["--out", str(tmp_path / "out")]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"hpcbench: error: --container-image: {image!r}: "), err
    assert "./" in err[0] or "~" in err[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "mount", ["/dss/data:/data", "./data:/data", "/a:/b:ro", "tmpfs:/scratch", "../d:./d"]
)
def test_mounts_pyxis_takes_are_accepted(mount):
    assert mount_problem(mount) is None


@pytest.mark.parametrize(
    "mount,why",
    [
        ("bench:/bench", "source that starts with / or ./"),
        ("~/data:/data", "does not expand ~"),
        ("/data:~/data", "does not expand ~"),
        ("/data:data", "target that starts with / or ./"),
        ("/data", "give SRC:DST"),
    ],
)
def test_mounts_pyxis_refuses_or_misreads_are_refused(mount, why, tmp_path, capsys):
    assert why in (mount_problem(mount) or "")
    code = cli.main(
        ["scale", "--env", "slurm", "--nodes", "1", "--container-image", "/i.sqsh"]
        + ["--container-mounts", mount, "--dry-run", "--out", str(tmp_path / "out")]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--container-mounts" in err[0], err


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="./~#:abc-sqhSQH", min_size=1, max_size=16))
def test_an_accepted_image_is_read_by_pyxis_as_what_it_names(image):
    """Whatever is accepted, pyxis reads a squashfs file name as a file."""
    if image_problem(image) is None and image.lower().endswith((".sqsh", ".squashfs")):
        assert is_image_path(image)
    if image.startswith("~"):
        assert image_problem(image) is not None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="/.~abt:mpfsu", min_size=1, max_size=20))
def test_an_accepted_mount_is_one_pyxis_takes(mount):
    if mount_problem(mount) is None:
        src, dst = mount.split(":")[:2]
        assert src[:1] in "./" and src[:1] or src in ("tmpfs", "umount")
        assert dst[:1] in ("/", ".")


def test_a_hash_in_an_sbatch_option_is_refused():
    """sbatch ends an #SBATCH line's value at '#': the image would be cut."""
    with pytest.raises(UsageError, match="holds '#'"):
        sbatch_option("--container-image=nvcr.io#nvidia/pytorch:24.05-py3")
    assert sbatch_option("--exclusive") == "--exclusive"


# ------------------------------------------------------------------ CPUs per rank
@pytest.mark.parametrize(
    "given_cpus,node_cpus,gpus,per_node,expect",
    [
        (0, 0, 0, 4, 0),  # nothing known: Slurm's default
        (6, 128, 8, 1, 6),  # given wins
        (0, 128, 8, 8, 16),  # a full node: its CPUs shared by its 8 ranks
        (0, 128, 8, 1, 16),  # a one-GPU baseline books one GPU's share, not the node
        (0, 4, 0, 2, 2),  # no GPUs: the node's CPUs shared by this job's ranks
        (0, 3, 0, 4, 1),  # never below one
    ],
)
def test_cpus_per_rank(given_cpus, node_cpus, gpus, per_node, expect):
    opts = SlurmOptions(cpus_per_task=given_cpus, node_cpus=node_cpus, gpus_per_node=gpus)
    assert opts.rank_cpus(per_node) == expect


def test_cpus_per_rank_go_to_sbatch_and_to_srun(tmp_path):
    spec = RunSpec("t.py", (), "python", "/b", (Placement("n1", 2, None),), time_limit_s=60)
    script = sbatch_script(spec, SlurmOptions(node_cpus=8), "ddp")
    assert "#SBATCH --cpus-per-task=4" in script.splitlines()
    [srun] = [x for x in script.splitlines() if x.startswith("srun ")]
    assert " --cpus-per-task=4 " in srun  # srun 22.05 does not inherit sbatch's -c


# -------------------------------------------------------- the import's deadline
def test_a_registry_images_jobs_may_take_the_import_on_top_of_their_time():
    spec = RunSpec("t.py", (), "python", "/b", (Placement("n1", 1, None),), time_limit_s=300)
    registry = SlurmOptions(container_image="nvcr.io#nvidia/pytorch:24.05-py3")
    sqsh = SlurmOptions(container_image="/dss/stack.sqsh")
    assert (registry.import_s, sqsh.import_s, SlurmOptions().import_s) == (1800, 300, 0)
    assert SlurmOptions(container_image="/x.sqsh", container_import_s=60).import_s == 60
    lines = sbatch_script(spec, registry, "ddp").splitlines()
    assert "#SBATCH --time=36" in lines  # 300 s + 1800 s -> 35 min + 1
    assert "#SBATCH --time=6" in sbatch_script(spec, SlurmOptions(), "ddp").splitlines()


def test_the_check_jobs_deadline_counts_the_import(monkeypatch):
    """The scheduler's running deadline is the run's timeout plus the import."""
    scheduler = SlurmScheduler(
        SlurmLauncher(SlurmOptions(container_image="nvcr.io#nvidia/pytorch:24.05-py3"))
    )
    seen = {}

    def wait(spec, job, job_name, timeout_s):
        seen["timeout_s"] = timeout_s
        raise OSError("stop here")

    monkeypatch.setattr(scheduler, "submit_job", lambda script: "7")
    monkeypatch.setattr(scheduler, "wait", wait)
    spec = RunSpec("t.py", (), "python", "/b", (Placement("n1", 1, None),), time_limit_s=300)
    scheduler.run(spec, timeout_s=300)
    assert seen["timeout_s"] == 300 + 1800


# ------------------------------------------------------------- the campaign files
REPO = Path(__file__).resolve().parents[2]


def test_the_lrz_campaigns_scripts_mount_every_folder_they_use(tmp_path, capsys):
    """`campaign run --dry-run campaigns/lrz.yaml`: every step in a container names
    the job's container, mounts in pyxis's forms, and mounts every folder its command
    names (bench/, the job folder, the check's --shared)."""
    data = yaml.safe_load((REPO / "campaigns" / "lrz.yaml").read_text())
    data["out"] = str(tmp_path / "out")
    path = tmp_path / "lrz.yaml"
    path.write_text(yaml.safe_dump(data))
    assert cli.main(["campaign", "run", "--dry-run", str(path)]) == 0
    out = capsys.readouterr().out
    steps = [x for x in out.splitlines() if x.startswith("srun ") and "--container-" in x]
    assert steps
    for line in steps:
        words = shlex.split(line.split(" || ")[0])
        opts = dict(w[2:].partition("=")[::2] for w in words if w.startswith("--container-"))
        if "container-image" in opts:  # the step that makes the job's container
            assert image_problem(opts["container-image"]) is None
            continue
        mounts = opts["container-mounts"].split(",")
        assert all(mount_problem(m) is None for m in mounts), mounts
        targets = [m.split(":")[1] for m in mounts]
        command = shlex.split(words[-1]) if words[-2] == "-c" else words
        used = [opts["container-workdir"]]
        used += [command[i + 1] for i, w in enumerate(command[:-1]) if w in ("--shared", "--data")]
        for folder in used:
            if folder.startswith("/"):
                assert any(folder == t or folder.startswith(t + "/") for t in targets), (
                    folder,
                    targets,
                )


@pytest.mark.parametrize(
    "key,value,why",
    [
        ("container_image", "stack.sqsh", "registry image"),
        ("container_mounts", ["bench:/bench"], "mount source"),
        ("sbatch", ["--container-image=nvcr.io#nvidia/pytorch:24.05-py3"], "holds '#'"),
        ("cpus_per_task", 5000, "out of range"),
    ],
)
def test_a_partition_pyxis_would_misread_is_one_line_naming_the_key(
    key, value, why, tmp_path, capsys
):
    data = {
        "name": "c",
        "out": str(tmp_path / "out"),
        "sweep": {"batch": [8], "nodes": 1},
        "testbeds": [
            {"name": "p", "slurm": {"partition": "gpu", "container_image": "/i.sqsh", key: value}}
        ],
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    assert cli.main(["campaign", "plan", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"testbeds[0].slurm.{key}: " in err[0] and why in err[0], err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "flag,value", [("--container-mounts", "/dss/data:/data"), ("--container-import-time", "60")]
)
def test_a_container_option_without_an_image_is_refused(flag, value, tmp_path, capsys):
    """Without --container-image no step runs in a container: the mounts (or the import
    time) would be dropped without a word."""
    out = tmp_path / "out"
    code = cli.main(
        ["scale", "--env", "slurm", "--nodes", "1", flag, value, "--dry-run"] + ["--out", str(out)]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"hpcbench: error: {flag} is for jobs in a container"), err
    assert not out.exists()


@pytest.mark.parametrize(
    "key,value", [("container_mounts", ["/dss/data:/data"]), ("container_import", "10m")]
)
def test_a_partitions_container_key_needs_its_image(key, value, tmp_path, capsys):
    def plan(slurm: dict) -> tuple[int, list[str]]:
        data = {
            "name": "c",
            "out": str(tmp_path / "out"),
            "sweep": {"batch": [8], "nodes": 1},
            "testbeds": [{"name": "p", "slurm": {"partition": "gpu", key: value, **slurm}}],
        }
        path = tmp_path / "c.yaml"
        path.write_text(yaml.safe_dump(data))
        code = cli.main(["campaign", "plan", str(path)])
        return code, capsys.readouterr().err.strip().splitlines()

    code, err = plan({})
    assert code == 2 and len(err) == 1 and "testbeds[0].slurm: " in err[0], err
    assert "is for jobs in a container" in err[0] and "container_image" in err[0], err
    assert plan({"container_image": "/i.sqsh"}) == (0, [])
    assert not (tmp_path / "out").exists()


def test_a_given_time_limit_gets_the_import_on_top():
    """lrz.yaml's `time: 30m`: the run's 30 minutes and the registry image's import
    allowance, not 30 minutes for both; a .sqsh's unpacking, or what is given."""
    spec = RunSpec("t.py", (), "python", "/b", (Placement("n1", 1, None),), time_limit_s=300)

    def minutes(**opts: Any) -> list[str]:
        lines = sbatch_script(spec, SlurmOptions(time_min=30, **opts), "ddp").splitlines()
        return [x for x in lines if x.startswith(("#SBATCH --time=", "#SBATCH --deadline="))]

    assert minutes(container_image="nvcr.io#nvidia/pytorch:24.05-py3") == [
        "#SBATCH --time=60",
        "#SBATCH --deadline=now+120minutes",  # the queue wait's 60 and the job's 60
    ]
    assert minutes(container_image="/dss/stack.sqsh")[0] == "#SBATCH --time=35"
    assert minutes(container_image="/x.sqsh", container_import_s=0)[0] == "#SBATCH --time=30"
    assert minutes()[0] == "#SBATCH --time=30"  # no container, nothing to import


def test_the_lrz_campaigns_jobs_get_the_import_on_top_of_their_time(tmp_path, capsys):
    data = yaml.safe_load((REPO / "campaigns" / "lrz.yaml").read_text())
    data["out"] = str(tmp_path / "out")
    path = tmp_path / "lrz.yaml"
    path.write_text(yaml.safe_dump(data))
    assert cli.main(["campaign", "run", "--dry-run", str(path)]) == 0
    times = {x for x in capsys.readouterr().out.splitlines() if x.startswith("#SBATCH --time=")}
    assert times == {"#SBATCH --time=60"}  # time: 30m, and 30 for the NGC image's import
