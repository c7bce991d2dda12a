"""Training stack: Horovod built with PyTorch and Gloo; the benchmark code installed."""

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

EXCLUDE = {"__pycache__", ".pytest_cache"}


# What `horovodrun --check-build` marks [X], asked in one process as the stack role does
# (check_build.py says why).
CHECK_BUILD = REPO / "ansible/roles/stack/files/check_build.py"


def check_build_argv(testbed, name) -> list[str]:
    python = testbed.var("hpcbench_python", name)
    argv = [python, "-c", CHECK_BUILD.read_text()]
    if testbed.var("stack_mode", name) == "container":
        return ["docker", "exec", "hpcbench-stack", *argv]
    return argv


def test_the_one_process_check_answers_as_horovodrun_check_build_does():
    """Every framework and controller line, on this machine's venv (horovod built with
    PyTorch and Gloo, as the stack image's)."""
    python = Path(sys.executable)
    if not (python.parent / "horovodrun").exists():
        pytest.skip("no horovodrun beside this Python (pip install '.[stack]')")
    ours = subprocess.run(
        [python, CHECK_BUILD], capture_output=True, text=True, check=True, timeout=300
    ).stdout.splitlines()
    theirs = subprocess.run(
        [python.parent / "horovodrun", "--check-build"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    # Its Frameworks and Controllers sections, line by line ("[X] PyTorch").
    sections = theirs.split("Available Tensor Operations:")[0]
    marked = [line.strip() for line in sections.splitlines() if line.strip().startswith("[")]
    assert ours == marked and "[X] PyTorch" in ours and "[X] Gloo" in ours, (ours, theirs)


@pytest.fixture
def stack_enabled(testbed, name):
    if not testbed.var("enable_stack", name):
        pytest.skip("enable_stack is false: no training stack configured")


def test_horovod_has_pytorch_and_gloo(host, testbed, name, stack_enabled):
    argv = check_build_argv(testbed, name)
    with host.sudo():
        out = host.check_output(" ".join(["%s"] * len(argv)), *argv)
    assert "[X] PyTorch" in out and "[X] Gloo" in out, out


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


def test_the_stack_asks_for_gpus_as_ngc_images_do(host, testbed, name, stack_enabled):
    """enroot's nvidia hook and NVIDIA's runtime inject GPUs only into an image that
    sets these two (a .sqsh exported from it under pyxis included)."""
    with host.sudo():
        if testbed.var("stack_mode", name) == "container":
            env = host.check_output("docker inspect -f '{{json .Config.Env}}' hpcbench-stack")
        elif host.check_output("cat /proc/1/comm") == "systemd":
            # The node runs the stack image itself: its first process has its ENV.
            env = host.check_output("tr '\\0' '\\n' < /proc/1/environ")
        else:  # a job's sshd as PID 1 writes its process title over its environment
            pytest.skip(f"{name}: PID 1 is not systemd; its environment is not its image's")
    assert "NVIDIA_VISIBLE_DEVICES=all" in env, env
    assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility" in env, env
