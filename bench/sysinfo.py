"""What a node says of its hardware and system, for the run's fingerprint and the MLPerf
system description made from it (hpcbench/reports/mlperf.py): CPU sockets and cores, the CPU's
top frequency and caches, memory, the operating system. Each value is read from /proc,
/sys or /etc/os-release, and left out where the node does not say.

Inside a container /proc/cpuinfo and /proc/meminfo show the host's (the machine the
node runs on), as os.cpu_count does; a node's own CPU limit is nodemon's.
Runs on the nodes: never imports hpcbench, and not torch.
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

PROC = Path("/proc")
CPU0 = Path("/sys/devices/system/cpu/cpu0")
OS_RELEASE = Path("/etc/os-release")


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def cpu_layout(cpuinfo: str) -> dict[str, int]:
    """Sockets and physical cores from /proc/cpuinfo ('physical id', 'core id')."""
    cores: set[tuple[str, str]] = set()
    sockets: set[str] = set()
    socket = core = ""
    for line in [*cpuinfo.splitlines(), ""]:
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "physical id":
            socket = value
        elif key == "core id":
            core = value
        elif not line.strip() and socket:
            sockets.add(socket)
            cores.add((socket, core))
            socket = core = ""
    return {"cpu_sockets": len(sockets), "cpu_cores": len(cores)} if sockets else {}


def caches(cpu: Path = CPU0) -> str:
    """'L1d 48K, L1i 32K, L2 2048K, L3 32768K' from sysfs (per cache, as cpu0 sees it)."""
    found = []
    for index in sorted(cpu.glob("cache/index*")):
        level, kind, size = (_read(index / n).strip() for n in ("level", "type", "size"))
        if level and size:
            suffix = {"Data": "d", "Instruction": "i"}.get(kind, "")
            found.append(f"L{level}{suffix} {size}")
    return ", ".join(found)


def memory_gib(meminfo: str) -> float | None:
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                return int(fields[1]) / 1024**2  # kB
    return None


def os_name(os_release: str) -> str:
    for line in os_release.splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.partition("=")[2].strip().strip('"')
    return ""


def host_facts(
    proc: Path = PROC, cpu: Path = CPU0, os_release: Path = OS_RELEASE
) -> dict[str, Any]:
    facts: dict[str, Any] = dict(cpu_layout(_read(proc / "cpuinfo")))
    max_khz = _read(cpu / "cpufreq" / "cpuinfo_max_freq").strip()
    if max_khz.isdigit():
        facts["cpu_max_mhz"] = int(max_khz) // 1000
    cache = caches(cpu)
    if cache:
        facts["cpu_caches"] = cache
    memory = memory_gib(_read(proc / "meminfo"))
    if memory:
        facts["memory_gib"] = round(memory, 1)
    name = os_name(_read(os_release))
    facts["os"] = f"{name}, Linux {platform.release()}" if name else platform.platform()
    return facts
