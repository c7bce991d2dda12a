"""Jobs in containers as pyxis runs them: every folder a job uses mounted, the image
imported once per node and job and removed however the job ends, and the nodes' CPUs
read from sinfo (the options as pyxis reads them: tests/unit/test_slurm_containers.py).

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
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcbench.launchers.slurm import (
    EXIT_MARKER,
    SlurmLauncher,
    SlurmOptions,
    sbatch_script,
)
from hpcbench.schedulers import SlurmScheduler
from tests.unit.test_slurm_containers import _folders, _spec

pytestmark = pytest.mark.integration


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


def test_a_rendezvous_server_that_cannot_start_fails_the_job_without_waiting(tmp_path):
    """Horovod over Gloo where the python that serves the rendezvous is missing: rank 0
    sees its server gone and runs its workload at once (it fails too), rather than
    waiting out the minute every task gives the server to answer."""
    bench, jobs, _ = _folders(tmp_path)
    env = _tools(tmp_path)
    env["FAKE_NODES"] = "node1"
    opts = SlurmOptions(
        container_image="./stack.sqsh", job_dir=str(jobs), container_python="/no/such/python"
    )
    spec = _spec(bench, ("true",), nodes=1)
    started = time.monotonic()
    proc = _run(sbatch_script(spec, opts, "horovod", job_name="j"), env)
    took = time.monotonic() - started
    assert proc.returncode == 127, proc.stdout + proc.stderr  # the shell's: not found
    assert took < 30, took  # the wait alone is 60 s


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
