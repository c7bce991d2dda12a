"""hpcbench.atomic: a file written whole or not at all, never through a planted link."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

import pytest

from hpcbench import atomic


def test_a_write_replaces_the_file_and_leaves_nothing_beside_it(tmp_path: Path):
    target = tmp_path / "configurations.json"
    target.write_text("old")
    atomic.write_text(target, "new ±")
    assert target.read_text(encoding="utf-8") == "new ±"
    assert list(tmp_path.iterdir()) == [target]


def test_a_write_that_fails_midway_leaves_the_old_file(tmp_path: Path):
    target = tmp_path / "report.md"
    target.write_text("old")

    def half(f: BinaryIO) -> None:
        f.write(b"new, half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic.write_with(target, half)
    assert target.read_text() == "old" and list(tmp_path.iterdir()) == [target]


def test_a_planted_link_is_replaced_not_written_through(tmp_path: Path):
    outside, folder = tmp_path / "outside.txt", tmp_path / "results"
    folder.mkdir()
    outside.write_text("not yours")
    (folder / "throughput.png").symlink_to(outside)
    atomic.write_with(folder / "throughput.png", lambda f: f.write(b"png"))
    assert outside.read_text() == "not yours"
    assert not (folder / "throughput.png").is_symlink()
    assert (folder / "throughput.png").read_bytes() == b"png"


def test_a_long_name_still_finds_room_for_its_temporary(tmp_path: Path):
    target = tmp_path / ("e" * 251 + ".png")  # NAME_MAX: 255 bytes
    atomic.write_text(target, "x")
    assert target.read_text() == "x"


def test_a_new_file_gets_the_mode_of_any_new_file(tmp_path: Path):
    atomic.write_text(tmp_path / "a", "x")
    (tmp_path / "b").write_text("x")
    assert (tmp_path / "a").stat().st_mode == (tmp_path / "b").stat().st_mode
