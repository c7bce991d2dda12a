"""Slurm: munge and the daemons run, every node is idle in sinfo, each
partition is up with its nodes, a job runs on all nodes of each partition."""

import pytest


@pytest.fixture(scope="module")
def slurm(testbed):
    if not testbed.var("enable_slurm"):
        pytest.skip("enable_slurm is false in the inventory: Slurm is not configured")
    nodes = [n["name"] for n in testbed.nodes]
    # The inventory's partitions (the first the default), else the role's one
    # partition of every node, whose name the inventory does not carry (None).
    partitions = testbed.var("slurm_partitions") or [{"name": None, "nodes": nodes}]
    return {"head": testbed.head, "nodes": nodes, "partitions": partitions}


def test_munge_round_trip_on_every_node(host, name, slurm):
    assert host.service("munge").is_running, f"munge does not run on {name}"
    key = host.file("/etc/munge/munge.key")
    with host.sudo():
        assert key.user == "munge" and key.mode == 0o400, (key.user, oct(key.mode))
    out = host.run("munge -n | unmunge")
    assert out.rc == 0 and "Success" in out.stdout.split("\n")[0], out.stdout + out.stderr


def test_credential_from_a_worker_decodes_on_the_head(testbed, slurm):
    head = testbed.host(slurm["head"])
    for name in slurm["nodes"]:
        cred = testbed.host(name).check_output("munge -n")
        out = head.run("echo %s | unmunge", cred)
        assert out.rc == 0, f"a credential from {name} does not decode on the head: {out.stderr}"


def test_daemons_run(testbed, host, name, slurm):
    if name == slurm["head"]:
        assert host.service("slurmctld").is_running and host.service("slurmctld").is_enabled
    if name in slurm["nodes"]:
        assert host.service("slurmd").is_running and host.service("slurmd").is_enabled


def test_sinfo_shows_every_node_up(testbed, slurm):
    """Idle, or busy with a job (a sweep may be running): not down, drained or unknown."""
    out = testbed.host(slurm["head"]).check_output("sinfo --noheader --Node --format '%N %t'")
    states = dict(line.split() for line in out.splitlines())
    assert sorted(states) == sorted(slurm["nodes"]), out
    assert set(states.values()) <= {"idle", "alloc", "mix"}, out


def test_each_partition_is_up_with_its_nodes(testbed, slurm):
    """One line per node and partition (sinfo -N); the default partition ends in '*'."""
    out = testbed.host(slurm["head"]).check_output("sinfo --noheader --Node --format '%P %a %N'")
    shown: dict[str, set[str]] = {}
    avail: dict[str, set[str]] = {}
    for line in out.splitlines():
        part, up, node = line.split()
        shown.setdefault(part, set()).add(node)
        avail.setdefault(part, set()).add(up)
    if slurm["partitions"][0]["name"] is None:
        # The role's one partition of every node, whatever its name.
        assert len(shown) == 1 and next(iter(shown)).endswith("*"), out
        expected = {next(iter(shown)): set(slurm["nodes"])}
    else:
        expected = {
            p["name"] + ("*" if i == 0 else ""): set(p["nodes"])
            for i, p in enumerate(slurm["partitions"])
        }
    assert shown == expected, out
    assert all(avail[p] == {"up"} for p in shown), out


def test_a_job_runs_on_every_node_of_each_partition(testbed, slurm):
    reached: set[str] = set()
    for part in slurm["partitions"]:
        cmd, args = "timeout 300 srun --nodes=%s", [str(len(part["nodes"]))]
        if part["name"]:
            cmd, args = cmd + " --partition=%s", [*args, part["name"]]
        # Bounded: waits for a running job (a sweep) to finish for at most 4 minutes.
        out = testbed.host(slurm["head"]).run(
            cmd + " --ntasks-per-node=1 --time=1 --immediate=240 hostname", *args
        )
        assert out.rc == 0, out.stderr
        assert sorted(out.stdout.split()) == sorted(part["nodes"]), part
        reached |= set(out.stdout.split())
    assert reached == set(slurm["nodes"])
