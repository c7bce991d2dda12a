"""`hpcbench export --mlperf DIR` checked by MLCommons' own checkers, run here:
package_checker reads the package, system_desc_checker each system's description
(the export itself: tests/unit/test_mlperf.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hpcbench import cli
from hpcbench.reports import mlperf
from tests.unit.test_mlperf import logged_run, store_of

pytestmark = pytest.mark.integration
pytest.importorskip("mlperf_logging")


def checker(module: str, *args: str, log: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", f"mlperf_logging.{module}", *args, "--log_output", str(log)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_exported_package_passes_package_checker_and_system_desc_checker(tmp_path, capsys):
    runs = [logged_run("resnet50", r) for r in range(5)]
    runs += [logged_run("resnet50", r, nodes=2) for r in range(5)]
    out = tmp_path / "package"
    assert cli.main(["export", "--mlperf", str(out), "--out", str(store_of(tmp_path, runs))]) == 0
    err = capsys.readouterr().err
    assert "vw_n1x1_horovod_b32/resnet: 5 run(s)" in err
    org = out / "hpcbench"
    assert sorted(
        p.name for p in (org / "results" / "vw_n2x1_horovod_b32" / "resnet").iterdir()
    ) == [f"result_{n}.txt" for n in range(5)]
    assert (org / "benchmarks" / "resnet" / "implementations" / "hpcbench" / "train.py").is_file()

    done = checker("package_checker", str(org), "training", "4.0.0", log=tmp_path / "pc.log")
    said = done.stdout + done.stderr
    assert "PACKAGE CHECKER FOUND NO ERRORS, SUCCESS !" in said, said[-3000:]
    assert not [line for line in said.splitlines() if line.startswith(("ERROR", "WARNING"))]

    for description in sorted((org / "systems").glob("*.json")):
        fields = json.loads(description.read_text())
        assert list(fields) == list(mlperf.REQUIRED) and len(fields) == 33
        assert all(isinstance(v, str) for v in fields.values())
        assert fields["status"] == "Research, Development, or Internal (RDI)"
        assert fields["host_processors_per_node"] == "2"
        assert fields["host_processor_core_count"] == "64"
        assert fields["host_memory_capacity"] == "503.6 GiB"
        done = checker(
            "system_desc_checker", str(description), "training", "4.0.0", log=tmp_path / "sd.log"
        )
        said = done.stdout + done.stderr
        assert "System description checker passed" in said, said
        assert not [line for line in said.splitlines() if line.startswith("ERROR")]


def test_system_desc_checker_exits_0_on_an_error_so_its_output_is_read(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"submitter": "x", "status": "available"}))
    done = checker("system_desc_checker", str(broken), "training", "4.0.0", log=tmp_path / "l")
    said = (done.stdout + done.stderr).splitlines()
    assert done.returncode == 0 and any(line.startswith("ERROR -") for line in said)
