"""What train.py and allreduce.py share: the process group, timing, the result line.

Runs on the nodes with only torch (and Horovod) installed: never imports hpcbench.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import nodemon  # a sibling module: bench/ is on sys.path wherever runtime is imported
import sysinfo
import torch
from cpu_share import auto_threads

# The harness finds the record in the launcher's output by this marker, whatever
# prefixes the launcher puts in front of a line (horovodrun adds "[1,0]<stdout>:").
RESULT_MARKER = "HPCBENCH_RESULT "
# A rank an MPI launcher started: PMIx's (srun --mpi=pmix), Open MPI's mpirun, PMI-2's.
MPI_RANK_VARIABLES = ("PMIX_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
_IMPORTED = time.time()


def process_start_time() -> float:
    """When this process started (epoch s): the kernel's record, so that the
    interpreter start and the slow torch imports count as launch cost."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime"))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return _IMPORTED


class Comm:
    """The few collectives the workload needs, over Horovod or torch.distributed."""

    backend = ""
    dist_backend = ""  # the library that moves the tensors: nccl, gloo (torch) or horovod's
    rank = 0
    size = 1
    local_rank = 0
    local_size = 1

    def barrier(self) -> None:
        raise NotImplementedError

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's object, in rank order, on every rank."""
        raise NotImplementedError

    def allreduce_(self, tensor: torch.Tensor) -> None:
        """In-place sum across ranks."""
        raise NotImplementedError

    def allreduce_start(self, tensor: torch.Tensor) -> Pending:
        """An in-place sum started in the backend's own thread (as training's gradients
        are): poll it while the caller computes, then finish it."""
        raise NotImplementedError

    def allgather_(self, output: torch.Tensor, tensor: torch.Tensor) -> None:
        """Every rank's `tensor`, in rank order, into `output` (size x as long)."""
        raise NotImplementedError

    def reduce_scatter_(self, output: torch.Tensor, tensor: torch.Tensor) -> None:
        """The sum across ranks of `tensor`, this rank's 1/size part of it into `output`."""
        raise NotImplementedError

    def shutdown(self) -> None:
        pass


class Pending:
    """An all-reduce under way: done() polls without blocking, finish() waits."""

    def __init__(self, done: Callable[[], bool], finish: Callable[[], Any]) -> None:
        self.done = done
        self.finish = finish


class HorovodComm(Comm):
    backend = "horovod"

    def __init__(self) -> None:
        import horovod.torch as hvd

        if not any(v in os.environ for v in MPI_RANK_VARIABLES):
            # Horovod built with MPI picks MPI's controller unless told otherwise
            # (horovod/common/utils/env_parser.cc, ParseControllerOpsFromEnv): a
            # rank no MPI launcher started (one worker run directly) takes Gloo's,
            # as horovodrun --gloo sets it.
            os.environ.setdefault("HOROVOD_CONTROLLER", "gloo")
            os.environ.setdefault("HOROVOD_CPU_OPERATIONS", "gloo")
        hvd.init()
        self.hvd = hvd
        self.dist_backend = "horovod+nccl" if hvd.nccl_built() else "horovod"
        self.rank, self.size = hvd.rank(), hvd.size()
        self.local_rank, self.local_size = hvd.local_rank(), hvd.local_size()
        self._count = 0

    def barrier(self) -> None:
        self.hvd.barrier()

    def gather(self, obj: Any) -> list[Any]:
        return self.hvd.allgather_object(obj)

    def _name(self) -> str:
        self._count += 1  # Horovod matches collectives across ranks by name
        return f"probe.{self._count}"

    def allreduce_(self, tensor: torch.Tensor) -> None:
        self.hvd.allreduce_(tensor, op=self.hvd.Sum, name=self._name())

    def allreduce_start(self, tensor: torch.Tensor) -> Pending:
        handle = self.hvd.allreduce_async_(tensor, op=self.hvd.Sum, name=self._name())
        # horovod/torch/mpi_ops.py: poll() says whether synchronize() would block.
        return Pending(lambda: self.hvd.poll(handle), lambda: self.hvd.synchronize(handle))

    def shutdown(self) -> None:
        self.hvd.shutdown()


class TorchComm(Comm):
    """torch.distributed from the env:// variables torchrun (or the harness) sets."""

    backend = "ddp"

    def __init__(self, device: torch.device, dist_backend: str = "auto") -> None:
        import torch.distributed as dist

        self.dist = dist
        self.device = device
        self.dist_backend = dist_backend_for(device, dist_backend)
        dist.init_process_group(self.dist_backend)
        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        self.local_rank = int(os.environ.get("LOCAL_RANK", 0))
        self.local_size = int(os.environ.get("LOCAL_WORLD_SIZE", 1))

    def barrier(self) -> None:
        if self.dist_backend == "nccl":
            self.dist.barrier(device_ids=[self.device.index])
        else:
            self.dist.barrier()

    def gather(self, obj: Any) -> list[Any]:
        out: list[Any] = [None] * self.size
        self.dist.all_gather_object(out, obj)
        return out

    def allreduce_(self, tensor: torch.Tensor) -> None:
        self.dist.all_reduce(tensor)

    def allreduce_start(self, tensor: torch.Tensor) -> Pending:
        work = self.dist.all_reduce(tensor, async_op=True)
        return Pending(work.is_completed, work.wait)

    def allgather_(self, output: torch.Tensor, tensor: torch.Tensor) -> None:
        self.dist.all_gather_into_tensor(output, tensor)  # FSDP2's parameter all-gather

    def reduce_scatter_(self, output: torch.Tensor, tensor: torch.Tensor) -> None:
        self.dist.reduce_scatter_tensor(output, tensor)  # FSDP2's gradient reduce-scatter

    def shutdown(self) -> None:
        self.dist.destroy_process_group()


# The collectives FSDP2 and DDP issue, by the names a backend's own profiler events carry
# ("gloo:all_reduce", "nccl:_reduce_scatter_base"): what a backend runs for each is read
# from those events, not assumed.
EVENT_NAMES = {
    "all_reduce": ("all_reduce", "allreduce"),
    "all_gather": ("all_gather", "allgather"),
    "reduce_scatter": ("reduce_scatter", "reducescatter"),
}


def profiled(fn: Callable[[], Any], prefixes: tuple[str, ...]) -> dict[str, int]:
    """fn() run under torch's profiler (host events only): how many events of each name
    that starts with one of the prefixes it recorded, every thread's (Gloo runs its
    collectives in threads of its own)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    counts: dict[str, int] = {}
    for event in prof.events():
        if event.name.startswith(prefixes):
            counts[event.name] = counts.get(event.name, 0) + 1
    return dict(sorted(counts.items()))


def collective_paths(comm: Comm, device: torch.device) -> dict[str, dict[str, Any]] | None:
    """What the backend runs for each collective (None under Horovod): one small call of
    each, its backend events named. `emulated`: none of them carries the collective's
    own name. Gloo carries out reduce_scatter_tensor as an all-reduce of the whole
    input, of which each rank keeps its part (pytorch/pytorch
    torch/csrc/distributed/c10d/ProcessGroupGloo.cpp, reduce_scatter_tensor_coalesced:
    `works.push_back(allreduce(inp))`, then `buffers[i].chunk(worldSize)[rank]`)."""
    if not isinstance(comm, TorchComm):
        return None
    n = comm.size
    part = torch.zeros(4, device=device)
    whole = torch.zeros(4 * n, device=device)
    calls = {
        "all_reduce": lambda: comm.allreduce_(whole),
        "all_gather": lambda: comm.allgather_(whole, part),
        "reduce_scatter": lambda: comm.reduce_scatter_(part, whole),
    }
    prefix = f"{comm.dist_backend}:"
    out = {}
    for name, call in calls.items():
        ran = [
            e.removeprefix(prefix)
            for e in profiled(lambda c=call: (c(), synchronize(device)), (prefix,))
        ]
        own = EVENT_NAMES[name]
        out[name] = {
            "ran": [f"{prefix}{e}" for e in ran] or None,
            "emulated": None if not ran else not any(o in e for e in ran for o in own),
        }
    return out


def local_rank_hint() -> int:
    """The local rank before any process group exists (to pick a GPU first)."""
    for var in ("LOCAL_RANK", "HOROVOD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"):
        if var in os.environ:
            return int(os.environ[var])
    return 0


def local_size_hint() -> int:
    """This node's worker count before any process group exists (to size threads first)."""
    for var in ("LOCAL_WORLD_SIZE", "HOROVOD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"):
        if var in os.environ:
            return int(os.environ[var])
    return 1


def pick_device(want: str) -> torch.device:
    if want == "cpu" or (want == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise SystemExit("--device cuda asked for, but torch sees no CUDA device")
    device = torch.device("cuda", local_rank_hint() % torch.cuda.device_count())
    torch.cuda.set_device(device)
    return device


def dist_backend_for(device: torch.device, want: str = "auto") -> str:
    """torch.distributed's backend: NCCL on CUDA unless Gloo is asked for (ranks sharing one
    GPU: NCCL refuses two ranks on the same device); NCCL without CUDA is an error."""
    if want == "auto":
        return "nccl" if device.type == "cuda" else "gloo"
    if want == "nccl" and device.type != "cuda":
        raise SystemExit("--dist-backend nccl needs a CUDA device; use gloo on the CPU")
    return want


def connect(backend: str, device: torch.device, dist_backend: str = "auto") -> Comm:
    if backend == "horovod":
        return HorovodComm()
    return TorchComm(device, dist_backend)


def slowest(per_rank: list[list[float] | None]) -> list[float] | None:
    """Window k of the run is window k of its slowest rank (None where a rank has no times)."""
    if not per_rank or any(r is None for r in per_rank):
        return None
    return [max(r[k] for r in per_rank) for k in range(len(per_rank[0]))]


def mark(device: torch.device) -> Any:
    """A moment on the device's own clock: a CUDA event recorded on the current stream
    (it fires once the work queued before it has run), else the host's perf_counter."""
    if device.type == "cuda":
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event
    return time.perf_counter()


def elapsed_s(start: Any, stop: Any) -> float:
    """Seconds between two marks; CUDA events only once the device has synchronised."""
    if isinstance(start, float):
        return stop - start
    return start.elapsed_time(stop) / 1000.0


class DeviceWindows:
    """The timed windows as the GPU saw them: a mark at each window's start and end
    on the current stream; nothing on the CPU (seconds() is then None)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self.pairs: list[tuple[Any, Any]] = []

    def begin(self) -> None:
        if self.cuda:
            self.pairs.append((mark(self.device), None))

    def end(self) -> None:
        if self.cuda:
            self.pairs[-1] = (self.pairs[-1][0], mark(self.device))

    def seconds(self) -> list[float] | None:
        """Each window's GPU time; call after the device has synchronised."""
        if not self.cuda:
            return None
        return [elapsed_s(start, stop) for start, stop in self.pairs]


def usable_cores() -> float:
    """The CPUs this node may use: its CPU set, or its cgroup quota where that is less
    (a container of half a core still sees every CPU of the machine)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0
    cores = cores or os.cpu_count() or 1
    return min(float(cores), nodemon.cpu_source(where="")["cpus"])


def set_threads(threads: int, local_size: int) -> int:
    """Intra-op threads per worker: given, else this node's usable cores shared among its
    workers (auto_threads)."""
    if threads <= 0:
        threads = auto_threads(usable_cores(), local_size)
    torch.set_num_threads(threads)
    return threads


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _gpu_driver() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
        return out.stdout.splitlines()[0].strip()
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def fingerprint(device: torch.device, comm: Comm) -> dict[str, Any]:
    """This rank's software and hardware; rank 0 reports the gathered set."""
    info: dict[str, Any] = {
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "device": device.type,
        "comm_backend": comm.backend,
        **sysinfo.host_facts(),  # sockets, cores, caches, memory, OS: the MLPerf system file
    }
    try:
        import torchvision

        info["torchvision"] = torchvision.__version__
    except ImportError:
        pass
    if comm.backend == "horovod":
        import horovod

        info["horovod"] = horovod.__version__
        info["horovod_controller"] = "mpi" if comm.hvd.mpi_enabled() else "gloo"
        # Where Horovod's all-reduce runs: NCCL on GPUs when built with it, else Gloo/MPI.
        info["horovod_nccl"] = bool(comm.hvd.nccl_built())
    else:
        info["torch_distributed"] = comm.dist.get_backend()
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
        info["cuda"] = torch.version.cuda
        info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        info["driver"] = _gpu_driver()
    return info


def merge_fingerprints(per_rank: list[dict[str, Any]]) -> dict[str, Any]:
    """One fingerprint for the run: common values once, the host list in rank order."""
    merged: dict[str, Any] = {"hosts": [f["host"] for f in per_rank]}
    for key in per_rank[0]:
        if key == "host":
            continue
        values = {json.dumps(f.get(key)) for f in per_rank}
        merged[key] = per_rank[0][key] if len(values) == 1 else [f.get(key) for f in per_rank]
    return merged


def emit(record: dict[str, Any], out: str | None) -> None:
    """Rank 0's record: one line on stdout, and the same JSON in a file if asked."""
    line = json.dumps(record, sort_keys=True)
    if out:
        tmp = f"{out}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(line + "\n")
        os.replace(tmp, out)
    sys.stdout.write(RESULT_MARKER + line + "\n")
    sys.stdout.flush()


def leave(code: int) -> None:
    """Exit with `code` without the interpreter's teardown (train.py, allreduce.py).
    Gloo's worker threads outlive destroy_process_group, and one that frees a
    finished collective's tensors after the main thread has begun finalising
    cannot take the GIL: pthread_exit unwinds
    through a noexcept destructor, std::terminate, "terminate called without an
    active exception" and exit status 134, after the record was written (a core
    dump's stack: ProcessGroupGloo::runLoop -> ~AsyncAllgatherWork -> decref_pyobject
    -> take_gil -> PyThread_exit_thread). Output is flushed first."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
