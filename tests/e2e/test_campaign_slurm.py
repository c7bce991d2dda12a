"""Every kind of testbed in one campaign, end to end: two Slurm partitions of
the e2e testbed, reached as an LRZ user reaches a login node (sbatch over SSH, host key
checked), beside a local testbed the campaign deploys and destroys, into one report.

The e2e testbed (conftest.E2E_VARS) runs Slurm with two partitions that differ in
their links: `fast` is node1 and node2 at 1 Gbit/s, `slow` node1 and node3, whose
link is shaped to 200 Mbit/s (node_link_rates). The tests show that a partition that
does not exist stops the campaign before anything runs or is deployed; that Ctrl-C
cancels the job in flight (squeue shows none of the campaign's jobs after); that
`--resume` runs what is left, within the bound `campaign plan` gave; and that the
report describes and compares the three systems, the slow partition's 2-node runs
slower than the fast one's. The campaign then resumes with LRZ's and GWDG's ways as
campaigns/lrz.yaml and gwdg.yaml give them (tests/slurm_sites.py): the stack's .sqsh
through real pyxis and enroot (DDP, Horovod over Gloo, Horovod over MPI under
--mpi=pmix) and a `module load` partition, all in the same report.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from hpcbench.measure import analysis
from tests.e2e.conftest import (
    E2E_VARS,
    STACK_SQSH,
    TINY_SWEEP,
    DeployedTestbed,
    campaign_run,
    head,
    lean_local,
    partition,
)
from tests.slurm_sites import site_slurm

pytestmark = [pytest.mark.e2e, pytest.mark.stage("slurm campaigns")]

REPO = Path(__file__).resolve().parents[2]
# One thread a rank: the nodes' CPU quota (0.6) is not visible inside an enroot
# container, where a rank would otherwise take two; the same in every partition.
SWEEP = {
    **TINY_SWEEP,
    "batch": [4],
    "nodes": [1, 2],
    "probe_max_bytes": "1M",
    "backend": "ddp",
    "threads": 1,
}
# The campaign's own local testbed: a name, subnet and ports of its own, one node.
BUILT = {
    "name": "hpcbench-e2ec",
    "subnet": "172.30.19.0/24",
    "ssh_port_base": 22960,
    "jupyter_port": 28989,
    "node_count": 1,
    "cpus_per_node": 0.6,
    "link_rate": "1gbit",
}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One campaign folder for the module: the containers and modules test resumes the
    mixed campaign's, so that all its systems share one report."""
    return tmp_path_factory.mktemp("mixed")


def as_user(bed: DeployedTestbed, slurm: dict, name: str, title: str) -> dict:
    """A partition with the given `slurm:` keys, reached as the testbed's user
    (testbed_user) with the testbed key: its jobs run as that user, as a cluster's
    do, in the shared folder."""
    access = head(bed).access
    assert access is not None
    login = {
        "login": f"hpcbench@{access.host}:{access.port}",
        "ssh_key": str(bed.state / "local" / "ssh_mesh_ed25519"),
        "known_hosts": access.known_hosts,
        "job_dir": "/shared/slurm-jobs",
        "bench_dir": "/opt/hpcbench/bench",
        "nodes": 2,
    }
    return {"name": name, "title": title, "slurm": {**slurm, **login}}


def the_lrz_and_gwdg_ways(bed: DeployedTestbed) -> list[dict]:
    """campaigns/lrz.yaml's partition keys (the stack's .sqsh through pyxis: DDP,
    Horovod over Gloo, Horovod over MPI under --mpi=pmix) and gwdg.yaml's (its setup
    line, the environment's python), on the fast partition (tests/slurm_sites.py)."""
    lrz = site_slurm("lrz", "fast", f"/images/{STACK_SQSH.name}")
    gwdg = site_slurm("gwdg", "fast")
    return [
        as_user(bed, lrz, "pyxis-ddp", "e2e Slurm, pyxis, DDP"),
        # No probe of their own: pyxis-ddp's probes the same nodes through pyxis, and
        # each probe there costs a minute or more of the suite (its container made anew).
        {
            **as_user(bed, lrz, "pyxis-gloo", "e2e Slurm, pyxis, Horovod over Gloo"),
            "sweep": {"backend": "horovod", "no_probe": True},
        },
        {
            **as_user(bed, lrz, "pyxis-mpi", "e2e Slurm, pyxis, Horovod over MPI (PMIx)"),
            "sweep": {"backend": "horovod", "horovod_controller": "mpi", "no_probe": True},
        },
        as_user(bed, gwdg, "lmod", "e2e Slurm, module load, DDP"),
    ]


def campaign_file(
    bed: DeployedTestbed, tmp: Path, *partitions: str, more: tuple[dict, ...] = ()
) -> Path:
    data = {
        "name": "mixed",
        "out": str(tmp / "results"),
        "sweep": SWEEP,
        "testbeds": [
            *(partition(bed, p) for p in partitions),
            *more,
            lean_local("built", "local, deployed by the campaign", BUILT, sweep={"nodes": 1}),
        ],
    }
    path = tmp / "mixed.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def built_containers() -> list[str]:
    return subprocess.run(
        ["docker", "ps", "-a", "--filter", f"name={BUILT['name']}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()


def journal(tmp: Path) -> list[dict]:
    path = tmp / "results" / "results.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []


def run(
    bed: DeployedTestbed, tmp: Path, path: Path, *args: str, stop_when=None
) -> tuple[int, str, float]:
    """`campaign run` as from a terminal; Ctrl-C once `stop_when(journal)` says so. Its
    exit status, output and wall time."""
    log = tmp / f"run-{len(list(tmp.glob('run-*.out')))}.out"
    started = time.monotonic()
    code = campaign_run(
        path, args, bed.environ, log, lambda: stop_when is not None and stop_when(journal(tmp))
    )
    return code, log.read_text(), time.monotonic() - started


def test_a_partition_that_does_not_exist_stops_the_campaign_before_anything_runs(
    deployed: DeployedTestbed, tmp_path: Path
) -> None:
    testbed = deployed
    path = campaign_file(testbed, tmp_path, "fast", "nosuch")
    proc = testbed.hpcbench("campaign", "run", str(path), timeout=600)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    err = proc.stderr.strip().splitlines()
    assert err[-1].startswith(
        f"hpcbench: error: {path}: testbeds[1] (nosuch): partition "
        "'nosuch' does not exist on 127.0.0.1"
    ), err
    # Nothing measured, submitted or deployed: the stores, Slurm's queue, Docker.
    assert not [p for p in (tmp_path / "results").glob("*/results.jsonl")]
    assert not jobs(testbed)
    assert built_containers() == []


def test_two_partitions_and_a_deployed_testbed_in_one_report(
    deployed: DeployedTestbed, results: Path
) -> None:
    testbed, tmp_path = deployed, results
    path = campaign_file(testbed, tmp_path, "fast", "slow")

    def fast_cell_measured(records: list[dict]) -> bool:
        return any(
            r.get("kind") == "cell" and r.get("testbed") == "fast" and r.get("status") == "measured"
            for r in records
        )

    rc, out, _ = run(testbed, tmp_path, path, stop_when=fast_cell_measured)
    assert rc == 130, out[-4000:]
    assert "interrupted" in out
    # Ctrl-C cancelled the job in flight: once its nodes are released (a cancelled job
    # is COMPLETING a moment), Slurm holds none of the campaign's jobs.
    assert not jobs(testbed)
    assert built_containers() == []  # the deployed testbed's turn had not come

    plan = testbed.hpcbench("campaign", "plan", str(path))
    assert plan.returncode == 0, plan.stderr
    most = re.search(r"^total: wall about \S+ \(up to (\S+)\)", plan.stdout, re.M)
    assert most, plan.stdout[-2000:]
    rc, out, took = run(testbed, tmp_path, path, "--resume")
    assert rc == 0, out[-6000:]
    assert "check job waited" in out and "queued" in out  # each job's queue wait, as it ran
    # The plan's bound held for what was left (a lease is sized from it).
    assert took <= duration_s(most[1]), (took, most[1], plan.stdout[-3000:])
    states = {}
    for r in journal(tmp_path):
        if r.get("kind") == "cell":
            states[r["cell"]] = (r["testbed"], r["status"])
    assert {s for _, s in states.values()} == {"measured"}
    assert {t for t, _ in states.values()} == {"fast", "slow", "built"}
    assert built_containers() == []  # deployed, measured and destroyed

    # One report, three systems, each described from what its nodes reported.
    report = tmp_path / "results"
    systems = {s["testbed"]: s for s in json.loads((report / "systems.json").read_text())}
    assert {k: s["kind"] for k, s in systems.items()} == {
        "fast": "slurm",
        "slow": "slurm",
        "built": "deployed",
    }
    assert systems["fast"]["where"].startswith("partition fast via root@127.0.0.1")
    assert systems["fast"]["queue_wait_per_job"].startswith("median ")
    assert "GB/s" in systems["slow"]["measured_bus_bandwidth"]  # probed, not assumed
    text = (report / "report.md").read_text()
    for title in (
        "e2e Slurm, partition fast",
        "e2e Slurm, partition slow",
        "local, deployed by the campaign",
    ):
        assert title in text

    def two_node_rate(name: str) -> float:
        lines = (report / name / "results.jsonl").read_text().splitlines()
        runs = [json.loads(x) for x in lines if '"kind": "run"' in x]
        [two] = [r for r in runs if r["workers"] == 2 and r["status"] == "ok"]
        assert isinstance(two.get("queue_wait_s"), int | float)
        return analysis.run_stats(two)["throughput"]

    # node3's link is a fifth of the others': the slow partition's 2-node runs lose more.
    assert two_node_rate("slow") < two_node_rate("fast")

    # The deployed testbed's one worker was measured on this machine before it was
    # booked, in a container of its first node's planned limits (0.6 of a core on any
    # core), once for the interrupted run and its resumption; its plan took it.
    lines = (report / "before_booking" / "results.jsonl").read_text().splitlines()
    [here] = [json.loads(x) for x in lines]
    assert here["status"] == "ok" and here["testbeds"] == ["built"], here.get("error")
    limits = here["node_limits"]
    # Terraform's ceil(0.6 x 100000) is 60001: the quota as planned, not as rounded here.
    assert limits["cpu_quota_us"] == pytest.approx(0.6 * limits["cpu_period_us"], abs=1)
    assert limits["cpu_set"] is None
    [argv] = here["command"]
    assert argv[:2] == ["docker", "run"] and argv[argv.index("--network") + 1] == "none"
    plans = [
        r
        for r in journal(tmp_path)
        if r.get("kind") == "forecast" and r["testbed"] == "built" and r["made"] == "plan"
    ]
    assert len(plans) == 1 and plans[0]["cells"], plans
    for c in plans[0]["cells"]:
        assert c["single_source"].startswith(
            f"{analysis.run_stats(here)['throughput']:.1f} images/s measured on this machine "
            "before booking (a node's limits: 0.6 core(s)"
        ), c


def duration_s(text: str) -> float:
    """hpcbench.core.progress.format_duration's text back in seconds: 1h02m, 5m38s, 42s."""
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text)
    assert parts and text, text
    h, m, s = (int(x or 0) for x in parts.groups())
    return h * 3600 + m * 60 + s


def test_pyxis_and_lmod_partitions_join_the_same_report(
    deployed: DeployedTestbed, results: Path
) -> None:
    """The LRZ way (the stack's .sqsh through real pyxis and enroot: DDP, Horovod over
    Gloo) and the GWDG way (Lmod's module load, the environment's python), as the
    testbed's user, beside the systems the mixed campaign measured: one report."""
    testbed, tmp_path = deployed, results
    path = campaign_file(
        testbed, tmp_path, "fast", "slow", more=tuple(the_lrz_and_gwdg_ways(testbed))
    )
    rc, out, _ = run(testbed, tmp_path, path, "--resume")
    assert rc == 0, out[-6000:]
    states = {}
    for r in journal(tmp_path):
        if r.get("kind") == "cell":
            states[r["cell"]] = (r["testbed"], r["status"])
    new = {"pyxis-ddp", "pyxis-gloo", "pyxis-mpi", "lmod"}
    assert new <= {t for t, _ in states.values()}
    assert {s for t, s in states.values() if t in new} == {"measured"}, states
    report = tmp_path / "results"
    systems = {s["testbed"]: s for s in json.loads((report / "systems.json").read_text())}
    assert new | {"fast", "slow", "built"} <= set(systems), sorted(systems)
    text = (report / "report.md").read_text()
    for title in ("pyxis, Horovod over Gloo", "pyxis, Horovod over MPI", "module load"):
        assert title in text, title
    for name in new:
        lines = [json.loads(x) for x in (report / name / "results.jsonl").read_text().splitlines()]
        ok = {r["workers"] for r in lines if r.get("kind") == "run" and r["status"] == "ok"}
        assert ok == {1, 2}, (name, ok)
        # The all-reduce probe ran to its end through pyxis and under Lmod's python.
        if name in ("pyxis-ddp", "lmod"):
            probes = [r["status"] for r in lines if r.get("kind") == "probe"]
            assert probes and set(probes) == {"ok"}, (name, probes)
    # Each job made its container once per node and removed it: none is left, and the
    # jobs ran as the testbed's user, not as root.
    for node in ("node1", "node2"):
        left = subprocess.run(
            [
                "docker",
                "exec",
                f"{E2E_VARS['name']}-{node}",
                "su",
                "-",
                "hpcbench",
                "-c",
                "enroot list",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert left.returncode == 0 and left.stdout.strip() == "", left.stdout + left.stderr
    owners = subprocess.run(
        [
            "docker",
            "exec",
            f"{E2E_VARS['name']}-node1",
            "find",
            "/shared/slurm-jobs",
            "-name",
            "*.out",
            "-printf",
            "%u\\n",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert set(owners.stdout.split()) == {"hpcbench"}, owners.stdout + owners.stderr


# A scancel in front of the real one on the login node (/usr/local/bin comes first on
# ssh's default PATH): it fails while /tmp/scancel-fails counts down, then runs it.
FLAKY_SCANCEL = """#!/bin/bash
n=$(cat /tmp/scancel-fails 2>/dev/null || echo 0)
if [ "$n" -gt 0 ]; then
  echo $((n - 1)) > /tmp/scancel-fails
  echo "scancel: error: stand-in failure ($n left)" >&2
  exit 1
fi
exec /usr/bin/scancel "$@"
"""
HEAD = f"{E2E_VARS['name']}-node1"


def on_head(*argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", "exec", "-i", HEAD, *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def jobs(bed: DeployedTestbed) -> dict[str, str]:
    """Slurm's jobs of hpcbench's names, id -> state, COMPLETING ones once gone (bounded:
    30 s for a cancelled job's nodes to be released)."""
    deadline = time.monotonic() + 30
    while True:
        proc = on_head("squeue", "--noheader", "--format=%i %j %T")
        assert proc.returncode == 0, proc.stderr
        rows = [r.split() for r in proc.stdout.splitlines() if "hpcbench-" in r]
        if not any(r[2] == "COMPLETING" for r in rows) or time.monotonic() > deadline:
            return {r[0]: r[2] for r in rows}
        time.sleep(1)


def interrupted_with_scancel_failing(
    bed: DeployedTestbed, tmp: Path, fails: int
) -> tuple[int, str, Path]:
    """A campaign of the fast partition, Ctrl-C once its first run's job runs, with
    scancel on the login node failing `fails` times: exit status, output, file."""
    path = campaign_file(bed, tmp, "fast")
    data = yaml.safe_load(path.read_text())
    data["testbeds"] = data["testbeds"][:1]  # the partition alone
    # A run long enough to outlast every scancel tried (it is cancelled after).
    data["testbeds"][0]["sweep"] = {"nodes": [1], "no_probe": True, "windows": 500}
    path.write_text(yaml.safe_dump(data))

    def a_run_is_running(records: list[dict]) -> bool:
        verified = any(r.get("phase") == "verify" and r.get("status") == "ok" for r in records)
        return verified and "RUNNING" in jobs(bed).values()

    assert on_head("tee", "/usr/local/bin/scancel", stdin=FLAKY_SCANCEL).returncode == 0
    on_head("chmod", "755", "/usr/local/bin/scancel")
    on_head("sh", "-c", f"echo {fails} > /tmp/scancel-fails")
    try:
        rc, out, _ = run(bed, tmp, path, stop_when=a_run_is_running)
    finally:
        on_head("rm", "-f", "/usr/local/bin/scancel")
    return rc, out, path


def test_ctrl_c_with_a_scancel_that_fails_twice_leaves_no_job(
    deployed: DeployedTestbed, tmp_path: Path
) -> None:
    before = set(jobs(deployed))
    rc, out, _ = interrupted_with_scancel_failing(deployed, tmp_path, fails=2)
    assert rc == 130, out[-4000:]
    assert on_head("cat", "/tmp/scancel-fails").stdout.strip() == "0"  # tried past both
    assert set(jobs(deployed)) <= before, out[-4000:]
    assert "may still be queued or running" not in out


def test_a_scancel_that_cannot_succeed_names_the_job_left_and_its_command(
    deployed: DeployedTestbed, tmp_path: Path
) -> None:
    before = set(jobs(deployed))
    rc, out, path = interrupted_with_scancel_failing(deployed, tmp_path, fails=99)
    left = set(jobs(deployed)) - before
    try:
        assert rc == 130, out[-4000:]
        [job] = left  # the run's job goes on: said where the user sees it
        access = head(deployed).access
        assert access is not None
        command = f"`scancel {job}` on the login node {access.user}@{access.host} (ssh port "
        said = [line for line in out.splitlines() if "STILL QUEUED OR RUNNING" in line]
        assert said and f"slurm job {job} may still be queued" in said[0], out[-4000:]
        assert command in said[0]
        status = deployed.hpcbench("campaign", "status", str(path))
        assert status.returncode == 0, status.stderr
        shown = [x for x in status.stdout.splitlines() if x.startswith("STILL QUEUED")]
        assert shown and f"slurm job {job} of testbed fast" in shown[0] and command in shown[0]
        assert f"slurm job {job} may still be queued or running" in status.stdout.split("\n")[2]
    finally:
        for job in left:
            on_head("/usr/bin/scancel", job)
    assert set(jobs(deployed)) <= before


def test_a_missing_image_fails_its_testbed_with_pyxiss_line_and_the_next_one_runs(
    deployed: DeployedTestbed, tmp_path: Path
) -> None:
    lrz = site_slurm("lrz", "fast", "/images/no-such-image.sqsh")
    path = campaign_file(deployed, tmp_path, "fast")
    data = yaml.safe_load(path.read_text())
    fast = {**data["testbeds"][0], "sweep": {"nodes": [1], "no_probe": True}}
    data["testbeds"] = [as_user(deployed, lrz, "no-image", "e2e Slurm, no such image"), fast]
    path.write_text(yaml.safe_dump(data))
    rc, out, _ = run(deployed, tmp_path, path)
    assert rc == 1, out[-4000:]
    cause = "[ERROR] No such file or directory: /images/no-such-image.sqsh"
    failed = [line for line in out.splitlines() if "verify FAILED" in line]
    assert failed and cause in failed[0], out[-4000:]
    states = {r["cell"]: r for r in journal(tmp_path) if r.get("kind") == "cell"}
    fast_states = {r["status"] for r in states.values() if r["testbed"] == "fast"}
    assert fast_states == {"measured"}, (states, out[-4000:])
    bad = [r for r in states.values() if r["testbed"] == "no-image"]
    assert bad and all(r["status"] == "failed" and cause in r["why"] for r in bad)
    status = deployed.hpcbench("campaign", "status", str(path))
    assert cause in status.stdout, status.stdout
    report = tmp_path / "results"
    assert cause in (report / "report.html").read_text()
    assert cause in html.unescape((report / "report.md").read_text())
