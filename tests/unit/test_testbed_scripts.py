"""The shell steps Terraform runs for the real testbeds, against fake jFed and
gpulab-cli executables: what they pass, what they keep, what they never write."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import yaml

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
            "JFED_PEM_PASSWORD": "it's secret",
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


def test_jfed_delete_takes_password_from_tf_var(tmp_path: Path) -> None:
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
        {"JFED_JAVA": str(java), "JFED_JAR": str(jar), "TF_VAR_pem_password": "pw"},
    )
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load(seen.read_text())["user"]["password"] == "pw"


def test_jfed_missing_jar_says_what_to_do(tmp_path: Path) -> None:
    action = tmp_path / "a.yaml"
    action.write_text("action: RUN\n")
    proc = run([str(JFED_SH), str(action)], {"JFED_JAR": str(tmp_path / "nope.jar")})
    assert proc.returncode == 2
    assert "TF_VAR_jfed_cli_jar" in proc.stderr


def fake_gpulab(tmp_path: Path) -> Path:
    log = tmp_path / "calls.log"
    return executable(
        tmp_path / "gpulab-cli",
        f"""
echo "$* proxy=${{https_proxy:-}} cert=$GPULAB_CERT pw=${{GPULAB_PASSWORD:-}}" >> {log}
case $1 in
  submit) echo 'Waiting for Job to start running...' >&2; echo 1234-abcd ;;
  jobs) echo '{{"uuid": "1234-abcd", "state": {{"resources": {{"slaveHost": "gpu1"}}}}}}' ;;
  cancel) ;;
esac
""",
    )


def test_gpulab_submit_then_cancel(tmp_path: Path) -> None:
    cli = fake_gpulab(tmp_path)
    pem = tmp_path / "login.pem"
    pem.write_text("x")
    env = {
        "GPULAB_CLI": str(cli),
        "GPULAB_CERT": str(pem),
        "GPULAB_PROJECT": "myproj",
        "GPULAB_PASSWORD": "pw",
        "https_proxy": "http://proxy:3128",
    }
    job, id_file, state = tmp_path / "job0.json", tmp_path / "job0.id", tmp_path / "job0.state.json"
    job.write_text("{}")
    proc = run([str(GPULAB_SH), "submit", str(job), str(id_file), str(state)], env)
    assert proc.returncode == 0, proc.stderr
    assert id_file.read_text().strip() == "1234-abcd"
    assert json.loads(state.read_text())["state"]["resources"]["slaveHost"] == "gpu1"
    proc = run([str(GPULAB_SH), "cancel", str(id_file)], {**env, "GPULAB_PASSWORD": ""})
    assert proc.returncode == 0, proc.stderr
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert calls[0].startswith(f"submit --project myproj --wait-run {job} proxy= ")
    assert calls[0].endswith("pw=pw")
    assert calls[1].startswith("jobs 1234-abcd --raw")
    assert calls[2].startswith("cancel 1234-abcd")
    assert not id_file.exists()


def test_gpulab_missing_cli_says_what_to_do(tmp_path: Path) -> None:
    proc = run(
        [str(GPULAB_SH), "cancel", str(tmp_path / "x.id")], {"GPULAB_CLI": "no-such-gpulab-cli"}
    )
    assert proc.returncode == 2
    assert "pip install imecilabt-gpulab-cli" in proc.stderr
