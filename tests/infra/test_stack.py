"""Training stack: Horovod built with PyTorch and Gloo; the benchmark code installed."""

import hashlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

EXCLUDE = {"__pycache__", ".pytest_cache"}


# What `horovodrun --check-build` marks [X] for PyTorch and Gloo, asked in one process:
# it forks a process per line, each importing horovod.<framework> afresh
# (horovod/common/util.py, _check_extension_lambda; PyTorch is extension_available,
# import_module("horovod.torch"); Gloo is the first extension's gloo_built()), which took
# 25-34 s a node on the local testbed's half-core nodes against 7 s for this.
CHECK_BUILD = "import horovod.torch as hvd; print('gloo_built', hvd.gloo_built())"


def check_build_cmd(testbed, name) -> str:
    python = testbed.var("hpcbench_python", name)
    command = f'{python} -c "{CHECK_BUILD}"'
    if testbed.var("stack_mode", name) == "container":
        return f"docker exec hpcbench-stack {command}"
    return command


@pytest.fixture
def stack_enabled(testbed, name):
    if not testbed.var("enable_stack", name):
        pytest.skip("enable_stack is false: no training stack configured")


def test_horovod_has_pytorch_and_gloo(host, testbed, name, stack_enabled):
    with host.sudo():
        out = host.check_output(check_build_cmd(testbed, name))
    # Importing horovod.torch failing would have failed the command.
    assert "gloo_built True" in out, out


def test_bench_code_installed(host, testbed, name, stack_enabled):
    bench_dir = testbed.var("hpcbench_bench_dir", name)
    files = sorted(
        p
        for p in (REPO / "bench").rglob("*")
        if p.is_file() and not EXCLUDE & set(p.parts) and p.suffix != ".pyc"
    )
    if not files:
        pytest.skip("bench/ holds no files in this checkout")
    differ = []
    for p in files:  # bounded: the files of bench/
        rel = p.relative_to(REPO / "bench")
        remote = host.file(f"{bench_dir}/{rel}")
        if not remote.exists or remote.sha256sum != hashlib.sha256(p.read_bytes()).hexdigest():
            differ.append(str(rel))
    assert not differ, f"bench files missing or different on {name}: {differ}"
