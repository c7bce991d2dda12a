"""The testbed interface is shaped to link_rate with tbf (or not shaped when it is empty)."""

import json

import pytest

from hpcbench.performance import allreduce_model


def rate_bytes(rate: str) -> int:
    nominal = allreduce_model.nominal_bytes_per_s(rate)
    assert nominal is not None, f"link_rate {rate!r} is not a tc rate in bits (1gbit, 10gbit)"
    return int(nominal)


def _iface(host, testbed, name) -> str:
    iface = testbed.var("hpcbench_iface", name)
    if iface:
        return iface
    address = testbed.address(name)
    for link in json.loads(host.check_output("ip -j -4 addr show")):
        if any(a.get("local") == address for a in link.get("addr_info", [])):
            return link["ifname"]
    pytest.fail(f"no interface of {name} holds its testbed address {address}")


def test_tbf_rate_as_configured(host, testbed, name):
    if not testbed.var("enable_link_shaping", name):
        pytest.skip("enable_link_shaping is false: links are not shaped")
    rate = testbed.var("link_rate", name) or ""
    iface = _iface(host, testbed, name)
    qdiscs = json.loads(host.check_output(f"tc -j qdisc show dev {iface} root"))
    root = next((q for q in qdiscs if q.get("root")), {})
    if not rate:
        assert root.get("kind") != "tbf", f"{iface} is shaped although link_rate is empty: {root}"
        return
    assert root.get("kind") == "tbf", f"{iface} root qdisc is {root}, expected tbf rate {rate}"
    assert root["options"]["rate"] == rate_bytes(rate), root
