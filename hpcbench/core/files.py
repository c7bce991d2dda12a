"""The one way hpcbench opens, reads and writes a file in a results folder, its state
folder (.hpcbench, HPCBENCH_STATE) or a path the user gives (a campaign file,
--output, --calibrate-from).

Each call names the folder the user named (`root`: a results folder, the state
folder; None: the file's own folder). That folder is opened as named, a link there
being the user's own; every level below it is opened from the one above (openat(2))
with O_NOFOLLOW, so a symbolic link someone planted in any part of the path below it
(`logs -> elsewhere`, `plots -> ~`, `leases/x.json -> /dev/zero`) is never followed,
whatever changes meanwhile: a descriptor, once open, is the folder that was checked.

- A read opens with O_NONBLOCK, so a FIFO or device at the name cannot make it wait,
  then takes only a regular file (fstat), and reads at most the bound of its kind
  (`Bound`, below): a larger file is one line naming it.
- A whole-file write (`write_atomic`) makes a fresh temporary file beside the target,
  created with O_EXCL (so not a name anyone planted), and renames it over the target:
  rename(2) replaces a link, it never follows one. A reader (a browser on report.html,
  a program on configurations.json) sees the old file or the new one, never a torn
  one, and a failed or interrupted write leaves the old file as it was.
- A file opened in place (a lock, a log appended to) goes through `open_regular`,
  with the same refusals.

What someone planted is a UsageError (one line naming the path and what to do, exit
status 2); other failures (a full disk, a missing file) are the OSError of the call.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from hpcbench.core.errors import UsageError

Content = bytes | str | Callable[[BinaryIO], object]

KIB, MIB = 1024, 1024 * 1024


@dataclass(frozen=True)
class Bound:
    """The most bytes hpcbench reads of one kind of file, and what to say of a larger
    one (far above what hpcbench itself writes: a larger one was put there)."""

    most: int
    why: str


# Each kind of file hpcbench reads, and its bound.
CAMPAIGN_FILE = Bound(1_000_000, "a campaign file is a page of YAML")
RESULTS = Bound(
    256 * MIB,
    "more than any results store or journal holds (a run's record is a few kB): move "
    "it away and measure into a fresh folder",
)
LEASE = Bound(64 * KIB, "a lease is one line of JSON")
OWNER = Bound(64 * KIB, "an owner marker is one line of JSON")
CAMPAIGN_NOTE = Bound(4 * KIB, "a campaign state folder's note is one path (PATH_MAX)")
PID = Bound(64, "a lock's pid file holds one number")
SETTINGS = Bound(MIB, "settings.json holds the Terraform variables of earlier deploys")
TF_STATE = Bound(64 * MIB, "more than a testbed's Terraform state holds")
INVENTORY = Bound(4 * MIB, "more than a testbed's inventory holds")

_WALK = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_OPEN = os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def open_folder(folder: Path, root: Path | None = None, make: int | None = None) -> int:
    """A descriptor of `folder` (O_DIRECTORY). `root` (the folder the user named,
    `folder` itself or one above it; None: `folder`) is opened as named; every level
    below it without following a link: a link, a file or a FIFO there is a UsageError
    naming it. make: the mode of each missing level, created here (the root's own
    missing levels too); None: a missing level is FileNotFoundError."""
    root = folder if root is None else root
    parts = _below(folder, root)
    fd = _open_root(root, make)
    for depth, name in enumerate(parts, 1):
        fd = _step(fd, name, root.joinpath(*parts[:depth]), make)  # closes the one above
    return fd


def make_folder(folder: Path, root: Path | None = None, mode: int = 0o777) -> None:
    """`folder` and its missing levels (mkdir -p), none below `root` through a link."""
    os.close(open_folder(folder, root, make=mode))


def open_regular(
    path: Path, flags: int, mode: int = 0o600, root: Path | None = None, one_link: bool = False
) -> int:
    """A descriptor of the regular file `path`, opened with `flags` (O_CREAT makes it
    with `mode`), in blocking mode. `root`: the folder the user named (None: `path`'s
    own); `path` itself when the user named the file (a link at its name is then
    theirs, and followed). A link below `root`, or a FIFO, socket, device or folder at
    the name, is a UsageError naming it (exit status 2); so is, with one_link, a file
    of more than one name (a hard link planted to a file elsewhere: st_nlink of the
    descriptor, so no name made after the check is written through either); other
    failures are the OSError of open(2)."""
    root = path.parent if root is None else root
    named = path == root
    folder = None if named else open_folder(path.parent, root)
    try:
        fd = os.open(
            path if named else path.name,
            flags | _OPEN | (0 if named else os.O_NOFOLLOW),
            mode,
            dir_fd=folder,
        )
    except OSError as err:
        if err.errno == errno.ELOOP and not named:
            raise UsageError(_link(path, "opens")) from None
        if err.errno in (errno.ENXIO, errno.EISDIR):  # a FIFO with no reader, a socket, a folder
            raise UsageError(_not_regular(path, named)) from None
        raise
    finally:
        if folder is not None:
            os.close(folder)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(_not_regular(path, named))
        if one_link and st.st_nlink > 1:
            raise UsageError(
                f"{path} is one of {st.st_nlink} hard links to a file, which hpcbench never "
                "writes through: remove it"
            )
        os.set_blocking(fd, True)  # a regular file: ordinary I/O from here on
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bounded(path: Path, bound: Bound, root: Path | None = None) -> bytes:
    """The whole of the regular file `path` (open_regular's refusals), at most
    `bound.most` bytes: a larger file is a UsageError naming it."""
    with os.fdopen(open_regular(path, os.O_RDONLY, root=root), "rb") as f:
        check_size(path, os.fstat(f.fileno()).st_size, bound)
        data = f.read(bound.most + 1)  # it may have grown since
    check_size(path, len(data), bound)
    return data


def check_size(path: Path, size: int, bound: Bound) -> None:
    if size > bound.most:
        raise UsageError(f"{path}: over {_size(bound.most)}; {bound.why}")


def present(path: Path, root: Path | None = None) -> bool:
    """Whether anything (a link, a FIFO included) is at `path`'s name; False where a
    level of its folder is missing, or `root` is not a folder. A link or non-folder
    below `root` is a UsageError naming it."""
    root = path.parent if root is None else root
    if path == root:
        return os.path.lexists(path)
    try:
        folder = open_folder(path.parent, root)
    except (FileNotFoundError, NotADirectoryError):
        return False
    try:
        os.stat(path.name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return False
    finally:
        os.close(folder)
    return True


def names(folder: Path, root: Path | None = None) -> list[str]:
    """The names in `folder`, sorted; none where it is missing."""
    try:
        fd = open_folder(folder, root)
    except FileNotFoundError:
        return []
    try:
        return sorted(os.listdir(fd))
    finally:
        os.close(fd)


def remove(path: Path, root: Path | None = None) -> None:
    """The name `path` removed (a link itself, never what it points at); nothing there
    is no error."""
    try:
        folder = open_folder(path.parent, path.parent if root is None else root)
    except FileNotFoundError:
        return
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path.name, dir_fd=folder)
    finally:
        os.close(folder)


def write_atomic(
    path: Path,
    content: Content,
    mode: int | None = None,
    root: Path | None = None,
    only_over_a_file: bool = False,
) -> None:
    """`path` holds `content` (bytes, text as UTF-8, or what a writer puts in the
    binary file it is given, e.g. a figure's savefig), or is unchanged. `mode`: the
    file's permissions (0o600 for state that names hosts); None: what any new file
    gets (the umask's). `root`: the folder the user named (None: `path`'s own); its
    folder must exist. A link or FIFO at the name is replaced, never written through;
    with only_over_a_file (a name the user gave: their link or device is not ours to
    replace) it is refused, as a folder at the name always is."""
    root = path.parent if root is None or root == path else root
    folder = open_folder(path.parent, root)
    try:
        if only_over_a_file:
            _only_a_file(path, folder)
        tmp, fd = _new_file(path.name, folder)
        try:
            with os.fdopen(fd, "wb") as out:
                if mode is not None:
                    os.fchmod(out.fileno(), mode)
                if callable(content):
                    content(out)
                else:
                    out.write(content.encode() if isinstance(content, str) else content)
                out.flush()
                os.fsync(out.fileno())  # the data on disk before the name points at it
            try:
                os.replace(tmp, path.name, src_dir_fd=folder, dst_dir_fd=folder)
            except IsADirectoryError:
                raise UsageError(
                    f"{path} is a folder, where hpcbench writes a file: move it away"
                ) from None
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=folder)
            raise
        with contextlib.suppress(OSError):  # the rename itself on disk, where it can be
            os.fsync(folder)
    finally:
        os.close(folder)


def _only_a_file(path: Path, folder: int) -> None:
    try:
        st = os.stat(path.name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise UsageError(
            f"{path} is a symbolic link, which hpcbench never writes through: "
            "give the file's own name"
        )
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(_not_regular(path, named=True))


def _below(folder: Path, root: Path) -> tuple[str, ...]:
    parts = folder.relative_to(root).parts  # ValueError: `folder` is not in `root`
    if ".." in parts:
        raise ValueError(f"{folder}: '..' below {root}")
    return parts


def _open_root(root: Path, make: int | None) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        return os.open(root, flags)
    except FileNotFoundError:
        if make is None:
            raise
    missing = [p for p in (root, *root.parents) if not os.path.lexists(p)]
    for level in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile by another process
            os.mkdir(level, make)
    return os.open(root, flags)


def _step(parent: int, name: str, shown: Path, make: int | None) -> int:
    """The folder `name` in `parent` (which this closes), made with `make` if missing."""
    try:
        for attempt in range(2):
            try:
                return os.open(name, _WALK, dir_fd=parent)
            except FileNotFoundError:
                if make is None or attempt:
                    raise
                with contextlib.suppress(FileExistsError):  # made meanwhile: opened as any
                    os.mkdir(name, make, dir_fd=parent)
            except OSError as err:
                if err.errno not in (errno.ENOTDIR, errno.ELOOP):
                    raise
                raise UsageError(_not_folder(shown, parent, name)) from None
        raise AssertionError("unreachable")
    finally:
        os.close(parent)


def _not_folder(shown: Path, parent: int, name: str) -> str:
    try:
        is_link = stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        is_link = False
    if is_link:
        return _link(shown, "follows")
    return f"{shown} is not a folder (a file, FIFO, socket or device): move it away"


def _link(path: Path, does: str) -> str:
    return f"{path} is a symbolic link, which hpcbench never {does}: remove it"


def _not_regular(path: Path, named: bool = False) -> str:
    what = "give a file" if named else "move it away"
    return f"{path} is not a regular file (a FIFO, socket, device or folder): {what}"


def _size(most: int) -> str:
    for unit, size in (("MiB", MIB), ("KiB", KIB)):
        if most >= size and most % size == 0:
            return f"{most // size} {unit}"
    if most % 1_000_000 == 0:
        return f"{most // 1_000_000} MB"
    return f"{most} bytes"


def _new_file(name: str, folder: int) -> tuple[str, int]:
    """A file of a fresh name beside `name` in `folder`, created by this call (O_EXCL:
    a name that exists, a link included, is never opened) with the mode a new file
    gets (umask), and its descriptor, open for writing."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        # Short prefix: the temporary name must fit NAME_MAX whatever the target's length.
        tmp = f".{name[:40]}.{secrets.token_hex(4)}.tmp"
        try:
            return tmp, os.open(tmp, flags, 0o666, dir_fd=folder)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {name}")
