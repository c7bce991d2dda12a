"""The scaling harness end to end on this machine: real launchers, real training.

Two CPU workers (Gloo) train a small model through horovodrun and through
torchrun; the sweep writes results, the report turns them into tables and
plots. Sizes are tiny so that the whole module takes about two minutes on two
cores; every run is bounded by the harness's --timeout.
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpcbench.measure import analysis

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SMALL = (
    "--model mobilenet_v3_small --image-size 32 --batch 8 --warmup 2 --windows 3 "
    "--steps 3 --probe-max-bytes 1M --timeout 300"
)


def _need(module: str, hint: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed: {hint}")


@pytest.fixture(autouse=True)
def _stack() -> None:
    _need("torch", "install the training stack from the wheelhouse (make tools)")
    _need("torchvision", "install the training stack from the wheelhouse (make tools)")


def hpcbench(command: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hpcbench", *shlex.split(command)],
        cwd=REPO,
        text=True,
        capture_output=True,
        timeout=timeout,
    )


def records(out: Path, kind: str) -> list[dict]:
    lines = (out / "results.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


def test_horovodrun_sweep_makes_results_and_report(tmp_path):
    _need("horovod", "install the Horovod wheel from the wheelhouse (tools/build-horovod.sh)")
    if shutil.which("horovodrun", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("horovodrun is not beside this python")
    out = tmp_path / "hvd"
    proc = hpcbench(
        f"scale --env localhost --nodes 1-2 --backend horovod --repeats 2 --out {out} {SMALL}"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "4 runs in" in proc.stderr and "0 failed" in proc.stderr

    [probe] = records(out, "probe")
    assert probe["status"] == "ok" and probe["workers"] == 2
    assert all(p["busbw"] > 0 for p in probe["results"])
    # CPU workers: the CPU work of the largest all-reduce, measured on every rank.
    work = probe["cpu_work"]
    assert work["bytes"] == 1 << 20 and work["allreduces"] >= 1 and len(work["per_rank"]) == 2
    assert all(r["wall_s"] > 0 and min(r["alone_per_s"]) > 0 for r in work["per_rank"])
    runs = records(out, "run")
    assert sorted((r["workers"], r["repeat"]) for r in runs) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    # The store holds raw measurements; the analysis derives every figure from them.
    summaries = {s.workers: s for s in analysis.summarise(runs, [probe])}
    for r in runs:
        assert not {"images_per_sec", "efficiency", "predicted_efficiency", "busbw"} & set(r)
        assert r["status"] == "ok" and r["launcher"] == "horovodrun"
        assert r["wrapped"] is (r["workers"] > 1)  # one worker trains without DistributedOptimizer
        assert r["weights_in_sync"] is True
        assert len(r["window_times"]) == 3 and len(r["rank_window_times"]) == r["workers"]
        # The slowest rank's time counts.
        assert r["window_times"] == [max(col) for col in zip(*r["rank_window_times"], strict=True)]
        stats = analysis.run_stats(r)
        assert stats["throughput"] > 0 and summaries[r["workers"]].efficiency > 0
        assert 0 < r["overhead_s"] < r["duration_s"]
        fp = r["fingerprint"]
        assert fp["horovod"] == "0.28.1" and fp["horovod_controller"] == "gloo"
        assert fp["torch"] and fp["env"] == "localhost" and len(fp["hosts"]) == r["workers"]
    two = summaries[2]
    low, high = two.predicted_efficiency_low, two.predicted_efficiency_high
    assert 0 < low <= high <= 1 and two.busbw > 0

    proc = hpcbench(f"report --out {out}")
    assert proc.returncode == 0, proc.stderr
    report = (out / "report.md").read_text()
    assert "mobilenet_v3_small, horovod, batch 8/worker" in report
    assert "| 2 | 2 | 2 |" in report  # two workers, two repeats
    # Throughput and efficiency, and where the time went (stacked bars per node count).
    pngs = sorted((out / "plots").glob("*.png"))
    assert [p.name.endswith("-time.png") for p in pngs] == [True, False]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    html = (out / "report.html").read_text()
    assert all(f'src="plots/{p.name}"' in html for p in pngs)


def _image_folder(root: Path, classes: int = 2, per_class: int = 12) -> Path:
    from PIL import Image

    for c in range(classes):
        folder = root / "train" / f"class{c}"
        folder.mkdir(parents=True)
        for i in range(per_class):
            Image.new("RGB", (40, 40), (40 * c, 7 * i, 100)).save(folder / f"{i}.png")
    return root


def test_torchrun_sweep_on_real_data_with_resume(tmp_path):
    data = _image_folder(tmp_path / "imagenet")
    out = tmp_path / "ddp"
    common = (
        f"--env localhost --nodes 2 --backend ddp --data {data} --data-workers 1 "
        f"--out {out} {SMALL}"
    )
    proc = hpcbench(f"scale --repeats 1 --no-probe {common}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = records(out, "run")
    assert sorted(r["workers"] for r in runs) == [1, 2]
    for r in runs:
        assert r["status"] == "ok" and r["launcher"] == "torchrun" and r["weights_in_sync"]
        assert 0 <= r["data_time_fraction"] < 1  # data time reported apart from compute
        assert r["fingerprint"]["torch_distributed"] == "gloo"

    # Without --resume a full store is refused; with it only the missing repeats run.
    refused = hpcbench(f"scale --repeats 2 --no-probe {common}")
    assert refused.returncode == 2 and "--resume" in refused.stderr
    proc = hpcbench(f"scale --repeats 2 --no-probe --resume {common}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 runs in" in proc.stderr
    runs = records(out, "run")
    assert sorted((r["workers"], r["repeat"]) for r in runs) == [(1, 0), (1, 1), (2, 0), (2, 1)]

    compared = hpcbench(f"compare {out} {out}")
    assert compared.returncode == 0
    assert "| mobilenet_v3_small | ddp | 8 | 2 | 2 |" in compared.stdout


def test_a_failed_run_is_recorded_and_the_sweep_goes_on(tmp_path):
    out = tmp_path / "failing"
    # Two seconds is too short to even import torch here: every run times out.
    proc = hpcbench(
        f"scale --env localhost --nodes 2 --backend ddp --repeats 1 --no-probe "
        f"--out {out} {SMALL} --timeout 2"
    )
    assert proc.returncode == 1
    assert "2 runs in" in proc.stderr and "2 failed" in proc.stderr
    runs = records(out, "run")
    assert len(runs) == 2
    assert all(r["status"] == "failed" and r["error"].startswith("timed out") for r in runs)
    proc = hpcbench(f"report --out {out}")
    assert proc.returncode == 0 and "## Failed runs" in (out / "report.md").read_text()
