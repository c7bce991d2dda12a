"""The artefacts each environment hands to the testbed, rendered by a real
`terraform plan` and checked the way the testbed reads them: RSpecs parsed as
XML, jFed action files as YAML, GPULab jobs against GPULab's own pydantic
schema (PyPI imecilabt-gpulab-common), and all compared to golden files
(HPCBENCH_UPDATE_GOLDEN=1 rewrites them after a deliberate change)."""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.terraform.conftest import GOLDEN, PUBKEY, env_root

NS = {"r": "http://www.geni.net/resources/rspec/3"}
WALL2_CM = "urn:publicid:IDN+wall2.ilabt.iminds.be+authority+cm"
STACK = "gitlab.ilabt.imec.be:4567/hpcbench/stack:1.0"
WALL2_IMAGE = "urn:publicid:IDN+wall2.ilabt.iminds.be+image+emulab-ops:UBUNTU22-64-STD"


def plan_files(
    tf, env: str, tmp_path: Path, environ: dict[str, str] | None = None, **variables: str
) -> dict[str, str]:
    """Plan `env` and return {filename relative to state_dir: content} of every local_file.

    The saved plan stays at tmp_path/"plan"; `environ` is added to terraform's
    environment (the PEM password travels there, never as a variable)."""
    state = tmp_path / "state"
    tf_vars = {
        "project": "myproj",
        "pem_path": "/nonexistent/login.pem",
        "disk_image": WALL2_IMAGE,  # required on the Virtual Wall (no guessed default)
        "ssh_public_key_file": str(PUBKEY),
        "ssh_private_key_file": "/nonexistent/id_ed25519",
        "state_dir": str(state),
        **variables,
    }
    folder, var_files = env_root(env)
    runner = tf(folder)
    plan = tmp_path / "plan"
    result = runner(
        "plan",
        "-input=false",
        "-lock=false",
        *var_files,
        f"-out={plan}",
        env={**(environ or {}), **{f"TF_VAR_{k}": v for k, v in tf_vars.items()}},
    )
    assert result.rc == 0, result.out
    shown = runner("show", "-json", str(plan))
    assert shown.rc == 0, shown.out
    files: dict[str, str] = {}

    def walk(module: dict[str, Any]) -> None:
        for res in module.get("resources", []):
            if res["type"] == "local_file" and res["values"].get("content") is not None:
                name = Path(res["values"]["filename"])
                if name.is_relative_to(state):
                    files[str(name.relative_to(state))] = res["values"]["content"]
        for child in module.get("child_modules", []):
            walk(child)

    walk(json.loads(shown.out)["planned_values"]["root_module"])
    assert not state.exists(), "plan must not write anything"
    return {k: v.replace(str(state), "@STATE_DIR@") for k, v in files.items()}


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("HPCBENCH_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.is_file(), f"no golden file {path}: run with HPCBENCH_UPDATE_GOLDEN=1 once"
    assert text == path.read_text(), f"{name} differs from its golden file"


@pytest.mark.parametrize(
    ("env", "kbps"), [("virtualwall", 1_000_000), ("virtualwall-10g", 10_000_000)]
)
def test_virtualwall_rspec(tf, tmp_path: Path, env: str, kbps: int) -> None:
    files = plan_files(tf, env, tmp_path)
    text = files["virtualwall.rspec"]
    root = ET.fromstring(text.encode())
    assert root.get("type") == "request"
    nodes = root.findall("r:node", NS)
    assert [n.get("client_id") for n in nodes] == [f"node{i}" for i in range(10)]
    for node in nodes:
        assert node.get("exclusive") == "true"
        assert node.get("component_manager_id") == WALL2_CM
        assert node.find("r:sliver_type", NS).get("name") == "raw-pc"
        boot = node.find("r:services/r:execute", NS).get("command")
        script = base64.b64decode(boot.split()[1]).decode()
        assert PUBKEY.read_text().strip() in script and "NOPASSWD" in script
    addresses = [n.find("r:interface/r:ip", NS).get("address") for n in nodes]
    net = ipaddress.ip_network("192.168.100.0/24")
    assert len(set(addresses)) == 10 and all(ipaddress.ip_address(a) in net for a in addresses)

    links = root.findall("r:link", NS)
    assert len(links) == 1 and links[0].find("r:link_type", NS).get("name") == "lan"
    refs = {r.get("client_id") for r in links[0].findall("r:interface_ref", NS)}
    assert refs == {f"node{i}:if0" for i in range(10)}
    props = links[0].findall("r:property", NS)
    assert len(props) == 10 * 9
    assert {int(p.get("capacity")) for p in props} == {kbps}
    assert {(p.get("source_id"), p.get("dest_id")) for p in props} == {
        (a, b) for a in refs for b in refs if a != b
    }
    golden(f"{env}.rspec", text)


def saved_plan_entries(plan: Path) -> dict[str, bytes]:
    """A saved plan's contents (a zip file: its entries may be compressed)."""
    with zipfile.ZipFile(plan) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


@pytest.mark.parametrize("env", ["virtualwall", "gpulab"])
def test_saved_plan_holds_no_password(tf, tmp_path: Path, env: str) -> None:
    # What `hpcbench deploy` does: the password is in terraform's environment
    # only (the module scripts read it at apply time), so the plan cannot hold it.
    secret = "s3cret-Xq7"
    extra = {"stack_image": STACK} if env == "gpulab" else {}
    files = plan_files(tf, env, tmp_path, environ={"HPCBENCH_PEM_PASSWORD": secret}, **extra)
    entries = saved_plan_entries(tmp_path / "plan")
    assert entries, "the saved plan is empty"
    for name, content in entries.items():
        assert secret.encode() not in content, f"the password is in the saved plan ({name})"
        assert b"pem_password" not in content, f"pem_password is a variable again ({name})"
    assert all(secret not in text for text in files.values()), "the password must stay off disk"


def test_jfed_action_files(tf, tmp_path: Path) -> None:
    files = plan_files(tf, "virtualwall", tmp_path)
    run = yaml.safe_load(files["jfed-run.yaml"])
    assert run["action"] == "RUN"
    assert run["experiment"]["requestRSpec"] == {
        "source": "PROVIDE_FILE",
        "providedContentSource": "@STATE_DIR@/virtualwall.rspec",
    }
    assert run["experiment"]["slice"]["project"] == "myproj"
    assert run["experiment"]["slice"]["sliceName"] == "hpcbench-vw"
    assert run["deleteOn"]["failCreate"] is True
    assert run["output"]["ansibleDir"] == "@STATE_DIR@/jfed-ansible"
    assert run["user"] == {"pem": ["/nonexistent/login.pem"]}
    delete = yaml.safe_load(files["jfed-delete.yaml"])
    assert delete["action"] == "DELETE"
    assert delete["slice"]["sliceName"] == "hpcbench-vw"
    golden("jfed-run.yaml", files["jfed-run.yaml"])
    golden("jfed-delete.yaml", files["jfed-delete.yaml"])


@pytest.mark.parametrize(("topology", "jobs", "gpus"), [("1x10", 1, 10), ("10x1", 10, 1)])
def test_gpulab_jobs(tf, tmp_path: Path, topology: str, jobs: int, gpus: int) -> None:
    files = plan_files(
        tf,
        "gpulab",
        tmp_path,
        topology=topology,
        stack_image=STACK,
    )
    names = sorted((k for k in files if k.startswith("gpulab-job")), key=lambda k: int(k[10:-5]))
    assert names == [f"gpulab-job{i}.json" for i in range(jobs)]
    defs = [json.loads(files[n]) for n in names]
    assert [d["request"]["resources"]["gpus"] for d in defs] == [gpus] * jobs
    assert len({d["name"] for d in defs}) == jobs
    for d in defs:
        docker = d["request"]["docker"]
        # The project share wherever the job lands, as gpulab-cli asks for it.
        share = {"hostPath": "PROJECT_SHARE_AUTO", "containerPath": "/project"}
        assert docker["storage"] == [share]
        assert docker["portMappings"] == [{"containerPort": 2222}]
        assert d["request"]["extra"]["sshPubKeys"] == [PUBKEY.read_text().strip()]
        assert d["request"]["scheduling"]["maxDuration"] == "4h"
    golden(f"gpulab-{topology}-job0.json", json.dumps(defs[0], indent=2, sort_keys=True) + "\n")


@pytest.mark.parametrize("topology", ["1x10", "10x1"])
def test_gpulab_jobs_pass_gpulab_schema(tf, tmp_path: Path, topology: str) -> None:
    job2 = pytest.importorskip(
        "imecilabt.gpulab.schemas.job2",
        reason="GPULab's schema needs imecilabt-gpulab-common==6.0.16 (pip install '.[test]')",
    )
    files = plan_files(
        tf,
        "gpulab",
        tmp_path,
        topology=topology,
        stack_image=STACK,
    )
    jobs = [json.loads(v) for k, v in files.items() if k.startswith("gpulab-job")]
    assert jobs
    for job in jobs:
        # What `gpulab-cli submit` itself does with the file before sending it.
        parsed = job2.NewJobV4CLI.model_validate(job)
        assert parsed.request.resources.gpus * len(jobs) == 10
        assert parsed.request.scheduling.max_duration == "4h"
