"""hpcbench.testbeds.here: a planned node's limits read from the plan's JSON, and the
one-worker command run in a container of them."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hpcbench.launchers.base import Command
from hpcbench.testbeds.here import NodeLimits, in_container, planned_nodes

FIRST_NODE = "module.testbed.docker_container.node[0]"

IMAGE = "sha256:" + "ab" * 32


def plan(*nodes: dict[str, Any]) -> dict[str, Any]:
    """A plan's JSON as `terraform show -json` gives it: the containers' changes."""
    return {
        "resource_changes": [
            {
                "address": f"module.testbed.docker_container.node[{i}]",
                "change": {"actions": ["create"], "after": after},
            }
            for i, after in enumerate(nodes)
        ]
    }


def test_every_nodes_image_and_limits_are_read_from_the_plan_first_node_first() -> None:
    shown = plan(
        {"image": IMAGE, "cpu_period": 100000, "cpu_quota": 100000, "cpu_set": "1"},
        {"image": IMAGE, "cpu_period": 100000, "cpu_quota": 100000, "cpu_set": "0"},
    )
    node, second = planned_nodes(shown)
    assert node == NodeLimits(IMAGE, 100000, 100000, "1", None)
    assert second == NodeLimits(IMAGE, 100000, 100000, "0", None)
    assert node.cpus == 1.0 and node.said() == (
        "1 core(s) (quota 100000/100000 us), pinned to CPU set 1"
    )
    # A fractional quota is not pinned (docker_testbed): any core, its memory limit kept.
    (half,) = planned_nodes(
        plan({"image": IMAGE, "cpu_period": 100000, "cpu_quota": 50000, "memory": 2048})
    )
    assert half == NodeLimits(IMAGE, 100000, 50000, None, 2048)
    assert half.cpus == 0.5 and half.said().endswith("on any core")


def test_a_plan_without_every_node_known_gives_none() -> None:
    # A VM environment: no container at all.
    vm = {"resource_changes": [{"address": "openstack_compute_instance_v2.n"}]}
    assert planned_nodes(vm) == ()
    assert planned_nodes({}) == ()
    # The image not known until apply (Terraform leaves it out of `after`).
    assert planned_nodes(plan({"cpu_period": 100000, "cpu_quota": 100000})) == ()
    # A quota that is no positive whole number (a bool is no count).
    assert planned_nodes(plan({"image": IMAGE, "cpu_period": 100000, "cpu_quota": True})) == ()
    assert planned_nodes(plan({"image": IMAGE, "cpu_period": 0, "cpu_quota": 1000})) == ()
    # One node of two unknown: the plan's nodes are not all known.
    known = {"image": IMAGE, "cpu_period": 100000, "cpu_quota": 100000}
    assert planned_nodes(plan(known, {"cpu_period": 100000})) == ()
    # Numbered with a gap (node[1] missing): not the testbed's whole set.
    gap = plan(known, known, known)
    del gap["resource_changes"][1]
    assert planned_nodes(gap) == ()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(
    st.dictionaries(
        st.sampled_from(["image", "cpu_period", "cpu_quota", "cpu_set", "memory"]), JSON
    ),
    JSON,
)
def test_any_plan_gives_limits_or_none_and_never_raises(after: dict[str, Any], noise: Any) -> None:
    for shown in (plan(after), {"resource_changes": noise}, {"resource_changes": [noise]}):
        for node in planned_nodes(shown):  # type: ignore[arg-type]
            assert node.image and node.cpu_period_us > 0 and node.cpu_quota_us > 0
            assert node.cpu_set is None or isinstance(node.cpu_set, str)
    # Whatever the first node's change holds.
    nodes = planned_nodes({"resource_changes": [{"address": FIRST_NODE, "change": noise}]})
    assert all(node.cpu_quota_us > 0 for node in nodes)


def test_the_run_is_started_in_a_container_of_the_nodes_image_and_limits(tmp_path: Any) -> None:
    run = Command(
        ("/opt/hpcbench/venv/bin/python", "leash.py", "--stdin", "--", "python", "train.py"),
        env={"RANK": "0", "WORLD_SIZE": "1"},
        cwd="/opt/hpcbench-before-booking/bench",
    )
    pinned = in_container(NodeLimits(IMAGE, 100000, 100000, "1"), run, "hb-1", tmp_path)
    argv = list(pinned.argv)
    assert argv[:4] == ["docker", "run", "-i", "--rm"]  # stdin held: the leash's end
    assert argv[argv.index("--network") + 1] == "none"  # one worker reaches nothing
    assert argv[argv.index("--cpu-period") + 1] == "100000"
    assert argv[argv.index("--cpu-quota") + 1] == "100000"
    assert argv[argv.index("--cpuset-cpus") + 1] == "1"
    assert argv[argv.index("--volume") + 1] == f"{tmp_path}:/opt/hpcbench-before-booking/bench:ro"
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "-e"] == ["RANK=0", "WORLD_SIZE=1"]
    # The image, then the command: its first word as the entrypoint, the rest after.
    at = argv.index(IMAGE)
    assert argv[at - 2 : at] == ["--entrypoint", "/opt/hpcbench/venv/bin/python"]
    assert argv[at + 1 :] == ["leash.py", "--stdin", "--", "python", "train.py"]
    assert pinned.access is None and pinned.env == {}  # nothing else of this shell
    half = list(
        in_container(NodeLimits(IMAGE, 100000, 50000, None, 512), run, "hb-2", tmp_path).argv
    )
    assert "--cpuset-cpus" not in half and half[half.index("--memory") + 1] == "512m"
