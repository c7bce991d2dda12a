"""bench/energy.py and the energy counter of bench/gpumon.py: RAPL read from a fake
powercap tree (packages and DRAM, a counter that wraps, a root-only file), NVML through
a stand-in of the pynvml calls gpumon makes, and the run's record from the ranks'."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import energy  # noqa: E402
import gpumon  # noqa: E402


def zone(root: Path, name: str, label: str, uj: int, wrap: int = 262143328850) -> Path:
    path = root / name
    path.mkdir(parents=True)
    (path / "name").write_text(label + "\n")
    (path / "energy_uj").write_text(f"{uj}\n")
    (path / "max_energy_range_uj").write_text(f"{wrap}\n")
    return path


def powercap(tmp_path: Path) -> Path:
    root = tmp_path / "powercap"
    zone(root, "intel-rapl:0", "package-0", 1_000_000)
    zone(root, "intel-rapl:0:0", "core", 500_000)  # inside package-0: not added again
    zone(root, "intel-rapl:0:1", "dram", 2_000_000)  # a domain of its own
    zone(root, "intel-rapl:1", "package-1", 262143328850 - 1_000_000)  # about to wrap
    zone(root, "intel-rapl:2", "psys", 9)  # the platform: includes the packages
    return root


def test_rapl_sums_packages_and_dram_over_the_windows_and_survives_a_wrap(tmp_path):
    root = powercap(tmp_path)
    first = energy.rapl_start(root)
    assert [z.name for z in first.zones] == ["package-0", "dram", "package-1"]
    (root / "intel-rapl:0" / "energy_uj").write_text("31000000\n")  # +30 J
    (root / "intel-rapl:0:0" / "energy_uj").write_text("99000000\n")  # ignored
    (root / "intel-rapl:0:1" / "energy_uj").write_text("7000000\n")  # +5 J
    (root / "intel-rapl:1" / "energy_uj").write_text("4000000\n")  # wrapped: +5 J
    reading = energy.rapl_stop(first)
    assert reading["joules"] == pytest.approx(40.0)
    assert reading["zones"] == [
        "intel-rapl:0 (package-0)",
        "intel-rapl:0:1 (dram)",
        "intel-rapl:1 (package-1)",
    ]


def test_rapl_says_why_where_it_cannot_be_read(tmp_path, monkeypatch):
    absent = energy.rapl_stop(energy.rapl_start(tmp_path / "none"))["unknown"]
    assert absent.endswith("is absent (no RAPL driver here, as in most virtual machines)")
    (tmp_path / "empty").mkdir()
    empty = energy.rapl_stop(energy.rapl_start(tmp_path / "empty"))["unknown"]
    assert "no RAPL package zone" in empty

    root = powercap(tmp_path)

    def root_only(path: Path) -> int:
        if path.name == "energy_uj":
            raise PermissionError(13, "Permission denied")
        return 0

    monkeypatch.setattr(energy, "_read_int", root_only)
    assert "readable by root only" in energy.rapl_stop(energy.rapl_start(root))["unknown"]


def test_a_counter_that_goes_back_beyond_its_range_gives_no_negative_figure(tmp_path):
    root = tmp_path / "powercap"
    package = zone(root, "intel-rapl:0", "package-0", 5_000_000)
    (package / "max_energy_range_uj").unlink()  # its range unreadable
    first = energy.rapl_start(root)
    (package / "energy_uj").write_text("3000000\n")
    reading = energy.rapl_stop(first)
    assert "joules" not in reading and "went back (5000000 to 3000000)" in reading["unknown"]
    monitor = gpumon.Monitor(handle="h", nvml=FakeNvml([9_000, 1_000]), name="H100")
    assert "went back" in monitor.start().stop()["energy_unknown"]


def test_this_machine_says_what_it_has():
    reading = energy.rapl_stop(energy.rapl_start())
    assert isinstance(reading.get("joules"), float) or reading["unknown"]


def test_rapl_merge_counts_each_host_once_and_is_unknown_if_one_is():
    a = {"host": "n1", "joules": 10.0, "seconds": 2.0, "zones": ["intel-rapl:0 (package-0)"]}
    b = {"host": "n2", "joules": 30.0, "seconds": 2.5, "zones": ["intel-rapl:0 (package-0)"]}
    merged = energy.merge_rapl([a, dict(a, joules=99.0), b])  # two ranks on n1
    assert merged["joules"] == 40.0 and merged["hosts"] == 2 and merged["seconds"] == 2.5
    c = {"host": "n3", "unknown": "no RAPL"}
    assert energy.merge_rapl([a, c]) == {"unknown": "no RAPL"}


class FakeNvml:
    """The pynvml calls gpumon makes, as nvidia-ml-py defines them (pynvml.py:
    nvmlDeviceGetTotalEnergyConsumption returns millijoules as an int)."""

    def __init__(self, energy_mj: list[int] | None = None, error: Exception | None = None):
        self.energy_mj = iter(energy_mj or [])
        self.error = error

    def nvmlDeviceGetUtilizationRates(self, handle):
        return SimpleNamespace(gpu=90, memory=40)

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(used=2 * 1024**2, total=16 * 1024**2)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        if self.error:
            raise self.error
        return next(self.energy_mj)


def test_gpu_energy_is_the_counter_difference_over_the_windows():
    monitor = gpumon.Monitor(handle="h", nvml=FakeNvml([5_000_000, 5_450_000]), name="H100")
    summary = monitor.start().stop()
    assert summary["energy_j"] == pytest.approx(450.0) and summary["energy_s"] >= 0


def test_a_gpu_without_the_counter_says_why():
    class NVMLError_NotSupported(Exception):  # pynvml's class for NVML_ERROR_NOT_SUPPORTED
        def __str__(self) -> str:
            return "Not Supported"

    monitor = gpumon.Monitor(handle="h", nvml=FakeNvml(error=NVMLError_NotSupported()), name="P100")
    summary = monitor.start().stop()
    assert summary["energy_unknown"] == "NVML energy counter: Not Supported"
    assert summary["samples"] >= 1  # utilisation is sampled all the same


def test_nvml_merge_counts_each_gpu_once_and_says_why_where_one_is_missing():
    g0 = {"host": "n1", "uuid": "GPU-0", "energy_j": 100.0, "energy_s": 1.0}
    g1 = {"host": "n1", "uuid": "GPU-1", "energy_j": 120.0, "energy_s": 1.1}
    merged = energy.merge_nvml([g0, g1, dict(g0)])  # two ranks share GPU-0
    assert merged["joules"] == 220.0 and merged["gpus"] == 2
    missing = {"host": "n2", "uuid": "GPU-9", "energy_unknown": "NVML energy counter: x"}
    assert energy.merge_nvml([g0, missing]) == {"unknown": "NVML energy counter: x"}
    cpu = {"host": "n1", "skipped": "no GPU: the run is on the cpu"}
    assert energy.merge_nvml([cpu]) == {"unknown": "no GPU: the run is on the cpu"}


def test_the_record_carries_each_source_and_the_samples_in_the_runs_unit():
    record = energy.merge([], [{"host": "n1", "unknown": "no RAPL"}], 4096, "tokens")
    assert record["samples"] == 4096 and record["unit"] == "tokens"
    assert record["rapl"] == {"unknown": "no RAPL"} and "unknown" in record["nvml"]


@settings(max_examples=150, deadline=None)
@given(
    name=st.text(max_size=30),
    before=st.text(max_size=30),
    after=st.text(max_size=30),
    wrap=st.text(max_size=30),
)
def test_any_powercap_file_content_reads_as_joules_or_a_reason(
    tmp_path_factory, name, before, after, wrap
):
    root = tmp_path_factory.mktemp("powercap")
    zone = root / "intel-rapl:0"
    zone.mkdir()
    for file, text in (("name", name), ("energy_uj", before), ("max_energy_range_uj", wrap)):
        (zone / file).write_text(text)
    first = energy.rapl_start(root)
    (zone / "energy_uj").write_text(after)
    reading = energy.rapl_stop(first)
    # Never a negative figure: the store would refuse the whole run's record.
    assert reading.get("joules", 0.0) >= 0 and ("joules" in reading or reading["unknown"])
