"""SSH: no passwords anywhere; every node reaches every other by name with the testbed key."""

import json

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


# On the node: the sshd listener (the ssh/sshd unit's main process; without
# systemd, the oldest sshd whose parent is no sshd), when it started (proc(5):
# starttime, clock ticks after boot) and which of its configuration files
# changed after that (mtimes brought onto the boot clock).
SSHD_AGE = r"""
import glob, json, os, subprocess, time
def stat(pid):
    s = open(f"/proc/{pid}/stat").read()
    rest = s[s.rindex(")") + 2:].split()
    return s[s.index("(") + 1:s.rindex(")")], int(rest[1]), int(rest[19])
pid = 0
for unit in ("ssh.service", "sshd.service"):
    try:
        out = subprocess.run(["systemctl", "show", "-p", "MainPID", "--value", unit],
                             capture_output=True, text=True).stdout.strip()
    except FileNotFoundError:
        break
    if out.isdigit() and int(out) > 0:
        pid = int(out)
        break
if not pid:
    procs = {}
    for d in glob.glob("/proc/[0-9]*"):
        try:
            procs[int(d[6:])] = stat(d[6:])
        except (OSError, ValueError):
            pass
    roots = [(st, p) for p, (comm, pp, st) in procs.items()
             if comm == "sshd" and procs.get(pp, ("",))[0] != "sshd"]
    pid = min(roots)[1] if roots else 0
started = stat(pid)[2] / os.sysconf("SC_CLK_TCK")
offset = time.clock_gettime(time.CLOCK_REALTIME) - time.clock_gettime(time.CLOCK_BOOTTIME)
files = ["/etc/ssh/sshd_config", *glob.glob("/etc/ssh/sshd_config.d/*.conf")]
newer = [f for f in files if os.path.exists(f) and os.stat(f).st_mtime - offset > started + 0.01]
print(json.dumps({"pid": pid, "newer": newer}))
"""


def test_running_sshd_has_read_its_configuration(host):
    """`sshd -T` reads the files; this asks whether the daemon that answers has
    read them too: it started after each of them last changed (a run that
    wrote the drop-in and was interrupted before restarting sshd fails here)."""
    if not host.file("/run/systemd/system").is_directory:
        # No systemd (a GPULab job's own sshd): the role reloads sshd, which keeps
        # its process and start time, so its age cannot tell (ssh_mesh handlers).
        pytest.skip("sshd is not run by systemd here: reloaded, not restarted")
    with host.sudo():
        out = host.check_output(f"python3 - <<'EOF'\n{SSHD_AGE}EOF")
    age = json.loads(out.splitlines()[-1])
    assert age["pid"] > 0, "no sshd runs"
    assert age["newer"] == [], f"sshd (pid {age['pid']}) started before {age['newer']} changed"


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
