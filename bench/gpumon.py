"""GPU utilisation and memory during the timed windows, sampled with NVML.

Every rank samples the GPU it trains on (so every GPU of every node is
covered, whatever the launcher) in a background thread; rank 0 merges the
summaries into the run's record. The GPU's energy counter
(nvmlDeviceGetTotalEnergyConsumption: millijoules since the driver was loaded,
Volta and newer; NVML API reference, "Device Queries") is read as sampling starts
and as it stops, so the summary carries the joules of the timed windows, or why
there are none (bench/energy.py merges them). Without a CUDA device, or without NVML
(nvidia-ml-py, or the driver's libnvidia-ml), the summary says why it was
skipped instead. Runs on the nodes: never imports hpcbench, and not torch.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

INTERVAL_S = 0.2


class Monitor:
    """Samples one GPU until stop(); stop() returns the summary."""

    def __init__(self, handle: Any = None, nvml: Any = None, name: str = "", skipped: str = ""):
        self.handle, self.nvml, self.name, self.skipped = handle, nvml, name, skipped
        self.util: list[int] = []
        self.mem_util: list[int] = []
        self.mem_used: list[int] = []
        self.mem_total = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors = 0
        self.uuid = ""
        self._energy: list[tuple[float, int]] = []  # (monotonic s, mJ) at start and stop
        self.energy_unknown = ""

    def start(self) -> Monitor:
        if self.handle is not None:
            self.read_energy()
            self._thread = threading.Thread(target=self._loop, name="gpumon", daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(INTERVAL_S)

    def sample(self) -> None:
        try:
            rates = self.nvml.nvmlDeviceGetUtilizationRates(self.handle)
            mem = self.nvml.nvmlDeviceGetMemoryInfo(self.handle)
        except Exception:  # a transient NVML error costs one sample, not the run
            self.errors += 1
            return
        self.util.append(int(rates.gpu))
        self.mem_util.append(int(rates.memory))
        self.mem_used.append(int(mem.used))
        self.mem_total = int(mem.total)

    def stop(self) -> dict[str, Any]:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(5.0)
            self.sample()  # at least one sample, however short the run
            self.read_energy()
        return self.summary()

    def read_energy(self) -> None:
        """The energy counter now; the first failure is kept as the reason."""
        if self.energy_unknown:
            return
        try:
            millijoules = int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        except Exception as err:  # NVMLError_NotSupported before Volta, no permission, ...
            self.energy_unknown = f"NVML energy counter: {err}"
            return
        self._energy.append((time.monotonic(), millijoules))

    def energy(self) -> dict[str, Any]:
        if self.energy_unknown or len(self._energy) < 2:
            return {"energy_unknown": self.energy_unknown or "NVML energy counter not read"}
        (t0, e0), (t1, e1) = self._energy[0], self._energy[-1]
        if e1 < e0:  # the driver was reloaded: the counter starts again from 0
            return {"energy_unknown": f"NVML energy counter went back ({e0} to {e1} mJ)"}
        return {"energy_j": (e1 - e0) / 1e3, "energy_s": t1 - t0}

    def summary(self) -> dict[str, Any]:
        host = socket.gethostname()
        if self.skipped:
            return {"host": host, "skipped": self.skipped}
        n = len(self.util)
        mib = 1024**2
        return {
            "host": host,
            "gpu": self.name,
            "samples": n,
            "interval_s": INTERVAL_S,
            "util_mean": sum(self.util) / n if n else None,
            "util_max": max(self.util) if n else None,
            "mem_util_mean": sum(self.mem_util) / n if n else None,
            "mem_used_max_mib": max(self.mem_used) / mib if n else None,
            "mem_total_mib": self.mem_total / mib if n else None,
            "errors": self.errors,
            "uuid": self.uuid,
            **self.energy(),
        }


def _handle(nvml: Any, device: Any) -> Any:
    """The NVML handle of torch's device: by UUID (NVML ignores CUDA_VISIBLE_DEVICES),
    else by the index."""
    try:
        import torch

        uuid = str(torch.cuda.get_device_properties(device).uuid)
        return nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    except Exception:
        return nvml.nvmlDeviceGetHandleByIndex(device.index or 0)


def start(device: Any) -> Monitor:
    """Start sampling `device` (a torch.device); a skipped monitor says why."""
    if getattr(device, "type", "cpu") != "cuda":
        return Monitor(skipped=f"no GPU: the run is on the {getattr(device, 'type', 'cpu')}")
    try:
        import pynvml as nvml  # nvidia-ml-py
    except ImportError:
        return Monitor(skipped="nvidia-ml-py (pynvml) is not installed")
    try:
        nvml.nvmlInit()
        handle = _handle(nvml, device)
        name = nvml.nvmlDeviceGetName(handle)
    except Exception as err:  # NVMLError: no driver library, no permission, ...
        return Monitor(skipped=f"NVML unavailable: {err}")
    monitor = Monitor(handle, nvml, name.decode() if isinstance(name, bytes) else str(name))
    try:
        uuid = nvml.nvmlDeviceGetUUID(handle)
        monitor.uuid = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
    except Exception:  # the name and host tell GPUs apart less surely: kept as is
        pass
    return monitor.start()


def merge(per_rank: list[dict[str, Any]]) -> dict[str, Any]:
    """One summary for the run: every rank's GPU, plus the means over the sampled ones."""
    sampled = [g for g in per_rank if g.get("samples")]
    if not sampled:
        reasons = sorted({g.get("skipped") or "no samples" for g in per_rank})
        return {"skipped": "; ".join(reasons)}
    return {
        "util_mean": sum(g["util_mean"] for g in sampled) / len(sampled),
        "util_min_rank": min(g["util_mean"] for g in sampled),
        "mem_used_max_mib": max(g["mem_used_max_mib"] for g in sampled),
        "per_rank": per_rank,
    }
