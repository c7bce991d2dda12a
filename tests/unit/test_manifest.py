"""bench/'s manifest: computed as the stack role writes it, compared per node before a
sweep (a fake SSH call: no network)."""

from __future__ import annotations

import pytest

from hpcbench.core import paths, ssh
from hpcbench.core.errors import UsageError
from hpcbench.core.ssh import SshAccess
from hpcbench.launchers import get
from hpcbench.launchers.parse import HostSlots
from hpcbench.launchers.specs import TargetSpec
from hpcbench.testbeds import manifest, nodeset
from hpcbench.testbeds.kinds import hosts, localhost
from hpcbench.testbeds.target import Target


@pytest.fixture
def bench(tmp_path):
    root = tmp_path / "bench"
    (root / "models").mkdir(parents=True)
    (root / "__pycache__").mkdir()
    (root / "train.py").write_text("print('train')\n")
    (root / "models" / "a.json").write_text("{}\n")
    (root / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"\0cache")
    (root / manifest.MANIFEST_FILE).write_text("stale\n")
    return root


def test_every_file_but_caches_and_the_manifest(bench):
    digests = manifest.compute(bench)
    assert list(digests) == ["models/a.json", "train.py"]
    assert all(len(d) == 64 for d in digests.values())


def test_a_manifest_matches_only_the_same_files_and_contents(bench):
    expected = manifest.compute(bench)
    text = manifest.render(expected)
    assert manifest.matches(expected, text)
    assert manifest.matches(expected, "".join(f"{d}  ./{p}\n" for p, d in expected.items()))
    assert not manifest.matches(expected, "")  # missing on the node
    assert not manifest.matches(expected, text.replace(expected["train.py"], "0" * 64))
    assert not manifest.matches(expected, text + f"{'1' * 64}  extra.py\n")
    assert not manifest.matches(expected, text.splitlines()[0] + "\n")


def _deployed(nodes: int = 2) -> nodeset.Testbed:
    return nodeset.Testbed(
        env="local",
        kind="local",
        nodes=[
            nodeset.Node(f"n{i}", f"10.0.0.{i}", 0, SshAccess("127.0.0.1", 2220 + i))
            for i in range(nodes)
        ],
        head="n0",
        bench_dir="/opt/hpcbench/bench",
    )


def _target(tb: nodeset.Testbed) -> Target:
    return Target(tb, [len(tb.nodes)], None, "horovod", get(TargetSpec("localhost", (1,))))


def test_prepare_refuses_a_node_whose_bench_differs(bench, monkeypatch):
    monkeypatch.setattr(paths, "BENCH_DIR", bench)
    good = manifest.render(manifest.compute(bench))
    calls = []

    def call(access, command="true", timeout_s=30):
        calls.append(command)
        return ssh.Reply(good if access.port == 2220 else "")  # n1 lacks the manifest

    monkeypatch.setattr(ssh, "call", call)
    with pytest.raises(UsageError) as err:
        _target(_deployed()).prepare()
    assert str(err.value) == (
        "node n1: the workload in /opt/hpcbench/bench differs from this checkout's "
        "bench/ (run make deploy ENV=local)"
    )
    # One SSH round trip per node: reachability and the manifest together.
    assert calls == ["cat /opt/hpcbench/bench/.manifest.sha256 2>/dev/null || true"] * 2


def test_prepare_passes_matching_nodes_and_names_unreachable_ones(bench, monkeypatch):
    monkeypatch.setattr(paths, "BENCH_DIR", bench)
    good = manifest.render(manifest.compute(bench))
    monkeypatch.setattr(ssh, "call", lambda access, command, timeout_s=30: ssh.Reply(good))
    _target(_deployed()).prepare()
    monkeypatch.setattr(ssh, "call", lambda a, c, timeout_s=30: ssh.Reply(problem="refused"))
    with pytest.raises(UsageError, match=r"node n0 \(127.0.0.1:2220\) is unreachable over SSH"):
        _target(_deployed()).prepare()


def test_hosts_on_a_shared_file_system_skip_the_manifest(monkeypatch):
    calls = []
    monkeypatch.setattr(ssh, "call", lambda a, c, timeout_s=30: calls.append(c) or ssh.Reply())
    tb = hosts.testbed([HostSlots("h0", 1), HostSlots("h1", 1)])
    assert tb.kind == "hosts"
    _target(tb).prepare()
    assert calls == ["true", "true"]
    calls.clear()
    _target(localhost.testbed(cores=2)).prepare()  # nothing to reach
    assert calls == []
