"""How the harness calls ssh: host keys are always checked, against the testbed's
known_hosts (the one Ansible learned them into) or the user's own.

`ssh -G` prints the configuration ssh would use, without connecting: the checks
read what ssh itself makes of the arguments."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from hpcbench import nodeset
from hpcbench.errors import UsageError
from hpcbench.ssh import SshAccess, split_options

pytestmark = pytest.mark.skipif(shutil.which("ssh") is None, reason="needs the ssh client")


def effective(access: SshAccess) -> dict[str, str]:
    argv = access.argv()
    out = subprocess.run([argv[0], "-G", *argv[1:]], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)


def _inventory(tmp_path, **host_vars):
    host = {"ansible_host": "127.0.0.1", "ansible_port": 22901, "ansible_user": "hpc", **host_vars}
    data = {
        "all": {
            "vars": {"testbed_head": "n1", "testbed_nodes": [{"name": "n1"}]},
            "hosts": {"n1": host},
        }
    }
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_inventory_known_hosts_is_used_and_checked_strictly(tmp_path):
    # What terraform/modules/inventory writes: Ansible learns keys with accept-new.
    path = _inventory(
        tmp_path,
        ansible_ssh_extra_args="-o UserKnownHostsFile=/state/ssh/known_hosts "
        "-o StrictHostKeyChecking=accept-new",
        ansible_ssh_common_args="-o ProxyJump=jump@bastion",
    )
    [node] = nodeset.load_inventory(path).nodes
    config = effective(node.access)
    assert config["stricthostkeychecking"] == "true"
    assert config["userknownhostsfile"] == "/state/ssh/known_hosts"
    assert config["proxyjump"] == "jump@bastion" and config["port"] == "22901"
    assert "/dev/null" not in node.access.argv()


def test_without_ansible_arguments_the_state_folder_known_hosts_is_used(tmp_path):
    [node] = nodeset.load_inventory(_inventory(tmp_path)).nodes
    config = effective(node.access)
    assert config["userknownhostsfile"] == str(tmp_path / "ssh" / "known_hosts")
    assert config["stricthostkeychecking"] == "true"


def test_ad_hoc_hosts_use_the_users_known_hosts_strictly():
    config = effective(SshAccess(host="node1"))
    assert config["stricthostkeychecking"] == "true"
    assert "/dev/null" not in config["userknownhostsfile"]


def test_extra_arguments_cannot_turn_checking_off():
    access = SshAccess(
        host="n", extra_args=("-oStrictHostKeyChecking=no", "-o", "UserKnownHostsFile /dev/null")
    )
    config = effective(access)
    assert (
        config["stricthostkeychecking"] == "true"
        and "/dev/null" not in config["userknownhostsfile"]
    )


def test_the_host_is_never_an_option():
    argv = SshAccess(host="-Fevil").argv()
    assert argv[-2:] == ["--", "-Fevil"]


def test_split_options():
    assert split_options(
        ("-o", "UserKnownHostsFile=/k", "-p", "2", "-oStrictHostKeyChecking no")
    ) == (("-p", "2"), {"userknownhostsfile": "/k", "stricthostkeychecking": "no"})


@pytest.mark.parametrize(
    ("host_vars", "message"),
    [
        ({"ansible_port": "abc"}, "ansible_port 'abc' is not a port"),
        ({"ansible_port": 70000}, "is not a port"),
        ({"ansible_ssh_common_args": "-o 'ProxyCommand=x"}, "not valid shell words"),
        ({"node_gpus": "many"}, "gpus: 'many' is not a whole number"),
    ],
)
def test_a_malformed_inventory_is_one_line(tmp_path, host_vars, message):
    with pytest.raises(UsageError, match=message):
        nodeset.load_inventory(_inventory(tmp_path, **host_vars))


@pytest.mark.parametrize(
    "text",
    [
        "all: {vars: {testbed_head: n1, testbed_nodes: [7]}, hosts: {n1: {}}}",
        "all: {vars: {testbed_head: n1, testbed_nodes: 7}, hosts: {n1: {}}}",
        "all: {vars: {testbed_head: n1, testbed_nodes: [{name: n1}]}, hosts: [1]}",
        "all: 7",
        "- 1",
        "all: {vars: {testbed_head: n1, testbed_nodes: [{name: n1}]}, hosts: {n1: 3}}",
    ],
)
def test_a_malformed_inventory_entry_is_one_line(tmp_path, text):
    path = tmp_path / "inventory.yml"
    path.write_text(text)
    with pytest.raises(UsageError):
        nodeset.load_inventory(path)


def test_an_inventory_that_is_not_utf8_is_one_line(tmp_path):
    path = tmp_path / "inventory.yml"
    path.write_bytes(b"all: \xff\xfe\n")
    with pytest.raises(UsageError, match="not valid YAML"):
        nodeset.load_inventory(path)
