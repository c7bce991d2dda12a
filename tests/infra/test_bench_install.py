"""The stack role's install of bench/ (roles/stack/tasks/bench.yml), run by Ansible
itself on this machine into a folder: the copy is exact, a second run changes nothing
and copies nothing, and a file that drifted on the node is put right, alone."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from tests.infra.test_role_inputs import play, playbook

MANIFEST = ".manifest.sha256"


def install(tmp_path: Path, src: Path, dest: Path) -> tuple[dict[str, int], list[str]]:
    """bench.yml from `src` into `dest`: the recap's counts and the files it copied."""
    task = {
        "ansible.builtin.include_role": {"name": "stack", "tasks_from": "bench"},
        "vars": {"stack_bench_src": str(src), "stack_bench_dir": str(dest)},
    }
    result = playbook(tmp_path, [{**play([task]), "gather_facts": False}])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    recap = re.search(r"localhost\s*: ok=(\d+)\s+changed=(\d+)", result.stdout)
    assert recap, result.stdout[-2000:]
    said = re.search(r"^ *msg: '?copied: (.*?)'?$", result.stdout, re.M)
    copied = said[1].split() if said else []
    return {"ok": int(recap[1]), "changed": int(recap[2])}, sorted(copied)


def manifest(src: Path, names: list[str]) -> str:
    return "".join(
        f"{hashlib.sha256((src / n).read_bytes()).hexdigest()}  {n}\n" for n in sorted(names)
    )


def test_bench_install_is_exact_and_copies_only_what_differs(tmp_path: Path) -> None:
    src, dest = tmp_path / "bench", tmp_path / "node" / "bench"
    (src / "sub").mkdir(parents=True)
    (src / "__pycache__").mkdir()
    files = {"train.py": "print('train')\n", "sub/probe.py": "X = 1\n", "util.py": "Y = 2\n"}
    for name, text in files.items():
        (src / name).write_text(text)
    (src / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"\0bytecode")

    counts, copied = install(tmp_path, src, dest)
    assert copied == sorted(files)
    assert {str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()} == {
        *files,
        MANIFEST,
    }
    assert (dest / MANIFEST).read_text() == manifest(src, list(files))
    assert all((dest / n).stat().st_mode & 0o777 == 0o644 for n in files)

    counts, copied = install(tmp_path, src, dest)
    assert counts["changed"] == 0 and copied == [], (counts, copied)

    # Drift on the node (content, mode, a stray file, a cache the node wrote itself)
    # and in bench/ (a file came), in one run; the stray stands for a file that left.
    (dest / "train.py").write_text("print('edited on the node')\n")
    (dest / "sub/probe.py").chmod(0o600)
    (dest / "stray.py").write_text("")
    (dest / "__pycache__").mkdir()
    (dest / "__pycache__" / "util.cpython-311.pyc").write_bytes(b"kept")
    (src / "sub/new.py").write_text("Z = 3\n")
    untouched = (dest / "util.py").stat().st_ino
    counts, copied = install(tmp_path, src, dest)
    assert copied == ["sub/new.py", "sub/probe.py", "train.py"], copied
    assert (dest / "train.py").read_text() == files["train.py"]
    assert (dest / "sub/probe.py").stat().st_mode & 0o777 == 0o644
    assert not (dest / "stray.py").exists()
    assert (dest / "__pycache__" / "util.cpython-311.pyc").read_bytes() == b"kept"
    assert (dest / "util.py").stat().st_ino == untouched
    assert (dest / MANIFEST).read_text() == manifest(src, [*files, "sub/new.py"])
