"""Every node knows every other by name; its host name is its testbed name."""

import pytest


def test_hostname_is_testbed_name(host, name, testbed):
    if testbed.var("base_set_hostname", name) is False:
        pytest.skip("base_set_hostname is false: the testbed names the nodes (GPULab jobs)")
    assert host.check_output("hostname") == name


def test_every_node_resolves_to_its_address(host, testbed):
    wrong = {}
    for node in testbed.nodes:
        out = host.run(f"getent hosts {node['name']}")
        if out.rc != 0 or node["address"] not in out.stdout.split():
            wrong[node["name"]] = out.stdout.strip() or f"rc={out.rc}"
    assert not wrong, f"names that do not resolve to their testbed address: {wrong}"
