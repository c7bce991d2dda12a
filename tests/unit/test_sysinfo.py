"""bench/sysinfo.py: sockets, cores, caches, memory and OS from fake /proc and /sys trees,
and any file content reads without an error (what a node does not say, left out:
tests/integration/test_sysinfo_processes.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import sysinfo  # noqa: E402

CPUINFO = "".join(
    f"processor\t: {n}\nmodel name\t: X\nphysical id\t: {n // 4}\ncore id\t\t: {n % 4 // 2}\n\n"
    for n in range(8)
)  # 2 sockets x 2 cores x 2 threads


def test_a_nodes_layout_memory_caches_and_os(tmp_path):
    proc, cpu = tmp_path / "proc", tmp_path / "cpu0"
    proc.mkdir()
    (proc / "cpuinfo").write_text(CPUINFO)
    (proc / "meminfo").write_text("MemTotal:       16384000 kB\nMemFree: 1 kB\n")
    for n, (level, kind, size) in enumerate(
        [(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K")]
    ):
        index = cpu / "cache" / f"index{n}"
        index.mkdir(parents=True)
        for name, value in (("level", level), ("type", kind), ("size", size)):
            (index / name).write_text(f"{value}\n")
    (cpu / "cpufreq").mkdir()
    (cpu / "cpufreq" / "cpuinfo_max_freq").write_text("3500000\n")
    release = tmp_path / "os-release"
    release.write_text('NAME="Debian"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n')
    facts = sysinfo.host_facts(proc, cpu, release)
    assert facts["cpu_sockets"] == 2 and facts["cpu_cores"] == 4
    assert facts["cpu_max_mhz"] == 3500 and facts["memory_gib"] == 15.6
    assert facts["cpu_caches"] == "L1d 48K, L1i 32K, L2 2048K"
    assert facts["os"].startswith("Debian GNU/Linux 12 (bookworm), Linux ")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400), st.text(max_size=200), st.text(max_size=200))
def test_any_file_content_reads_without_an_error(cpuinfo, meminfo, release):
    sysinfo.cpu_layout(cpuinfo)
    sysinfo.memory_gib(meminfo)
    sysinfo.os_name(release)
