"""How the harness calls ssh: host keys are always checked, against the testbed's
known_hosts (the one Ansible learned them into) or the user's own. What ssh itself makes of
the arguments (`ssh -G`) and a login node on this machine's sshd:
tests/integration/test_ssh_access_processes.py."""

from __future__ import annotations

import shutil

import pytest
import yaml

from hpcbench import cli
from hpcbench.core.errors import UsageError
from hpcbench.core.ssh import SshAccess, split_options
from hpcbench.testbeds import nodeset

pytestmark = pytest.mark.skipif(shutil.which("ssh") is None, reason="needs the ssh client")


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


@pytest.mark.parametrize("field", ["known_hosts", "key_file"])
def test_a_file_name_ssh_would_expand_is_refused_in_one_line(field):
    """ssh expands ${NAME} from the environment in these names and has no escape for it."""
    with pytest.raises(UsageError) as err:
        SshAccess(host="login", **{field: "/home/me/${HOME}/x"})
    assert "\n" not in str(err.value) and "has no escape" in str(err.value)


def test_such_a_known_hosts_stops_the_command_before_anything_is_made(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["scale", "--env", "slurm", "--nodes", "1", "--backend", "ddp", "--no-probe"]
    argv += ["--slurm-login", "me@login", "--slurm-python", "python", "--out", str(out)]
    assert cli.main([*argv, "--slurm-known-hosts", "/k/${HOME}/known_hosts"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("hpcbench: error: known_hosts '/k/${HOME}")
    assert not out.exists()
