"""tools/: the build scripts that fetch code refuse what does not match its pin."""

import functools
import http.server
import subprocess
import threading
from pathlib import Path

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
