"""The testbed checks themselves, run against this machine as a one-node
"testbed" (Ansible's local connection): what they compare, and what they leave
alone where a testbed does not set it. No testbed needed (conftest.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def run_checks(tmp_path: Path, node_vars: dict, *pytest_args: str) -> subprocess.CompletedProcess:
    """tests/infra against an inventory whose one node is this machine, named
    "node-elsewhere" (not this machine's host name)."""
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "vars": {
                        "testbed_nodes": [
                            {"name": "node-elsewhere", "address": "127.0.0.1", "gpus": 0}
                        ],
                        "testbed_head": "node-elsewhere",
                        **node_vars,
                    },
                    "hosts": {
                        "node-elsewhere": {
                            "ansible_connection": "local",
                            "ansible_python_interpreter": sys.executable,
                        }
                    },
                }
            }
        )
    )
    env = {k: v for k, v in os.environ.items() if k not in ("HPCBENCH_INVENTORY", "HPCBENCH_ENV")}
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "-rs",
        f"--ansible-inventory={inventory}",
        *pytest_args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env, timeout=300)


def test_hostname_compared_where_the_base_role_sets_it(tmp_path: Path) -> None:
    if socket.gethostname() == "node-elsewhere":
        pytest.skip("this machine is named like the stand-in node")
    out = run_checks(tmp_path, {}, "tests/infra/test_common.py", "-k", "hostname")
    assert "1 failed" in out.stdout, out.stdout[-2000:]


def test_hostname_not_compared_where_the_testbed_names_the_nodes(tmp_path: Path) -> None:
    # GPULab jobs: base_set_hostname false, the job keeps the name it is given.
    out = run_checks(
        tmp_path, {"base_set_hostname": False}, "tests/infra/test_common.py", "-k", "hostname"
    )
    assert out.returncode == 0, out.stdout[-2000:]
    assert "1 skipped" in out.stdout and "base_set_hostname is false" in out.stdout, out.stdout
