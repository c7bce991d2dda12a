"""`hpcbench deploy --env gpulab` on this machine through the gpulab-cli stand-in
(tests/standins/gpulab: GPULab's commands and job model, the jobs run on the
local Docker engine, CPU only), with the settings a user exports (TF_VAR_*):
the ways a deploy goes wrong: a job that cannot start, a cluster that is full.

A deploy that succeeds, `verify`, a 1-2 worker sweep and `destroy`, for one job
with two GPUs (1x2) and two jobs with one (2x1), run in tests/e2e/test_campaign.py,
on the campaign's own testbeds (test_gpulab_testbed_held_a_lease_for_each_running_job
and test_resume_runs_what_is_left_past_a_failed_testbed).

Run under the shared Docker lock:
    flock /tmp/hpcbench-docker.lock timeout 1500 \
      .venv/bin/python -m pytest -q tests/e2e/test_gpulab.py
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.conftest import hpcbench
from tests.interrupt import as_from_a_terminal

REPO = Path(__file__).resolve().parents[2]
STANDIN = REPO / "tests/standins/gpulab"
# What fits two cores: one CPU and 2 GB per (pretend) GPU.
SIZE = ["--var", "cpus_per_gpu=1", "--var", "memory_gb_per_gpu=2", "--var", "start_timeout=300"]
PASSWORD = "e2e pass"

pytestmark = pytest.mark.e2e
sys.path.insert(0, str(STANDIN))
gpulab_cli = pytest.importorskip(
    "gpulab_cli",
    reason="the stand-in needs click, docker and imecilabt-gpulab-common (pip install '.[test]')",
)


@dataclass
class Bed:
    root: Path
    environ: dict[str, str]

    @property
    def state(self) -> Path:
        return self.root / "state" / "gpulab"

    def hpcbench(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return hpcbench({**self.environ, **env}, *args, timeout=1200)

    def jobs(self) -> dict[str, str]:
        """Every job the stand-in knows: id -> status."""
        d = self.root / "standin" / "jobs"
        return (
            {p.stem: json.loads(p.read_text())["job"]["state"]["status"] for p in d.glob("*.json")}
            if d.is_dir()
            else {}
        )

    def running_containers(self) -> list[str]:
        out = subprocess.run(
            [
                "docker",
                "ps",
                "--filter",
                f"label={gpulab_cli.LABEL}={gpulab_cli.standin_id(self.root / 'standin')}",
                "--format",
                "{{.Names}}",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return out.split()


@pytest.fixture
def bed(tmp_path: Path) -> Iterator[Bed]:
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        pytest.fail("no Docker engine answers: `make tools` starts one")
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-days",
            "2",
            "-subj",
            "/CN=e2e",
            "-keyout",
            str(tmp_path / "key.pem"),
            "-out",
            str(tmp_path / "cert.pem"),
            "-passout",
            f"pass:{PASSWORD}",
        ],
        check=True,
        capture_output=True,
    )
    pem = tmp_path / "login.pem"
    pem.write_text((tmp_path / "cert.pem").read_text() + (tmp_path / "key.pem").read_text())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_VAR_", "GPULAB_"))}
    bed = Bed(
        tmp_path,
        {
            **env,
            # The stand-in first on PATH, as `pip install imecilabt-gpulab-cli` would put
            # the real one.
            "PATH": f"{STANDIN / 'bin'}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}"
            f"{env['PATH']}",
            "HPCBENCH_STATE": str(tmp_path / "state"),
            "GPULAB_STANDIN_DIR": str(tmp_path / "standin"),
            # What the user exports (docs/testbeds.md).
            "TF_VAR_project": "e2eproj",
            "TF_VAR_pem_path": str(pem),
            "TF_VAR_stack_image": "hpcbench/stack:latest",
            "HPCBENCH_PEM_PASSWORD": PASSWORD,
        },
    )
    yield bed
    bed.hpcbench("destroy", "--env", "gpulab")
    still = gpulab_cli.purge(tmp_path / "standin")
    assert not still, f"jobs still running after destroy: {still}"


def one_line(proc: subprocess.CompletedProcess[str]) -> str:
    return (proc.stdout[-3000:] + proc.stderr[-3000:]).strip()


def test_a_job_that_dies_fails_the_deploy_naming_its_state(bed: Bed) -> None:
    """An image without sshd makes the job exit at once. `submit
    --wait-run` would have returned 0; the deploy names the state and the exit
    code in one line and keeps nothing running."""
    proc = bed.hpcbench(
        "deploy",
        "--env",
        "gpulab",
        "--var",
        "topology=1x1",
        *SIZE,
        "--var",
        "stack_image=debian:bookworm-slim",
    )
    assert proc.returncode != 0
    lines = [x for x in proc.stdout.splitlines() + proc.stderr.splitlines() if "GPULab job" in x]
    assert lines and "is FAILED (exit code 127), not RUNNING" in lines[0], one_line(proc)
    # hpcbench's own one line names the cause, not the clean-up that followed it.
    assert "is FAILED (exit code 127)" in proc.stderr.strip().splitlines()[-1], one_line(proc)
    assert set(bed.jobs().values()) == {"FAILED"}
    assert not list((bed.state / "leases").glob("*.json"))
    # The real client's --wait-run on the same job: exit 0 (what gpulab.sh no longer trusts).
    (job_id,) = bed.jobs()
    wait = subprocess.run(
        ["gpulab-cli", "wait", "--wait-run", job_id],
        env={
            **bed.environ,
            "GPULAB_CERT": bed.environ["TF_VAR_pem_path"],
            "GPULAB_PASSWORD": PASSWORD,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert wait.returncode == 0 and "Job is now running" in wait.stderr


def test_ctrl_c_while_queued_then_destroy_leaves_no_job(bed: Bed) -> None:
    """A full cluster keeps the jobs QUEUED; Ctrl-C (SIGINT
    to the process group, as a terminal sends it), then destroy."""
    full = {"GPULAB_STANDIN_SLOTS": "0"}
    deploy = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hpcbench",
            "deploy",
            "--env",
            "gpulab",
            "--var",
            "topology=2x1",
            *SIZE,
        ],
        cwd=REPO,
        env={**bed.environ, **full},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=as_from_a_terminal,
    )
    leases = bed.state / "leases"
    deadline = time.monotonic() + 300
    while len(list(leases.glob("*.json"))) < 2:
        assert deploy.poll() is None, deploy.communicate()[0][-3000:]
        assert time.monotonic() < deadline, "no leases while the jobs are queued"
        time.sleep(0.5)
    assert set(bed.jobs().values()) == {"QUEUED"}
    os.killpg(deploy.pid, signal.SIGINT)
    output, _ = deploy.communicate(timeout=300)
    assert deploy.returncode != 0
    proc = bed.hpcbench("destroy", "--env", "gpulab", **full)
    assert proc.returncode == 0, one_line(proc) + output[-2000:]
    # A cancel Ctrl-C started may still be confirming (it outlives Terraform's kill).
    deadline = time.monotonic() + 60
    while set(bed.jobs().values()) != {"CANCELLED"} and time.monotonic() < deadline:
        time.sleep(1)
    assert bed.jobs() and set(bed.jobs().values()) == {"CANCELLED"}, output[-2000:]
    assert not bed.running_containers()
