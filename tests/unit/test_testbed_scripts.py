"""The shell steps Terraform runs for the real testbeds, against fake jFed and
gpulab-cli executables: what they pass, what they keep, what they never write."""

from __future__ import annotations

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
        [str(GPULAB_SH), "submit", str(job), str(tmp_path / "leases" / "job0.json"),
         str(tmp_path / "job0.state.json")],
        {"GPULAB_CLI": "no-such-gpulab-cli", "GPULAB_CERT": str(job)},
    )  # fmt: skip
    assert proc.returncode == 2
    assert "pip install imecilabt-gpulab-cli" in proc.stderr
