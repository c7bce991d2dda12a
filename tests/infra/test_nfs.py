"""NFS: the server exports to the testbed nodes only, squashes root, and the
testbed user writes; files cross nodes over NFS.

libnfs (nfs-ls, nfs-cp, nfs-cat) speaks the protocol without a kernel client.
Run as root it binds a reserved source port (libnfs lib/socket.c,
rpc_connect_sockaddr_async) and sends uid 0, or the uid/gid given in the URL
(`&uid=N&gid=N`): what the kernel client sends for that user.
"""

import uuid

import pytest

from tests.infra.conftest import Stranger


def nfs_url(server_address: str, path: str, uid: int | None = None, gid: int | None = None) -> str:
    creds = "" if uid is None else f"&uid={uid}&gid={gid}"
    return f"nfs://{server_address}{path}?version=4{creds}"


@pytest.fixture(scope="module")
def nfs(testbed):
    if not testbed.var("enable_nfs"):
        pytest.skip("enable_nfs is false: no NFS server configured")
    servers = testbed.group("nfs_server")
    assert servers, "the inventory has no nfs_server group"
    server = servers[0]
    user = testbed.var("testbed_user", server)
    assert user, "testbed_user is not set (environments/common group_vars)"
    owner = testbed.host(server).user(user)
    assert owner.exists, f"the testbed user {user} does not exist on {server}"
    return {
        "server": server,
        "address": testbed.address(server),
        "dir": testbed.var("shared_dir", server),
        "user": user,
        "uid": owner.uid,
        "gid": owner.gid,
    }


def probe_name() -> str:
    return f"hpcbench-infra-{uuid.uuid4().hex}.txt"


def test_nfs_server_runs(testbed, nfs):
    server = testbed.host(nfs["server"])
    assert (
        server.socket("tcp://0.0.0.0:2049").is_listening
        or server.socket("tcp://:::2049").is_listening
    ), "nothing listens on port 2049"
    services = [server.service(s) for s in ("nfs-ganesha", "nfs-kernel-server", "nfs-server")]
    assert any(s.is_running for s in services), "neither nfs-ganesha nor the kernel NFS server runs"


def test_export_only_to_the_nodes_with_root_squashed(testbed, nfs):
    addresses = sorted(n["address"] for n in testbed.nodes)
    server = testbed.host(nfs["server"])
    with server.sudo():
        if server.service("nfs-ganesha").is_running:
            conf = server.file("/etc/ganesha/ganesha.conf").content_string
            export = conf.split("EXPORT {")[1]
            settings = {
                k.strip(): v.strip(" ;")
                for k, v in (line.split("=", 1) for line in export.splitlines() if "=" in line)
            }
            assert "Access_Type = None;" in export, "the export grants access by default"
            assert sorted(c.strip() for c in settings["Clients"].split(",")) == addresses
            assert settings["Squash"] == "root_squash", settings
            assert settings["PrivilegedPort"] == "true", settings
        else:
            exports = server.check_output("exportfs -v")
            clients = exports.split(nfs["dir"])[1:]
            assert sorted(c.split("(")[0].strip() for c in clients) == addresses, exports
            assert all("root_squash" in c and "no_root_squash" not in c for c in clients)
            assert all("secure" in c and "insecure" not in c for c in clients)
        assert server.file(nfs["dir"]).user == nfs["user"], (
            f"{nfs['dir']} is not the testbed user's"
        )
    # Behaviour: a node gets the export, loopback (no node) does not.
    ok = server.run("nfs-ls %s", nfs_url(nfs["address"], nfs["dir"]))
    assert ok.rc == 0, ok.stderr
    refused = server.run("nfs-ls %s", nfs_url("127.0.0.1", nfs["dir"]))
    assert refused.rc != 0, "the export answers a client outside the node list (127.0.0.1)"


def test_root_on_a_node_is_squashed(testbed, nfs):
    """Root on every node writes as nobody: the testbed user's directory refuses it."""
    name = probe_name()
    leaked = []
    for h in testbed.hosts:  # bounded: the testbed's hosts
        node = testbed.host(h)
        with node.sudo():
            out = node.run(
                "nfs-cp /etc/hostname %s", nfs_url(nfs["address"], f"{nfs['dir']}/{name}")
            )
        if out.rc == 0:
            leaked.append(h)
    server = testbed.host(nfs["server"])
    with server.sudo():
        server.run("rm -f %s", f"{nfs['dir']}/{name}")
    assert not leaked, f"root on {leaked} wrote {nfs['dir']} over NFS (no root_squash)"


def test_testbed_user_writes_from_every_node(testbed, nfs):
    """Where a node mounts the export, the testbed user writes through the mount;
    elsewhere (containers) as the kernel client would for that user."""
    server = testbed.host(nfs["server"])
    name = probe_name()
    failed = {}
    for h in testbed.hosts:  # bounded: the testbed's hosts
        node = testbed.host(h)
        target = f"{nfs['dir']}/{h}-{name}"
        mount = node.run("findmnt --noheadings --output FSTYPE --mountpoint %s", nfs["dir"])
        with node.sudo():
            if h != nfs["server"] and mount.rc == 0 and mount.stdout.strip().startswith("nfs"):
                out = node.run(
                    "runuser -u %s -- sh -c 'echo x > \"$1\"' sh %s", nfs["user"], target
                )
            else:
                url = nfs_url(nfs["address"], target, nfs["uid"], nfs["gid"])
                out = node.run("nfs-cp /etc/hostname %s", url)
        if out.rc != 0:
            failed[h] = out.stderr.strip()[-300:]
    with server.sudo():
        owners = {
            h: server.run("stat -c %%u %s", f"{nfs['dir']}/{h}-{name}").stdout.strip()
            for h in testbed.hosts
        }
        for h in testbed.hosts:  # bounded: the testbed's hosts
            server.run("rm -f %s", f"{nfs['dir']}/{h}-{name}")
    assert not failed, f"the testbed user {nfs['user']} cannot write {nfs['dir']}: {failed}"
    assert set(owners.values()) == {str(nfs["uid"])}, f"files not owned by {nfs['user']}: {owners}"


def test_file_written_on_one_node_is_read_on_another(testbed, nfs):
    hosts = testbed.hosts
    others = [h for h in hosts if h != nfs["server"]]
    writer = others[0] if others else hosts[0]
    readers = [h for h in hosts if h != writer] or [writer]
    reader = readers[-1]
    name = probe_name()
    content = f"written on {writer} {uuid.uuid4().hex}"
    path = f"{nfs['dir']}/{name}"
    w, r = testbed.host(writer), testbed.host(reader)
    local = f"/tmp/{name}"
    try:
        w.check_output("printf %%s %s > %s", content, local)
        with w.sudo():
            cp = w.run("nfs-cp %s %s", local, nfs_url(nfs["address"], path, nfs["uid"], nfs["gid"]))
        assert cp.rc == 0, f"nfs-cp on {writer} failed: {cp.stderr}"
        with r.sudo():
            cat = r.run("nfs-cat %s", nfs_url(nfs["address"], path, nfs["uid"], nfs["gid"]))
        assert cat.rc == 0, f"nfs-cat on {reader} failed: {cat.stderr}"
        assert cat.stdout == content
        # Where the reader's kernel mounts the export, the file is there too.
        mount = r.run("findmnt --noheadings --output FSTYPE --mountpoint %s", nfs["dir"])
        if mount.rc == 0 and mount.stdout.strip().startswith("nfs"):
            assert r.file(path).content_string == content
    finally:
        w.run("rm -f %s", local)
        with testbed.host(nfs["server"]).sudo():
            testbed.host(nfs["server"]).run("rm -f %s", path)


def test_clients_mount_where_the_kernel_can(testbed, nfs):
    checked = 0
    for h in testbed.hosts:  # bounded: the testbed's hosts
        if h == nfs["server"]:
            continue
        client = testbed.host(h)
        filesystems = client.file("/proc/filesystems").content_string.split()
        if "nfs4" not in filesystems:
            continue
        checked += 1
        out = client.check_output(
            "findmnt --noheadings --output FSTYPE --mountpoint %s", nfs["dir"]
        )
        assert out.startswith("nfs"), f"{h} can mount NFS but {nfs['dir']} is {out!r}"
    if not checked:
        pytest.skip(
            "no client kernel has an NFS client (no nfs4 in /proc/filesystems): "
            "the export is checked over the protocol with libnfs instead"
        )


# --- from outside the node list: the controller and a stranger on the network

# Runs in a throwaway container as root (a reserved port, uid 0): whether TCP
# reaches the server at all, then whether NFS lists and takes a file. Where TCP
# does not get through (a firewall that drops), NFS cannot either: ls and cp
# are reported failed without waiting out their timeouts against a drop.
STRANGER = r"""
exec 2>&1
if ! timeout 5 bash -c "exec 3<>/dev/tcp/$1/2049"; then printf "tcp=1\nls=1\ncp=1\n"; exit 0; fi
echo tcp=0
timeout 30 nfs-ls "nfs://$1$2?version=4" >/dev/null; echo ls=$?
timeout 30 nfs-cp /etc/hostname "nfs://$1$2/$3?version=4"; echo cp=$?
"""


@pytest.fixture(scope="module")
def outsider(testbed, nfs):
    """Runs STRANGER from the host or from an address on the testbed network
    that no node has (conftest.Stranger)."""
    stranger = Stranger(testbed, nfs["server"])
    server = testbed.host(nfs["server"])

    def run(where: str) -> dict[str, int]:
        probe = probe_name()
        try:
            out = stranger.run(where, STRANGER, nfs["address"], nfs["dir"], probe)
        finally:  # a file it may have written where it should not
            with server.sudo():
                server.run("rm -f %s", f"{nfs['dir']}/{probe}")
        found = dict(
            line.split("=", 1) for line in out.splitlines() if line[:3] in ("tcp", "ls=", "cp=")
        )
        assert set(found) == {"tcp", "ls", "cp"}, out
        return {k: int(v) for k, v in found.items()}

    return run, stranger.ip


def _refused(got: dict[str, int], who: str, firewall: bool) -> None:
    """Behind the testbed firewall (node_firewall) port 2049 itself is closed to
    `who`; without it TCP gets through and the export's own client list refuses."""
    if firewall:
        assert got["tcp"] != 0, f"{who} reaches port 2049 through the testbed firewall"
    else:
        assert got["tcp"] == 0, f"{who} cannot reach port 2049: the refusal below proves nothing"
    assert got["ls"] != 0 and got["cp"] != 0, f"{who} gets the export: {got}"


def test_export_refuses_root_from_the_host(outsider, testbed, nfs):
    run, _ = outsider
    firewall = testbed.var("enable_firewall", nfs["server"])
    _refused(run("host"), "the host (Docker gateway)", firewall)


def test_export_refuses_an_address_outside_the_node_list(outsider, testbed, nfs):
    run, ip = outsider
    _refused(run("stranger"), f"a container at {ip}", testbed.var("enable_firewall", nfs["server"]))
