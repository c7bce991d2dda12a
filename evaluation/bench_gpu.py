"""The GPU path, checked and measured on one CUDA device (`make bench-gpu`).

    python evaluation/bench_gpu.py checks              # correctness; exit 1 if one fails
    python evaluation/bench_gpu.py matrix [--models resnet50 --batches 32,64,96 --amp on,off]
    python evaluation/bench_gpu.py all                 # both, then the fidelity rounds

checks: the workload (bench/train.py) with the data-parallel wrapper forced on
at world size 1 (DDP over NCCL, Horovod if it is installed), AMP on and off,
NHWC on and off; two DDP ranks sharing the one GPU over Gloo (NCCL refuses two
ranks on one device), whose weights must stay identical; the all-reduce probe
on the GPU. Each record must carry the GPU fingerprint (GPU, CUDA, NCCL,
driver), an NVML summary (bench/gpumon.py) and window times that agree with
CUDA-event timing of the same windows.

matrix: per-GPU images/s through the harness (`hpcbench scale --env
localhost --nodes 1 --device cuda`) for each model, batch and AMP setting,
with the 95% interval over the run's windows and the GPU utilisation NVML saw.

Each figure is printed with the command that reproduces it; everything lands
in --out (default results/bench-gpu) as JSON.
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
from hpcbench import analysis  # noqa: E402  (run as a script from evaluation/)

TRAIN = REPO / "bench" / "train.py"
PROBE = REPO / "bench" / "allreduce.py"
MARKER = "HPCBENCH_RESULT "
SEED_MODELS = ["resnet50", "resnet101", "inception_v3", "vgg16"]
# Window time by the host clock vs the same window by CUDA events: launch latency and the
# barrier's return are the only difference, far below 1% of a window of 10 training steps.
TIMING_TOLERANCE = 0.01
SHORT = ["--warmup", "5", "--windows", "3", "--steps", "5"]


def torchrun(nproc: int) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={nproc}"]


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


def checks(out: Path, only: str = "") -> list[dict[str, Any]]:
    """Each check (those whose name holds `only`): name, command, ok, details."""
    cases: list[tuple[str, list[str], dict[str, Any]]] = []
    base = [str(TRAIN), "--device", "cuda", "--model", "resnet50", "--batch", "32", *SHORT]
    for amp, nhwc in (("on", "on"), ("on", "off"), ("off", "off")):
        cases.append((
            f"DDP wrapped at world size 1 over NCCL, AMP {amp}, channels_last {nhwc}",
            [*torchrun(1), *base, "--backend", "ddp", "--wrap", "on", "--amp", amp,
             "--channels-last", nhwc],
            {"wrapped": True, "dist_backend": "nccl", "amp": amp == "on",
             "channels_last": nhwc == "on"},
        ))
    cases.append((
        "DDP, two ranks sharing the GPU over Gloo, AMP on",
        [*torchrun(2), *base, "--backend", "ddp", "--dist-backend", "gloo", "--amp", "on"],
        {"wrapped": True, "workers": 2, "dist_backend": "gloo"},
    ))
    for model, size in (("inception_v3", "299"), ("vgg16", "224"), ("resnet101", "224")):
        cases.append((
            f"{model} unwrapped baseline, AMP on",
            [*torchrun(1), str(TRAIN), "--device", "cuda", "--model", model, "--image-size",
             size, "--batch", "32", *SHORT, "--backend", "ddp", "--amp", "on"],
            {"wrapped": False},
        ))
    if shutil.which("horovodrun") and _importable("horovod.torch"):
        for amp in ("on", "off"):
            cases.append((
                f"Horovod DistributedOptimizer at world size 1, AMP {amp}",
                ["horovodrun", "-np", "1", "-H", "localhost:1", "--gloo", sys.executable, *base,
                 "--backend", "horovod", "--wrap", "on", "--amp", amp],
                {"wrapped": True, "amp": amp == "on"},
            ))
    results = []
    for name, argv, expect in [c for c in cases if only in c[0]]:
        start = time.monotonic()
        rec, tail = run_record(argv)
        faults = ["no record: " + tail] if rec is None else workload_faults(rec)
        for key, want in (expect.items() if rec else []):
            if rec.get(key) != want:
                faults.append(f"{key} is {rec.get(key)!r}, expected {want!r}")
        if rec and "Horovod" in name and not rec["fingerprint"].get("horovod_nccl"):
            faults.append("Horovod was built without NCCL")
        results.append(_result(name, argv, faults, rec, start))
    probe = [*torchrun(1), str(PROBE), "--backend", "ddp", "--device", "cuda", "--max-bytes",
             "64M"]
    if only in "all-reduce probe on the GPU":
        start = time.monotonic()
        rec, tail = run_record(probe)
        faults = ["no record: " + tail] if rec is None else []
        results.append(_result("all-reduce probe on the GPU (NCCL, one rank)", probe, faults,
                               rec, start))
    (out / "checks.json").write_text(json.dumps(results, indent=1))
    return results


def _importable(module: str) -> bool:
    return subprocess.run([sys.executable, "-c", f"import {module}"],
                          capture_output=True).returncode == 0


def _result(name: str, argv: list[str], faults: list[str], rec: dict[str, Any] | None,
            start: float) -> dict[str, Any]:
    ok = not faults
    print(f"{'PASS' if ok else 'FAIL'} {name} ({time.monotonic() - start:.0f} s)"
          + ("" if ok else "\n    " + "\n    ".join(faults)), flush=True)
    keep = {k: rec.get(k) for k in ("window_times", "device_window_times", "gpu", "fingerprint",
                                    "loss", "amp", "channels_last", "wrapped")} if rec else None
    return {"name": name, "command": _shell(argv), "ok": ok, "faults": faults, "record": keep}


def _shell(argv: list[str]) -> str:
    return " ".join(a.replace(str(REPO) + "/", "") if a.startswith(str(REPO)) else
                    ("python" if a == sys.executable else a) for a in argv)


def matrix(out: Path, models: list[str], batches: str, amps: list[str],
           backend: str) -> list[dict[str, Any]]:
    rows = []
    for model in models:
        for amp in amps:
            store = out / f"matrix-{model}-amp-{amp}"
            if store.exists():
                shutil.rmtree(store)
            argv = ["scale", "--env", "localhost", "--nodes", "1", "--device", "cuda",
                    "--backend", backend, "--model", model, "--batch", batches, "--amp", amp,
                    "--repeats", "1", "--no-probe", "--warmup", "10", "--windows", "6",
                    "--steps", "20", "--out", str(store)]
            proc = hpcbench(*argv, check=False, timeout=1800)
            first = len(rows)
            runs = records(store) if (store / "results.jsonl").exists() else []
            for run in sorted(runs, key=lambda r: r["batch"]):
                if run.get("status", "ok") != "ok" or not run.get("window_times"):
                    rows.append({"model": model, "amp": amp, "batch": run.get("batch"),
                                 "failed": run.get("error") or run.get("status")})
                    continue
                stats = analysis.run_stats(run)
                gpu = run.get("gpu") or {}
                rows.append({
                    "model": model, "amp": amp, "batch": run["batch"],
                    "images_per_sec": stats["images_per_sec"], "ci95": stats["ci95"],
                    "gpu_util": gpu.get("util_mean"), "mem_mib": gpu.get("mem_used_max_mib"),
                    "command": "python -m hpcbench " + " ".join(
                        a if a != str(store) else "results/bench-gpu/" + store.name
                        for a in argv).replace(batches, str(run["batch"])),
                })
            if not runs:
                rows.append({"model": model, "amp": amp, "failed": proc.stderr[-1500:]})
            _print_row_block(rows[first:])
    (out / "matrix.json").write_text(json.dumps(rows, indent=1))
    return rows


def _print_row_block(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        if "failed" in r:
            print(f"| {r['model']} | {r.get('batch')} | {r['amp']} | FAILED: "
                  f"{str(r['failed'])[-300:]} |", flush=True)
        else:
            util = "-" if r["gpu_util"] is None else f"{r['gpu_util']:.0f}"
            print(f"| {r['model']} | {r['batch']} | {r['amp']} | {r['images_per_sec']:.0f} "
                  f"+- {r['ci95']:.0f} | {util} | `{r['command']}` |", flush=True)


def fidelity(out: Path, backends: str) -> int:
    argv = [sys.executable, str(REPO / "evaluation" / "bench_fidelity.py"), "--device", "cuda",
            "--amp", "on", "--model", "resnet50", "--image-size", "224", "--batch", "96",
            "--warmup", "10", "--windows", "6", "--steps", "20", "--threads", "8",
            "--rounds", "3", "--backends", backends, "--out", str(out / "fidelity")]
    print("$ " + _shell(argv), flush=True)
    return subprocess.run(argv, cwd=REPO).returncode


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=["checks", "matrix", "fidelity", "all"])
    p.add_argument("--models", default=",".join(SEED_MODELS))
    p.add_argument("--batches", default="32,64,96")
    p.add_argument("--amp", default="on,off")
    p.add_argument("--backend", default="ddp", choices=["ddp", "horovod"])
    p.add_argument("--fidelity-backends", default="ddp")
    p.add_argument("--only", default="", help="checks whose name holds this text")
    p.add_argument("--out", default=str(REPO / "results" / "bench-gpu"))
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                          "--format=csv,noheader"], capture_output=True, text=True)
    if smi.returncode != 0:
        print("bench_gpu: nvidia-smi finds no GPU; this benchmark needs one", file=sys.stderr)
        return 2
    print(f"GPU: {smi.stdout.strip()}; python {sys.version.split()[0]}", flush=True)
    failed = 0
    if args.what in ("checks", "all"):
        failed += sum(not r["ok"] for r in checks(out, args.only))
    if args.what in ("matrix", "all"):
        print("| model | batch | AMP | images/s per GPU (95% CI over windows) | GPU util % "
              "| command |\n|---|---|---|---|---|---|", flush=True)
        rows = matrix(out, args.models.split(","), args.batches, args.amp.split(","),
                      args.backend)
        failed += sum("failed" in r for r in rows)
    if args.what in ("fidelity", "all"):
        failed += fidelity(out, args.fidelity_backends) != 0
    os.sync()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
