"""NFS: the server runs and exports only to the testbed subnet; files cross nodes over NFS."""

import uuid

import pytest


def nfs_url(server_address: str, path: str) -> str:
    return f"nfs://{server_address}{path}?version=4"


@pytest.fixture(scope="module")
def nfs(testbed):
    if not testbed.var("enable_nfs"):
        pytest.skip("enable_nfs is false: no NFS server configured")
    servers = testbed.group("nfs_server")
    assert servers, "the inventory has no nfs_server group"
    server = servers[0]
    return {
        "server": server,
        "address": testbed.address(server),
        "dir": testbed.var("shared_dir", server),
        "subnet": testbed.var("testbed_subnet", server),
    }


def test_nfs_server_runs(testbed, nfs):
    server = testbed.host(nfs["server"])
    assert (
        server.socket("tcp://0.0.0.0:2049").is_listening
        or server.socket("tcp://:::2049").is_listening
    ), "nothing listens on port 2049"
    services = [server.service(s) for s in ("nfs-ganesha", "nfs-kernel-server", "nfs-server")]
    assert any(s.is_running for s in services), "neither nfs-ganesha nor the kernel NFS server runs"


def test_export_only_to_testbed_subnet(testbed, nfs):
    server = testbed.host(nfs["server"])
    with server.sudo():
        if server.service("nfs-ganesha").is_running:
            conf = server.file("/etc/ganesha/ganesha.conf").content_string
            export = conf.split("EXPORT {")[1]
            assert "Access_Type = None;" in export, "the export grants access by default"
            clients = [
                line.split("=", 1)[1].strip(" ;")
                for line in conf.splitlines()
                if line.strip().startswith("Clients")
            ]
            assert clients == [nfs["subnet"]], clients
        else:
            exports = server.check_output("exportfs -v")
            for line in exports.split(nfs["dir"])[1:]:
                assert line.split()[0].startswith(nfs["subnet"]), exports
    # Behaviour: the subnet gets the export, loopback (outside it) does not.
    ok = server.run("nfs-ls %s", nfs_url(nfs["address"], nfs["dir"]))
    assert ok.rc == 0, ok.stderr
    refused = server.run("nfs-ls %s", nfs_url("127.0.0.1", nfs["dir"]))
    assert refused.rc != 0, "the export answers a client outside the testbed subnet (127.0.0.1)"


def test_file_written_on_one_node_is_read_on_another(testbed, nfs):
    hosts = testbed.hosts
    others = [h for h in hosts if h != nfs["server"]]
    writer = others[0] if others else hosts[0]
    readers = [h for h in hosts if h != writer] or [writer]
    reader = readers[-1]
    name = f"hpcbench-infra-{uuid.uuid4().hex}.txt"
    content = f"written on {writer} {uuid.uuid4().hex}"
    url = nfs_url(nfs["address"], f"{nfs['dir']}/{name}")
    w, r = testbed.host(writer), testbed.host(reader)
    local = f"/tmp/{name}"
    try:
        w.check_output("printf %%s %s > %s", content, local)
        cp = w.run("nfs-cp %s %s", local, url)
        assert cp.rc == 0, f"nfs-cp on {writer} failed: {cp.stderr}"
        cat = r.run("nfs-cat %s", url)
        assert cat.rc == 0, f"nfs-cat on {reader} failed: {cat.stderr}"
        assert cat.stdout == content
        # Where the reader's kernel mounts the export, the file is there too.
        mount = r.run("findmnt --noheadings --output FSTYPE --mountpoint %s", nfs["dir"])
        if mount.rc == 0 and mount.stdout.strip().startswith("nfs"):
            assert r.file(f"{nfs['dir']}/{name}").content_string == content
    finally:
        w.run("rm -f %s", local)
        with testbed.host(nfs["server"]).sudo():
            testbed.host(nfs["server"]).run("rm -f %s", f"{nfs['dir']}/{name}")


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
