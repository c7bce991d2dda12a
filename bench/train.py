"""Data-parallel training throughput of one configuration (runs on every rank).

    horovodrun -np 2 -H localhost:2 --gloo python bench/train.py --backend horovod
    torchrun --nproc-per-node 2 bench/train.py --backend ddp --model resnet18 --image-size 32
    torchrun --nproc-per-node 2 bench/train.py --model gpt-tiny --parallel fsdp2
    torchrun --nproc-per-node 2 bench/train.py --model my-model/config.json --seq-len 256

The CNNs (bench/models.json) train under DDP or Horovod; the transformers
(bench/transformer_configs.py: its configurations, or a Hugging Face config.json's,
given by its path or, as the harness passes it, by its name and --model-shape) under
DDP, FSDP2 or HSDP (bench/lm.py). Both are timed the same way (measure).

Timing (docs/method.md, "Measurement method"): warm-up steps are discarded; then
K windows of B steps, each started at a barrier and ended after the device
has finished; every rank's window times are gathered and the slowest rank's
time counts. Afterwards a checksum of the weights is compared across ranks.
A single worker trains without the data-parallel wrapper: the baseline X(1)
is plain single-device training, as in the published DDP and Horovod figures.
Rank 0 prints one JSON record (prefixed HPCBENCH_RESULT) and writes it to
--out if given, after the run's MLPerf log (bench/mllog.py). The record also carries
the energy of the timed windows (bench/energy.py) and, where NCCL runs, the fabric it
used between nodes (bench/nccl_log.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cnns  # noqa: E402
import energy  # noqa: E402
import gpumon  # noqa: E402
import inputs  # noqa: E402
import mllog  # noqa: E402
import nccl_log  # noqa: E402
import nodemon  # noqa: E402
import runtime  # noqa: E402  (a sibling module; bench/ is not a package on the nodes)
import steps  # noqa: E402
import transformer_configs  # noqa: E402
import units  # noqa: E402
import workload_options  # noqa: E402

MODELS = cnns.MODELS


def _count(name: str) -> Any:
    return units.argtype(units.count, name)  # the bounds the harness checks too


# The parsers of the shared options' kinds (bench/workload_options.py): the bounds the
# harness checks too.
PARSERS = {
    "count": _count,
    "megabytes": lambda name: units.argtype(units.megabytes, name),
    "seconds": lambda name: units.argtype(units.seconds, name),
}
MODEL_NAMES = sorted([*MODELS, *transformer_configs.CONFIGS])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    workload_options.add_to(p, PARSERS)
    p.add_argument("--batch", type=_count("batch"), default=32, help="per worker")
    p.add_argument("--backend", default="ddp", choices=workload_options.BACKENDS)
    p.add_argument(
        "--channels-last",
        default="auto",
        choices=["auto", "on", "off"],
        help="auto: on with CUDA and AMP, where tensor cores want NHWC",
    )
    p.add_argument(
        "--wrap",
        default="auto",
        choices=["auto", "on"],
        help="auto: DDP/Horovod only with two or more workers; on: also with one, so that "
        "the wrapped path runs on a single GPU",
    )
    p.add_argument(
        "--dist-backend",
        default="auto",
        choices=["auto", "nccl", "gloo"],
        help="DDP's process group; auto: NCCL on CUDA, else Gloo (Gloo lets ranks share a GPU)",
    )
    p.add_argument("--lr", type=float, default=None, help="default: 0.01 (SGD), 3e-4 (AdamW)")
    p.add_argument("--seed", type=_count("seed"), default=0)
    p.add_argument("--out", default=None, help="also write the JSON record here (rank 0)")
    p.add_argument(
        "--model-shape",
        default=None,
        help="the shape of the model --model names, read from a config.json by the "
        "harness (JSON of transformer_configs.shape_of): the nodes need not see the file",
    )
    args = p.parse_args(argv)
    try:
        args.model = known_model(args.model, args.model_shape)
    except ValueError as err:
        p.error(str(err))
    if min(args.batch, args.windows, args.steps) < 1 or args.warmup < 0:
        p.error("--batch, --windows and --steps must be >= 1, --warmup >= 0")
    why = transformer_configs.problem_of(args) or workload_options.grouping_problem(
        args.backend, args.bucket_cap_mb, args.fusion_threshold_mb
    )
    if why:
        p.error(why)
    config = transformer_configs.resolve(args.model)
    if config is not None:
        args.seq_len = transformer_configs.resolve_seq_len(config, args.seq_len)
    else:
        args.image_size = args.image_size or MODELS[args.model]["image_size"]
    return args


def known_model(model: str, shape: str | None) -> str:
    """The name of the model --model gives: a CNN's or a configuration's name, a
    config.json's path (read here), or a read config's name beside its shape
    (--model-shape, as the harness passes it); each config known by its name from then
    on. ValueError (one line) for anything else."""
    if shape is not None:
        try:
            given = json.loads(shape)
        except ValueError:
            raise ValueError("--model-shape: not JSON") from None
        return transformer_configs.remember(
            transformer_configs.from_shape(model, given, "--model-shape")
        ).name
    if transformer_configs.is_config_path(model):
        return transformer_configs.remember(transformer_configs.read_config(model)).name
    if transformer_configs.READ_NAME.fullmatch(model):
        raise ValueError(f"--model {model}: a config.json's model: give --model-shape beside it")
    if model not in MODEL_NAMES:
        raise ValueError(
            f"--model {model[:60]!r}: choose one of {', '.join(MODEL_NAMES)}, or give a "
            "config.json's path"
        )
    return model


def precision(args: argparse.Namespace, cuda: bool) -> tuple[bool, bool]:
    """(fp16 autocast, NHWC): both on by default on CUDA, under DDP and Horovod alike
    (Horovod is handed NHWC tensors as contiguous views: steps.ChannelsLastSafe)."""
    amp = args.amp == "on" or (args.amp == "auto" and cuda)
    channels_last = args.channels_last == "on" or (args.channels_last == "auto" and cuda and amp)
    return amp, channels_last


# Steps timed to size the windows: enough to average out one slow step.
SIZING_STEPS = 3


def window_steps(
    asked: int, min_window_s: float, step: Any, device: torch.device, comm: runtime.Comm
) -> int:
    """Steps per window: `asked`, or more so that a window lasts min_window_s (a window
    of a few short steps on a throttled CPU node measures the scheduler, not the step).
    Every rank times a few steps; the slowest rank's time sizes the windows for all, as
    the ranks must run the same number of steps."""
    if min_window_s <= 0:
        return asked
    comm.barrier()
    times = []
    for _ in range(SIZING_STEPS):
        start = time.perf_counter()
        step()
        runtime.synchronize(device)
        times.append(time.perf_counter() - start)
    # The median step: a step still paying for warm-up would size the windows too short.
    per_step = max(comm.gather(sorted(times)[SIZING_STEPS // 2]))
    return max(asked, math.ceil(min_window_s / max(per_step, 1e-6)))


def build_model(name: str) -> torch.nn.Module:
    import torchvision

    return torchvision.models.get_model(name, **cnns.constructor_kwargs(name))


def weights_digest(model: torch.nn.Module) -> tuple[str, float]:
    """A strict checksum (SHA-256 of the parameter bytes) and a readable sum."""
    h = hashlib.sha256()
    total = 0.0
    for p in model.parameters():
        data = p.detach().float().cpu().contiguous()
        h.update(data.numpy().tobytes())
        total += float(data.double().sum())
    return h.hexdigest(), total


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    timeline = {"process_start": runtime.process_start_time()}
    if args.backend == "horovod" and args.fusion_threshold_mb is not None:
        # Read by hvd.init(), so it must be in the environment first.
        os.environ["HOROVOD_FUSION_THRESHOLD"] = str(int(args.fusion_threshold_mb * 1024**2))
    device = runtime.pick_device(args.device)
    # NCCL reads its debug settings as it initialises: before the process group.
    nccl = nccl_log.Capture.start(device.type == "cuda" and args.dist_backend != "gloo")
    steps.check(args.step, device)
    steps.before_process_group(args.step, args.backend)
    comm = runtime.connect(args.backend, device, args.dist_backend)
    threads = runtime.set_threads(args.threads, comm.local_size)
    timeline["initialised"] = time.time()
    if transformer_configs.is_transformer(args.model):
        import lm  # torch's nn and FSDP2: loaded for the transformers only

        work = lm.build(args, comm, device)
    else:
        work = build_cnn(args, comm, device)
    timeline["ready"] = time.time()  # model, optimizer, data and graphs built; warm-up next
    record = measure(args, comm, device, work, timeline, threads, nccl)
    if record is not None:
        runtime.emit(record, args.out)
    # Every rank is past its last collective before any tears the group down.
    comm.barrier()
    comm.shutdown()
    return 0


def build_cnn(args: argparse.Namespace, comm: runtime.Comm, device: torch.device) -> steps.Workload:
    cuda = device.type == "cuda"
    amp, channels_last = precision(args, cuda)
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    # One worker has nothing to all-reduce: it trains unwrapped, so that X(1) is plain
    # single-device training and E(N) charges the framework's per-step cost to scaling.
    wrapped = comm.size > 1 or args.wrap == "on"
    horovod = wrapped and args.backend == "horovod"
    capture = steps.capture_kind(args.step, wrapped, args.backend, comm.dist_backend)
    autocast = steps.autocast_factory(amp, capture)

    if cuda:
        # Fixed input shapes: let cuDNN pick its fastest kernels once, during warm-up, as
        # NVIDIA's and PyTorch's own ImageNet benchmarks do.
        torch.backends.cudnn.benchmark = True
    torch.manual_seed(args.seed)
    model = build_model(args.model).to(device, memory_format=memory_format)
    params = [p for p in model.parameters() if p.requires_grad]
    grad_bytes = sum(p.numel() * p.element_size() for p in params)
    fused = steps.fused_optimizer(capture)
    lr = 0.01 if args.lr is None else args.lr
    optimizer = torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=1e-4, fused=fused or None)
    batches = inputs.Batches(args, comm.rank, comm.size, device, memory_format)
    if capture == "partial":  # before any wrapper hooks the parameters
        model = steps.graph_model(model, batches.static()[0], autocast)
    forward: Any = model
    if horovod:
        hvd = comm.hvd
        # NHWC tensors go to Horovod as the contiguous views they are (steps.py).
        hvd.broadcast_parameters(list(steps.contiguous_views(model.state_dict())), root_rank=0)
        hvd.broadcast_optimizer_state(optimizer, root_rank=0)
        compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
        optimizer = hvd.DistributedOptimizer(
            optimizer,
            named_parameters=model.named_parameters(),
            compression=steps.ChannelsLastSafe(compression),
        )
    elif wrapped:
        from torch.nn.parallel import DistributedDataParallel as DDP

        with steps.wrapper_context(capture, device):
            forward = DDP(
                model,
                device_ids=[device.index] if cuda else None,
                bucket_cap_mb=args.bucket_cap_mb,
                gradient_as_bucket_view=True,
            )
        if args.fp16_allreduce:
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            forward.register_comm_hook(None, default_hooks.fp16_compress_hook)
    if args.step == "compile":
        forward = steps.compile_forward(forward, args.compile_backend)
    scaler = torch.amp.GradScaler("cuda") if amp else None
    forward.train()
    parts = steps.Parts(model, forward, optimizer, scaler, autocast, horovod)
    # A whole capture runs its eager steps and captures here.
    step = steps.make_step(
        capture,
        parts,
        batches,
        device,
        ddp=wrapped and args.backend == "ddp",
        timeline=comm.size == 1,
    )

    def fields() -> dict[str, Any]:
        return {
            "image_size": args.image_size,
            "amp": amp,
            "channels_last": channels_last,
            "graph_capture": capture,
            "graph_eager_steps": getattr(step, "eager_steps", None),
            "fused_optimizer": fused,
            "decode": batches.decoder,
            "decode_note": batches.decode_note or None,
            "host_decoded": batches.host_decoded if batches.decoder == "device" else None,
            "fp16_allreduce": args.fp16_allreduce,
            "fusion_threshold_mb": args.fusion_threshold_mb,
            "bucket_cap_mb": args.bucket_cap_mb if args.backend == "ddp" else None,
            "params": sum(p.numel() for p in params),
            "grad_bytes": grad_bytes,
            "allreduce_bytes": grad_bytes // 2 if args.fp16_allreduce else grad_bytes,
        }

    def digest() -> dict[str, Any]:
        strict, total = weights_digest(model)
        return {"digest": strict, "weight_sum": total, "replica": 0}

    return steps.Workload(
        step,
        model,
        wrapped,
        "images",
        args.batch,
        fields,
        digest,
        held_out=batches.held_out,
        held_out_note=batches.held_out_note,
        train_samples=batches.train_samples,
    )


def measure(
    args: argparse.Namespace,
    comm: runtime.Comm,
    device: torch.device,
    work: steps.Workload,
    timeline: dict[str, float],
    threads: int,
    nccl: nccl_log.Capture | None = None,
) -> dict[str, Any] | None:
    """Warm-up, windows sized, K timed windows, one evaluation on held-out samples, the
    weights compared across ranks; rank 0 gets the record (None elsewhere)."""
    step = work.step
    for _ in range(args.warmup):
        step()
    runtime.synchronize(device)
    per_window = window_steps(args.steps, args.min_window_s, step, device, comm)
    # The single worker's backward as it happens: when each gradient is ready (one step,
    # outside the timed windows); the harness replays the all-reduces against it.
    grad_timeline = step.gradient_timeline(device) if comm.size == 1 else None
    before = work.before_windows()
    monitor = gpumon.start(device)  # GPU utilisation, memory and energy over the windows
    node_before = nodemon.start()  # the node's CPU and network over the same windows
    rapl = energy.rapl_start()  # the host's CPU packages and DRAM over the same windows
    window_times: list[float] = []
    walls: list[tuple[float, float]] = []  # each window's wall clock: the MLPerf log's blocks
    data_times: list[float] = []
    # The same windows timed by the GPU (CUDA events on the training stream): a check that
    # the host clock plus synchronize measures what the device did (docs/method.md).
    events = runtime.DeviceWindows(device)
    loss = torch.zeros(())
    for k in range(args.windows):
        comm.barrier()
        wall = time.time()
        start = time.perf_counter()
        events.begin()
        if k == 0:
            timeline["first_timed_step"] = time.time()
        waited_total = 0.0
        for _ in range(per_window):
            waited, loss = step()
            waited_total += waited
        events.end()
        runtime.synchronize(device)
        window_times.append(time.perf_counter() - start)
        walls.append((wall, time.time()))
        data_times.append(waited_total)
    timeline["timed_end"] = time.time()
    gpu = monitor.stop()
    node = nodemon.stop(node_before)
    host_energy = energy.rapl_stop(rapl)
    # Every rank at once: a sharded model's forward gathers its parameters.
    held_out = mllog.evaluate(torch, work.model, work.held_out, work.held_out_note, time.time)

    weights = work.digest()
    gathered = comm.gather(
        {
            "window_times": window_times,
            "device_window_times": events.seconds(),
            "data_times": data_times,
            "weights": weights,
            "fingerprint": runtime.fingerprint(device, comm),
            "gpu": gpu,
            "node": node,
            "rapl": host_energy,
            "eval": [held_out.correct, held_out.count, held_out.error],
            "fabric": nccl.finish() if nccl is not None else {"skipped": "not captured"},
        }
    )
    timeline["end"] = time.time()
    if comm.rank != 0:
        return None
    rank_windows = [g["window_times"] for g in gathered]
    rank_data = [g["data_times"] for g in gathered]
    slowest = runtime.slowest(rank_windows)
    sums = [g["weights"]["weight_sum"] for g in gathered]
    replicas: dict[Any, set[str]] = {}
    for g in gathered:
        replicas.setdefault(g["weights"]["replica"], set()).add(g["weights"]["digest"])
    # Its fields, with the workload's own, are declared in bench/workload_record.py.
    record = {
        "kind": "workload",
        "model": args.model,
        "backend": args.backend,
        "batch": args.batch,
        "unit": work.unit,
        "data": "synthetic" if args.data == "synthetic" else os.path.abspath(args.data),
        "warmup": args.warmup,
        "windows": args.windows,
        "steps": per_window,
        "steps_asked": args.steps,
        "min_window_s": args.min_window_s,
        "workers": comm.size,
        "local_workers": comm.local_size,
        "device": device.type,
        "step": args.step,
        "compile_backend": args.compile_backend if args.step == "compile" else None,
        "threads": threads,
        "wrapped": work.wrapped,
        "dist_backend": comm.dist_backend,
        "grad_timeline": grad_timeline,
        "window_times": slowest,
        "rank_window_times": rank_windows,
        "device_window_times": runtime.slowest([g["device_window_times"] for g in gathered]),
        "rank_data_times": rank_data if args.data != "synthetic" else None,
        "data_time_fraction": (
            None
            if args.data == "synthetic"
            else sum(map(sum, rank_data)) / sum(map(sum, rank_windows))
        ),
        # Every copy of each replica the same (DDP: every rank; FSDP2: each rank's shard
        # is the only copy; HSDP: a shard's copies across the replicas).
        "weights_in_sync": all(len(d) == 1 for d in replicas.values()),
        "weight_sum_spread": (max(sums) - min(sums)) / max(abs(sums[0]), 1e-30),
        "weights_digest": gathered[0]["weights"].get("full_digest", weights["digest"]),
        "loss": float(loss),
        "timeline": timeline,
        "fingerprint": runtime.merge_fingerprints([g["fingerprint"] for g in gathered]),
        "gpu": gpumon.merge([g["gpu"] for g in gathered]),
        "nodes_use": nodemon.merge([g["node"] for g in gathered]),
        **before,
        **work.fields(),
    }
    work.finish(record)
    samples = comm.size * work.per_step * per_window * args.windows
    record["energy"] = energy.merge(
        [g["gpu"] for g in gathered], [g["rapl"] for g in gathered], samples, work.unit
    )
    if comm.size > comm.local_size and nccl is not None and nccl.used:  # NCCL between nodes
        record["fabric"] = nccl_log.merge([g["fabric"] for g in gathered])
    held_out.correct = sum(g["eval"][0] for g in gathered)
    held_out.count = sum(g["eval"][1] for g in gathered)
    held_out.error = next((g["eval"][2] for g in gathered if g["eval"][2]), "")
    lines = mllog_lines(args, comm, work, record, walls, held_out, per_window)
    for line in lines:
        print(line)
    # Kept without the marker: the record's own line on stdout must not read as one.
    record["mllog"] = [line.removeprefix(mllog.TOKEN) for line in lines]
    rate = comm.size * work.per_step * per_window * args.windows / sum(slowest)
    how = record.get("parallel") or args.backend
    print(f"{args.model} {how} x{comm.size}: {rate:.1f} {work.unit}/s", file=sys.stderr)
    return record


def mllog_lines(
    args: argparse.Namespace,
    comm: runtime.Comm,
    work: steps.Workload,
    record: dict[str, Any],
    walls: list[tuple[float, float]],
    held_out: mllog.Evaluation,
    per_window: int,
) -> list[str]:
    """The run's MLPerf log from what measure() recorded (bench/mllog.py)."""
    fp = record["fingerprint"]
    name = fp.get("gpu") or fp.get("cpu") or record["device"]
    nodes = len(set(fp.get("hosts") or [])) or 1
    platform = f"{nodes}x{comm.local_size} {name if isinstance(name, str) else name[0]}"
    samples = comm.size * work.per_step * per_window
    return mllog.run_lines(
        model=args.model,
        unit=work.unit,
        platform=platform,
        seed=args.seed,
        global_batch=record.get("global_batch") or comm.size * args.batch,
        train_samples=work.train_samples(comm.size),
        init_start=record["timeline"]["process_start"],
        ready=record["timeline"]["ready"],
        windows=[
            mllog.Window(a, b, samples, t)
            for (a, b), t in zip(walls, record["window_times"], strict=True)
        ],
        evaluation=held_out,
        data=record["data"],
    )


if __name__ == "__main__":
    runtime.leave(main())
