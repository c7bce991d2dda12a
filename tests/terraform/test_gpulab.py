"""GPULab: the job definitions Terraform renders, read as GPULab reads
them, and terraform/modules/gpulab/scripts/gpulab.sh driven against the
gpulab-cli stand-in (tests/standins/gpulab) with a full cluster (every job
stays QUEUED), so no Docker engine is needed here. tests/e2e/test_gpulab.py
runs the jobs.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.interrupt import as_from_a_terminal
from tests.terraform.conftest import REPO
from tests.terraform.test_artefacts import plan_files

GPULAB_SH = REPO / "terraform/modules/gpulab/scripts/gpulab.sh"
STANDIN_BIN = REPO / "tests/standins/gpulab/bin"
IMAGE = "gitlab.ilabt.imec.be:4567/hpcbench/stack:1.0"
PASSWORD = "s3cret pass"

job2 = pytest.importorskip(
    "imecilabt.gpulab.schemas.job2",
    reason="GPULab's schema needs imecilabt-gpulab-common==6.0.16 (pip install '.[test]')",
)


def rendered_jobs(tf, tmp_path: Path, **variables: str) -> list[dict]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    files = plan_files(tf, "gpulab", tmp_path, stack_image=IMAGE, **variables)
    names = sorted((k for k in files if k.startswith("gpulab-job")), key=lambda k: int(k[10:-5]))
    return [json.loads(files[n]) for n in names]


# --- the job's command --------------- --------------------------------------


def test_command_runs_under_bash_with_host_keys(tf, tmp_path: Path) -> None:
    """GPULab runs `command` as docker-py does: a string is split with shlex and
    run with no shell (job2.py:917-923), so the script must be bash's argument;
    a job runs no systemd, so sshd's host keys come from `ssh-keygen -A`."""
    (job,) = rendered_jobs(tf, tmp_path, topology="1x2")
    command = job["request"]["docker"]["command"]
    assert isinstance(command, list) and command[:2] == ["/bin/bash", "-c"], command
    script = command[2]
    lines = script.splitlines()
    assert "ssh-keygen -A" in lines
    assert lines[-1] == "exec /usr/sbin/sshd -D -e -p 2222 -p 22"
    assert lines.index("ssh-keygen -A") < len(lines) - 1
    # What docker-py would do with the list: argv as given, the script whole.
    assert job2.NewJobV4CLI.model_validate(job).request.docker.command == command
    # The script parses as bash and uses the key from the environment.
    proc = subprocess.run(["bash", "-n", "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert '"$HPCBENCH_SSH_PUBKEY"' in script


# --- storage and features ---------------------------------------------------


def test_project_share_auto_and_features(tf, tmp_path: Path) -> None:
    jobs = rendered_jobs(tf, tmp_path, topology="2x1")
    for job in jobs:
        assert job["request"]["docker"]["storage"] == [
            {"hostPath": "PROJECT_SHARE_AUTO", "containerPath": "/project"}
        ]
        assert "features" not in job["request"]["resources"]
        parsed = job2.NewJobV4CLI.model_validate(job)
        assert parsed.request.docker.storage[0].host_path.rstrip("/") == "PROJECT_SHARE_AUTO"
    (job,) = rendered_jobs(tf, tmp_path / "f", topology="1x1", features='["UNFIREWALLED_PORTS"]')
    assert job["request"]["resources"]["features"] == ["UNFIREWALLED_PORTS"]
    job2.NewJobV4CLI.model_validate(job)


# --- the password is no Terraform variable -----------------------------------


def test_no_pem_password_variable(tf, tmp_path: Path) -> None:
    for rel in ("environments/gpulab", "terraform/modules/gpulab"):
        result = tf(rel)("providers", "schema", "-json")  # initialised, config loads
        assert result.rc == 0, result.out
    text = "".join(
        p.read_text()
        for d in ("environments/gpulab", "terraform/modules/gpulab")
        for p in (REPO / d).rglob("*.tf")
    )
    assert 'variable "pem_password"' not in text and "var.pem_password" not in text
    files = plan_files(tf, "gpulab", tmp_path, topology="1x1", stack_image=IMAGE)
    assert all(PASSWORD not in v for v in files.values())


# --- gpulab.sh against the stand-in ----------------------------------------


@pytest.fixture
def login_pem(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A login PEM as the portal gives it: certificate + encrypted RSA key."""
    d = tmp_path_factory.mktemp("pem")
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
            "/CN=standin",
            "-keyout",
            str(d / "key.pem"),
            "-out",
            str(d / "cert.pem"),
            "-passout",
            f"pass:{PASSWORD}",
        ],
        check=True,
        capture_output=True,
    )
    pem = d / "login.pem"
    pem.write_text((d / "cert.pem").read_text() + (d / "key.pem").read_text())
    return pem


@pytest.fixture
def standin(tmp_path: Path, login_pem: Path) -> dict[str, str]:
    """Environment for gpulab.sh with the stand-in first on PATH and a full cluster."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPULAB_", "TF_VAR_"))}
    env.pop("HPCBENCH_PEM_PASSWORD", None)
    return {
        **env,
        "PATH": f"{STANDIN_BIN}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
        "GPULAB_STANDIN_DIR": str(tmp_path / "standin"),
        "GPULAB_STANDIN_SLOTS": "0",
        "GPULAB_CERT": str(login_pem),
        "GPULAB_PROJECT": "myproj",
        "HPCBENCH_PEM_PASSWORD": PASSWORD,
        "GPULAB_POLL_S": "0.5",
        "https_proxy": "http://proxy.invalid:3128",  # gpulab.sh must drop it for the CLI
    }


def job_file(tmp_path: Path) -> Path:
    job = tmp_path / "gpulab-job0.json"
    job.write_text(
        json.dumps(
            {
                "name": "hpcbench-1x1-job0",
                "request": {
                    "resources": {"gpus": 1, "cpus": 1, "cpuMemoryGb": 1},
                    "docker": {"image": "hpcbench/node:latest", "command": ["/bin/true"]},
                    "scheduling": {"maxDuration": "10m"},
                },
            }
        )
    )
    return job


def standin_status(env: dict[str, str], job_id: str) -> str:
    proc = subprocess.run(
        ["gpulab-cli", "jobs", job_id, "--raw"],
        env={**env, "GPULAB_PASSWORD": PASSWORD, "https_proxy": ""},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["state"]["status"]


def lease_of(path: Path) -> dict:
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    lease = json.loads(path.read_text())
    assert set(lease) == {"what", "created", "cancel"}
    assert lease["what"].startswith("GPULab job ")
    assert lease["created"].endswith("Z")
    argv = lease["cancel"]
    assert argv[1] == "cancel-job" and all(Path(argv[i]).is_absolute() for i in (0, 2, 3, 5))
    return lease


def wait_for(path: Path, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


def test_queued_past_deadline_fails_in_one_line_and_cancels(tmp_path: Path, standin) -> None:
    """A job that never runs is cancelled at the deadline; the
    failure names the state; the lease goes once the cancel is confirmed."""
    lease = tmp_path / "leases" / "gpulab-job0.json"
    proc = subprocess.run(
        [str(GPULAB_SH), "submit", str(job_file(tmp_path)), str(lease), str(tmp_path / "s.json")],
        env={**standin, "GPULAB_RUN_DEADLINE": "3"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    failure = [line for line in proc.stderr.splitlines() if line.startswith("GPULab job ")]
    assert len(failure) == 1 and "still QUEUED after 3 s" in failure[0], proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == failure[0]  # the cause is said last
    job_id = failure[0].split()[2]
    assert standin_status(standin, job_id) == "CANCELLED"
    assert not lease.exists()
    assert not (tmp_path / "s.json").exists()


def test_ctrl_c_while_queued_cancels_the_job(tmp_path: Path, standin) -> None:
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) while queued."""
    lease = tmp_path / "leases" / "gpulab-job0.json"
    proc = subprocess.Popen(
        [str(GPULAB_SH), "submit", str(job_file(tmp_path)), str(lease), str(tmp_path / "s.json")],
        env=standin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=as_from_a_terminal,
    )
    wait_for(lease)
    job_id = lease_of(lease)["what"].split()[-1]
    assert standin_status(standin, job_id) == "QUEUED"
    time.sleep(1)  # inside the wait loop
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 130, err
    assert standin_status(standin, job_id) == "CANCELLED"
    assert not lease.exists()


def test_killed_while_queued_leaves_a_lease_that_cancels(tmp_path: Path, standin) -> None:
    """gpulab.sh killed outright (no trap runs): the lease holds the id
    from the moment it exists, and running its cancel argv (what `hpcbench
    destroy` does with leftover leases) ends the job and removes the lease."""
    lease = tmp_path / "leases" / "gpulab-job0.json"
    proc = subprocess.Popen(
        [str(GPULAB_SH), "submit", str(job_file(tmp_path)), str(lease), str(tmp_path / "s.json")],
        env=standin,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    wait_for(lease)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    record = lease_of(lease)
    job_id = record["what"].split()[-1]
    assert PASSWORD not in lease.read_text()
    assert standin_status(standin, job_id) == "QUEUED"
    # destroy's environment: the user's password variable, nothing from Terraform.
    env = {k: v for k, v in standin.items() if k not in ("GPULAB_CERT", "GPULAB_PROJECT")}
    done = subprocess.run(record["cancel"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert standin_status(standin, job_id) == "CANCELLED"
    assert not lease.exists()
    # The destroy-time provisioner runs the same argv; no lease: nothing to do.
    again = subprocess.run(
        [str(GPULAB_SH), "cancel", str(lease)], env=env, capture_output=True, text=True, timeout=60
    )
    assert again.returncode == 0, again.stderr


def test_failed_cancel_keeps_the_lease(tmp_path: Path, standin) -> None:
    """A cancel GPULab does not confirm keeps the lease and names the job."""
    lease = tmp_path / "leases" / "gpulab-job0.json"
    proc = subprocess.Popen(
        [str(GPULAB_SH), "submit", str(job_file(tmp_path)), str(lease), str(tmp_path / "s.json")],
        env=standin,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    wait_for(lease)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    record = lease_of(lease)
    job_id = record["what"].split()[-1]
    # GPULab unreachable: every gpulab-cli call fails.
    broken = tmp_path / "broken-cli"
    broken.write_text("#!/bin/sh\necho 'Error: connection refused' >&2\nexit 1\n")
    broken.chmod(0o755)
    argv = [*record["cancel"][:2], str(broken), *record["cancel"][3:]]
    env = {**standin, "GPULAB_CANCEL_CONFIRM_S": "2"}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert job_id in done.stderr.splitlines()[-1] and "lease kept" in done.stderr
    assert lease.exists()
    subprocess.run(record["cancel"], env=standin, capture_output=True, timeout=120, check=True)


def test_encrypted_pem_without_password_stops_before_submitting(tmp_path: Path, standin) -> None:
    env = {k: v for k, v in standin.items() if k != "HPCBENCH_PEM_PASSWORD"}
    lease = tmp_path / "leases" / "gpulab-job0.json"
    proc = subprocess.run(
        [str(GPULAB_SH), "submit", str(job_file(tmp_path)), str(lease), str(tmp_path / "s.json")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"login PEM {standin['GPULAB_CERT']} is encrypted: "
        "export HPCBENCH_PEM_PASSWORD='<its password>'"
    ]
    assert not (tmp_path / "standin" / "jobs").exists() or not list(
        (tmp_path / "standin" / "jobs").glob("*.json")
    )


def test_password_goes_by_environment_never_argv(tmp_path: Path, standin) -> None:
    """The CLI reads GPULAB_PASSWORD (auto_envvar_prefix, __main__.py:2026): the
    stand-in accepts the encrypted PEM only if the password arrived, and no
    process gpulab.sh starts carries it as an argument."""
    spy = tmp_path / "spy"
    spy.mkdir()
    log = tmp_path / "argv.log"
    (spy / "gpulab-cli").write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$*" >> {shlex.quote(str(log))}\n'
        f'exec {shlex.quote(str(STANDIN_BIN / "gpulab-cli"))} "$@"\n'
    )
    (spy / "gpulab-cli").chmod(0o755)
    env = {**standin, "PATH": f"{spy}{os.pathsep}{standin['PATH']}", "GPULAB_RUN_DEADLINE": "2"}
    lease = tmp_path / "leases" / "gpulab-job0.json"
    proc = subprocess.run(
        [str(GPULAB_SH), "submit", str(job_file(tmp_path)), str(lease), str(tmp_path / "s.json")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "still QUEUED" in proc.stderr, proc.stderr  # it got past the login
    calls = log.read_text()
    assert calls.startswith("submit --project myproj ")
    assert "--wait-run" not in calls.splitlines()[0]  # submit does not block
    assert PASSWORD not in calls and "-p" not in calls.split() and "--password" not in calls


# --- fixtures that stand for gpulab-cli's output ------------------------------


@pytest.mark.parametrize(
    "fixture", sorted((REPO / "tests/terraform/fixtures").glob("gpulab-job-state-*.json"))
)
def test_job_state_fixture_is_a_job_under_gpulab_common(fixture: Path) -> None:
    """The readback fixtures imitate `gpulab-cli jobs <id> --raw`, which prints
    the master's JSON as it came (gpulab-cli 3.11.12 __main__.py:1392-1396); the
    CLI itself reads that JSON as job2.Job (__main__.py:1398, 1559), so each
    fixture must be one: request, owner, state.scheduling and state.eventTimes
    are required (gpulab-common 6.0.16 schemas/job2.py:1215-1216, 1262-1264, 1430)."""
    job = job2.Job.model_validate_json(fixture.read_text())
    assert job.state.status in (job2.JobStatus.RUNNING, job2.JobStatus.STARTING)
    assert job.state.resources is not None, "readback reads state.resources"
