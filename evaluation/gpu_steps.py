"""The GPU path, checked and measured on one CUDA device (`make bench-gpu`).

    python evaluation/gpu_steps.py all        # the GPU table in one go, within --deadline-s
    python evaluation/gpu_steps.py checks [--full]
    python evaluation/gpu_steps.py matrix [--models resnet50 --batches 32,64,96 --amp on,off
                                           --steps eager,graph]
    python evaluation/gpu_steps.py jpeg       # ImageNet-layout JPEGs against synthetic data
    python evaluation/gpu_steps.py fidelity   # the harness against a plain loop, graph mode

checks: the workload (bench/train.py) with the data-parallel wrapper forced on
at world size 1 (DDP over NCCL, Horovod if it is installed) in each step mode
(bench/steps.py: eager, CUDA graphs as a whole capture and as a partial one),
AMP on and off, NHWC on and off; two DDP ranks sharing the one GPU over Gloo
(NCCL refuses two ranks on one device), whose weights must stay identical; the
all-reduce probe on the GPU. Each record must carry the GPU fingerprint (GPU,
CUDA, NCCL, driver), an NVML summary (bench/gpumon.py) and window times that
agree with CUDA-event timing of the same windows. `all` runs the two quick
ones (graphs whole under DDP over NCCL, partial under DDP over Gloo; the
matrix runs the rest of the new modes); --full adds eager, fp32 and the other
seed models.

matrix: per-GPU images/s through the harness (`hpcbench scale --env localhost
--nodes 1 --device cuda`) for each model, step mode, batch and AMP setting,
with the 95% interval over the run's windows and the GPU utilisation NVML saw;
`all` adds torch.compile at the largest batch with AMP.

jpeg: the same run on an ImageNet-layout folder of JPEGs (evaluation/jpeg_folder.py)
decoded on the GPU (nvJPEG) and by DataLoader workers, against synthetic data.

fidelity: harness over plain loop (evaluation/fidelity.py) in graph mode.

Each figure is printed with the command that reproduces it; everything lands
in --out (default results/bench-gpu) as JSON, and the table last.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cli import REPO, hpcbench, records

sys.path.insert(0, str(REPO))
from hpcbench import launchers  # noqa: E402  (run as a script from evaluation/)
from hpcbench.core.bench import workload_options  # noqa: E402
from hpcbench.measure import analysis  # noqa: E402  (run as a script from evaluation/)

TRAIN = REPO / "bench" / "train.py"
PROBE = REPO / "bench" / "allreduce.py"
MARKER = "HPCBENCH_RESULT "
# Window time by the host clock vs the same window by CUDA events: launch latency and the
# barrier's return are the only difference, far below 1% of a window of 10 training steps.
TIMING_TOLERANCE = 0.01
SHORT = ["--warmup", "5", "--windows", "3", "--steps", "5"]
MEASURED = ["--warmup", "10", "--windows", "6", "--steps", "20"]  # the matrix's and fidelity's


def torchrun(nproc: int) -> list[str]:
    return launchers.torchrun.here(nproc)  # the static rendezvous a run uses, not c10d's


def run_record(argv: list[str], timeout: int = 600) -> tuple[dict[str, Any] | None, str]:
    """Run one workload/probe command; its JSON record (or None) and its output's tail."""
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    out = proc.stdout + proc.stderr
    for line in proc.stdout.splitlines():
        if MARKER in line:
            return json.loads(line.split(MARKER, 1)[1]), out[-2000:]
    return None, out[-4000:]


def workload_faults(rec: dict[str, Any]) -> list[str]:
    """What is wrong with a GPU workload record (empty: nothing)."""
    faults = []
    fp = rec.get("fingerprint", {})
    for key in ("gpu", "cuda", "nccl", "driver"):
        if not fp.get(key):
            faults.append(f"fingerprint has no {key}")
    gpu = rec.get("gpu", {})
    if gpu.get("util_mean") is None:
        faults.append(f"no NVML summary: {gpu.get('skipped', gpu)}")
    if not math.isfinite(rec.get("loss", float("nan"))):
        faults.append(f"loss is {rec.get('loss')}")
    if not rec.get("weights_in_sync"):
        faults.append(f"weights differ across ranks (spread {rec.get('weight_sum_spread')})")
    faults += timing_faults(rec.get("window_times"), rec.get("device_window_times"))
    return faults


def timing_faults(host: list[float] | None, device: list[float] | None) -> list[str]:
    if not device or not host or len(device) != len(host):
        return [f"no CUDA-event window times to compare ({device!r})"]
    worst = max(abs(h - d) / h for h, d in zip(host, device, strict=True))
    if worst > TIMING_TOLERANCE:
        limit = f"{TIMING_TOLERANCE:.0%}"
        return [f"host and CUDA-event window times differ by {worst:.1%} (> {limit})"]
    return []


def check_cases(full: bool) -> list[tuple[str, list[str], dict[str, Any]]]:
    """(name, command, fields the record must have): the quick set, or all of them."""
    cases: list[tuple[str, list[str], dict[str, Any]]] = []
    base = [str(TRAIN), "--device", "cuda", "--model", "resnet50", "--batch", "32", *SHORT]
    ddp1 = [*torchrun(1), *base, "--backend", "ddp", "--wrap", "on"]
    quick = [("graph", "on", "on")]
    more = [
        ("graph", "off", "off"),
        ("eager", "on", "on"),
        ("eager", "on", "off"),
        ("eager", "off", "off"),
    ]
    for step, amp, nhwc in quick + (more if full else []):
        capture = "whole" if step == "graph" else None
        cases.append(
            (
                f"DDP wrapped at world size 1 over NCCL, {step} step, AMP {amp}, "
                f"channels_last {nhwc}",
                [*ddp1, "--step", step, "--amp", amp, "--channels-last", nhwc],
                {
                    "wrapped": True,
                    "dist_backend": "nccl",
                    "amp": amp == "on",
                    "channels_last": nhwc == "on",
                    "step": step,
                    "graph_capture": capture,
                },
            )
        )
    for step in ("graph", "eager") if full else ("graph",):
        cases.append(
            (
                f"DDP, two ranks sharing the GPU over Gloo, {step} step, AMP on",
                [
                    *torchrun(2),
                    *base,
                    "--backend",
                    "ddp",
                    "--dist-backend",
                    "gloo",
                    "--amp",
                    "on",
                    "--step",
                    step,
                ],
                {
                    "wrapped": True,
                    "workers": 2,
                    "dist_backend": "gloo",
                    "step": step,
                    "graph_capture": "partial" if step == "graph" else None,
                },
            )
        )
    if full:
        for model, size in (("inception_v3", "299"), ("vgg16", "224"), ("resnet101", "224")):
            cases.append(
                (
                    f"{model} unwrapped, graph step, AMP on",
                    [
                        *torchrun(1),
                        str(TRAIN),
                        "--device",
                        "cuda",
                        "--model",
                        model,
                        "--image-size",
                        size,
                        "--batch",
                        "32",
                        *SHORT,
                        "--backend",
                        "ddp",
                        "--amp",
                        "on",
                        "--step",
                        "graph",
                    ],
                    {"wrapped": False, "graph_capture": "whole"},
                )
            )
    if shutil.which("horovodrun") and _importable("horovod.torch"):
        for step, amp in (("graph", "on"), ("eager", "on"), ("eager", "off")):
            cases.append(
                (
                    f"Horovod DistributedOptimizer at world size 1, {step} step, AMP {amp}, NHWC",
                    [
                        "horovodrun",
                        "-np",
                        "1",
                        "-H",
                        "localhost:1",
                        "--gloo",
                        sys.executable,
                        *base,
                        "--backend",
                        "horovod",
                        "--wrap",
                        "on",
                        "--amp",
                        amp,
                        "--step",
                        step,
                    ],
                    {
                        "wrapped": True,
                        "amp": amp == "on",
                        "channels_last": amp == "on",
                        "graph_capture": "partial" if step == "graph" else None,
                    },
                )
            )
    return cases


def checks(out: Path, only: str = "", full: bool = False) -> list[dict[str, Any]]:
    """Each check (those whose name holds `only`): name, command, ok, details."""
    results = []
    for name, argv, expect in [c for c in check_cases(full) if only in c[0]]:
        start = time.monotonic()
        rec, tail = run_record(argv)
        faults = ["no record: " + tail] if rec is None else workload_faults(rec)
        for key, want in expect.items() if rec else []:
            if rec.get(key) != want:
                faults.append(f"{key} is {rec.get(key)!r}, expected {want!r}")
        if rec and "Horovod" in name and not rec["fingerprint"].get("horovod_nccl"):
            faults.append("Horovod was built without NCCL")
        results.append(_result(name, argv, faults, rec, start))
    probe = [*torchrun(1), str(PROBE), "--backend", "ddp", "--device", "cuda", "--max-bytes", "64M"]
    if only in "all-reduce probe on the GPU":
        start = time.monotonic()
        rec, tail = run_record(probe)
        faults = ["no record: " + tail] if rec is None else []
        results.append(
            _result("all-reduce probe on the GPU (NCCL, one rank)", probe, faults, rec, start)
        )
    (out / "checks.json").write_text(json.dumps(results, indent=1))
    return results


def _importable(module: str) -> bool:
    return (
        subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True).returncode
        == 0
    )


def _result(
    name: str, argv: list[str], faults: list[str], rec: dict[str, Any] | None, start: float
) -> dict[str, Any]:
    ok = not faults
    print(
        f"{'PASS' if ok else 'FAIL'} {name} ({time.monotonic() - start:.0f} s)"
        + ("" if ok else "\n    " + "\n    ".join(faults)),
        flush=True,
    )
    keep = (
        {
            k: rec.get(k)
            for k in (
                "window_times",
                "device_window_times",
                "gpu",
                "fingerprint",
                "loss",
                "amp",
                "channels_last",
                "wrapped",
            )
        }
        if rec
        else None
    )
    return {"name": name, "command": _shell(argv), "ok": ok, "faults": faults, "record": keep}


def _shell(argv: list[str]) -> str:
    return " ".join(
        a.replace(str(REPO) + "/", "")
        if a.startswith(str(REPO))
        else ("python" if a == sys.executable else a)
        for a in argv
    )


def scale_rows(
    out: Path, name: str, argv: list[str], fields: dict[str, Any]
) -> list[dict[str, Any]]:
    """Run `hpcbench scale` into out/name; a row per run: images/s, CI, GPU busy, command."""
    store = out / name
    if store.exists():
        shutil.rmtree(store)
    argv = [*argv, "--repeats", "1", "--no-probe", "--out", str(store)]
    proc = hpcbench(*argv, check=False, timeout=1800)
    runs = records(store) if (store / "results.jsonl").exists() else []
    rows = []
    for run in sorted(runs, key=lambda r: r["batch"]):
        row = {**fields, "batch": run.get("batch")}
        if run.get("status", "ok") != "ok" or not run.get("window_times"):
            rows.append({**row, "failed": run.get("error") or run.get("status")})
            continue
        stats = analysis.run_stats(run)
        gpu = run.get("gpu") or {}
        batch_arg = argv[argv.index("--batch") + 1]
        rows.append(
            {
                **row,
                "images_per_sec": stats["throughput"],
                "ci95": stats["ci95"],
                "gpu_util": gpu.get("util_mean"),
                "mem_mib": gpu.get("mem_used_max_mib"),
                "data_time_fraction": run.get("data_time_fraction"),
                "decode": run.get("decode"),
                "graph_capture": run.get("graph_capture"),
                "command": "python -m hpcbench "
                + " ".join(
                    {str(store): "results/bench-gpu/" + name, batch_arg: str(run["batch"])}.get(
                        a, a
                    )
                    for a in argv
                ),
            }
        )
    if not runs:
        rows.append({**fields, "failed": proc.stderr[-1500:]})
    _print_row_block(rows)
    return rows


def matrix_argv(model: str, step: str, amp: str, batches: str, backend: str) -> list[str]:
    return [
        "scale",
        "--env",
        "localhost",
        "--nodes",
        "1",
        "--device",
        "cuda",
        "--backend",
        backend,
        "--model",
        model,
        "--batch",
        batches,
        "--amp",
        amp,
        "--step",
        step,
        *MEASURED,
    ]


def matrix(
    out: Path,
    models: list[str],
    batches: str,
    amps: list[str],
    steps: list[str],
    backend: str,
    deadline: Deadline,
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for model in models:
        for step in steps:
            for amp in amps:
                fields = {"model": model, "step": step, "amp": amp}
                if deadline.passed(f"matrix {model} {step} AMP {amp}"):
                    rows.append({**fields, "skipped": "deadline"})
                    continue
                rows += scale_rows(
                    out,
                    f"matrix-{model}-{step}-amp-{amp}",
                    matrix_argv(model, step, amp, batches, backend),
                    fields,
                )
    _merge_json(out / "matrix.json", rows)
    return rows


def jpeg(out: Path, batch: int, step: str, deadline: Deadline) -> list[dict[str, Any]]:
    """Synthetic against JPEG files decoded on the GPU and by the DataLoader's workers."""
    sys.path.insert(0, str(REPO / "evaluation"))
    import jpeg_folder

    folder = jpeg_folder.make(out / "jpeg-data", classes=100, per_class=20)
    workers = max(1, (os.cpu_count() or 2) - 2)
    rows: list[dict[str, Any]] = []
    for data, decode in (("synthetic", "auto"), (str(folder), "device"), (str(folder), "workers")):
        fields = {
            "model": "resnet50",
            "step": step,
            "amp": "on",
            "data": data if data == "synthetic" else "jpeg",
            "decode_asked": decode,
        }
        if deadline.passed(f"jpeg {data} {decode}"):
            rows.append({**fields, "skipped": "deadline"})
            continue
        argv = [
            *matrix_argv("resnet50", step, "on", str(batch), "ddp"),
            "--data",
            data,
            "--decode",
            decode,
            "--data-workers",
            str(workers),
        ]
        rows += scale_rows(out, f"jpeg-{fields['data']}-{decode}", argv, fields)
    synthetic = [r for r in rows if r.get("data") == "synthetic" and "images_per_sec" in r]
    for r in rows:
        if synthetic and "images_per_sec" in r and r is not synthetic[0]:
            r["vs_synthetic"] = r["images_per_sec"] / synthetic[0]["images_per_sec"]
            print(
                f"{r['decode_asked']} decode: {r['vs_synthetic']:.3f} of synthetic data's "
                f"images/s, data time {r.get('data_time_fraction') or 0:.1%}",
                flush=True,
            )
    (out / "jpeg.json").write_text(json.dumps(rows, indent=1))
    return rows


def _merge_json(path: Path, rows: list[dict[str, Any]]) -> None:
    """Rows into a JSON list, replacing those of the same model, step, AMP and batch."""

    def key(r: dict[str, Any]) -> tuple:
        return r.get("model"), r.get("step"), r.get("amp"), r.get("batch")

    old = json.loads(path.read_text()) if path.exists() else []
    new = {key(r) for r in rows}
    path.write_text(json.dumps([r for r in old if key(r) not in new] + rows, indent=1))


def _print_row_block(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        model = r["model"] + (
            f" ({r['data']} data, {r['decode_asked']} decode)" if "decode_asked" in r else ""
        )
        head = f"| {model} | {r.get('step')} | {r.get('batch')} | {r['amp']} |"
        if "failed" in r:
            print(f"{head} FAILED: {str(r['failed'])[-300:]} |", flush=True)
        else:
            util = "-" if r["gpu_util"] is None else f"{r['gpu_util']:.0f}"
            print(
                f"{head} {r['images_per_sec']:.0f} +- {r['ci95']:.0f} | {util} "
                f"| `{r['command']}` |",
                flush=True,
            )


def fidelity(out: Path, backends: str, step: str) -> int:
    argv = [
        sys.executable,
        str(REPO / "evaluation" / "fidelity.py"),
        "--device",
        "cuda",
        "--amp",
        "on",
        "--step",
        step,
        "--model",
        "resnet50",
        "--image-size",
        "224",
        "--batch",
        "96",
        *MEASURED,
        "--threads",
        "8",
        "--rounds",
        "3",
        "--backends",
        backends,
        "--out",
        str(out / f"fidelity-{step}"),
    ]
    print("$ " + _shell(argv), flush=True)
    return subprocess.run(argv, cwd=REPO).returncode


class Deadline:
    """The prepared run's time limit: a part that would start after it is skipped, and
    the skip is printed and recorded (a lent GPU's time is short)."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds if seconds > 0 else float("inf")

    def passed(self, what: str) -> bool:
        if time.monotonic() < self.end:
            return False
        print(f"SKIPPED {what}: --deadline-s reached", flush=True)
        return True


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=["checks", "matrix", "jpeg", "fidelity", "all"])
    p.add_argument("--models", default="resnet50")
    p.add_argument("--batches", default="32,64,96")
    p.add_argument("--amp", default="on,off")
    p.add_argument("--steps", default="eager,graph", help="step modes (bench/steps.py)")
    p.add_argument("--backend", default="ddp", choices=workload_options.BACKENDS)
    p.add_argument("--fidelity-backends", default="ddp")
    p.add_argument("--full", action="store_true", help="checks: every seed model too")
    p.add_argument("--only", default="", help="checks whose name holds this text")
    p.add_argument(
        "--deadline-s",
        type=float,
        default=0,
        help="start no part after this many seconds (0: no limit)",
    )
    p.add_argument("--out", default=str(REPO / "results" / "bench-gpu"))
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
        capture_output=True,
        text=True,
    )
    if smi.returncode != 0:
        print("gpu_steps: nvidia-smi finds no GPU; this benchmark needs one", file=sys.stderr)
        return 2
    print(f"GPU: {smi.stdout.strip()}; python {sys.version.split()[0]}", flush=True)
    deadline = Deadline(args.deadline_s)
    failed = 0
    rows: list[dict[str, Any]] = []
    if args.what in ("checks", "all"):
        failed += sum(not r["ok"] for r in checks(out, args.only, args.full))
    header = (
        "| model | step | batch | AMP | images/s per GPU (95% CI over windows) "
        "| GPU busy % | command |\n|---|---|---|---|---|---|---|"
    )
    if args.what in ("matrix", "all"):
        print(header, flush=True)
        rows = matrix(
            out,
            args.models.split(","),
            args.batches,
            args.amp.split(","),
            args.steps.split(","),
            args.backend,
            deadline,
        )
    if args.what in ("jpeg", "all"):
        rows += jpeg(out, int(args.batches.split(",")[-1]), "graph", deadline)
    if args.what in ("fidelity", "all") and not deadline.passed("fidelity"):
        failed += fidelity(out, args.fidelity_backends, "graph") != 0
    if args.what == "all":  # last: compile at the largest batch with AMP (its compile is long)
        rows += matrix(
            out,
            ["resnet50"],
            args.batches.split(",")[-1],
            ["on"],
            ["compile"],
            args.backend,
            deadline,
        )
        print("\nThe table again:\n" + header, flush=True)
        _print_row_block([r for r in rows if "skipped" not in r])
    failed += sum("failed" in r for r in rows)
    os.sync()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
