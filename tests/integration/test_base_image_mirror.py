"""images/base: the Debian mirror of the offline base image comes from the
host's apt sources (one-line and deb822 formats, as sources.list(5) defines
them), DEBIAN_MIRROR overrides it, and a host whose sources name no entry for
the suite is told to set DEBIAN_MIRROR."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
APT_MIRROR = REPO / "images/base/apt-mirror.sh"
BUILD = REPO / "images/base/build.sh"

# What a Debian 12 installer writes (deb822), with a site mirror in place of the default.
DEBIAN12_SOURCES = """\
Types: deb
URIs: http://mirror.example.org/debian/
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def apt_dir(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "apt"
    (root / "sources.list.d").mkdir(parents=True)
    for name, text in files.items():
        (root / name).write_text(text)
    return root


def mirror(root: Path, suite: str = "bookworm") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(APT_MIRROR), suite, str(root)], capture_output=True, text=True, timeout=30
    )


def test_deb822_debian12_default(tmp_path: Path) -> None:
    proc = mirror(apt_dir(tmp_path, {"sources.list.d/debian.sources": DEBIAN12_SOURCES}))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "http://mirror.example.org/debian\n"


def test_deb822_skips_security_disabled_and_source_stanzas(tmp_path: Path) -> None:
    text = """\
# a comment line
Types: deb
URIs: http://security.example.org/debian-security
Suites: bookworm-security
Components: main

Types: deb-src
URIs: http://src.example.org/debian
Suites: bookworm
Components: main

Types: deb
URIs: http://off.example.org/debian
Suites: bookworm
Components: main
Enabled: no

types: deb deb-src
uris:
 http://proxy.example.org:3142/debian
suites: bookworm
components: main
"""
    proc = mirror(apt_dir(tmp_path, {"sources.list.d/site.sources": text}))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "http://proxy.example.org:3142/debian\n"


def test_one_line_format_with_options_and_comments(tmp_path: Path) -> None:
    text = """\
# deb http://old.example.org/debian bookworm main
deb-src http://src.example.org/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] http://mirror.example.org/debian/ bookworm main
"""
    proc = mirror(apt_dir(tmp_path, {"sources.list": text}))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "http://mirror.example.org/debian\n"


def test_sources_list_first_then_parts_in_order(tmp_path: Path) -> None:
    root = apt_dir(
        tmp_path,
        {
            "sources.list.d/b.list": "deb http://b.example.org/debian bookworm main\n",
            "sources.list.d/a.sources": DEBIAN12_SOURCES.replace("mirror.example", "a.example"),
        },
    )
    assert mirror(root).stdout == "http://a.example.org/debian\n"
    (root / "sources.list").write_text("deb http://main.example.org/debian bookworm main\n")
    assert mirror(root).stdout == "http://main.example.org/debian\n"


def test_only_third_party_repositories_asks_for_debian_mirror(tmp_path: Path) -> None:
    root = apt_dir(
        tmp_path,
        {"sources.list.d/node.list": "deb https://node.example.org/node_20.x nodistro main\n"},
    )
    proc = mirror(root)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert "DEBIAN_MIRROR" in proc.stderr and "bookworm" in proc.stderr


def test_suite_must_match(tmp_path: Path) -> None:
    root = apt_dir(tmp_path, {"sources.list.d/debian.sources": DEBIAN12_SOURCES})
    assert mirror(root, "trixie").returncode == 1


def test_no_host_named_in_the_image_scripts() -> None:
    for script in (APT_MIRROR, BUILD):
        code = "\n".join(
            line for line in script.read_text().splitlines() if not line.lstrip().startswith("#")
        )
        assert "http://" not in code and "https://" not in code, script


@pytest.fixture
def fake_tools(tmp_path: Path) -> Path:
    """docker that finds no image and reaches no registry; debootstrap that
    records its arguments and fails, so nothing is built."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text("#!/bin/sh\nexit 1\n")
    record = tmp_path / "debootstrap.args"
    (bin_dir / "debootstrap").write_text(f'#!/bin/sh\necho "$@" > {record}\nexit 1\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return bin_dir


def build(fake_tools: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("DEBIAN_MIRROR", "APT_DIR")}
    return subprocess.run(
        [str(BUILD)],
        env={**clean, "PATH": f"{fake_tools}:{os.environ['PATH']}", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_build_debootstraps_from_the_hosts_apt_mirror(tmp_path: Path, fake_tools: Path) -> None:
    root = apt_dir(tmp_path, {"sources.list.d/debian.sources": DEBIAN12_SOURCES})
    proc = build(fake_tools, APT_DIR=str(root))
    assert proc.returncode == 1  # the fake debootstrap fails
    args = (tmp_path / "debootstrap.args").read_text().split()
    assert (args[-3], args[-1]) == ("bookworm", "http://mirror.example.org/debian")
    assert "from http://mirror.example.org/debian" in proc.stdout


def test_build_debian_mirror_overrides_apt(tmp_path: Path, fake_tools: Path) -> None:
    root = apt_dir(tmp_path, {"sources.list.d/debian.sources": DEBIAN12_SOURCES})
    proc = build(fake_tools, APT_DIR=str(root), DEBIAN_MIRROR="http://override.example.org/debian")
    assert proc.returncode == 1
    args = (tmp_path / "debootstrap.args").read_text().split()
    assert args[-1] == "http://override.example.org/debian"


def test_build_without_a_mirror_says_what_to_set(tmp_path: Path, fake_tools: Path) -> None:
    proc = build(fake_tools, APT_DIR=str(apt_dir(tmp_path, {})))
    assert proc.returncode == 2
    assert "DEBIAN_MIRROR" in proc.stderr
    assert not (tmp_path / "debootstrap.args").exists()
