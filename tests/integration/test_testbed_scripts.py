"""The shell steps Terraform runs for the real testbeds, against fake jFed and
gpulab-cli executables: what they pass, what they keep, what they never write."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
JFED_SH = REPO / "terraform/modules/virtualwall/scripts/jfed.sh"
GPULAB_SH = REPO / "terraform/modules/gpulab/scripts/gpulab.sh"


def executable(path: Path, body: str) -> Path:
    path.write_text("#!/usr/bin/env bash\nset -eu\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def run(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TF_VAR_", "GPULAB_"))}
    return subprocess.run(cmd, env={**clean, **env}, capture_output=True, text=True, timeout=60)


def test_jfed_run_collects_inventory_and_keeps_password_off_disk(tmp_path: Path) -> None:
    pem = tmp_path / "login.pem"
    pem.write_text("x")
    action = tmp_path / "jfed-run.yaml"
    action.write_text(f'action: RUN\nuser:\n  pem:\n    - "{pem}"\n')
    seen = tmp_path / "seen.yaml"
    ansible = tmp_path / "jfed-ansible"
    # Fake `java -jar JAR -a FILE`: records the action it got, writes an inventory.
    java = executable(
        tmp_path / "java",
        f"""
cp "$4" {seen}
mkdir -p {ansible}
echo 'node0 ansible_host=n1.example' > {ansible}/ansible-hosts
""",
    )
    jar = tmp_path / "experimenter-cli2.jar"
    jar.write_text("")
    inventory = tmp_path / "jfed-inventory.ini"
    proc = run(
        [str(JFED_SH), str(action)],
        {
            "JFED_JAVA": str(java),
            "JFED_JAR": str(jar),
            "HPCBENCH_PEM_PASSWORD": "it's secret",
            "JFED_ANSIBLE_DIR": str(ansible),
            "JFED_INVENTORY": str(inventory),
            "TMPDIR": str(tmp_path),
        },
    )
    assert proc.returncode == 0, proc.stderr
    user = yaml.safe_load(seen.read_text())["user"]
    assert user == {"pem": [str(pem)], "password": "it's secret"}
    assert "secret" not in action.read_text()
    assert not list(tmp_path.glob("jfed-action.*")), "the private copy must be removed"
    assert inventory.read_text() == "node0 ansible_host=n1.example\n"


def test_jfed_delete_takes_password_from_the_environment(tmp_path: Path) -> None:
    pem = tmp_path / "login.pem"
    pem.write_text("x")
    action = tmp_path / "jfed-delete.yaml"
    action.write_text(f'action: DELETE\nuser:\n  pem:\n    - "{pem}"\n')
    seen = tmp_path / "seen.yaml"
    java = executable(tmp_path / "java", f'cp "$4" {seen}\n')
    jar = tmp_path / "experimenter-cli2.jar"
    jar.write_text("")
    proc = run(
        [str(JFED_SH), str(action)],
        {"JFED_JAVA": str(java), "JFED_JAR": str(jar), "HPCBENCH_PEM_PASSWORD": "pw"},
    )
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load(seen.read_text())["user"]["password"] == "pw"


def files_holding(root: Path, secret: bytes) -> list[Path]:
    """Every regular file under root whose bytes contain secret (links not followed)."""
    return [
        p
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and secret in p.read_bytes()
    ]


def start_and_sigkill_when(cmd: list[str], env: dict[str, str], mark: Path) -> subprocess.Popen:
    """Start a script in its own process group, wait until its fake client wrote
    mark (and sleeps), then SIGKILL the script only, as Terraform does: no trap
    runs. The caller kills the group (the client) when done."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TF_VAR_", "GPULAB_"))}
    proc = subprocess.Popen(
        cmd,
        env={**clean, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while not mark.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(f"{cmd[0]} never reached its client ({mark.name})")
        time.sleep(0.05)
    time.sleep(0.2)  # the client sleeps now
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    return proc


def test_jfed_sigkilled_while_jfed_runs_leaves_no_password_on_disk(tmp_path: Path) -> None:
    """Terraform stops a local-exec with SIGKILL after an interrupt: no trap of
    jfed.sh runs. While the (fake) jFed still runs, and after it is gone, no file
    on disk may hold the password; jFed must still have read it from the path
    it was given, as often as it likes."""
    password = "pw-SIGKILL-4711"
    pem = tmp_path / "login.pem"
    pem.write_text("x")
    action = tmp_path / "jfed-run.yaml"
    action.write_text(f'action: RUN\nuser:\n  pem:\n    - "{pem}"\n')
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    marks = tmp_path / "marks"
    marks.mkdir()
    # Reads the action twice (the password, which it finds in its environment,
    # counted, never copied), then hangs.
    java = executable(
        tmp_path / "java",
        f"""
grep -c "password: '$HPCBENCH_PEM_PASSWORD'" "$4" > {marks}/read1
grep -c "password: '$HPCBENCH_PEM_PASSWORD'" "$4" > {marks}/read2
echo $$ > {marks}/java.pid
exec sleep 60
""",
    )
    jar = tmp_path / "experimenter-cli2.jar"
    jar.write_text("")
    proc = start_and_sigkill_when(
        [str(JFED_SH), str(action)],
        {
            "JFED_JAVA": str(java),
            "JFED_JAR": str(jar),
            "HPCBENCH_PEM_PASSWORD": password,
            "TMPDIR": str(tmp),
        },
        marks / "java.pid",
    )
    try:
        assert (marks / "read1").read_text() == "1\n" == (marks / "read2").read_text()
        assert files_holding(tmp_path, password.encode()) == [], "while jFed still runs"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # jFed goes too
    assert files_holding(tmp_path, password.encode()) == [], "after jFed is gone"
    assert password not in action.read_text()


def test_jfed_missing_jar_says_what_to_do(tmp_path: Path) -> None:
    action = tmp_path / "a.yaml"
    action.write_text("action: RUN\n")
    proc = run([str(JFED_SH), str(action)], {"JFED_JAR": str(tmp_path / "nope.jar")})
    assert proc.returncode == 2
    assert "TF_VAR_jfed_cli_jar" in proc.stderr


def test_gpulab_missing_cli_says_what_to_do(tmp_path: Path) -> None:
    # gpulab.sh against the gpulab-cli stand-in: tests/terraform/test_gpulab.py.
    job = tmp_path / "job0.json"
    job.write_text("{}")
    proc = run(
        [
            str(GPULAB_SH),
            "submit",
            str(job),
            str(tmp_path / "leases" / "job0.json"),
            str(tmp_path / "job0.state.json"),
        ],
        {"GPULAB_CLI": "no-such-gpulab-cli", "GPULAB_CERT": str(job)},
    )
    assert proc.returncode == 2
    assert "pip install imecilabt-gpulab-cli" in proc.stderr


def test_gpulab_sigkilled_while_the_cli_runs_leaves_no_password_on_disk(tmp_path: Path) -> None:
    """gpulab.sh hands the password to gpulab-cli in its environment only
    (GPULAB_PASSWORD, read for --password: __main__.py:343, 2026), and the real
    client keeps it in memory (ssl load_cert_chain(password=...), apiclient.py:66):
    killed while the CLI waits, nothing on disk holds it. A guard, not a fix:
    gpulab.sh never wrote it to a file."""
    password = "pw-SIGKILL-0815"
    marks = tmp_path / "marks"
    marks.mkdir()
    job_id = "0f0e0d0c-0b0a-4900-8800-0123456789ab"
    cli = executable(
        tmp_path / "gpulab-cli",
        f"""
case $1 in
  submit) echo "Submitted job {job_id}" ;;
  jobs) [ "$GPULAB_PASSWORD" = "$HPCBENCH_PEM_PASSWORD" ] && echo yes > {marks}/env
        echo $$ > {marks}/cli.pid; exec sleep 60 ;;
esac
""",
    )
    job = tmp_path / "job0.json"
    job.write_text("{}")
    pem = tmp_path / "login.pem"
    pem.write_text("-----BEGIN ENCRYPTED PRIVATE KEY-----\n")
    proc = start_and_sigkill_when(
        [
            str(GPULAB_SH),
            "submit",
            str(job),
            str(tmp_path / "leases" / "job0.json"),
            str(tmp_path / "job0.state.json"),
        ],
        {
            "GPULAB_CLI": str(cli),
            "GPULAB_CERT": str(pem),
            "GPULAB_PROJECT": "p",
            "HPCBENCH_PEM_PASSWORD": password,
            "TMPDIR": str(tmp_path),
        },
        marks / "cli.pid",
    )
    try:
        assert (marks / "env").read_text() == "yes\n", "the CLI got the password"
        assert (tmp_path / "leases" / "job0.json").is_file()
        assert files_holding(tmp_path, password.encode()) == []
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
    assert files_holding(tmp_path, password.encode()) == []
