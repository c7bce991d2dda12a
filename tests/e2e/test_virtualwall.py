"""ENV=virtualwall end to end through the jFed CLI 2 stand-in (tests/standins/jfed):
`hpcbench deploy --env virtualwall` runs the module's own jfed.sh, RSpec, boot
script, readback and wait, then Ansible; `verify`, a 2-worker sweep and
`destroy` follow. Two nodes on a 1 Gbit/s LAN; the tests run in this order on
one slice. Roles a container node cannot run say why in the deploy output
(tests/standins/jfed/group_vars.yml)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hpcbench import analysis
from tests.e2e.conftest import REPO, TINY_RUN
from tests.interrupt import as_from_a_terminal

pytestmark = pytest.mark.e2e

STANDIN = REPO / "tests" / "standins" / "jfed"
SLICE = "hpcbench-vwe2e"
PREFIX = f"jfedsi-{SLICE}-"
# A custom disk image with the stack in it (group_vars.yml says why); the
# stand-in maps its URN to the local image.
STACK_URN = "urn:publicid:IDN+wall2.ilabt.iminds.be+image+hpcbench:STACK-E2E"
# Any other image URN boots the bare node image (hpcbench/node: no stack).
BARE_URN = "urn:publicid:IDN+wall2.ilabt.iminds.be+image+emulab-ops:UBUNTU22-64-STD"
VARS = {
    "project": "hpcbench",
    "disk_image": STACK_URN,
    "node_count": "2",
    "slice_name": SLICE,
    "lan_cidr": "172.30.38.0/24",
    "link_capacity_mbps": "1000",
    "bootstrap_wait_min": "3",
    # The stand-in's LAN is each node's second interface. The default "auto"
    # reaches horovodrun unresolved today (KeyError 'auto' in Horovod's
    # get_driver_ip): the harness must resolve it (vwall notes, Needed outside).
    "experiment_iface": "eth1",
}


@dataclass
class Slice:
    state: Path
    environ: dict[str, str]
    var_args: list[str]

    def hpcbench(self, *args: str, timeout: float = 1500) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "hpcbench", *args],
            cwd=REPO,
            env=self.environ,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def containers(self) -> list[str]:
        out = subprocess.run(
            ["docker", "ps", "-a", "--filter", f"name={PREFIX}", "--format", "{{.Names}}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return sorted(n for n in out.split() if n.startswith(PREFIX))

    def on_node(self, node: str, *cmd: str) -> str:
        return subprocess.run(
            ["docker", "exec", f"{PREFIX}{node}", *cmd],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout

    def remove_leftovers(self) -> None:
        """A run killed before its teardown leaves its nodes: remove them by the
        stand-in's label so this run can create the slice again."""
        label = f"org.hpcbench.jfed-standin.slice={VARS['project']}/{SLICE}"
        for kind in ("container", "network"):
            listing = [
                "docker",
                kind,
                "ls",
                *(["-a"] if kind == "container" else []),
                "--filter",
                f"label={label}",
                "-q",
            ]
            ids = subprocess.run(listing, capture_output=True, text=True, check=True).stdout.split()
            if ids:
                rm = ["docker", kind, "rm", *(["-f"] if kind == "container" else []), *ids]
                subprocess.run(rm, capture_output=True, check=True)


@pytest.fixture(scope="module")
def vw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slice]:
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        pytest.fail("no Docker engine answers: `make tools` starts one")
    for image in ("hpcbench/node:latest", "hpcbench/stack:latest"):
        if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode:
            pytest.fail(f"{image} is missing: run `make images`")
    root = tmp_path_factory.mktemp("vw")
    state = root / "state"
    # What a user brings: a login PEM (a dummy; the stand-in checks only that it
    # exists) and jFed's CLI folder with experimenter-cli2.jar in it.
    pem = root / "login.pem"
    pem.write_text("stand-in PEM\n")
    pem.chmod(0o600)
    jar = root / "jfed_cli" / "experimenter-cli2.jar"
    jar.parent.mkdir()
    jar.write_text("")
    # The group_vars of this test, beside the inventory Terraform renders.
    group_vars = state / "virtualwall" / "group_vars"
    group_vars.mkdir(parents=True)
    shutil.copy(STANDIN / "group_vars.yml", group_vars / "all.yml")
    venv_bin = str(Path(sys.executable).parent)
    environ = {
        **os.environ,
        "HPCBENCH_STATE": str(state),
        # The stand-in's `java` first, then the venv's python3 for it.
        "PATH": f"{STANDIN / 'bin'}{os.pathsep}{venv_bin}{os.pathsep}{os.environ['PATH']}",
        "JFED_STANDIN_IMAGES": json.dumps({STACK_URN: "hpcbench/stack:latest"}),
        "HPCBENCH_PEM_PASSWORD": "",
    }
    var_args = [
        a
        for k, v in {**VARS, "pem_path": str(pem), "jfed_cli_jar": str(jar)}.items()
        for a in ("--var", f"{k}={v}")
    ]
    bed = Slice(state, environ, var_args)
    bed.remove_leftovers()
    yield bed
    if bed.containers():
        bed.hpcbench("destroy", "--env", "virtualwall", timeout=600)
        bed.remove_leftovers()


def test_deploy_waits_for_the_boot_script_then_configures(vw: Slice) -> None:
    proc = vw.hpcbench("deploy", "--env", "virtualwall", *vw.var_args)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    assert vw.containers() == [f"{PREFIX}node0", f"{PREFIX}node1"]
    # The boot script ran as the experimenter through sudo, after "ready", and
    # the create step waited for its marker on both nodes before Ansible.
    assert "boot script finished on node0" in out and "boot script finished on node1" in out
    assert out.index("boot script finished on node1") < out.index("ansible-playbook site.yml")
    for node in ("node0", "node1"):
        owner = vw.on_node(node, "stat", "-c", "%U", "/var/tmp/startup-0.txt").strip()
        assert owner == "jfeduser", "the <execute> must run as the experimenter, not root"
        assert vw.on_node(node, "cat", "/var/lib/hpcbench/bootstrap.done").startswith("20")
    lease = json.loads((vw.state / "virtualwall" / "leases" / f"{SLICE}.json").read_text())
    assert lease["what"] == f"Virtual Wall slice {SLICE}" and lease["cancel"][0] == "env"
    # Roles that cannot run in a container say which and why.
    assert "docker skipped on node0" in out
    assert "nvidia_driver skipped on node0" in out
    # enroot is off until its checksums are set (environments/virtualwall group_vars).
    # The LAN is shaped to the link's 1 Gbit/s.
    qdisc = vw.on_node("node1", "tc", "qdisc", "show")
    assert "tbf" in qdisc and "rate 1Gbit" in qdisc


def test_verify_passes(vw: Slice) -> None:
    proc = vw.hpcbench("verify", "--env", "virtualwall", "--", "-rs")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " failed" not in proc.stdout.splitlines()[-1]


def test_two_worker_sweep_lands_in_the_store(vw: Slice) -> None:
    out = vw.state / "results"
    proc = vw.hpcbench(
        "scale", "--env", "virtualwall", "--nodes", "2", *TINY_RUN, "--out", str(out)
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    runs = {r["nodes"]: r for r in records if r.get("kind") == "run" and r.get("status") == "ok"}
    # The sweep adds its one-node baseline; the 2-node run is the 2-worker one.
    assert set(runs) == {1, 2}, [(r.get("nodes"), r.get("status"), r.get("error")) for r in records]
    two = runs[2]
    assert two["workers"] == 2 and two["weights_in_sync"] is True and two["env"] == "virtualwall"
    assert analysis.run_stats(two)["images_per_sec"] > 0


def test_destroy_deletes_the_slice_and_its_lease(vw: Slice) -> None:
    proc = vw.hpcbench("destroy", "--env", "virtualwall", timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert vw.containers() == []
    assert not (vw.state / "virtualwall").exists()


def test_ctrl_c_while_jfed_creates_then_destroy_deletes_the_slice(vw: Slice) -> None:
    """Point 4: a Ctrl-C while jFed creates the slice leaves Terraform without the
    resource (no destroy-time provisioner will run); the lease written before jFed
    started lets `hpcbench destroy` delete the slice all the same. Bare nodes here."""
    lease = vw.state / "virtualwall" / "leases" / f"{SLICE}.json"
    deploy = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hpcbench",
            "deploy",
            "--env",
            "virtualwall",
            "--skip-ansible",
            *vw.var_args,
            "--var",
            f"disk_image={BARE_URN}",
        ],
        cwd=REPO,
        env=vw.environ,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=as_from_a_terminal,
    )
    try:
        deadline = time.monotonic() + 240
        while not (lease.is_file() and vw.containers()):
            assert deploy.poll() is None, "deploy ended before jFed created a node"
            assert time.monotonic() < deadline, "jFed created no node in time"
            time.sleep(0.5)
        os.killpg(deploy.pid, signal.SIGINT)  # what Ctrl-C sends to the foreground group
        deploy.wait(timeout=120)
    finally:
        if deploy.poll() is None:
            os.killpg(deploy.pid, signal.SIGKILL)
            deploy.wait(timeout=30)
    assert deploy.returncode != 0
    assert lease.is_file(), "the interrupted create must leave the slice's lease"
    proc = vw.hpcbench("destroy", "--env", "virtualwall", timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert vw.containers() == []
    assert not (vw.state / "virtualwall").exists()
