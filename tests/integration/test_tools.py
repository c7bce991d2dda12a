"""tools/: the build scripts that fetch code refuse what does not match its pin."""

import functools
import http.server
import subprocess
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_providers_refuse_a_module_zip_that_does_not_match_its_pinned_sha256(tmp_path):
    # A stand-in for the Go module proxy on loopback that serves a tampered zip
    # for every module the script asks for.
    served = tmp_path / "proxy"
    for line in (REPO / "tools" / "providers.sh").read_text().splitlines():
        parts = line.strip().strip('"').split()
        if len(parts) == 6 and parts[2].startswith("github.com/"):
            zip_path = served / parts[2] / "@v" / f"{parts[3]}.zip"
            zip_path.parent.mkdir(parents=True)
            zip_path.write_bytes(b"PK\x05\x06" + b"\0" * 18)  # an empty, valid zip
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        proc = subprocess.run(
            ["bash", str(REPO / "tools" / "providers.sh")],
            env={
                "PATH": "/usr/local/go/bin:/usr/bin:/bin",
                "TOOLS_DIR": str(tmp_path / "tools"),
                "GOPROXY_URL": f"http://127.0.0.1:{server.server_port}",
            },
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        server.shutdown()
    assert proc.returncode != 0
    assert "does not match its pinned sha256" in proc.stderr
    assert not list((tmp_path / "tools").rglob("terraform-provider-*"))  # nothing built
    assert not (tmp_path / "tools" / "tofurc").exists()


def _enroot_pyxis(tmp_path: Path, vendor: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(REPO / "tools" / "enroot-pyxis.sh")],
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "VENDOR_DIR": str(vendor),
            "OUT": str(tmp_path / "out"),
            "SLURM_VERSION": "22.05.8-4+deb12u3",  # no node image asked
        },
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_enroot_and_pyxis_sources_that_do_not_match_their_pins_stop_the_build(tmp_path):
    """A release archive that differs from tools/enroot-pyxis.sha256, both as the file
    and as the tar inside it, is refused in one line (exit 2), before anything builds."""
    vendor = tmp_path / "vendor"
    (vendor / "enroot-4.1.2").mkdir(parents=True)
    (vendor / "enroot-4.1.2" / "Makefile").write_text("all:\n\ttouch /tmp/pwned\n")
    for name in ("enroot-4.1.2", "pyxis-0.24.0"):
        subprocess.run(
            ["tar", "-czf", str(vendor / f"{name}.tar.gz"), "-C", str(vendor), "enroot-4.1.2"],
            check=True,
        )
    proc = _enroot_pyxis(tmp_path, vendor)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "matches neither its pinned sum" in lines[0], lines
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_a_missing_release_archive_is_named(tmp_path):
    proc = _enroot_pyxis(tmp_path, tmp_path / "empty")
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("enroot-pyxis: VENDOR_DIR=") and "has no" in proc.stderr


def _build_horovod(wheelhouse: Path, path: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["/bin/bash", str(REPO / "tools" / "build-horovod.sh")],
        env={"PATH": path, "WHEELHOUSE": str(wheelhouse), "HOME": str(wheelhouse), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_horovod_wheel_built_without_mpi_is_built_again_and_kept_until_it_can_be(tmp_path):
    """The wheel cache says how its wheel was built: a Gloo-only wheel of the same
    version (an older cache) is not taken for the Gloo+MPI one; where Open MPI's
    headers are missing the build stops in one line (exit 2) and keeps the old wheel."""
    wheel = tmp_path / "horovod-0.28.1-cp311-cp311-linux_x86_64.whl"
    wheel.write_text("an older build")
    stamp = tmp_path / ".horovod-0.28.1.flavour"
    stamp.write_text("gloo\n")
    bare = tmp_path / "bin"  # bash's tools, no mpicxx
    bare.mkdir()
    for tool in ("ls", "cat", "rm", "mkdir", "dirname"):
        (bare / tool).symlink_to(subprocess.check_output(["which", tool], text=True).strip())
    proc = _build_horovod(tmp_path, str(bare))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "libopenmpi-dev" in lines[0] and "MPI=0" in lines[0], lines
    assert wheel.read_text() == "an older build"
    # Asked for what it was built with, the same wheel is taken as it is.
    proc = _build_horovod(tmp_path, str(bare), MPI="0")
    assert proc.returncode == 0 and "present" in proc.stdout, proc.stdout + proc.stderr
    stamp.write_text("gloo+mpi\n")
    proc = _build_horovod(tmp_path, str(bare))
    assert proc.returncode == 0 and "(gloo+mpi): present" in proc.stdout, proc.stdout + proc.stderr
