"""torchrun's store and horovodrun's Gloo rendezvous, started as the launchers start
them (bench/bind_rendezvous.py), listen on the run's address only.

Two ranks on this machine (loopback) each look, while their launcher's rendezvous is
up, at what listens on its port (/proc/net/tcp and tcp6, as `ss -ltn` reads them) and
try it at 127.0.0.2, which reaches only a socket bound to every interface. Without the
wrapper both listened on every interface: torchrun's store on ::, horovodrun's on
0.0.0.0 (tests/unit/test_rendezvous_binding.py). Each run takes a few seconds.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from hpcbench.core import paths
from hpcbench.launchers import Placement, RunSpec
from hpcbench.launchers.base import free_port
from hpcbench.launchers.horovodrun import HorovodrunLauncher
from hpcbench.launchers.torchrun import TorchrunLauncher
from hpcbench.schedulers import ProcessScheduler

pytestmark = pytest.mark.integration

WORKER = """
import json, os, socket
from pathlib import Path
port = int(os.environ.get("HOROVOD_GLOO_RENDEZVOUS_PORT") or os.environ["MASTER_PORT"])
rows = [r.split() for t in ("/proc/net/tcp", "/proc/net/tcp6")
        for r in Path(t).read_text().splitlines()[1:]]
listening = sorted({r[1].split(":")[0] for r in rows
                    if r[3] == "0A" and int(r[1].split(":")[1], 16) == port})
try:
    socket.create_connection(("127.0.0.2", port), timeout=5).close()
    elsewhere = True
except OSError:
    elsewhere = False
record = json.dumps({"listening": listening, "elsewhere": elsewhere})
# One write: torchrun runs its workers unbuffered (python -u), where print's text and
# its newline are two writes that the other rank's line can land between.
os.write(1, f"HPCBENCH_RESULT {record}\\n".encode())
"""
# 127.0.0.1 as /proc/net/tcp writes it (little-endian hex): not 00000000 (0.0.0.0) or
# 32 zeros (::).
LOOPBACK = "0100007F"


def _spec(tmp_path: Path) -> RunSpec:
    for script in ("leash.py", "bind_rendezvous.py"):
        shutil.copy(paths.BENCH_DIR / script, tmp_path)
    (tmp_path / "worker.py").write_text(WORKER)
    return RunSpec(
        script="worker.py",
        args=(),
        python=sys.executable,
        workdir=str(tmp_path),
        placements=(Placement("localhost", 2),),
        master_addr="127.0.0.1",
        master_port=free_port(),
        iface="lo",
    )


def test_torchruns_store_listens_on_the_master_address_only(tmp_path: Path) -> None:
    pytest.importorskip("torch.distributed.run")
    out = ProcessScheduler(TorchrunLauncher()).run(_spec(tmp_path), timeout_s=60)
    assert out.ok, out.error()
    assert out.records == [{"listening": [LOOPBACK], "elsewhere": False}] * 2


def test_horovodruns_rendezvous_listens_on_the_address_its_ranks_get_only(
    tmp_path: Path,
) -> None:
    util = pytest.importorskip("horovod.common.util")
    if not util.gloo_built():
        pytest.skip("this Horovod has no Gloo")
    out = ProcessScheduler(HorovodrunLauncher()).run(_spec(tmp_path), timeout_s=60)
    assert out.ok, out.error()
    assert out.records == [{"listening": [LOOPBACK], "elsewhere": False}] * 2
