"""bench/tokens.py as a script, run here: a byte-level token file made from text, and a
missing text refused in one line (the files themselves: tests/unit/test_tokens.py)."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import tokens  # noqa: E402


def test_the_script_makes_a_byte_level_file_from_text(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("héllo\n", encoding="utf-8")
    out = tmp_path / "t.tok"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "tokens.py"), str(out), str(text)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    header = tokens.read_header(out)
    assert (header.vocab, header.itemsize) == (256, 2)
    raw = out.read_bytes()[tokens.HEADER.size :]
    assert bytes(struct.unpack(f"<{header.count}H", raw)) == "héllo\n".encode()
    missing = subprocess.run(
        [sys.executable, str(REPO / "bench" / "tokens.py"), str(out), str(tmp_path / "no")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
