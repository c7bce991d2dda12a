"""bench/nccl_log.py: the fabric NCCL used, read from real NCCL_DEBUG=INFO excerpts quoted
from public issues (tests/unit/fixtures/nccl/, each with its source), and any text."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import stat
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import nccl_log  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "nccl"


def parsed(name: str) -> dict:
    return nccl_log.parse(FIXTURES.joinpath(name).read_text().splitlines())


# fixture -> (transport, GPUDirect RDMA, NICs used)
EXPECTED = {
    "ib-gdr-a100.log": ("IB", True, ["mlx5_10:1", "mlx5_12:1", "mlx5_14:1", "mlx5_8:1"]),
    "ib-no-gdr-container.log": ("IB or RoCE", False, ["device 0"]),
    "roce-gdr-disabled.log": ("RoCE", False, ["mlx5_0:1", "mlx5_1:1"]),
    "roce-dgx-h100.log": ("RoCE", None, ["mlx5_10:1", "mlx5_11:1"]),
    "socket-fallback-container.log": (
        "Socket",
        False,
        ["ens5f0np0", "ens3f0np0", "ens8f1np1", "bond0", "virbr0"],
    ),
    "socket-fallback-ipoib.log": ("Socket", False, ["device 3"]),
    "socket-fallback-docker-roce.log": ("Socket", False, ["bond0"]),
    "ib-sharp-plugin.log": ("IB", None, [f"mlx5_{i}:1" for i in range(8)]),
    "socket-old-ring.log": ("Socket", False, ["eth0"]),
}


def test_every_fixture_names_the_public_thread_it_is_quoted_from():
    logs = sorted(FIXTURES.glob("*.log"))
    assert len(logs) >= 6
    for log in logs:
        head = log.read_text().splitlines()[0]
        assert head.startswith("# source: https://github.com/"), log.name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_excerpt_gives_its_transport_gpudirect_and_nics(name):
    transport, gdr, nics = EXPECTED[name]
    result = parsed(name)
    assert result["transport"] == transport
    assert result["gdr"] is gdr
    assert sorted(result["nics"]) == sorted(nics)


def test_the_excerpts_cover_infiniband_roce_a_socket_fallback_and_gpudirect_on_and_off():
    results = [parsed(name) for name in EXPECTED]
    transports = {r["transport"] for r in results}
    assert {"IB", "RoCE", "Socket"} <= transports
    assert {r["gdr"] for r in results} >= {True, False}


def test_the_channels_between_nodes_name_the_devices_used_not_all_devices_listed():
    result = parsed("ib-gdr-a100.log")
    # Nine devices listed (two of them RoCE), four used by the channels, all InfiniBand.
    assert len(result["ib_devices"]) == 9 and "mlx5_16:1/RoCE" in result["ib_devices"]
    assert result["gdr_channels"] == [12, 12]
    assert result["basis"] == "12 channel connections between nodes"
    assert result["hosts"] == ["10-90-43-152"]


def test_a_container_without_rdma_devices_says_so_and_names_its_socket_interfaces():
    result = parsed("socket-fallback-container.log")
    assert result["no_ib_device"] is True and result["network"] == "Socket"
    assert "no channel between nodes logged" in result["basis"]


def test_an_unopenable_device_is_kept_as_a_warning():
    result = parsed("socket-fallback-docker-roce.log")
    assert any("Unable to open device mlx5_bond_0" in w for w in result["warnings"])
    assert result["hosts"] == []  # no host:pid prefix on these lines


def test_infiniband_and_roce_ports_side_by_side_are_listed_with_their_link_layers():
    result = parsed("ib-mixed-roce-devices-pyxis.log")
    assert result["ib_devices"][:2] == ["mlx5_1:1/IB", "mlx5_3:1/IB"]
    assert result["ib_devices"][4:] == ["mlx5_4:1/RoCE", "mlx5_10:1/RoCE"]
    assert result["transport"] is None  # no network chosen in the excerpt: no verdict


def test_channels_partly_with_gpudirect_say_how_many_and_give_no_single_answer():
    lines = [
        "h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>",
        "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA",
        "h:1:1 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/IB/0",
    ]
    result = nccl_log.parse(lines)
    assert result["transport"] == "IB" and result["gdr"] is None
    assert result["gdr_channels"] == [1, 2]


def test_todays_channel_format_with_a_proxy_rank_and_the_pci_mode_is_read():
    # net.cc:328: "via NET/%s/%d(%d)%s%s%s" (device, proxy rank, /GDRDMA, (PCI), /Shared)
    lines = ["n1:7:7 [0] NCCL INFO Channel 02/1 : 3[3] -> 11[3] [send] via NET/IB/1(2)/GDRDMA(PCI)"]
    result = nccl_log.parse(lines)
    assert result["gdr"] is True and result["nics"] == ["device 1"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=200), max_size=30))
def test_any_text_parses_to_a_verdict_or_none_never_an_error(lines):
    result = nccl_log.parse(lines)
    assert result["transport"] is None or isinstance(result["transport"], str)
    assert result["gdr"] in (True, False, None)
    assert isinstance(result["nics"], list) and len(result["nics"]) <= nccl_log.MAX_NICS


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "NCCL INFO NET/IB : Using [",
                "NCCL INFO Channel 00 : a via NET/",
                "NCCL INFO Using network ",
                "NCCL INFO NET/Socket : Using [9999999999999999999]x:",
                "GPU Direct RDMA Enabled for HCA 99999999999999999999",
                "IB/0/GDRDMA",
                "]mlx5_0:1/RoCE",
                "(",
                " ",
                "Socket",
            ]
        ),
        max_size=40,
    ).map(lambda parts: ["".join(parts)])
)
def test_fragments_of_real_lines_in_any_order_never_break_the_parser(lines):
    nccl_log.parse(lines)


def test_rdma_ports_are_read_from_sysfs_with_their_link_layer_and_state(tmp_path):
    port = tmp_path / "mlx5_0" / "ports" / "1"
    port.mkdir(parents=True)
    (port / "link_layer").write_text("InfiniBand\n")
    (port / "state").write_text("4: ACTIVE\n")
    (tmp_path / "mlx5_1" / "ports" / "1").mkdir(parents=True)  # unreadable attributes
    assert nccl_log.rdma_devices(tmp_path) == [
        {"device": "mlx5_0", "port": "1", "link_layer": "InfiniBand", "state": "4: ACTIVE"},
        {"device": "mlx5_1", "port": "1", "link_layer": "unknown", "state": "unknown"},
    ]
    assert nccl_log.rdma_devices(tmp_path / "absent") == []


def test_capture_sets_nccls_debug_file_and_leaves_a_users_own_setting_alone(tmp_path):
    env: dict[str, str] = {}
    capture = nccl_log.Capture.start(True, env)
    assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_DEBUG_SUBSYS"] == "INIT,NET"
    assert env["NCCL_DEBUG_FILE"] == str(capture.path)
    assert capture.path is not None
    capture.path.write_text((FIXTURES / "roce-dgx-h100.log").read_text())
    summary = capture.finish()
    assert summary["transport"] == "RoCE" and not capture.path.exists()

    mine = {"NCCL_DEBUG": "WARN"}
    assert "set by the user" in nccl_log.Capture.start(True, mine).finish()["skipped"]
    assert mine == {"NCCL_DEBUG": "WARN"}
    cpu: dict[str, str] = {}
    unused = nccl_log.Capture.start(False, cpu)
    assert "not used" in unused.finish()["skipped"] and not cpu and not unused.used


def test_merge_keeps_each_host_once_and_agrees_only_where_all_hosts_agree():
    a = {"host": "n1", "transport": "IB", "gdr": True, "nics": ["mlx5_0:1"]}
    b = {"host": "n2", "transport": "Socket", "gdr": False, "nics": ["eth0"]}
    merged = nccl_log.merge([a, dict(a), b])
    assert merged["transport"] == "IB / Socket" and merged["gdr"] is None
    assert merged["nics"] == ["eth0", "mlx5_0:1"] and len(merged["per_host"]) == 2
    assert nccl_log.merge([{"host": "n1", "skipped": "why"}])["skipped"] == "why"


# ------------------------------------------------------------ the debug file
def nccl_expands(name: str) -> str:
    """NCCL_DEBUG_FILE as NCCL turns it into a file name (src/debug.cc:203-233 at
    nccl4py-v0.3.1): %% is %, %h the host name, %p the pid, anything else as written."""
    out, i = [], 0
    while i < len(name):
        if name[i] != "%" or i + 1 == len(name):
            out.append(name[i])
            i += 1
            continue
        code = name[i + 1]
        out.append(
            {"%": "%", "h": socket.gethostname(), "p": str(os.getpid())}.get(code, "%" + code)
        )
        i += 2
    return "".join(out)


def nccl_writes(env: dict[str, str], text: str) -> None:
    """NCCL's fopen(name, "w") of its debug file (debug.cc:237): a link at the name is
    followed and its target truncated. O_NONBLOCK only so that a FIFO there fails
    here (ENXIO) where NCCL would wait for a reader."""
    name = nccl_expands(env["NCCL_DEBUG_FILE"])
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK, 0o644)
    except OSError:
        return  # NCCL logs to stdout where it cannot open the file
    with os.fdopen(fd, "w") as f:
        f.write(text)


def predictable_names(folder: Path) -> list[Path]:
    """The names a debug file in a shared folder could be guessed at: the pid's."""
    pid = os.getpid()
    return [folder / f"hpcbench-nccl-{pid}.log", folder / f"hpcbench-nccl-{pid}"]


@pytest.fixture
def shared_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A /tmp that others write to, as $TMPDIR."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    return tmp_path


def a_rank(text: str) -> dict[str, Any]:
    """One rank's capture: start, NCCL writes its lines, finish."""
    env: dict[str, str] = {}
    capture = nccl_log.Capture.start(True, env)
    nccl_writes(env, text)
    return capture.finish()


def finished_promptly(work: Any, unblock: list[Path]) -> dict[str, Any]:
    """work() in a thread, given 30 s: a rank waiting on a FIFO fails the test; each
    FIFO in `unblock` is then opened for writing and closed, so the wait ends."""
    result: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: result.update(work()), daemon=True)
    thread.start()
    thread.join(30)
    hung = thread.is_alive()
    for fifo in unblock:
        with contextlib.suppress(OSError):  # no reader waits on it
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    thread.join(30)
    assert not hung, "the rank waited on a planted FIFO"
    return result


def test_a_link_planted_at_every_predictable_name_is_neither_written_through_nor_read(
    shared_tmp: Path, tmp_path_factory: pytest.TempPathFactory
):
    victim = tmp_path_factory.mktemp("victim") / "precious"
    victim.write_text((FIXTURES / "socket-old-ring.log").read_text())
    before = victim.read_text()
    planted = predictable_names(shared_tmp)
    for name in planted:
        name.symlink_to(victim)
    summary = a_rank((FIXTURES / "roce-dgx-h100.log").read_text())
    assert victim.read_text() == before
    assert summary["transport"] == "RoCE"  # NCCL's own lines, not the link's target
    assert sorted(shared_tmp.iterdir()) == sorted(planted)  # nothing of the rank left


def test_a_fifo_planted_at_every_predictable_name_neither_holds_the_rank_nor_is_read(
    shared_tmp: Path,
):
    planted = predictable_names(shared_tmp)
    for name in planted:
        os.mkfifo(name)
    summary = finished_promptly(
        lambda: a_rank((FIXTURES / "roce-dgx-h100.log").read_text()), planted
    )
    assert summary["transport"] == "RoCE"
    assert all(stat.S_ISFIFO(name.lstat().st_mode) for name in planted)
    assert sorted(shared_tmp.iterdir()) == sorted(planted)


def test_the_debug_file_is_in_a_folder_of_the_rank_alone_removed_after(shared_tmp: Path):
    env: dict[str, str] = {}
    capture = nccl_log.Capture.start(True, env)
    assert capture.path is not None
    folder = capture.path.parent
    assert folder.parent == shared_tmp and folder.name not in {
        p.name for p in predictable_names(shared_tmp)
    }
    assert stat.S_IMODE(folder.lstat().st_mode) == 0o700 and folder.lstat().st_uid == os.getuid()
    nccl_writes(env, (FIXTURES / "ib-gdr-a100.log").read_text())
    assert capture.finish()["transport"] == "IB"
    assert list(shared_tmp.iterdir()) == []


def test_the_debug_file_is_read_only_as_a_regular_file(
    shared_tmp: Path, tmp_path_factory: pytest.TempPathFactory
):
    victim = tmp_path_factory.mktemp("victim") / "precious"
    victim.write_text((FIXTURES / "socket-old-ring.log").read_text())
    link = nccl_log.Capture.start(True, {})
    assert link.path is not None
    link.path.symlink_to(victim)
    assert "no NCCL log" in link.finish().get("skipped", "")  # the target's lines are not taken
    fifo = nccl_log.Capture.start(True, {})
    assert fifo.path is not None
    os.mkfifo(fifo.path)
    assert "no NCCL log" in finished_promptly(fifo.finish, [fifo.path])["skipped"]
    assert list(shared_tmp.iterdir()) == []


def test_a_percent_sign_in_the_temporary_folder_reaches_nccl_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    odd = tmp_path / "50%p%h%%"
    odd.mkdir()
    monkeypatch.setenv("TMPDIR", str(odd))
    monkeypatch.setattr(tempfile, "tempdir", None)
    env: dict[str, str] = {}
    capture = nccl_log.Capture.start(True, env)
    assert nccl_expands(env["NCCL_DEBUG_FILE"]) == str(capture.path)
    nccl_writes(env, (FIXTURES / "roce-dgx-h100.log").read_text())
    assert capture.finish()["transport"] == "RoCE"
    assert list(odd.iterdir()) == []


# ------------------------------------------------------------ hostile lines
# Far above the longest line NCCL writes (about 4.1 kB: nccl_log.LINE_LIMIT's comment).
LONGEST = 16 * 1024


class Bounded:
    """A compiled pattern that refuses a string longer than LONGEST: a pattern handed a
    whole hostile line could take time quadratic in it."""

    def __init__(self, pattern: re.Pattern[str], longest: list[int]) -> None:
        self.pattern, self.longest = pattern, longest

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.pattern, name)
        if not callable(method):
            return method

        def call(string: str, *args: Any, **kwargs: Any) -> Any:
            self.longest[0] = max(self.longest[0], len(string))
            assert len(string) <= LONGEST, (
                f"{self.pattern.pattern!r} given {len(string)} characters"
            )
            return method(string, *args, **kwargs)

        return call


def hostile_lines(size: int) -> list[str]:
    """Lines of `size` characters that make an unanchored or unbounded pattern backtrack
    over the whole line from each position."""
    return [
        "a" * size + " NCCL INFO x",  # a long host name that never ends in :pid:tid
        "h:1:" + "1" * size,
        "NCCL INFO " + "Channel 00 : " * (size // 13),  # channels that never say via
        "NCCL INFO Using network " + "x" * size,
        "NCCL INFO NET/IB : Using [0]" + "m" * size,
        "NCCL INFO " + "GPU Direct RDMA Enabled for GPU " + "g" * size,
        ("NCCL INFO " * (size // 10)) + "\nx",
    ]


def test_a_megabyte_hostile_line_is_cut_to_what_nccl_writes_before_any_pattern_reads_it(
    monkeypatch: pytest.MonkeyPatch,
):
    longest = [0]
    for name, value in vars(nccl_log).items():
        if isinstance(value, re.Pattern):
            monkeypatch.setattr(nccl_log, name, Bounded(value, longest))
    real = FIXTURES.joinpath("ib-gdr-a100.log").read_text().splitlines()
    expected = nccl_log.parse(real)
    result = nccl_log.parse([*hostile_lines(1 << 20), *real])  # the real lines have the last word
    assert 0 < longest[0] <= LONGEST
    for key in ("transport", "gdr", "gdr_channels", "nics", "network", "basis", "ib_devices"):
        assert result[key] == expected[key], key


# Real NCCL INFO lines, generated: the prefix (debug.cc:330 "%s:%d:%d ", :349
# "[%d] NCCL INFO "; the host name cut at its first dot, debug.cc:194), after what a
# launcher puts before a line; the devices (transport/net_ib/init.cc:494-505
# " [%d]%s:%d", rail and plane ":%d", "/%s" of IB, RoCE; :513 "NET/IB : Using%s %s;
# OOB %s:%s"; transport/net_socket.cc:72-77 " [%d]%s:%s", "NET/Socket : Using%s"); the
# network (init.cc:486 "Using network %s"); and each connection to another node
# (transport/net.cc:324 and :328 "Channel %02d/%d : %d[%d] -> %d[%d] [send] via
# NET/%s/%d%s%s%s" with the proxy rank "(%d)", /GDRDMA, (PCI), /Shared; :377 [receive]).
HOST = st.from_regex(r"[a-z][a-z0-9-]{0,30}", fullmatch=True)
LAUNCHER = st.sampled_from(["", "[1,0]<stdout>:", "[default0]:", "2024-05-01T10:00:00 "])
NOISE = st.sampled_from(
    [
        "Bootstrap : Using eth0:10.0.0.1<0>",  # bootstrap/socket lines, not the network
        "cudaDriverVersion 12040",
        "Channel 01/0 : 8[0] -> 15[7] via P2P/IPC/read",  # p2p.cc:423, inside the node
        "Channel 00 : 0[0] -> 1[1] via SHM/direct",  # shm.cc:116
        "NET/Plugin: Using internal network plugin.",
        "comm 0x55d5 rank 0 nranks 16 cudaDev 0 busId 1a000 - Init COMPLETE",
    ]
)


@st.composite
def channel_lines(draw: Any, net: str, devices: int) -> tuple[list[str], list[tuple[int, bool]]]:
    lines, used = [], []
    for _ in range(draw(st.integers(1, 12))):
        dev = draw(st.integers(0, devices - 1))
        gdr = net == "IB" and draw(st.booleans())
        chan, conn = draw(st.integers(0, 31)), draw(st.integers(0, 1))
        me, peer = draw(st.integers(0, 255)), draw(st.integers(0, 255))
        nvml = draw(st.integers(0, 7))
        ranks = f"{me}[{nvml}] -> {peer}[{nvml}]"
        pci = draw(st.sampled_from(["", "(PCI)"])) if gdr else ""
        tail = ("/GDRDMA" + pci if gdr else "") + draw(st.sampled_from(["", "/Shared"]))
        if draw(st.booleans()):  # net.cc:324, and :328 with the proxy rank
            proxy = draw(st.sampled_from(["", f"({draw(st.integers(0, 255))})"]))
            lines.append(
                f"Channel {chan:02d}/{conn} : {ranks} [send] via NET/{net}/{dev}{proxy}{tail}"
            )
        else:  # net.cc:377
            lines.append(f"Channel {chan:02d}/{conn} : {ranks} [receive] via NET/{net}/{dev}{tail}")
        used.append((dev, gdr))
    return lines, used


@st.composite
def nccl_logs(draw: Any) -> tuple[list[str], dict[str, Any]]:
    """One rank's log of INIT and NET lines, and what parse() must read from it."""
    host = draw(HOST)
    sockets = draw(st.booleans())
    names = draw(
        st.lists(
            st.from_regex(r"[a-z][a-z0-9_]{0,14}", fullmatch=True),
            min_size=1,
            max_size=8,
            unique=True,
        )
    )
    if sockets:
        listed = "".join(f" [{i}]{n}:10.0.{i}.1<0>" for i, n in enumerate(names))
        lines = [f"NET/Socket : Using{listed}", "Using network Socket"]
        channels, used = draw(channel_lines("Socket", len(names)))
    else:
        layers = draw(
            st.lists(st.sampled_from(["IB", "RoCE"]), min_size=len(names), max_size=len(names))
        )
        ports = draw(st.lists(st.integers(1, 2), min_size=len(names), max_size=len(names)))
        rails = draw(
            st.lists(
                st.sampled_from(["", ":0", "::1", ":1:2"]), min_size=len(names), max_size=len(names)
            )
        )
        listed = "".join(
            f" [{i}]{n}:{p}{r}/{layer}"
            for i, (n, p, r, layer) in enumerate(zip(names, ports, rails, layers, strict=True))
        )
        ro = draw(st.sampled_from(["[RO]", ""]))
        lines = [f"NET/IB : Using{listed} {ro}; OOB ib0:10.0.0.1<0>", "Using network IB"]
        channels, used = draw(channel_lines("IB", len(names)))
    lines += channels + draw(st.lists(NOISE, max_size=6))
    lines = draw(st.permutations(lines))
    pid, tid, dev = (
        draw(st.integers(1, 1 << 22)),
        draw(st.integers(1, 1 << 22)),
        draw(st.integers(0, 7)),
    )
    prefixed = [f"{draw(LAUNCHER)}{host}:{pid}:{tid} [{dev}] NCCL INFO {line}" for line in lines]
    indexes = sorted({d for d, _ in used})
    with_gdr = sum(1 for _, g in used if g)
    if sockets:
        want = {"transport": "Socket", "gdr": False, "nics": [names[i] for i in indexes]}
    else:
        found = {layers[i] for i in indexes}
        want = {
            "transport": found.pop() if len(found) == 1 else "IB and RoCE",
            "gdr": True if with_gdr == len(used) else False if not with_gdr else None,
            "nics": [f"{names[i]}:{ports[i]}" for i in indexes],
            "gdr_channels": [with_gdr, len(used)],
        }
    want.update(hosts=[host], basis=f"{len(used)} channel connections between nodes")
    return prefixed, want


@settings(max_examples=300, deadline=None)
@given(nccl_logs())
def test_generated_nccl_logs_give_the_transport_gpudirect_and_nics_their_lines_say(log):
    lines, want = log
    result = nccl_log.parse(lines)
    assert {k: result[k] for k in want} == want
