"""hpcbench.reports.findings through `hpcbench report`: the fabric flag on runs made from the real
NCCL excerpts (tests/unit/fixtures/nccl/), each rank's and node's step times with the
straggler named, and energy per sample with its source or why it is unknown."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcbench import cli
from hpcbench.measure.store import Store
from hpcbench.reports import findings
from tests.unit.test_report import _run

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import nccl_log  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "nccl"

# What the reporter of NVIDIA/nccl#451 quotes of the host's device (ibstat): port 1 of
# mlx5_bond_0, state 4: ACTIVE, link_layer Ethernet (a RoCE port).
ROCE_PORT = {"device": "mlx5_bond_0", "port": "1", "link_layer": "Ethernet", "state": "4: ACTIVE"}
IB_PORT = {"device": "mlx5_0", "port": "1", "link_layer": "InfiniBand", "state": "4: ACTIVE"}


def fabric(fixture: str, rdma: list[dict]) -> dict:
    """A two-node run's fabric as the workload records it: each host's parse of the
    excerpt and the RDMA ports its sysfs lists, merged."""
    parsed = nccl_log.parse((FIXTURES / fixture).read_text().splitlines())
    return nccl_log.merge([{"host": f"n{i}", "rdma": rdma, **parsed} for i in range(2)])


def report_md(tmp_path: Path, runs: list[dict], capsys) -> str:
    store = Store(tmp_path / "r")
    for r in runs:
        store.append(r)
    assert cli.main(["report", "--out", str(store.dir)]) == 0
    capsys.readouterr()
    return (store.dir / "report.md").read_text()


def test_a_socket_fallback_beside_an_rdma_port_is_flagged_in_the_report(tmp_path, capsys):
    runs = [
        _run(1, [1.0, 1.0]),
        _run(2, [1.5, 1.5], fabric=fabric("socket-fallback-docker-roce.log", [ROCE_PORT])),
        _run(2, [1.6, 1.5], repeat=1, fabric=fabric("ib-gdr-a100.log", [IB_PORT])),
        _run(2, [1.5, 1.5], repeat=2, fabric=fabric("socket-old-ring.log", [])),
    ]
    text = report_md(tmp_path, runs, capsys)
    assert "## Fabric between nodes" in text
    flag = (
        "NCCL fell back to TCP sockets between nodes although n0 has mlx5_bond_0 port 1 "
        "(RoCE, 4: ACTIVE)"
    )
    assert text.count(flag) == 1  # the RoCE host's run; not the IB run, not a host without RDMA
    assert "1 run(s) fell back to sockets beside an RDMA port." in text
    rows = [line for line in text.splitlines() if "repeat 1 |" in line]
    assert rows and "| IB | yes | mlx5_10:1, mlx5_12:1, mlx5_14:1, mlx5_8:1 | - |" in rows[0]


def test_every_socket_fallback_excerpt_is_flagged_beside_infiniband_and_none_else():
    for log in sorted(FIXTURES.glob("*.log")):
        run = {"status": "ok", "nodes": 2, "fabric": fabric(log.name, [IB_PORT])}
        flagged = findings.fabric_flag(run) is not None
        assert flagged == (run["fabric"]["transport"] == "Socket"), log.name
    one_node = {
        "status": "ok",
        "nodes": 1,
        "fabric": fabric("socket-fallback-container.log", [IB_PORT]),
    }
    assert findings.fabric_flag(one_node) is None


def test_the_per_rank_table_names_the_straggler_and_its_node(tmp_path, capsys):
    slow = [[0.10, 0.11], [0.10, 0.10], [0.10, 0.10], [0.30, 0.32]]  # rank 3 on n1
    hosts = {"hosts": ["n0", "n0", "n1", "n1"]}
    run = _run(4, [0.32, 0.30], rank_window_times=slow, steps=1)
    run["nodes"] = 2
    run["fingerprint"] = {**run["fingerprint"], **hosts}
    text = report_md(tmp_path, [_run(1, [0.1, 0.1]), run], capsys)
    assert "## Step times per rank and node" in text
    lines = text.splitlines()
    rank3 = next(line for line in lines if line.startswith("| rank 3 |"))
    assert rank3 == "| rank 3 | n1 | 300.0 | 310.0 | 320.0 | +210% |"
    node1 = next(line for line in lines if line.startswith("| node | n1 |"))
    assert node1.split(" | ")[2:5] == ["100.0", "200.0", "320.0"]


def test_energy_per_image_with_its_source_or_why_it_is_unknown(tmp_path, capsys):
    known = {"samples": 640, "unit": "images", "nvml": {"joules": 320.0, "gpus": 2}}
    unknown = {
        "samples": 320,
        "unit": "images",
        "rapl": {"unknown": "/sys/class/powercap is absent"},
    }
    runs = [
        _run(1, [1.0, 1.0], device="cpu", energy=unknown),
        _run(2, [1.0, 1.0], device="cuda", energy=known),
    ]
    text = report_md(tmp_path, runs, capsys)
    assert "## Energy per sample" in text
    assert "| unknown | unknown: RAPL: /sys/class/powercap is absent |" in text
    assert "| 0.5 J/image | NVML energy counter of 2 GPU(s), the GPUs alone |" in text


def test_a_rank_that_recorded_no_window_is_left_out_with_one_line_saying_so(tmp_path, capsys):
    ranks = [[0.10, 0.11], [], [0.10, 0.12, 0.13], [0.30]]  # rank 1 none; lengths differ
    run = _run(4, [0.30, 0.31], rank_window_times=ranks, steps=1)
    text = report_md(tmp_path, [_run(1, [0.1, 0.1]), run], capsys)
    lines = text.splitlines()
    assert [line.split(" | ")[0] for line in lines if line.startswith("| rank ")] == [
        "| rank 0",
        "| rank 2",
        "| rank 3",
    ]
    assert next(line for line in lines if line.startswith("| rank 2 |")).split(" | ")[2:5] == [
        "100.0",
        "120.0",
        "130.0",
    ]
    said = [line for line in lines if "left out" in line]
    assert said == [
        "resnet50 horovod batch 32, 4 node(s), 4 worker(s): rank 1 recorded no window time "
        "in any run: left out."
    ], said


# A run's ranks as a damaged or odd store may hold them: any count of ranks, each with
# any count of windows (none included), every time one the store's schema takes.
RANK_LISTS = st.lists(
    st.lists(st.floats(min_value=0, max_value=1e3, allow_nan=False), max_size=4), max_size=5
)


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(runs=st.lists(RANK_LISTS, min_size=1, max_size=3))
def test_the_report_of_any_rank_lists_names_each_rank_it_leaves_out_never_a_traceback(
    tmp_path_factory, capsys, runs
):
    records = [_run(1, [0.1, 0.1])]
    records += [
        _run(4, [0.3, 0.3], repeat=k, rank_window_times=ranks, steps=1)
        for k, ranks in enumerate(runs)
    ]
    text = report_md(tmp_path_factory.mktemp("r"), records, capsys)
    timed = {k for ranks in runs for k, windows in enumerate(ranks) if windows}
    untimed = {k for ranks in runs for k in range(len(ranks))} - timed
    shown = {
        int(line.split(" | ")[0].removeprefix("| rank "))
        for line in text.splitlines()
        if line.startswith("| rank ")
    }
    assert shown == (timed if len(timed) > 1 else set())  # a rank alone is set beside none
    said = [line for line in text.splitlines() if "recorded no window time" in line]
    named = set(map(int, re.findall(r"\d+", said[0].split(": ")[-2]))) if said else set()
    assert named == untimed and len(said) == (1 if untimed else 0), said
