"""hpcbench.core.files: whole-file writes that are whole or not at all, and reads and
writes that never go through a link below the folder the user named, never wait on
a FIFO, and read no more than their kind's bound."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcbench.core import files
from hpcbench.core.errors import UsageError


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


# ------------------------------------------------------------------- the opener
# Every read and write below the folder the user named (`root`) walks it a level at a
# time, never through a link; none waits on a FIFO; a read stops at its kind's bound.
LEVELS = ["a", "a/b", "a/b/c"]


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    """root/a/b/c/f, and an empty folder outside root."""
    root = tmp_path / "root"
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "a" / "b" / "c" / "f").write_text("inside\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    return root, outside


def _everything_under(folder: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None
        for p in sorted(folder.rglob("*"))
    }


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("planted", ["link", "fifo"])
def test_no_call_goes_through_a_link_or_a_fifo_at_any_level_below_the_root(
    tmp_path: Path, level: str, planted: str
) -> None:
    root, outside = _tree(tmp_path)
    where = root / level
    # What was there moves outside: a call that followed the link would work, there.
    where.rename(outside / where.name)
    if planted == "link":
        where.symlink_to(outside / where.name)
        says = f"{where} is a symbolic link, which hpcbench never follows"
    else:
        os.mkfifo(where)
        says = f"{where} is not a folder"
    before = _everything_under(outside)
    f = root / "a" / "b" / "c" / "f"
    calls = [
        lambda: files.read_bounded(f, files.LEASE, root),
        lambda: files.open_regular(f, os.O_WRONLY | os.O_APPEND | os.O_CREAT, root=root),
        lambda: files.write_atomic(f, "new\n", root=root),
        lambda: files.make_folder(f.parent / "d", root),
        lambda: files.present(f, root),
        lambda: files.names(f.parent, root),
        lambda: files.remove(f, root),
    ]
    for call in calls:
        with pytest.raises(UsageError, match=re.escape(says)):
            call()
    assert _everything_under(outside) == before


def test_the_folder_the_user_named_may_itself_be_a_link(tmp_path: Path) -> None:
    root, _ = _tree(tmp_path)
    named = tmp_path / "named"
    named.symlink_to(root)  # the user's own: `--out results` where results -> /scratch/r
    f = named / "a" / "b" / "c" / "f"
    assert files.read_bounded(f, files.LEASE, named) == b"inside\n"
    files.write_atomic(f, "new\n", root=named)
    assert (root / "a" / "b" / "c" / "f").read_text() == "new\n"
    files.make_folder(named / "x" / "y", named)
    assert (root / "x" / "y").is_dir()


def test_a_file_the_user_named_may_be_a_link_but_never_a_fifo(tmp_path: Path) -> None:
    real = tmp_path / "real.yaml"
    real.write_text("name: t\n")
    link = tmp_path / "latest.yaml"
    link.symlink_to(real)
    assert files.read_bounded(link, files.CAMPAIGN_FILE, root=link) == b"name: t\n"
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match=f"{fifo} is not a regular file .*: give a file"):
        files.read_bounded(fifo, files.CAMPAIGN_FILE, root=fifo)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=st.binary(max_size=300), most=st.integers(min_value=0, max_value=300))
def test_a_read_gives_the_file_whole_up_to_its_bound_and_refuses_a_larger_one(
    tmp_path: Path, content: bytes, most: int
) -> None:
    path = tmp_path / "f"
    files.write_atomic(path, content, root=tmp_path)
    bound = files.Bound(most, "a test file is short")
    if len(content) <= most:
        assert files.read_bounded(path, bound, tmp_path) == content
    else:
        with pytest.raises(UsageError, match=f"^{re.escape(str(path))}: over .*; a test file"):
            files.read_bounded(path, bound, tmp_path)


def test_a_read_never_takes_more_than_its_bound_of_a_file_that_grows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 10)
    real_fstat = os.fstat

    def smaller(fd: int) -> os.stat_result:  # the size it had when opened: under the bound
        st = real_fstat(fd)
        return os.stat_result((*st[:6], 5, *st[7:]))

    monkeypatch.setattr(files.os, "fstat", smaller)
    with pytest.raises(UsageError, match="over 8 bytes"):
        files.read_bounded(path, files.Bound(8, "short"), tmp_path)


def test_the_bounds_are_stated_in_units(tmp_path: Path) -> None:
    path = tmp_path / "owner.json"
    with path.open("wb") as f:
        f.truncate(files.OWNER.most + 1)  # sparse: its size alone refuses it
    with pytest.raises(UsageError, match=r"owner.json: over 64 KiB; an owner marker"):
        files.read_bounded(path, files.OWNER, tmp_path)


@pytest.mark.parametrize("planted", ["link", "fifo"])
def test_a_name_the_user_gave_for_output_is_written_only_over_a_file(
    tmp_path: Path, planted: str
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("not yours\n")
    out = tmp_path / "out.md"
    if planted == "link":
        out.symlink_to(victim)
    else:
        os.mkfifo(out)
    with pytest.raises(UsageError, match=f"{out} is (a symbolic link|not a regular file)"):
        files.write_atomic(out, "# report\n", only_over_a_file=True)
    assert victim.read_text() == "not yours\n"
    assert out.is_symlink() or stat.S_ISFIFO(out.lstat().st_mode)
    out.unlink()
    out.write_text("old")
    files.write_atomic(out, "# report\n", only_over_a_file=True)
    assert out.read_text() == "# report\n"


def test_a_folder_at_a_name_written_is_one_line_and_left_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "report.md").mkdir()
    with pytest.raises(UsageError, match="report.md is a folder, where hpcbench writes a file"):
        files.write_atomic(tmp_path / "report.md", "x")
    assert (tmp_path / "report.md").is_dir() and list(tmp_path.iterdir()) == [
        tmp_path / "report.md"
    ]


def test_removing_a_link_removes_the_link_not_what_it_points_at(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("not yours\n")
    (tmp_path / "leases").mkdir()
    (tmp_path / "leases" / "x.json").symlink_to(victim)
    files.remove(tmp_path / "leases" / "x.json", tmp_path)
    files.remove(tmp_path / "leases" / "gone.json", tmp_path)  # nothing there: no error
    assert victim.read_text() == "not yours\n" and list((tmp_path / "leases").iterdir()) == []


def test_missing_levels_are_made_with_the_mode_asked_for(tmp_path: Path) -> None:
    files.make_folder(tmp_path / "new" / "a" / "b", tmp_path / "new", 0o700)
    for level in ("new", "new/a", "new/a/b"):
        assert stat.S_IMODE((tmp_path / level).stat().st_mode) == 0o700, level
    assert files.names(tmp_path / "new", tmp_path) == ["a"]
    assert files.names(tmp_path / "none", tmp_path) == []
    assert not files.present(tmp_path / "none" / "f", tmp_path)


def test_a_path_that_leaves_the_root_is_a_mistake_of_the_caller(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        files.open_folder(tmp_path / "a" / ".." / "b", tmp_path)
    with pytest.raises(ValueError):
        files.open_folder(Path("/etc"), tmp_path)
