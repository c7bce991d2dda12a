"""MLCommons' checkers on real runs made here: five ResNet-50 runs on this machine's CPU
through the harness (one worker, batch 2, two timed windows of one step: the smallest
run that still trains, times windows and evaluates), exported with `export --mlperf`.
The compliance checker (training rules 4.0.0, open division) says SUCCESS on a run's
log, package_checker finds no error in the package, system_desc_checker no ERROR in
the system's description. About a minute on two cores."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
pytest.importorskip("torch")
pytest.importorskip("torchvision")
pytest.importorskip("mlperf_logging")

REPO = Path(__file__).resolve().parents[2]
RUNS = (
    "scale --env localhost --nodes 1 --model resnet50 --batch 2 --warmup 0 --windows 2 "
    "--steps 1 --min-window-s 0 --repeats 5 --max-repeats 5 --device cpu --timeout 300"
)


def run(argv: list[str], timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=REPO, text=True, capture_output=True, timeout=timeout)


def checker(module: str, *args: str, log: Path) -> list[str]:
    done = run([sys.executable, "-m", f"mlperf_logging.{module}", *args, "--log_output", str(log)])
    return (done.stdout + done.stderr).splitlines()


def test_resnet50_runs_here_pass_the_mlcommons_checkers(tmp_path):
    out = tmp_path / "results"
    made = run([sys.executable, "-m", "hpcbench", *shlex.split(RUNS), "--out", str(out)])
    assert made.returncode == 0, made.stderr[-3000:]
    package = tmp_path / "package"
    exported = run(
        [sys.executable, "-m", "hpcbench", "export", "--mlperf", str(package), "--out", str(out)]
    )
    assert exported.returncode == 0, exported.stderr[-3000:]
    org = package / "hpcbench"
    [system] = [p.stem for p in (org / "systems").glob("*.json")]
    results = sorted((org / "results" / system / "resnet").glob("result_*.txt"))
    assert len(results) == 5

    said = checker(
        "compliance_checker",
        "--usage",
        "training",
        "--ruleset",
        "4.0.0",
        str(results[0]),
        log=tmp_path / "cc.log",
    )
    assert said[-1] == "INFO - SUCCESS", "\n".join(said[-40:])

    said = checker("package_checker", str(org), "training", "4.0.0", log=tmp_path / "pc.log")
    assert any("PACKAGE CHECKER FOUND NO ERRORS, SUCCESS" in line for line in said), said[-40:]
    assert not [line for line in said if line.startswith("ERROR")]

    description = org / "systems" / f"{system}.json"
    said = checker(
        "system_desc_checker", str(description), "training", "4.0.0", log=tmp_path / "sd.log"
    )
    assert not [line for line in said if line.startswith("ERROR")], said
    fields = json.loads(description.read_text())
    assert fields["number_of_nodes"] == "1" and fields["accelerators_per_node"] == "0"
    assert fields["operating_system"] != "unknown"

    # The runs' energy: RAPL where this machine lets it be read, else why not.
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    energy = [r["energy"]["rapl"] for r in records if r.get("kind") == "run"]
    assert all("joules" in e or e["unknown"] for e in energy)
