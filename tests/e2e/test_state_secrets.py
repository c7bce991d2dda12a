"""No secret lands in `.hpcbench/<env>/` except in the files meant to hold one
(0600), and no saved plan outlives its deploy.

A real `hpcbench deploy --env virtualwall` with real Terraform, a made-up
login PEM and the password in HPCBENCH_PEM_PASSWORD (and, as old docs said,
in TF_VAR_pem_password). No jFed is installed, so the create step fails at
jFed's first check: everything before it (key, settings, plan, rendered
RSpec and action files, state) is written as a real deploy writes it, and the
failure path (apply failed) is the one that used to leave the plan behind.
No Docker, no network: jfed.sh stops before it would contact anything.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hpcbench.core.errors import UsageError
from hpcbench.testbeds.terraform import find_binary
from tests.e2e.conftest import hpcbench

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "Pw-e2e-7c1d!not-here"
IMAGE = "urn:publicid:IDN+wall2.ilabt.iminds.be+image+emulab-ops:UBUNTU22-64-STD"


def test_no_secret_under_state_dir_after_a_failed_virtualwall_deploy(tmp_path: Path) -> None:
    try:
        find_binary()
    except UsageError as err:
        pytest.skip(str(err))
    state_root = tmp_path / "state"
    pem = tmp_path / "login.pem"  # made up: jFed never reads it here
    pem.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    pem.chmod(0o600)
    environ = {
        **{k: v for k, v in os.environ.items() if not k.startswith("TF_VAR_")},
        "HPCBENCH_STATE": str(state_root),
        "HPCBENCH_PEM_PASSWORD": PASSWORD,
        "TF_VAR_pem_password": PASSWORD,  # what the old docs told users to export
    }
    args = [
        "deploy",
        "--env",
        "virtualwall",
        "--skip-ansible",
        "--var",
        "project=myproj",
        "--var",
        f"pem_path={pem}",
        "--var",
        f"disk_image={IMAGE}",
        "--var",
        "node_count=2",
        "--var",
        f"jfed_cli_jar={tmp_path / 'no-jfed' / 'experimenter-cli2.jar'}",
    ]
    proc = hpcbench(environ, *args, timeout=900)
    out = proc.stdout + proc.stderr
    assert PASSWORD not in out
    # Planned and applied: the create step itself failed, for want of jFed.
    assert proc.returncode == 1, out
    assert "jFed CLI 2 not found" in out and "terraform apply failed" in out, out

    state = state_root / "virtualwall"
    # Links (terraform links the provider mirror into its data dir) lead to
    # public files; everything else here is ours.
    own = [p for p in state.rglob("*") if not p.is_symlink()]
    files = [p for p in own if p.is_file()]
    assert files and (state / "settings.json").is_file()
    assert not [p for p in files if p.suffix == ".plan"], "a saved plan was left behind"
    for folder in [state_root, state, *(p for p in own if p.is_dir())]:
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    for path in files:
        data = path.read_bytes()
        assert PASSWORD.encode() not in data, f"{path} holds the PEM password"
        mode = stat.S_IMODE(path.stat().st_mode)
        if b"PRIVATE KEY" in data:
            assert path == state / "ssh" / "id_ed25519" and mode == 0o600, path
        if path.name in ("settings.json", "terraform.tfstate", "inventory.yml"):
            assert mode == 0o600, f"{path} is {oct(mode)}"
    assert "pem_password" not in (state / "settings.json").read_text()

    # Nothing was created, nothing is held: destroy removes the state directory.
    done = hpcbench(environ, "destroy", "--env", "virtualwall", timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not state.exists()
