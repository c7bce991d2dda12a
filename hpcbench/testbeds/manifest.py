"""The manifest of bench/: which workload a node holds.

The Ansible stack role copies bench/ to every node at deploy time (the one
path by which the workload reaches them) and writes `.manifest.sha256` beside
it, one `<sha256>  <relative path>` line per file sorted by path, as
`sha256sum` prints. Before a sweep the harness computes the same manifest
from this checkout's bench/ and refuses nodes whose manifest differs.
"""

from __future__ import annotations

import hashlib
import io
import shlex
import tarfile
from pathlib import Path

MANIFEST_FILE = ".manifest.sha256"


def included(relative: Path) -> bool:
    """Every file except caches and the manifest itself (as the stack role writes it)."""
    return "__pycache__" not in relative.parts and relative != Path(MANIFEST_FILE)


def compute(bench_dir: Path) -> dict[str, str]:
    """Relative path -> SHA-256 of each file under bench_dir."""
    digests = {}
    for path in bench_dir.rglob("*"):
        relative = path.relative_to(bench_dir)
        if path.is_file() and included(relative):
            digests[relative.as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return dict(sorted(digests.items()))


def render(digests: dict[str, str]) -> str:
    return "".join(f"{digest}  {path}\n" for path, digest in sorted(digests.items()))


def parse(text: str) -> dict[str, str]:
    """A manifest's lines back into path -> digest; `./` prefixes and blank lines ignored."""
    digests = {}
    for line in text.splitlines():
        digest, sep, path = line.strip().partition("  ")
        if sep:
            digests[path.removeprefix("./")] = digest.lower()
    return digests


def matches(expected: dict[str, str], text: str) -> bool:
    """Whether a node's manifest names the same files with the same contents.

    A missing manifest reads as empty and never matches a checkout's bench/.
    """
    return parse(text) == expected


def pack(bench_dir: Path) -> bytes:
    """bench/ as a tar stream (the files the manifest names, and the manifest), for a
    node that has no copy yet (a Slurm cluster's login node)."""
    digests = compute(bench_dir)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for relative in digests:
            tar.add(bench_dir / relative, arcname=relative, recursive=False)
        text = render(digests).encode()
        info = tarfile.TarInfo(MANIFEST_FILE)
        info.size, info.mode = len(text), 0o644
        tar.addfile(info, io.BytesIO(text))
    return buffer.getvalue()


def unpack_command(bench_dir: str, *also: str) -> str:
    """The shell line that unpacks pack()'s stream into bench_dir, replacing what was
    there only once the new copy is whole, and makes the folders `also` names."""
    new, q = f"{bench_dir}.new", shlex.quote
    folders = " ".join(q(d) for d in also if d)
    return (
        f"set -e; mkdir -p {q(new)} {folders}; rm -rf {q(new)}; mkdir -p {q(new)}; "
        f"tar -C {q(new)} -xf -; rm -rf {q(bench_dir)}; "
        f"mv {q(new)} {q(bench_dir)}"
    )
