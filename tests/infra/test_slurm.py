"""Slurm: munge and the daemons run, every node is idle in sinfo, a job runs on every node."""

import pytest


@pytest.fixture(scope="module")
def slurm(testbed):
    if not testbed.var("enable_slurm"):
        pytest.skip("enable_slurm is false in the inventory: Slurm is not configured")
    return {"head": testbed.head, "nodes": [n["name"] for n in testbed.nodes]}


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


def test_a_job_runs_on_every_node(testbed, slurm):
    n = len(slurm["nodes"])
    # Bounded: waits for a running job (a sweep) to finish for at most 4 minutes.
    out = testbed.host(slurm["head"]).run(
        "timeout 300 srun --nodes=%s --ntasks-per-node=1 --time=1 --immediate=240 hostname", str(n)
    )
    assert out.rc == 0, out.stderr
    assert sorted(out.stdout.split()) == sorted(slurm["nodes"])
