"""Jobs in containers as pyxis reads them: image and mount forms, every folder a job
uses mounted, the image imported once per node and job and removed however the job
ends, CPUs per rank, and the check job's deadline counting the import.

The batch scripts run here under bash with a stand-in for srun that reads the
pyxis options as pyxis 0.24.0 does (args.c, pyxis_slurmstepd.c: an image that
starts with '.' or '/' is a squashfs file, anything else a registry reference; a
step without --container-name gets a temporary container of its own,
pyxis_<job>.<step>, which the node's slurmstepd removes once the step's last task
there has ended, however it ended; a folder not mounted is not there) and runs each
task's command on this machine, as the mounts at the same path make it equivalent.
The real pyxis and enroot run the same scripts in the e2e testbed.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import stat
import subprocess
import sys
import time
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
    EXIT_MARKER,
    SlurmLauncher,
    SlurmOptions,
    image_problem,
    is_image_path,
    mount_problem,
    sbatch_script,
)
from hpcbench.measure.scale_options import sbatch_option
from hpcbench.schedulers import SlurmScheduler

# srun as pyxis reads it. Its state (which containers exist on which node, each
# import, each removal, the processes in each container) is kept in files under
# $PYXIS_STATE. Once the job has ended ($PYXIS_STATE/cancelled) no step starts. The
# node's slurmstepd, which the job's end does not stop, is a process of its own
# session: it removes the step's container once every task of the step has ended
# (slurm_spank_task_exit, pyxis_slurmstepd.c), whatever ended them.
FAKE_SRUN = r"""
import os, shlex, subprocess, sys, time
state = os.environ["PYXIS_STATE"]
def ended():
    return os.path.exists(os.path.join(state, "cancelled"))
if ended():
    sys.exit("srun: error: Unable to create step for job: Job/step already completing "
             "or completed")
args = sys.argv[1:]
opts = {}
while args and args[0].startswith("--"):
    key, _, value = args.pop(0)[2:].partition("=")
    opts[key] = value
nodes = os.environ["FAKE_NODES"].split(",")
ntasks = int(opts.get("ntasks", "1"))
per_node = int(opts.get("ntasks-per-node", ntasks))
tasks = [(nodes[i // per_node], i) for i in range(ntasks)]
def log(name, line):
    with open(os.path.join(state, name), "a") as f:
        f.write(line + "\n")
def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
def stepd(pids, containers):
    # a process of its own, outside the job's process group, as slurmstepd is
    if os.fork():
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    for _ in range(1200):  # bounded: 120 s
        if not any(alive(p) for p in pids):
            break
        time.sleep(0.1)
    for node, name in containers:
        os.remove(os.path.join(state, node, name))
        log("removed", node + " pyxis_" + name)
    os._exit(0)
def run_all(commands, containers=()):
    # every task at once, as srun starts them; the first failure's status
    started = [subprocess.Popen(argv, **kw) for argv, kw in commands]
    if containers:
        stepd([p.pid for p in started], containers)
    codes = [p.wait() for p in started]
    sys.exit(next((c for c in codes if c), 0))
image = opts.get("container-image")
if "container-name" in opts:
    sys.exit("fake pyxis: the scripts name no container")
if image is None:
    run_all([(args, {"env": {**os.environ, "SLURM_PROCID": str(rank), "SLURMD_NODENAME": node}})
             for node, rank in tasks])
mounts = [m.split(":")[:2] for m in opts.get("container-mounts", "").split(",") if m]
for src, dst in mounts:  # args.c add_mount
    if src[:1] not in "./" and src not in ("tmpfs", "umount"):
        sys.exit("pyxis: mount source must be a relative path, an absolute path, "
                 '"tmpfs" or "umount"')
    if src != dst and src not in ("tmpfs", "umount"):
        sys.exit("fake pyxis: mounts here keep their paths (%s:%s)" % (src, dst))
with open(os.path.join(state, "steps"), "a+") as f:
    f.seek(0)
    step = len(f.read().splitlines())
    f.write("step\n")
name = "%s.%d" % (os.environ.get("SLURM_JOB_ID", "7"), step)  # pyxis_<job>.<step>
containers = []
for node in sorted({node for node, _ in tasks}):
    if image[:1] not in "./":  # a registry reference
        log("imports", node + " docker://" + image)
        if image.endswith(".sqsh"):
            sys.exit("pyxis: importing docker image: %s ... failed" % image)
    else:
        log("imports", node + " " + image)
    os.makedirs(os.path.join(state, node), exist_ok=True)
    open(os.path.join(state, node, name), "w").close()
    containers.append((node, name))
targets = [d.rstrip("/") for _, d in mounts]
def inside(path):
    return any(path == t or path.startswith(t + "/") for t in targets)
workdir = opts.get("container-workdir", "/")
words = [workdir] + [w for a in args for w in shlex.split(a) if w.startswith("/")]
for path in words:
    if path != "/" and os.path.exists(path) and not inside(path) \
            and not path.startswith(("/bin", "/usr")):
        stepd([], containers)
        sys.exit("FAILED: [Errno 2] No such file or directory: %r" % path)
# each task in its node's container: enroot list --fancy shows its PID there
in_container = 'echo $$ >> "$PYXIS_STATE/$SLURMD_NODENAME/$CONTAINER.pids"; exec "$@"'
run_all([(["sh", "-c", in_container, "task", *args],
          {"cwd": workdir, "env": {**os.environ, "SLURM_PROCID": str(rank),
                                   "SLURMD_NODENAME": node, "CONTAINER": name}})
         for node, rank in tasks], containers)
"""


def _tools(tmp: Path) -> dict[str, str]:
    """PATH with the stand-ins, and their state folder."""
    bin_dir, state = tmp / "bin", tmp / "pyxis"
    bin_dir.mkdir()
    state.mkdir()
    srun = bin_dir / "srun"
    srun.write_text(f"#!{sys.executable}\n{FAKE_SRUN}")
    srun.chmod(srun.stat().st_mode | stat.S_IXUSR)
    (bin_dir / "scontrol").write_text('#!/bin/bash\necho "$FAKE_NODES" | tr , "\\n"\n')
    (bin_dir / "scontrol").chmod(0o755)
    return {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PYXIS_STATE": str(state),
        "FAKE_NODES": "node1,node2",
        "SLURM_JOB_NODELIST": "node1,node2",
    }


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


# The stand-in cluster's KillWait: seconds between a job's SIGTERM and its SIGKILL.
KILL_WAIT_S = 10


def _job_processes(pgid: int) -> list[int]:
    """The live (not zombie) processes of a job's process group."""
    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
            if fields[0] != "Z" and int(fields[2]) == pgid:
                found.append(int(stat_file.parent.name))
    return found


def _end_job(pgid: int, state: Path) -> float:
    """What Slurm does to a job's processes when it ends (its script's end, scancel or
    its time limit): no step starts any more, every process gets SIGCONT and SIGTERM,
    and SIGKILL after KillWait (slurmd req.c _rpc_terminate_job). How long they took
    to end."""
    (state / "cancelled").touch()
    start = time.monotonic()
    for sig in (signal.SIGCONT, signal.SIGTERM):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
    while _job_processes(pgid) and time.monotonic() - start < KILL_WAIT_S:
        time.sleep(0.1)
    took = time.monotonic() - start
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    return took


def _run(script: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The script as its job runs it, then the job's end as Slurm makes it."""
    proc = subprocess.Popen(
        ["bash", "-c", script],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        _end_job(proc.pid, Path(env["PYXIS_STATE"]))
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _folders(tmp: Path) -> tuple[Path, Path, Path]:
    bench, jobs, data = tmp / "bench", tmp / "jobs", tmp / "data"
    for folder in (bench, jobs, data):
        folder.mkdir()
    return bench, jobs, data


# The container's python is the image's; here /bin/sh, so the task runs `sh -c ARGS`.
IMAGE_OPTS = {"container_python": "/bin/sh"}


def test_the_check_jobs_shared_folder_and_the_data_are_mounted(tmp_path):
    """The check writes to --shared <job_dir>; a run reads --data: both are mounted."""
    bench, jobs, data = _folders(tmp_path)
    env = _tools(tmp_path)
    opts = SlurmOptions(container_image="/images/stack.sqsh", job_dir=str(jobs), **IMAGE_OPTS)
    touch = f"touch {jobs}/written && ls {data} >/dev/null"
    spec = _spec(bench, (touch, "--shared", str(jobs), "--data", str(data)), nodes=1)
    env["FAKE_NODES"] = "node1"
    proc = _run(sbatch_script(spec, opts, "ddp", job_name="hpcbench-c1"), env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (jobs / "written").exists()
    assert f"{EXIT_MARKER} 0" in proc.stdout


def test_a_folder_inside_a_users_mount_is_not_mounted_twice(tmp_path):
    bench, jobs, data = _folders(tmp_path)
    opts = SlurmOptions(
        container_image="/i.sqsh", container_mounts=(f"{tmp_path}:{tmp_path}",), job_dir=str(jobs)
    )
    script = sbatch_script(_spec(bench, ("--data", str(data))), opts, "ddp", job_name="j")
    assert f"--container-mounts={tmp_path}:{tmp_path} " in script


def _removed(state: Path, expect: list[str]) -> list[str]:
    """The containers the nodes' slurmstepd removed, once they number as many as
    expected (asked for at most 30 s: it removes them after the tasks ended)."""
    deadline = time.monotonic() + 30
    while True:
        removed = (
            sorted((state / "removed").read_text().splitlines())
            if (state / "removed").exists()
            else []
        )
        if len(removed) >= len(expect) or time.monotonic() > deadline:
            return removed
        time.sleep(0.1)


def test_the_image_is_imported_once_per_node_and_job_and_removed_after(tmp_path):
    """Horovod over Gloo: rank 0 serves the rendezvous in its own task, so the job is
    one step: one import per node, and no container left on any node."""
    bench, jobs, _ = _folders(tmp_path)
    env = _tools(tmp_path)
    opts = SlurmOptions(container_image="nvcr.io#nvidia/pytorch:24.05-py3", job_dir=str(jobs))
    spec = _spec(bench, ("true",))
    script = sbatch_script(spec, SlurmOptions(**{**opts.__dict__, **IMAGE_OPTS}), "horovod")
    # The rendezvous server is Horovod's; here rank 0's /bin/sh serves none.
    proc = _run(script.replace("for _ in $(seq 120)", "for _ in $(seq 1)"), env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    state = Path(env["PYXIS_STATE"])
    imports = (state / "imports").read_text().splitlines()
    assert sorted(imports) == [
        "node1 docker://nvcr.io#nvidia/pytorch:24.05-py3",
        "node2 docker://nvcr.io#nvidia/pytorch:24.05-py3",
    ]
    expect = ["node1 pyxis_7.0", "node2 pyxis_7.0"]
    assert _removed(state, expect) == expect
    assert not [p for p in state.glob("node*/*") if p.suffix != ".pids"]


def test_a_failed_import_stops_the_job_with_pyxiss_line_and_its_status(tmp_path):
    bench, jobs, _ = _folders(tmp_path)
    env = _tools(tmp_path)
    env["FAKE_NODES"] = "node1"
    witness = tmp_path / "ran"
    opts = SlurmOptions(container_image="stack.sqsh", job_dir=str(jobs), **IMAGE_OPTS)
    spec = _spec(bench, (f"touch {witness}",), nodes=1)
    proc = _run(sbatch_script(spec, opts, "ddp", job_name="j"), env)
    assert proc.returncode == 1
    assert "pyxis: importing docker image: stack.sqsh ... failed" in proc.stderr
    assert proc.stdout.splitlines()[-1] == f"{EXIT_MARKER} 1"
    assert not witness.exists()
    assert not list(Path(env["PYXIS_STATE"]).glob("node1/*"))  # no container made


def test_the_container_is_removed_when_the_workload_fails(tmp_path):
    bench, jobs, _ = _folders(tmp_path)
    env = _tools(tmp_path)
    opts = SlurmOptions(container_image="./stack.sqsh", job_dir=str(jobs), **IMAGE_OPTS)
    proc = _run(sbatch_script(_spec(bench, ("exit 3",)), opts, "ddp", job_name="j"), env)
    assert proc.returncode == 3 and proc.stdout.splitlines()[-1] == f"{EXIT_MARKER} 3"
    expect = ["node1 pyxis_7.0", "node2 pyxis_7.0"]
    assert _removed(Path(env["PYXIS_STATE"]), expect) == expect


@pytest.mark.parametrize("nodes", [1, 2])
def test_a_job_that_is_cancelled_while_it_runs_leaves_no_container(nodes, tmp_path):
    """scancel, a time limit, a Ctrl-C of hpcbench's: Slurm starts no step after it,
    SIGTERMs every process of the job and SIGKILLs what is left after KillWait. The
    container is pyxis's for the step alone, and each node's slurmstepd, which the
    job's end does not stop, removes it once the step's tasks there have ended."""
    bench, jobs, _ = _folders(tmp_path)
    env = _tools(tmp_path)
    env["FAKE_NODES"] = env["SLURM_JOB_NODELIST"] = ",".join(f"node{i + 1}" for i in range(nodes))
    state = Path(env["PYXIS_STATE"])
    opts = SlurmOptions(container_image="/images/stack.sqsh", job_dir=str(jobs), **IMAGE_OPTS)
    spec = _spec(bench, ("sleep 120",), nodes=nodes)
    proc = subprocess.Popen(
        ["bash", "-c", sbatch_script(spec, opts, "ddp", job_name="j")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        running = [state / f"node{i + 1}" / "7.0.pids" for i in range(nodes)]
        deadline = time.monotonic() + 60  # bounded: the workload running on every node
        while not all(p.exists() for p in running):
            assert proc.poll() is None and time.monotonic() < deadline, proc.returncode
            time.sleep(0.1)
        took = _end_job(proc.pid, state)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    expect = [f"node{i + 1} pyxis_7.0" for i in range(nodes)]
    assert _removed(state, expect) == expect
    assert not [p for p in state.glob("node*/*") if p.suffix != ".pids"], "a container is left"
    assert took < KILL_WAIT_S  # every process of the job ended before its SIGKILL


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


def test_the_nodes_cpus_come_from_sinfo(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sinfo").write_text(
        '#!/bin/bash\necho "$@" > ' + f"{tmp_path}/args\n" + "printf ' 64+\\n 48\\n'\n"
    )
    (bin_dir / "sinfo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    scheduler = SlurmScheduler(SlurmLauncher(SlurmOptions(partition="gpu")))
    assert scheduler.node_cpus() == 48
    assert (tmp_path / "args").read_text().split() == [
        "--noheader",
        "--partition=gpu",
        "--format=%c",
    ]


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
