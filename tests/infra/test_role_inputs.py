"""The roles' input checks and quoting, run by Ansible itself on this machine
(connection local, nothing on it changed): hostile values stop a role with one
message naming the setting; sound ones pass; the systemd units keep every
value one argument. No testbed needed: `make test` runs these, `verify` skips
them (conftest.py)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ANSIBLE = REPO / "ansible"


def _plugin(path: Path) -> ModuleType:
    """An Ansible plugin file as a module (its name would clash with the hpcbench package)."""
    spec = importlib.util.spec_from_file_location(f"hpcbench_plugin_{path.parent.name}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_tests = _plugin(ANSIBLE / "plugins/test/hpcbench.py")
image_reference, ip_address = _tests.image_reference, _tests.ip_address

ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
ENROOT_DEB = f"enroot_3.5.0-1_{ARCH}.deb"
ENROOT_CAPS_DEB = f"enroot+caps_3.5.0-1_{ARCH}.deb"
GOOD_SHA = "0" * 64

# What a deploy hands every role besides environments/common's group_vars:
# the values of a rendered inventory (terraform/modules/inventory).
RENDERED = {
    "hpcbench_env": "roletest",
    "testbed_nodes": [
        {"name": "node1", "address": "172.30.0.11", "gpus": 0},
        {"name": "node2", "address": "172.30.0.12", "gpus": 0},
    ],
    "testbed_head": "node1",
    "hpcbench_state_dir": "/nonexistent/state",
    "stack_image": "hpcbench/stack:latest",
    "stack_ssh_port": 2222,
    "hpcbench_iface": "lo",
    "hpcbench_python": "/opt/hpcbench/venv/bin/python",
    "hpcbench_bench_dir": "/opt/hpcbench/bench",
    # node_facts on this machine: its loopback stands in for the testbed address.
    "testbed_address": "127.0.0.1",
    "node_kind": "container",
}
IMAGE_MSG = "stack_image must be an image reference"
HOSTILE_IMAGES = [
    "hpcbench/stack:latest --privileged -v /:/host",
    "--privileged",
    "hpcbench/stack:$(reboot)",
    "hpcbench/stack:latest\nExecStartPre=/bin/sh -c id",
    'hpcbench/stack:"x"',
    "hpcbench/stack:%n",
    "",
]

RATE_MSG = "link_rate must be a tc rate in bits per second"
TWO_PARTITIONS = [
    {"name": "fast", "nodes": ["node1"]},
    {"name": "all", "nodes": ["node1", "node2"]},
]
PARTITIONS_MSG = "slurm_partitions must be a list of partitions, each {name: <word>, nodes:"
PARTITION_NAME_MSG = "slurm_partitions: partition names must be distinct words"

# (role, case, variables, None = passes / a piece of the one failure message)
CASES: list[tuple[str, str, dict, str | None]] = [
    (
        "stack",
        "container_ok",
        {"stack_mode": "container", "stack_image": "registry.example.org:5000/hpc/stack:1.0"},
        None,
    ),
    (
        "stack",
        "image_mode_ignores_image",
        {"stack_mode": "image", "stack_image": "--privileged"},
        None,
    ),
    *[
        ("stack", f"image_{i}", {"stack_mode": "container", "stack_image": v}, IMAGE_MSG)
        for i, v in enumerate(HOSTILE_IMAGES)
    ],
    (
        "stack",
        "port_words",
        {"stack_mode": "container", "stack_ssh_port": "2222 -o X=1"},
        "stack_ssh_port must be a port",
    ),
    (
        "stack",
        "port_low",
        {"stack_mode": "container", "stack_ssh_port": 22},
        "stack_ssh_port must be a port",
    ),
    ("stack", "mode", {"stack_mode": "vm"}, "stack_mode must be 'image' or 'container'"),
    ("jupyterlab", "defaults_ok", {}, None),
    ("jupyterlab", "loopback_ok", {"jupyterlab_bind_address": "127.0.0.1"}, None),
    (
        "jupyterlab",
        "bind_code",
        {"jupyterlab_bind_address": '0.0.0.0"; import os; "'},
        "jupyterlab_bind_address must be one IP address",
    ),
    (
        "jupyterlab",
        "bind_cidr",
        {"jupyterlab_bind_address": "10.0.0.0/8"},
        "jupyterlab_bind_address must be one IP address",
    ),
    (
        "jupyterlab",
        "root",
        {"jupyterlab_user": "root"},
        "jupyterlab_user must name a user other than root",
    ),
    (
        "jupyterlab",
        "container_image",
        {"stack_mode": "container", "stack_image": HOSTILE_IMAGES[0]},
        IMAGE_MSG,
    ),
    ("nfs_server", "defaults_ok", {}, None),
    (
        "nfs_server",
        "subnet",
        {"nfs_server_clients": "172.30.0.0/24"},
        "nfs_server_clients must list the testbed nodes' IP addresses",
    ),
    (
        "nfs_server",
        "cidr_in_list",
        {"nfs_server_clients": ["172.30.0.0/24"]},
        "nfs_server_clients must list",
    ),
    ("nfs_server", "wildcard", {"nfs_server_clients": ["*"]}, "nfs_server_clients must list"),
    (
        "nfs_server",
        "config_injection",
        {"nfs_server_clients": ["172.30.0.11; Access_Type = RW; } CLIENT { Clients = *"]},
        "nfs_server_clients must list",
    ),
    ("nfs_server", "empty", {"nfs_server_clients": []}, "nfs_server_clients must list"),
    (
        "nfs_server",
        "no_root_squash",
        {"nfs_server_squash": "no_root_squash"},
        "nfs_server_squash must be root_squash or all_squash",
    ),
    ("nfs_server", "export_dir", {"shared_dir": "/shared; }"}, "nfs_server_export_dir must be"),
    ("enroot", "no_checksums", {}, f"enroot_sha256 has no SHA-256 for {ENROOT_DEB}"),
    (
        "enroot",
        "checksums_ok",
        {"enroot_sha256": {ENROOT_DEB: GOOD_SHA, ENROOT_CAPS_DEB: GOOD_SHA.replace("0", "A")}},
        None,
    ),
    (
        "enroot",
        "caps_missing",
        {"enroot_sha256": {ENROOT_DEB: GOOD_SHA}},
        f"enroot_sha256 has no SHA-256 for {ENROOT_CAPS_DEB}",
    ),
    (
        "enroot",
        "not_hex",
        {"enroot_sha256": {ENROOT_DEB: "sha256:abc", ENROOT_CAPS_DEB: GOOD_SHA}},
        f"enroot_sha256 has no SHA-256 for {ENROOT_DEB}",
    ),
    (
        "enroot",
        "no_caps_ok",
        {"enroot_with_caps": False, "enroot_sha256": {ENROOT_DEB: GOOD_SHA}},
        None,
    ),
    ("link_shaping", "rate_ok", {"link_rate": "200mbit"}, None),
    ("link_shaping", "unshaped_ok", {"link_rate": ""}, None),
    ("link_shaping", "rate_words", {"link_rate": "200mbit; reboot"}, RATE_MSG),
    ("link_shaping", "rate_bytes", {"link_rate": "200M"}, RATE_MSG),
    ("link_shaping", "rate_newline", {"link_rate": "1gbit\nExecStartPre=/bin/id"}, RATE_MSG),
    ("slurm", "defaults_ok", {}, None),
    ("slurm", "partitions_ok", {"slurm_partitions": TWO_PARTITIONS}, None),
    ("slurm", "one_named_ok", {"slurm_partition": "all"}, None),
    (
        "slurm",
        "controller",
        {"slurm_controller": "node9"},
        "slurm_controller must be one testbed node",
    ),
    (
        "slurm",
        "compute_unknown",
        {"slurm_compute_nodes": ["node1", "node9"]},
        "slurm_compute_nodes a list of testbed nodes",
    ),
    ("slurm", "not_a_list", {"slurm_partitions": "testbed"}, PARTITIONS_MSG),
    ("slurm", "empty", {"slurm_partitions": []}, PARTITIONS_MSG),
    ("slurm", "no_nodes_key", {"slurm_partitions": [{"name": "a"}]}, PARTITIONS_MSG),
    (
        "slurm",
        "nodes_text",
        {"slurm_partitions": [{"name": "a", "nodes": "node1,node2"}]},
        PARTITIONS_MSG,
    ),
    *[
        (
            "slurm",
            f"name_{i}",
            {"slurm_partitions": [{"name": v, "nodes": ["node1", "node2"]}]},
            PARTITION_NAME_MSG,
        )
        for i, v in enumerate(["a b", "fast\nNodeName=evil", "DEFAULT", "default", "", "-x", "a,b"])
    ],
    (
        "slurm",
        "same_name",
        {
            "slurm_partitions": [
                {"name": "a", "nodes": ["node1"]},
                {"name": "a", "nodes": ["node2"]},
            ]
        },
        PARTITION_NAME_MSG,
    ),
    (
        "slurm",
        "unknown_node",
        {"slurm_partitions": [{"name": "a", "nodes": ["node1", "node2", "node9"]}]},
        'names no compute node: ["node9"]',
    ),
    (
        "slurm",
        "node_left_out",
        {"slurm_partitions": [{"name": "a", "nodes": ["node1"]}]},
        'leaves out: ["node2"]',
    ),
    (
        "slurm",
        "node_twice",
        {"slurm_partitions": [{"name": "a", "nodes": ["node1", "node2", "node2"]}]},
        "one or more distinct compute nodes",
    ),
    (
        "slurm",
        "no_node",
        {
            "slurm_partitions": [
                {"name": "a", "nodes": ["node1", "node2"]},
                {"name": "b", "nodes": []},
            ]
        },
        "one or more distinct compute nodes",
    ),
    ("base", "defaults_ok", {}, None),
    ("base", "root", {"testbed_user": "root"}, "testbed_user must be a user name other than root"),
    ("base", "uid_zero", {"testbed_uid": 0}, "testbed_uid a number from 1000 to 60000"),
    ("base", "user_words", {"testbed_user": "x -o"}, "testbed_user must be a user name"),
]


def ansible_env() -> dict[str, str]:
    return {
        **os.environ,
        "ANSIBLE_CONFIG": str(ANSIBLE / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_STDOUT_CALLBACK": "default",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def playbook(
    tmp_path: Path, plays: list[dict], inventory: str = "localhost,"
) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(plays, sort_keys=False))
    cmd = [
        str(Path(sys.executable).parent / "ansible-playbook"),
        "-i",
        inventory,
        "-e",
        f"ansible_python_interpreter={sys.executable}",
        str(path),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, env=ansible_env(), timeout=600)


def play(tasks: list[dict]) -> dict:
    common = yaml.safe_load((REPO / "environments/common/inventory/group_vars/all.yml").read_text())
    return {
        "name": "role inputs",
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": True,
        "vars": {**common, **RENDERED},
        "tasks": tasks,
    }


def record(key: str, value: str) -> str:
    """Jinja that adds key: <value expression> to the outcomes fact."""
    return "{{ outcomes | combine({'" + key + "': " + value + "}) }}"


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str | None]:
    """One ansible-playbook run for every case: role -> its validate tasks."""
    tmp = tmp_path_factory.mktemp("roles")
    out = tmp / "outcomes.json"
    tasks: list[dict] = [{"name": "start", "ansible.builtin.set_fact": {"outcomes": {}}}]
    for role, case, variables, _ in CASES:
        key = f"{role}/{case}"
        tasks.append(
            {
                "name": key,
                "block": [
                    {
                        "ansible.builtin.include_role": {"name": role, "tasks_from": "validate"},
                        "vars": variables,
                    },
                    {"ansible.builtin.set_fact": {"outcomes": record(key, "None")}},
                ],
                "rescue": [
                    {
                        "ansible.builtin.set_fact": {
                            "outcomes": record(key, "ansible_failed_result.msg | default('')")
                        }
                    },
                ],
            }
        )
    tasks.append(
        {
            "ansible.builtin.copy": {
                "content": "{{ outcomes | to_json }}",
                "dest": str(out),
                "mode": "0600",
            }
        }
    )
    result = playbook(tmp, [play(tasks)])
    assert result.returncode == 0 and out.is_file(), result.stdout[-3000:] + result.stderr[-2000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize(
    ("role", "case", "variables", "expect"), CASES, ids=[f"{r}-{c}" for r, c, _, _ in CASES]
)
def test_role_checks_its_inputs(outcomes, role, case, variables, expect) -> None:
    got = outcomes.get(f"{role}/{case}", "missing: the case did not run")
    if expect is None:
        assert got is None, f"{role} refused sound settings {variables}: {got}"
    else:
        assert got and expect in got, f"{role} with {variables}: {got!r}"
        assert "\n" not in got.strip(), f"not one line: {got!r}"


def test_enroot_keeps_only_packages_that_match_their_checksum(tmp_path: Path) -> None:
    release = tmp_path / "release"
    release.mkdir()
    good, bad = release / ENROOT_DEB, release / ENROOT_CAPS_DEB
    good.write_bytes(b"the package that was checked")
    bad.write_bytes(b"a package someone swapped in")
    dest = tmp_path / "cache"
    sums = {
        ENROOT_DEB: hashlib.sha256(good.read_bytes()).hexdigest(),
        ENROOT_CAPS_DEB: hashlib.sha256(b"the caps package that was checked").hexdigest(),
    }
    task = {
        "ansible.builtin.include_role": {"name": "enroot", "tasks_from": "download"},
        "vars": {
            "enroot_release_url": f"file://{release}",
            "enroot_download_dir": str(dest),
            "enroot_sha256": sums,
        },
    }
    result = playbook(tmp_path, [play([task])])
    assert result.returncode != 0, "a package that does not match its checksum was accepted"
    assert "checksum" in result.stdout.lower(), result.stdout[-2000:]
    assert (dest / ENROOT_DEB).read_bytes() == good.read_bytes()
    assert not (dest / ENROOT_CAPS_DEB).exists(), "the mismatching package was kept"


def exec_words(unit: str, key: str = "ExecStart=") -> list[str]:
    """The argv systemd builds from an Exec line: quotes and backslash escapes as
    shlex (the only escapes systemd_arg writes), "%%" and "$$" unescaped."""
    joined = unit.replace("\\\n", " ")
    line = next(line for line in joined.splitlines() if line.startswith(key))
    return [w.replace("%%", "%").replace("$$", "$") for w in shlex.split(line[len(key) :])]


HOSTILE_VALUE = '/a b"c\\d$HOME%n --privileged'


def render(tmp_path: Path, template: str, variables: dict) -> str:
    out = tmp_path / "unit"
    tasks = [
        {"ansible.builtin.getent": {"database": "passwd", "key": "root"}},
        {
            "ansible.builtin.copy": {
                "content": f"{{{{ lookup('ansible.builtin.template', '{template}') }}}}",
                "dest": str(out),
                "mode": "0600",
            },
            "vars": variables,
        },
    ]
    result = playbook(tmp_path, [play(tasks)])
    assert result.returncode == 0, result.stdout[-3000:]
    return out.read_text()


def test_stack_unit_keeps_each_value_one_argument(tmp_path: Path) -> None:
    # The checks stop a hostile image; the quoting is the second line of defence,
    # for the values no check covers (mounts, shm size).
    unit = render(
        tmp_path,
        str(ANSIBLE / "roles/stack/templates/hpcbench-stack.service.j2"),
        {
            "stack_container_image": "registry.example.org:5000/hpc/stack:1.0",
            "stack_container_name": "hpcbench-stack",
            "stack_container_ssh_port": 2222,
            "stack_container_shm_size": "8g --privileged",
            "stack_container_gpus": False,
            "node_facts_has_gpu": False,
            "stack_container_mounts": [HOSTILE_VALUE, "/x:/y"],
        },
    )
    words = exec_words(unit)
    assert "--privileged" not in words, words
    assert words[words.index("--shm-size") + 1] == "8g --privileged"
    assert [words[i + 1] for i, w in enumerate(words) if w == "-v"][:2] == [HOSTILE_VALUE, "/x:/y"]
    assert words[words.index("--entrypoint") + 2] == "registry.example.org:5000/hpc/stack:1.0"


def test_jupyter_unit_keeps_each_value_one_argument(tmp_path: Path) -> None:
    unit = render(
        tmp_path,
        str(ANSIBLE / "roles/jupyterlab/templates/jupyterlab.service.j2"),
        {
            "jupyterlab_run_mode": "container",
            "jupyterlab_user": "root",
            "jupyterlab_image": "registry.example.org/hpc/stack@sha256:" + "a" * 64,
            "jupyterlab_jupyter": HOSTILE_VALUE,
            "jupyterlab_config_dir": "/etc/hpcbench/jupyter",
            "jupyterlab_root_dir": "/shared",
        },
    )
    words = exec_words(unit)
    assert "--privileged" not in words, words
    assert words[words.index("--user") + 1] == "0:0"
    assert words[-3:] == ["registry.example.org/hpc/stack@sha256:" + "a" * 64, HOSTILE_VALUE, "lab"]


@pytest.mark.parametrize(
    "ref",
    [
        "hpcbench/stack:latest",
        "stack",
        "localhost:5000/a/b:1",
        "registry.example.org/x_y/z__w-v.u:TAG_1.2-rc",
        "ghcr.io/org/img@sha256:" + "0" * 64,
    ],
)
def test_image_reference_accepts(ref: str) -> None:
    assert image_reference(ref)


@pytest.mark.parametrize(
    "ref",
    [
        *HOSTILE_IMAGES,
        "UPPER:tag",
        "a/Upper",
        "a" * 256,
        "img:-tag",
        "img@md5:12",
        "img:tag\n",
        " img",
    ],
)
def test_image_reference_refuses(ref: str) -> None:
    assert not image_reference(ref)


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("172.30.0.11", True),
        ("::1", True),
        ("172.30.0.0/24", False),
        ("node1", False),
        ("fe80::1%eth0", False),
        ("*", False),
        ("", False),
    ],
)
def test_ip_address(value: str, ok: bool) -> None:
    assert ip_address(value) is ok
