"""Which fabric NCCL used between nodes, from its own NCCL_DEBUG=INFO lines.

NCCL falls back to TCP sockets without an error when it cannot open an RDMA device
(a container without /dev/infiniband, a missing verbs library), at a fraction of the
rate. Its INFO lines say what it chose (NVIDIA/nccl, src/ at nccl4py-v0.3.1):
    NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB ib0:...   the RDMA devices and
        each port's link layer, IB or RoCE (transport/net_ib/init.cc:513, common.h:118)
    NET/IB : No device found.                                   (net_ib/init.cc:470)
    NET/Socket : Using [0]eth0:10.0.0.1<0>                      (net_socket.cc:77)
    Using network IB | Socket | IBext_v8 | ...                  (init.cc:486)
    Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA      each connection to a peer
        on another node: the network, the device index, GPUDirect RDMA (net.cc:324-377;
        NCCL 2.5 and older print `Ring 00 : ...` the same way)
    NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)   (graph/topo.cc:1653)
The channel and device lines are logged under the INIT and NET subsystems, the
GPUDirect lines under NET alone, so a run sets NCCL_DEBUG_SUBSYS=INIT,NET
(debug.cc: the default is INIT,BOOTSTRAP,ENV).

parse() reads such lines, with or without the host:pid:tid prefix NCCL writes and
whatever a launcher put before it, each cut to LINE_LIMIT first and matched by
patterns that never rescan a line from each position: its time grows with the
log's length, not its square. start()/finish() collect one rank's lines through
NCCL_DEBUG_FILE (line-buffered by NCCL: debug.cc, setlinebuf) in a folder of the
rank's own, and rdma_devices() lists the host's RDMA ports from sysfs, which a
container shows even where it lacks the device files: a socket fallback beside
such a port is the case to flag.
Runs on the nodes: never imports hpcbench, and not torch.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import socket
import stat
import tempfile
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

INFINIBAND = Path("/sys/class/infiniband")
READ_LIMIT = 4 << 20  # bytes of one rank's log read: INIT and NET lines are a few kB
# The longest line NCCL writes is about 4.1 kB: its prefix and format fill at most
# 1024 bytes (debug.cc:286), and the longest arguments printed into them, NET/IB's,
# add its device list (2048, transport/net_ib/init.cc:487), its interface (16 on
# Linux, include/socket.h:27) and its address (NI_MAXHOST + NI_MAXSERV, 1057,
# socket.h:47). A longer line is not NCCL's: it is cut here before any pattern reads
# it, so that no line costs more than a bounded scan whatever was written into it.
LINE_LIMIT = 8192
MAX_NICS = 64

_LINE = re.compile(r"NCCL (?:INFO|WARN) ")
# host:pid:tid [device] (debug.cc:330, :349), tried only where a host name can start
# (the lookbehind), so a long run of name characters is read once, not from each of
# its positions.
_HOST = re.compile(r"(?<![^\s:\[\]<>])([^\s:\[\]<>]+):\d+:\d+ \[\d+\] NCCL (?:INFO|WARN)")
_IB_DEV = re.compile(r"\[(\d+)\] ?([^\s:\[\]]+):(\d+)(?::\d*)*/(IB|RoCE|UNSPECIFIED)")
_SOCKET_DEV = re.compile(r"\[(\d+)\]([^\s:\[\]<>]+):")
_NETWORK = re.compile(r"Using (?:internal )?[Nn]etwork (\S+)")  # matched at the start only
_CHANNEL = re.compile(r"(?:Channel|Ring) \d+(?:/\d+)? : .*? via (\S+)")  # the same
_NET_PATH = re.compile(r"NET/([A-Za-z][\w.-]*)/(\d+)(?:\(\d+\))?(/GDRDMA)?")
_GDR = re.compile(r"GPU Direct RDMA (Enabled|Disabled) for (?:GPU \S+ / )?HCA (\d+)(?: '([^']*)')?")


def _ib_family(network: str) -> bool:
    """NCCL's verbs transports: IB, and the SHARP plugin's IBext, IBext_v8, ..."""
    return network.upper().startswith("IB")


@dataclass
class _Seen:
    hosts: set[str]
    ib: dict[int, tuple[str, str]]  # index -> (device:port, link layer)
    sockets: dict[int, str]
    networks: list[str]
    net_channels: list[tuple[str, int, bool]]  # (network, device index, GPUDirect)
    gdr_lines: list[bool]
    no_ib_device: bool
    warnings: list[str]


def _scan(lines: Iterable[str]) -> _Seen:
    seen = _Seen(set(), {}, {}, [], [], [], False, [])
    for whole in lines:
        raw = whole[:LINE_LIMIT]
        found = _LINE.search(raw)
        if not found:
            continue
        message = raw[found.end() :].strip()
        host = _HOST.search(raw)
        if host:
            seen.hosts.add(host.group(1))
        if "NCCL WARN" in raw and len(seen.warnings) < 5:
            seen.warnings.append(message[:200])
        if message.startswith(("NET/IB : Using", "NET/IB: [")):
            for idx, dev, port, layer in _IB_DEV.findall(message):
                seen.ib.setdefault(int(idx), (f"{dev}:{port}", layer))
        elif message.startswith("NET/IB : No device found"):
            seen.no_ib_device = True
        elif message.startswith("NET/Socket : Using"):
            for idx, dev in _SOCKET_DEV.findall(message):
                seen.sockets.setdefault(int(idx), dev)
        network = _NETWORK.match(message)
        if network:
            seen.networks.append(network.group(1))
        channel = _CHANNEL.match(message)
        if channel:
            path = _NET_PATH.match(channel.group(1))
            if path:
                net, idx, gdr = path.groups()
                seen.net_channels.append((net, int(idx), bool(gdr)))
        gdr_line = _GDR.search(message)
        if gdr_line:
            seen.gdr_lines.append(gdr_line.group(1) == "Enabled")
    return seen


def _layers(seen: _Seen, indexes: Iterable[int]) -> str:
    """IB, RoCE, 'IB and RoCE', or 'IB or RoCE' where the log names no device."""
    found = {seen.ib[i][1] for i in indexes if i in seen.ib}
    found.discard("UNSPECIFIED")
    if found == {"IB"}:
        return "IB"
    if found == {"RoCE"}:
        return "RoCE"
    if found:
        return "IB and RoCE"
    return "IB or RoCE"


def parse(lines: Iterable[str]) -> dict[str, Any]:
    """What NCCL's lines say about the fabric between nodes:
    transport  IB, RoCE, 'IB and RoCE', 'IB or RoCE' (verbs, no device named), Socket,
               or None where the lines name no network;
    gdr        GPUDirect RDMA: True where every channel over the network has it, False
               where none has (or sockets carry it), None where the lines do not say;
    nics       the devices the channels between nodes use (else those NCCL chose);
    basis      what the verdict rests on: the channels between nodes, or the network
               NCCL chose when no channel between nodes was logged."""
    seen = _scan(lines)
    result: dict[str, Any] = {
        "transport": None,
        "gdr": None,
        "gdr_channels": None,
        "nics": [],
        "network": seen.networks[-1] if seen.networks else None,
        "basis": None,
        "no_ib_device": seen.no_ib_device,
        "ib_devices": [f"{dev}/{layer}" for _, (dev, layer) in sorted(seen.ib.items())],
        "socket_devices": [dev for _, dev in sorted(seen.sockets.items())][:MAX_NICS],
        "hosts": sorted(seen.hosts)[:MAX_NICS],
        "warnings": seen.warnings,
    }
    channels = seen.net_channels
    if channels:
        result["basis"] = f"{len(channels)} channel connections between nodes"
        nets = {net for net, _, _ in channels}
        verbs = [(net, i, g) for net, i, g in channels if _ib_family(net)]
        if verbs and len(verbs) == len(channels):
            used = sorted({i for _, i, _ in verbs})
            result["transport"] = _layers(seen, used)
            result["nics"] = [seen.ib[i][0] if i in seen.ib else f"device {i}" for i in used]
            with_gdr = sum(1 for _, _, g in verbs if g)
            result["gdr_channels"] = [with_gdr, len(verbs)]
            result["gdr"] = True if with_gdr == len(verbs) else False if not with_gdr else None
        elif nets == {"Socket"}:
            used = sorted({i for _, i, _ in channels})
            result["transport"] = "Socket"
            result["nics"] = [seen.sockets.get(i, f"device {i}") for i in used]
            result["gdr"] = False
        else:
            result["transport"] = " and ".join(sorted(nets))
    elif result["network"]:
        network = result["network"]
        result["basis"] = f"the network NCCL chose ({network}); no channel between nodes logged"
        if network == "Socket":
            result["transport"] = "Socket"
            result["nics"] = result["socket_devices"]
            result["gdr"] = False
        elif _ib_family(network):
            result["transport"] = _layers(seen, seen.ib)
            result["nics"] = [dev for _, (dev, _) in sorted(seen.ib.items())]
            if seen.gdr_lines:
                result["gdr"] = all(seen.gdr_lines) if len(set(seen.gdr_lines)) == 1 else None
        else:
            result["transport"] = network
    result["nics"] = result["nics"][:MAX_NICS]
    return result


def rdma_devices(root: Path = INFINIBAND) -> list[dict[str, str]]:
    """This host's RDMA ports as sysfs lists them: device, port, link layer
    (InfiniBand or Ethernet, i.e. RoCE) and state (e.g. '4: ACTIVE')."""
    ports = []
    try:
        devices = sorted(root.iterdir())
    except OSError:
        return []
    for device in devices[:MAX_NICS]:
        try:
            port_dirs = sorted((device / "ports").iterdir())
        except OSError:
            continue
        for port in port_dirs[:8]:
            entry = {"device": device.name, "port": port.name}
            for key in ("link_layer", "state"):
                try:
                    entry[key] = (port / key).read_text().strip()[:40]
                except OSError:
                    entry[key] = "unknown"
            ports.append(entry)
    return ports


def read_regular(path: Path, limit: int) -> bytes:
    """At most `limit` bytes of the regular file at `path`: a link there is not followed
    (O_NOFOLLOW: ELOOP), a FIFO or device not waited on (O_NONBLOCK, then fstat)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, f"{path.name} is not a regular file")
        return f.read(limit)


class Capture:
    """One rank's NCCL lines, through a file of its own (NCCL_DEBUG_FILE)."""

    def __init__(self, path: Path | None = None, skipped: str = "", used: bool = True) -> None:
        self.path, self.skipped, self.used = path, skipped, used

    @classmethod
    def start(cls, uses_nccl: bool, env: MutableMapping[str, str] | None = None) -> Capture:
        """Before NCCL initialises: its INFO lines of INIT and NET into a file of this
        process, unless NCCL is not used or the user set NCCL's debug output."""
        env = os.environ if env is None else env
        if not uses_nccl:
            return cls(skipped="NCCL is not used: the run is on the CPU", used=False)
        if env.get("NCCL_DEBUG") or env.get("NCCL_DEBUG_FILE"):
            return cls(skipped="NCCL_DEBUG or NCCL_DEBUG_FILE is set by the user: left as set")
        # NCCL opens the file with fopen(name, "w") (debug.cc:237), which follows a link
        # and waits on a FIFO: at a name anyone could guess in a shared /tmp, a link
        # planted there would have NCCL truncate its target. mkdtemp's folder is new,
        # the process's own (0700) and of a name nobody knew before.
        try:
            folder = Path(tempfile.mkdtemp(prefix="hpcbench-nccl-"))
        except OSError as err:
            return cls(skipped=f"no folder for NCCL's log: {err.strerror or err}")
        path = folder / "nccl.log"
        # NCCL expands %h and %p in the name and reads %% as % (debug.cc:203-233).
        name = str(path).replace("%", "%%")
        env.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,NET", NCCL_DEBUG_FILE=name)
        return cls(path)

    def finish(self) -> dict[str, Any]:
        """This rank's summary (host, RDMA ports, parse()), its file and folder removed."""
        summary: dict[str, Any] = {"host": socket.gethostname(), "rdma": rdma_devices()}
        if self.path is None:
            return {**summary, "skipped": self.skipped}
        try:
            text = read_regular(self.path, READ_LIMIT).decode("utf-8", "replace")
        except OSError as err:
            return {**summary, "skipped": f"no NCCL log: {err.strerror or err}"}
        finally:
            with contextlib.suppress(OSError):
                self.path.unlink()
            with contextlib.suppress(OSError):
                self.path.parent.rmdir()
        return {**summary, **parse(text.splitlines())}


def merge(per_rank: list[dict[str, Any]]) -> dict[str, Any]:
    """The run's fabric: each host once (its first rank's summary), and one verdict:
    the transports, whether GPUDirect RDMA was on everywhere, the NICs used."""
    hosts: dict[str, dict[str, Any]] = {}
    for r in per_rank:
        hosts.setdefault(str(r.get("host")), r)
    read = [r for r in hosts.values() if not r.get("skipped")]
    if not read:
        reasons = sorted({str(r.get("skipped")) for r in hosts.values()})
        why = "; ".join(reasons) or "no rank reported"
        return {"skipped": why, "per_host": list(hosts.values())}
    transports = sorted({str(r["transport"]) for r in read if r.get("transport")})
    gdrs = {r.get("gdr") for r in read}
    return {
        "transport": " / ".join(transports) or None,
        "gdr": gdrs.pop() if len(gdrs) == 1 else None,
        "nics": sorted({n for r in read for n in r.get("nics") or []})[:MAX_NICS],
        "per_host": list(hosts.values()),
    }
