"""`hpcbench export --mlperf DIR`: the runs of results folders as an MLPerf Training
submission package, in the layout mlperf-logging's package_checker reads
(package_checker/package_checker.py, check_training_package):

    DIR/hpcbench/systems/<system>.json                      one per system
    DIR/hpcbench/results/<system>/<benchmark>/result_<n>.txt  one MLPerf log per run
    DIR/hpcbench/benchmarks/<benchmark>/implementations/hpcbench/   the workload's code

A system is one testbed at one node count, measured with one backend (a transformer:
its parallelism) and batch (a configuration of the store). Its description holds the
33 fields system_desc_checker requires (system_desc_checker.py, required_fields),
every value a string (the checker joins some of them and fails on a number), `status`
one of its four exact strings, each taken from the runs' fingerprints or "unknown"
where no node reports it. Each result file is a run's own MLPerf log, each event
written anew by the workload's encoder (bench/mllog.py), one line whatever text it
holds; each run is exported once, however its folders are named or copied. ResNet-50
is MLPerf's `resnet`, checked against the training rules 4.0.0, which want 5 runs
(benchmark_meta.py, _ALL_RESULT_FILE_COUNTS); other models keep their names, which
the checkers skip: no ruleset covers them (docs/mlperf.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from hpcbench.core import files, paths
from hpcbench.core.bench import mllog
from hpcbench.core.errors import UsageError, one_line
from hpcbench.launchers.parse import check_path
from hpcbench.measure import fingerprint
from hpcbench.measure.store import Store, config_key, run_key

# The workload writes each run's MLPerf log (bench/mllog.py): its names are these.
ORG, DIVISION, RULESET = mllog.ORG, mllog.DIVISION, mllog.RULESET
benchmark = mllog.benchmark
# system_desc_checker.py, check_system_desc: "status" must be one of these (training).
STATUS = "Research, Development, or Internal (RDI)"
# benchmark_meta.py: the result files a benchmark's folder must hold (training).
RESULT_FILES = {"resnet": 5}
# system_desc_checker.py, required_fields, in its order.
REQUIRED = (
    "submitter",
    "division",
    "status",
    "system_name",
    "number_of_nodes",
    "host_processors_per_node",
    "host_processor_model_name",
    "host_processor_core_count",
    "host_processor_vcpu_count",
    "host_processor_frequency",
    "host_processor_caches",
    "host_processor_interconnect",
    "host_memory_capacity",
    "host_storage_type",
    "host_storage_capacity",
    "host_networking",
    "host_networking_topology",
    "host_memory_configuration",
    "accelerators_per_node",
    "accelerator_model_name",
    "accelerator_host_interconnect",
    "accelerator_frequency",
    "accelerator_on-chip_memories",
    "accelerator_memory_configuration",
    "accelerator_memory_capacity",
    "accelerator_interconnect",
    "accelerator_interconnect_topology",
    "cooling",
    "hw_notes",
    "framework",
    "other_software_stack",
    "operating_system",
    "sw_notes",
)
UNKNOWN = "unknown"


def _one(value: Any) -> str:
    """A fingerprint value as text: a list of differing values joined, None unknown."""
    if value is None or value == "":
        return UNKNOWN
    if isinstance(value, list):
        return ", ".join(sorted({str(v) for v in value})) or UNKNOWN
    return str(value)


def _first_number(value: Any) -> float | None:
    if isinstance(value, list):
        value = value[0] if value else None
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok else None


def parallelism(run: dict[str, Any]) -> str:
    """How a run's workers share the training: a transformer's `parallel` (ddp, fsdp2,
    hsdp: bench/lm.py records it), else the backend (a CNN's, or a transformer's
    recorded before it, which trained as DDP does)."""
    parallel = run.get("parallel")
    return parallel if isinstance(parallel, str) else str(run.get("backend"))


def system_description(system: str, runs: list[dict[str, Any]]) -> dict[str, str]:
    """The MLPerf system description of one system from its runs' fingerprints (the
    latest ok run's), every field a string."""
    ok = [r for r in runs if r.get("status") == "ok"]
    run = ok[-1] if ok else runs[-1]
    fp = run.get("fingerprint") or {}
    gpu = run.get("device") == "cuda" or fp.get("device") == "cuda"
    sockets, cores = _first_number(fp.get("cpu_sockets")), _first_number(fp.get("cpu_cores"))
    per_socket = int(cores // sockets) if sockets and cores else None
    memory = _first_number(fp.get("memory_gib"))
    mhz = _first_number(fp.get("cpu_max_mhz"))
    gpu_memory = [
        float(g["mem_total_mib"])
        for g in (run.get("gpu") or {}).get("per_rank") or []
        if isinstance(g, dict) and isinstance(g.get("mem_total_mib"), int | float)
    ]
    framework = f"PyTorch {_one(fp.get('torch'))}"
    if fp.get("horovod"):
        framework += f", Horovod {_one(fp.get('horovod'))}"
    stack = ", ".join(
        f"{name} {_one(fp.get(key))}"
        for name, key in (
            ("Python", "python"),
            ("torchvision", "torchvision"),
            ("CUDA", "cuda"),
            ("NCCL", "nccl"),
            ("driver", "driver"),
            ("torch.distributed", "torch_distributed"),
        )
        if fp.get(key)
    )
    fabric = run["fabric"] if isinstance(run.get("fabric"), dict) else {}
    link = f"{_one(fp.get('link_rate'))} link" + (
        f" over {_one(fp.get('iface'))}" if fp.get("iface") else ""
    )
    if fabric.get("transport"):
        link += f"; NCCL between nodes over {fabric['transport']}"
    na = "N/A" if not gpu else UNKNOWN
    cpus = ", ".join(
        sorted(
            {
                f"{h['cpus']:g} CPUs ({h.get('cpu_limit')})"
                for h in (run.get("nodes_use") or {}).get("per_host") or []
                if isinstance(h, dict) and isinstance(h.get("cpus"), int | float)
            }
        )
    )
    description = {
        "submitter": ORG,
        "division": DIVISION,
        "status": STATUS,
        "system_name": system,
        "number_of_nodes": str(run.get("nodes")),
        "host_processors_per_node": _one(int(sockets) if sockets else None),
        "host_processor_model_name": _one(fp.get("cpu")),
        "host_processor_core_count": _one(per_socket),
        "host_processor_vcpu_count": _one(fp.get("cores")),
        "host_processor_frequency": f"{mhz:g} MHz" if mhz else UNKNOWN,
        "host_processor_caches": _one(fp.get("cpu_caches")),
        "host_processor_interconnect": UNKNOWN,
        "host_memory_capacity": f"{memory:g} GiB" if memory else UNKNOWN,
        "host_storage_type": UNKNOWN,
        "host_storage_capacity": UNKNOWN,
        "host_networking": link,
        "host_networking_topology": UNKNOWN,
        "host_memory_configuration": UNKNOWN,
        "accelerators_per_node": str(run.get("gpus_per_node") if gpu else 0),
        "accelerator_model_name": _one(fp.get("gpu")) if gpu else "N/A",
        "accelerator_host_interconnect": na,
        "accelerator_frequency": na,
        "accelerator_on-chip_memories": na,
        "accelerator_memory_configuration": na,
        "accelerator_memory_capacity": (
            f"{max(gpu_memory) / 1024:.0f} GiB" if gpu and gpu_memory else na
        ),
        "accelerator_interconnect": na,
        "accelerator_interconnect_topology": na,
        "cooling": UNKNOWN,
        "hw_notes": (
            f"testbed {run.get('env')}, described by hpcbench from the runs' own report of "
            "their nodes; 'unknown' where no node reports it"
            + (f"; each node may use {cpus}" if cpus else "")
        ),
        "framework": framework,
        "other_software_stack": stack or UNKNOWN,
        "operating_system": _one(fp.get("os")),
        "sw_notes": (
            f"hpcbench {_one(fp.get('hpcbench_commit'))}, workload digest "
            f"{_one(fp.get('bench_digest'))}, launcher {_one(fp.get('launcher'))}, backend "
            f"{run.get('backend')}"
            + (f", parallelism {run['parallel']}" if isinstance(run.get("parallel"), str) else "")
            + f", batch {run.get('batch')} per worker"
        ),
    }
    return {k: description[k] for k in REQUIRED}


def _safe(text: str) -> str:
    """A name for a folder and a file: letters, digits, '.', '_' and '-'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:80] or "system"


def systems(runs: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(system, benchmark) -> its ok runs with an MLPerf log, by repeat."""
    by_config: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        if r.get("status") == "ok" and isinstance(r.get("mllog"), list) and r["mllog"]:
            by_config[config_key(r)].append(r)
    named: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for key, group in sorted(by_config.items(), key=lambda kv: str(kv[0])):
        first = group[0]
        name = _safe(
            f"{first.get('env')}_n{first.get('nodes')}x{first.get('gpus_per_node')}"
            f"_{parallelism(first)}_b{first.get('batch')}"
        )
        bench = benchmark(str(first.get("model")))
        if (name, bench) in named:  # another image size, data or method: told apart
            name += "_" + hashlib.sha256(json.dumps(key, default=str).encode()).hexdigest()[:6]
        named[(name, bench)] = sorted(group, key=lambda r: r.get("repeat") or 0)
    return named


def log_text(run: dict[str, Any]) -> str:
    """A run's MLPerf log, each event written anew by the workload's own encoder, so
    that whatever text the record holds, every event is one line (bench/mllog.py); a
    line that is not one event is a ValueError naming it."""
    lines = []
    for number, line in enumerate(run["mllog"], 1):
        event = mllog.decode(line)
        if event is None:
            raise ValueError(f"line {number} of its MLPerf log is not one event")
        lines.append(mllog.encode(**{f: event[f] for f in mllog.FIELDS}) + "\n")
    return "".join(lines)


def _identity(run: dict[str, Any]) -> str:
    """What tells one run record from another: its configuration and repeat, its
    launch (time and command) and its log (whose events carry the run's own clock)."""
    fields = [run_key(run), run.get("launched_at"), run.get("command"), run.get("mllog")]
    return json.dumps(fields, default=str)


def read_runs(result_dirs: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """The runs of the results folders, each once: a folder named twice (`r`, `r/`,
    `./r`, a link to it) is read once and a run record seen twice (a copy of a store
    beside it) counted once; the lines that say so."""
    runs: dict[str, dict[str, Any]] = {}
    folders: dict[str, str] = {}
    said, twice = [], 0
    for directory in result_dirs:
        check_path(directory, "results directory")
        store = Store(directory)
        if not store.exists():
            raise UsageError(f"{store.path} not found: give a folder `scale --out` wrote")
        real = os.path.realpath(store.dir)
        if real in folders:
            said.append(f"{one_line(directory)}: the folder {one_line(folders[real])}, read once")
            continue
        folders[real] = directory
        for run in store.runs():
            twice += runs.setdefault(_identity(run), run) is not run
    if twice:
        said.append(f"{twice} run record(s) seen twice, counted once")
    return list(runs.values()), said


def _benchmark_code(folder: Path, root: Path, runs: list[dict[str, Any]]) -> None:
    """The workload's code as it is in this checkout, with a README saying whether it is
    the code the runs recorded (their bench digest)."""
    files.make_folder(folder, root)
    digest = fingerprint.bench_digest()
    recorded = sorted({str((r.get("fingerprint") or {}).get("bench_digest")) for r in runs})
    same = recorded == [digest]
    lines = [
        "# hpcbench's workload",
        "",
        "The code that trains and times each run (bench/ of hpcbench), copied from the",
        f"checkout that exported this package: workload digest {digest}.",
        "The runs recorded digest(s) "
        + ", ".join(recorded)
        + ": "
        + ("the same code." if same else "not this code; the runs' commit is in sw_notes."),
        "",
        "Each result is a throughput run in the open division: warm-up, timed windows,",
        "one evaluation on held-out samples; no quality target (docs/mlperf.md).",
    ]
    files.write_atomic(folder / "README.md", "\n".join(lines) + "\n", root=root)
    for path in sorted(paths.BENCH_DIR.glob("*")):
        if path.is_file() and path.suffix in (".py", ".json"):
            files.write_atomic(folder / path.name, path.read_bytes(), root=root)


def check_empty(out: Path) -> None:
    """The export folder must be new or empty: one line otherwise (UsageError)."""
    check_path(str(out), "--mlperf")
    if out.exists() or out.is_symlink():
        if not out.is_dir() or out.is_symlink():
            raise UsageError(f"--mlperf {out}: not a folder; give a new or empty folder")
        if any(out.iterdir()):
            raise UsageError(f"--mlperf {out}: not empty; give a new or empty folder")


def export(result_dirs: list[str], out: Path) -> list[str]:
    """The package in `out` (new or empty); lines to tell the user, each count that a
    checker will hold against it included."""
    check_empty(out)
    runs, said = read_runs(result_dirs)
    logs: dict[int, str] = {}
    left: list[str] = []  # runs whose log is not one event per line
    groups = {}
    for (system, bench), group in systems(runs).items():
        for run in group:
            try:
                logs[id(run)] = log_text(run)
            except ValueError as err:
                left.append(f"{system}/{bench}: repeat {run.get('repeat')}: {err}; left out")
        if any(id(run) in logs for run in group):
            groups[(system, bench)] = [run for run in group if id(run) in logs]
    if not groups:
        why = left[0] if left else "runs record one since hpcbench wrote them: measure anew"
        raise UsageError(f"{', '.join(result_dirs)}: no run with an MLPerf log ({why})")
    said += left
    org = out / ORG
    for (system, bench), group in groups.items():
        files.make_folder(org / "systems", out)
        described = system_description(system, group)
        text = json.dumps(described, indent=1) + "\n"
        files.write_atomic(org / "systems" / f"{system}.json", text, root=out)
        want = RESULT_FILES.get(bench)
        kept = group[:want] if want else group
        folder = org / "results" / system / bench
        files.make_folder(folder, out)
        for n, run in enumerate(kept):
            files.write_atomic(folder / f"result_{n}.txt", logs[id(run)], root=out)
        code = org / "benchmarks" / bench / "implementations" / "hpcbench"
        if not files.present(code / "README.md", out):
            _benchmark_code(code, out, group)
        if want is None:
            said.append(f"{system}/{bench}: {len(kept)} run(s); no MLPerf ruleset covers {bench}")
        elif len(group) < want:
            said.append(
                f"{system}/{bench}: {len(group)} run(s), MLPerf's {bench} wants {want}: "
                "package_checker will count this folder as an error"
            )
        else:
            said.append(
                f"{system}/{bench}: {want} run(s)"
                + (f" of {len(group)} (the first {want} by repeat)" if len(group) > want else "")
            )
    return said


def add_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="runs as an MLPerf submission package (--mlperf DIR)",
        description="The runs of results folders as an MLPerf Training submission package "
        "that mlperf-logging's checkers read (docs/mlperf.md).",
    )
    p.add_argument(
        "--mlperf",
        required=True,
        metavar="DIR",
        help="a new or empty folder for the package (the checkers: docs/mlperf.md)",
    )
    p.add_argument(
        "--out",
        action="append",
        metavar="RESULTS",
        help="a results folder to export (default: results/); give it again for more",
    )
    p.set_defaults(func=export_main)


def export_main(args: argparse.Namespace) -> int:
    lines = export(args.out or ["results"], Path(args.mlperf))
    for line in lines:
        print(line, file=sys.stderr)
    print(
        f"wrote {Path(args.mlperf) / ORG}: check it with `python -m "
        f"mlperf_logging.package_checker {Path(args.mlperf) / ORG} training {RULESET}`"
    )
    return 0
