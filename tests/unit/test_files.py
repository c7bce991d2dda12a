"""hpcbench.files.write_atomic: whole or not at all, never through a planted link."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from hpcbench import files


def test_a_link_planted_at_the_target_is_replaced_and_its_file_untouched(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("not yours\n")
    out = tmp_path / "results"
    out.mkdir()
    (out / "report.md").symlink_to(victim)
    files.write_atomic(out / "report.md", "# report\n")
    assert victim.read_text() == "not yours\n"
    assert not (out / "report.md").is_symlink()
    assert (out / "report.md").read_text() == "# report\n"


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    target = tmp_path / "plot.png"
    target.write_bytes(b"old")

    def fails(out) -> None:
        out.write(b"half a pic")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        files.write_atomic(target, fails)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["plot.png"]


@pytest.mark.parametrize("mode", [0o600, 0o644])
def test_the_file_has_the_mode_asked_for(tmp_path: Path, mode: int) -> None:
    files.write_atomic(tmp_path / "f", b"x", mode)
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == mode
    files.write_atomic(tmp_path / "f", lambda out: out.write(b"y"), mode)
    assert (tmp_path / "f").read_bytes() == b"y"


def test_a_write_replaces_the_file_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    target = tmp_path / "configurations.json"
    target.write_text("old")
    files.write_atomic(target, "new ±")
    assert target.read_text(encoding="utf-8") == "new ±"
    assert list(tmp_path.iterdir()) == [target]


def test_a_long_name_still_finds_room_for_its_temporary(tmp_path: Path) -> None:
    target = tmp_path / ("e" * 251 + ".png")  # NAME_MAX: 255 bytes
    files.write_atomic(target, "x")
    assert target.read_text() == "x"


def test_without_a_mode_a_new_file_gets_the_mode_of_any_new_file(tmp_path: Path) -> None:
    files.write_atomic(tmp_path / "a", "x")
    (tmp_path / "b").write_text("x")
    assert (tmp_path / "a").stat().st_mode == (tmp_path / "b").stat().st_mode
