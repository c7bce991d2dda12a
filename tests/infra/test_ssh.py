"""SSH: no passwords anywhere; every node reaches every other by name with the testbed key."""

import pytest

SSH_MESH = (
    "ssh -i ~/.ssh/id_ed25519_hpcbench -o IdentitiesOnly=yes -o BatchMode=yes "
    "-o StrictHostKeyChecking=yes -o ConnectTimeout=10 %s hostname"
)


def run_ssh(host, command, *args):
    """Run an ssh client on the node; returns (exit status of ssh, stdout, stderr).

    testinfra treats exit status 255 as a broken connection to the node, and
    255 is what a refused ssh login returns: report it on stdout instead.
    """
    out = host.run(command + '; echo "ssh-exit=$?"', *args)
    lines = out.stdout.rstrip("\n").split("\n")
    rc = int(lines[-1].removeprefix("ssh-exit="))
    return rc, "\n".join(lines[:-1]), out.stderr


def test_sshd_configured_without_passwords(host):
    with host.sudo():
        conf = host.check_output("sshd -T").splitlines()
    assert "passwordauthentication no" in conf
    assert "kbdinteractiveauthentication no" in conf
    assert "permitemptypasswords no" in conf


def test_sshd_offers_no_password_method(host, name):
    """Ask the node's own sshd for a password login: it offers public keys only."""
    rc, _, err = run_ssh(
        host,
        "ssh -o BatchMode=yes -o ConnectTimeout=10 -o PubkeyAuthentication=no "
        "-o PreferredAuthentications=password,keyboard-interactive "
        "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null %s true",
        name,
    )
    assert rc == 255, err
    assert "Permission denied (publickey)" in err, err


def test_every_node_reaches_every_other_by_name(host, testbed, name):
    if not testbed.var("enable_ssh_mesh"):
        pytest.skip("enable_ssh_mesh is false: no testbed SSH mesh configured")
    assert testbed.nodes, "testbed_nodes is empty in the inventory"
    # Where the testbed names the nodes itself (base_set_hostname false: GPULab
    # jobs), any answer will do; elsewhere each node answers with its name.
    same_name = testbed.var("base_set_hostname", name) is not False
    failures = {}
    for node in testbed.nodes:  # bounded: one attempt per testbed node
        rc, out, err = run_ssh(host, SSH_MESH, node["name"])
        if rc != 0 or (same_name and out.strip() != node["name"]):
            failures[node["name"]] = (rc, out.strip(), err.strip()[-200:])
    assert not failures, f"{name} cannot reach with the testbed key: {failures}"
