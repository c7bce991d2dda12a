import pytest
import yaml

from hpcbench.core.errors import UsageError
from hpcbench.launchers.parse import HostSlots
from hpcbench.launchers.specs import TargetSpec
from hpcbench.testbeds import kinds, nodeset
from hpcbench.testbeds.kinds import hosts, localhost


def _inventory(nodes=3, proxy=False):
    names = [f"node{i}" for i in range(nodes)]
    hosts = {}
    for i, name in enumerate(names):
        hosts[name] = {
            "ansible_host": "127.0.0.1",
            "ansible_port": 2220 + i,
            "ansible_user": "hpc",
            "ansible_ssh_private_key_file": "/k/id",
            "testbed_address": f"10.0.0.{i + 1}",
            "node_role": "head" if i == 0 else "worker",
            "node_kind": "container",
            "node_gpus": 0,
        }
        if proxy:
            hosts[name]["ansible_ssh_common_args"] = "-o ProxyJump=jump@bastion"
    return {
        "all": {
            "vars": {
                "hpcbench_env": "local",
                "testbed_head": names[0],
                "link_rate": "1gbit",
                "hpcbench_iface": "eth0",
                "testbed_nodes": [
                    {"name": n, "address": f"10.0.0.{i + 1}", "gpus": 0}
                    for i, n in enumerate(names)
                ],
            },
            "hosts": hosts,
            "children": {"head": {"hosts": {names[0]: {}}}},
        }
    }


def test_reads_generated_inventory(tmp_path):
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(_inventory(proxy=True)))
    tb = nodeset.load_inventory(path)
    assert [n.name for n in tb.nodes] == ["node0", "node1", "node2"]
    assert tb.head == "node0" and tb.head_node().address == "10.0.0.1"
    assert tb.iface == "eth0" and tb.link_rate == "1gbit"
    assert tb.python == nodeset.DEFAULT_PYTHON and tb.bench_dir == nodeset.DEFAULT_BENCH_DIR
    assert tb.slots(tb.nodes[0]) == 1 and tb.slots(tb.nodes[0], 4) == 4
    argv = tb.nodes[1].access.argv()
    assert argv[-1] == "hpc@127.0.0.1"
    assert argv[argv.index("-p") : argv.index("-p") + 2] == ["-p", "2221"]
    assert 'IdentityFile="/k/id"' in argv
    assert "ProxyJump=jump@bastion" in argv


def test_an_automatic_interface_is_left_to_the_libraries(tmp_path):
    # horovodrun --network-interface auto failed with KeyError: 'auto' (jFed stand-in e2e).
    inventory = _inventory()
    inventory["all"]["vars"]["hpcbench_iface"] = "auto"
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory))
    assert nodeset.load_inventory(path).iface == ""


def test_for_env_reads_the_state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path))
    monkeypatch.setattr(nodeset.paths, "environments", lambda: ["local"])
    with pytest.raises(UsageError, match="not deployed.*make deploy ENV=local"):
        kinds.for_env("local").testbed(TargetSpec("local", (1,)))
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "inventory.yml").write_text(yaml.safe_dump(_inventory(4)))
    assert len(kinds.for_env("local").testbed(TargetSpec("local", (1,))).nodes) == 4
    with pytest.raises(UsageError, match="unknown environment 'nope'"):
        kinds.for_env("nope")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["all"]["vars"].pop("testbed_nodes"), "not an hpcbench inventory"),
        (lambda d: d["all"]["hosts"].pop("node1"), "not in hosts"),
        (lambda d: d["all"]["vars"].update(testbed_head="other"), "testbed_head other"),
    ],
)
def test_bad_inventory_is_one_clear_line(tmp_path, mutate, message):
    data = _inventory()
    mutate(data)
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(UsageError, match=message):
        nodeset.load_inventory(path)


def test_localhost_and_hosts():
    tb = localhost.testbed(cores=2)
    assert len(tb.nodes) == 2 and tb.on_controller
    mine = hosts.testbed([HostSlots("a", 2), HostSlots("b", 2)])
    assert mine.head == "a" and not mine.on_controller and mine.slots(mine.nodes[1]) == 2
