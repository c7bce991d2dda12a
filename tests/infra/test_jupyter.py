"""JupyterLab listens on the head node and needs the token (read on the node, never printed)."""

import hashlib
import os
import stat
from pathlib import Path

import pytest

TOKEN_FILE = "/etc/hpcbench/jupyter/token"

# Runs on the node: prints the HTTP status of GET /api/status, with the token
# from the node's file when asked. The token stays inside this process.
PROBE = r"""
import pathlib, sys, urllib.error, urllib.request
url, use = sys.argv[1], sys.argv[2]
headers = {}
if use == "token":
    headers["Authorization"] = "token " + pathlib.Path(sys.argv[3]).read_text().strip()
elif use == "wrong":
    headers["Authorization"] = "token not-the-token"
try:
    print(urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10).status)
except urllib.error.HTTPError as err:
    print(err.code)
"""


@pytest.fixture(scope="module")
def jupyter(testbed):
    if not testbed.var("enable_jupyter"):
        pytest.skip("enable_jupyter is false: no JupyterLab configured")
    hosts = testbed.group("jupyter")
    assert hosts, "the inventory has no jupyter group"
    name = hosts[0]
    # jupyterlab_bind_address when the inventory sets it (127.0.0.1: reached
    # through an SSH tunnel only), else the role's default: the testbed address.
    bind = testbed.var("jupyterlab_bind_address", name)
    address = bind if bind and bind not in ("0.0.0.0", "::") else testbed.address(name)
    port = testbed.var("jupyter_port", name)
    return name, testbed.host(name), f"http://{address}:{port}/api/status", (address, port)


def probe(host, url, use):
    with host.sudo():
        return host.check_output("python3 -c %s %s %s %s", PROBE, url, use, TOKEN_FILE)


def test_jupyter_listens(jupyter):
    _, host, _, (address, port) = jupyter
    assert host.service("jupyterlab").is_running
    assert (
        host.socket(f"tcp://{address}:{port}").is_listening
        or host.socket(f"tcp://0.0.0.0:{port}").is_listening
    ), f"nothing listens on {address}:{port}"


def test_request_without_token_is_refused(jupyter):
    _, host, url, _ = jupyter
    assert probe(host, url, "none") == "403"
    assert probe(host, url, "wrong") == "403"


def test_request_with_token_is_accepted(jupyter):
    _, host, url, _ = jupyter
    assert probe(host, url, "token") == "200"


def test_token_files_are_private(jupyter, testbed):
    name, host, _, _ = jupyter
    with host.sudo():
        f = host.file(TOKEN_FILE)
        assert f.mode == 0o600
        node_sha = f.sha256sum
    controller = Path(testbed.var("hpcbench_state_dir", name) or "") / "jupyter_token"
    if not controller.is_file():
        pytest.skip(f"no controller copy at {controller} (checks run from another machine?)")
    assert stat.S_IMODE(os.stat(controller).st_mode) == 0o600
    assert hashlib.sha256(controller.read_bytes()).hexdigest() == node_sha


def test_jupyter_runs_as_the_testbed_user(jupyter, testbed):
    """The token grants a shell as the server's user: never root. Selected by
    command name (jupyter-lab): in stack_mode container the server runs in a
    container, and `ss -p` cannot name another user's process without
    CAP_SYS_PTRACE."""
    name, host, _, _ = jupyter
    users = set(host.run("ps -C jupyter-lab -o user=").stdout.split())
    assert users, "no jupyter-lab process runs"
    expected = testbed.var("testbed_user", name)
    assert users == {expected}, f"JupyterLab runs as {users}, not the testbed user {expected}"
