"""Horovod is built with MPI beside Gloo: a rank takes MPI's controller only when an MPI
launcher started it (srun --mpi=pmix, mpirun); one started directly takes Gloo's, as
before MPI was built in (bench/runtime.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("horovod.torch")

# A rank started as the local launcher starts it: no launcher variables at all.
PROBE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import runtime
comm = runtime.HorovodComm()
h = comm.hvd
print(json.dumps({"size": comm.size, "gloo": h.gloo_enabled(), "mpi": h.mpi_enabled(),
                  "mpi_built": bool(h.mpi_built())}))
comm.shutdown()
"""


def probe(env: dict[str, str]) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(REPO / "bench")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def clean_env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HOROVOD_", "OMPI_", "PMIX_", "PMI_"))
    }


def test_a_rank_started_directly_takes_gloo_even_where_mpi_is_built() -> None:
    got = probe(clean_env())
    assert got["mpi_built"], "the stack's Horovod is built with MPI (tools/build-horovod.sh)"
    assert got == {"size": 1, "gloo": True, "mpi": False, "mpi_built": True}


def test_a_controller_asked_for_is_kept() -> None:
    got = probe({**clean_env(), "HOROVOD_CONTROLLER": "mpi", "HOROVOD_CPU_OPERATIONS": "mpi"})
    assert got["mpi"] and not got["gloo"] and got["size"] == 1
