"""Files planted in a results folder cannot be turned against a campaign: a link
where hpcbench writes is never written through, a FIFO where it reads or locks
never makes it wait, and each is refused in one line naming it (exit status 2)."""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcbench import cli
from hpcbench.campaign import console
from hpcbench.core import files, locks, paths
from hpcbench.core.errors import UsageError
from hpcbench.measure import sweep
from tests.unit.test_campaign import Fakes, base

TIMEOUT_S = 20  # a hang fails the test instead of stopping the suite


@pytest.fixture(autouse=True)
def no_hang() -> Iterator[None]:
    """An open that waits on a FIFO fails the test after TIMEOUT_S (SIGALRM interrupts
    the open), rather than stopping the suite."""

    def late(signum: int, frame: object) -> None:  # not an OSError, which code may catch
        pytest.fail(f"still waiting after {TIMEOUT_S} s")

    before = signal.signal(signal.SIGALRM, late)
    signal.alarm(TIMEOUT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim"
    path.write_text("not yours\n")
    return path


# ------------------------------------------------------------ the one helper
@pytest.mark.parametrize(
    "flags", [os.O_RDONLY, os.O_WRONLY | os.O_APPEND | os.O_CREAT], ids=["read", "append"]
)
def test_open_regular_refuses_a_link_a_fifo_and_a_folder(
    tmp_path: Path, victim: Path, flags: int
) -> None:
    link, fifo, folder = tmp_path / "link", tmp_path / "fifo", tmp_path / "folder"
    link.symlink_to(victim)
    os.mkfifo(fifo)
    folder.mkdir()
    with pytest.raises(UsageError, match=f"{link} is a symbolic link"):
        files.open_regular(link, flags)
    for path in (fifo, folder):  # a FIFO with no writer (or reader) would block the open
        with pytest.raises(UsageError, match=f"{path} is not a regular file"):
            files.open_regular(path, flags)
    assert victim.read_text() == "not yours\n"
    fd = files.open_regular(victim, flags)
    try:
        assert os.get_blocking(fd)
    finally:
        os.close(fd)


# ----------------------------------------------------------------- the lock
def test_a_link_at_the_pid_file_is_replaced_never_written_through(
    tmp_path: Path, victim: Path
) -> None:
    lock = tmp_path / ".lock"
    locks.pid_file(lock).symlink_to(victim)
    fd = locks.hold_as_process(lock, "busy")
    try:
        assert victim.read_text() == "not yours\n"
        pid_file = locks.pid_file(lock)
        assert not pid_file.is_symlink() and pid_file.read_text() == f"{os.getpid()}\n"
        assert locks.holder(lock) == os.getpid()
    finally:
        os.close(fd)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_fifo_at_the_pid_file_is_replaced_without_waiting(tmp_path: Path) -> None:
    lock = tmp_path / ".lock"
    os.mkfifo(locks.pid_file(lock))
    fd = locks.hold_as_process(lock, "busy")
    try:
        assert locks.pid_file(lock).read_text() == f"{os.getpid()}\n"
    finally:
        os.close(fd)


def test_a_fifo_at_the_pid_file_of_a_held_lock_is_refused_when_read(tmp_path: Path) -> None:
    lock = tmp_path / ".lock"
    fd = locks.hold(lock, "busy")
    try:
        os.mkfifo(locks.pid_file(lock))
        with pytest.raises(UsageError, match=r"\.lock\.pid is not a regular file"):
            locks.holder(lock)
    finally:
        os.close(fd)


# ------------------------------------------------------------------ the logs
def test_a_link_at_a_testbeds_log_is_refused_before_anything_is_created(
    tmp_path: Path, victim: Path, fakes: Fakes, capfd: pytest.CaptureFixture[str]
) -> None:
    path = base(tmp_path)
    logs = tmp_path / "out" / "logs"
    logs.mkdir(parents=True)
    (logs / "b.log").symlink_to(victim)
    assert cli.main(["campaign", "run", str(path)]) == 2
    err = capfd.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last.startswith("hpcbench: error: ") and "Traceback" not in err, err
    assert f"{logs / 'b.log'} is a symbolic link" in last
    assert victim.read_text() == "not yours\n"
    assert [c for c in fakes.calls if c[0] != "check"] == []  # nothing deployed


def test_a_link_planted_at_the_log_during_a_run_still_lets_the_destroy_run(
    tmp_path: Path,
    victim: Path,
    fakes: Fakes,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = base(tmp_path)
    log = tmp_path / "out" / "logs" / "a.log"
    events = fakes.sweep

    def planted_then_sweep(*args: Any) -> Generator[sweep.Event, None, int]:
        if not log.is_symlink():  # testbed a's first sweep: the link appears mid-run
            log.unlink()
            log.symlink_to(victim)
        return (yield from events(*args))

    # The campaign iterates the sweep's events; monkeypatch puts them back after.
    monkeypatch.setattr(sweep, "events", planted_then_sweep)
    cli.main(["campaign", "run", str(path)])
    err = capfd.readouterr().err
    assert ("destroy", "a") in fakes.calls and fakes.held() == []
    assert f"destroy: its output is not kept: {log} is a symbolic link" in err
    assert victim.read_text() == "not yours\n"


def test_lines_for_a_log_never_go_through_a_link(tmp_path: Path, victim: Path) -> None:
    link = tmp_path / "logs" / "a.log"
    link.parent.mkdir()
    link.symlink_to(victim)
    assert not console.append_lines(link, ["STILL HELD: machines"])
    assert victim.read_text() == "not yours\n"
    with pytest.raises(UsageError, match="is a symbolic link"), console.logged(link):
        pass
    with console.logged(link, must_run=True) as refused:
        print("destroying")
    assert refused is not None and str(link) in refused
    assert victim.read_text() == "not yours\n"


# ------------------------------------------- every name, every command, one table
# A results folder (R, with R2 beside it for compare), a campaign's out folder (O)
# and its testbeds' state (S, HPCBENCH_STATE; C is the campaign's folder there), as
# the commands leave them; then a link, a FIFO or an oversized file at one name that
# hpcbench reads or writes there. A link leads to what was at the name, moved out of
# the folder, so that a command following it would work, and write, outside.
COMMANDS = {
    "report": ["report", "--out", "{R}"],
    "export": ["report", "--out", "{R}", "--format", "json"],
    "compare": ["compare", "{R}", "{R2}", "--output", "{T}/comparison.md"],
    "scale --resume": [
        *("scale", "--env", "localhost", "--nodes", "1", "--batch", "32"),
        *("--repeats", "1", "--resume", "--dry-run", "--out", "{R}"),
    ],
    "checks": ["campaign", "plan", "{F}", "--calibrate-from", "{R}"],
    "plan": ["campaign", "plan", "{F}"],
    "status": ["campaign", "status", "{F}"],
    "campaign report": ["campaign", "report", "{F}"],
    "destroy": ["campaign", "destroy", "{F}"],
}
BOUNDS = {
    "results.jsonl": files.RESULTS,
    "owner.json": files.OWNER,
    "terraform.tfstate": files.TF_STATE,
    "job.json": files.LEASE,
}
REFUSED, KEPT_ON = "refused", "goes on"  # exit 2 in one line naming it; exit 0 as documented
SAYS = {  # what the line says was found
    "link": "is a symbolic link",
    "fifo": r"is not a (regular file|folder)",
    "big": r": over \d+ [KM]iB",
}


STORE_READERS = ("report", "export", "compare", "scale --resume", "checks")
JOURNAL_READERS = ("plan", "status", "campaign report", "destroy")
TESTBED_READERS = ("plan", "campaign report")
STATE_READERS = ("status", "destroy")
TABLE = [  # where, the commands that read or write there, the outcome, what is planted
    ("R/results.jsonl", STORE_READERS, REFUSED, ("link", "fifo", "big")),
    ("R/plots", ("report",), REFUSED, ("link", "fifo")),
    ("O/results.jsonl", JOURNAL_READERS, REFUSED, ("link", "fifo", "big")),
    ("O/.lock", ("status", "destroy"), REFUSED, ("link", "fifo")),
    ("O/a", TESTBED_READERS, REFUSED, ("link", "fifo")),
    ("O/a/results.jsonl", TESTBED_READERS, REFUSED, ("link", "fifo", "big")),
    ("O/logs", ("destroy",), KEPT_ON, ("link", "fifo")),
    ("O/logs/a.log", ("destroy",), KEPT_ON, ("link", "fifo")),
    ("S/campaigns", STATE_READERS, REFUSED, ("link", "fifo")),
    ("C", STATE_READERS, REFUSED, ("link", "fifo")),
    ("C/owner.json", STATE_READERS, REFUSED, ("link", "fifo", "big")),
    ("C/a", STATE_READERS, REFUSED, ("link", "fifo")),
    ("C/a/local", STATE_READERS, REFUSED, ("link", "fifo")),
    ("C/a/local/terraform.tfstate", STATE_READERS, REFUSED, ("link", "fifo", "big")),
    ("C/a/local/leases", STATE_READERS, KEPT_ON, ("link", "fifo")),
    ("C/a/local/leases/job.json", STATE_READERS, KEPT_ON, ("link", "fifo", "big")),
]


def _cases() -> Iterator[tuple[str, str, str, str]]:
    """(command, where/name, what is planted, outcome)."""
    for name, commands, outcome, planted in TABLE:
        for command in commands:
            for kind in planted:
                yield command, name, kind, outcome


class World:
    """The folders as the commands find them, and what lies outside them."""

    def __init__(self, tmp_path: Path) -> None:
        from hpcbench.campaign import campaign_file, state
        from hpcbench.campaign.journal import Journal
        from tests.unit.test_campaign import fake_run
        from tests.unit.test_report import _store

        self.tmp = tmp_path
        self.outside = tmp_path / "outside"
        self.outside.mkdir()
        _store(tmp_path, "R")
        _store(tmp_path, "R2")
        self.campaign_path = base(tmp_path)
        campaign = campaign_file.load(self.campaign_path)
        Journal(campaign.out, campaign.name).phase(campaign.testbeds[0], "deploy", "ok", 1.0)
        a = campaign.testbeds[0]
        store = campaign.testbed_store(a)
        for cell in a.cells:
            store.append(fake_run(a.env, cell.batch, cell.nodes, cell.workers, 1))
        (campaign.out / "logs").mkdir()
        (campaign.out / "logs" / "a.log").write_text("")
        state.claim(campaign)
        env = state.state_root(campaign, a) / a.env
        (env / "leases").mkdir(parents=True)
        lease = {"what": "job 7", "cancel": ["true"]}
        (env / "leases" / "job.json").write_text(json.dumps(lease))
        (env / "terraform.tfstate").write_text(json.dumps({"resources": [{"x": 1}]}))
        self.folders = {
            "R": tmp_path / "R",
            "O": campaign.out,
            "S": paths.state_root(),
            "C": state.campaign_folder(campaign),
        }

    def path(self, name: str) -> Path:
        top, _, rest = name.partition("/")
        if top == "C" and not rest:
            return self.folders["C"]
        return self.folders[top] / rest

    def argv(self, command: str) -> list[str]:
        given = {
            "R": self.tmp / "R",
            "R2": self.tmp / "R2",
            "T": self.tmp,
            "F": self.campaign_path,
        }
        return [arg.format(**given) for arg in COMMANDS[command]]

    def plant(self, path: Path, kind: str) -> None:
        """What is at `path` moved outside (a link then leads to it), and `kind` put there."""
        if os.path.lexists(path):
            moved = self.outside / f"{len(list(self.outside.iterdir()))}-{path.name}"
            path.rename(moved)
        else:
            moved = self.outside / f"{len(list(self.outside.iterdir()))}-{path.name}"
            moved.write_text("not yours\n")
        if kind == "link":
            path.symlink_to(moved)
        elif kind == "fifo":
            os.mkfifo(path)
        else:  # a sparse file one byte over the bound of its kind
            with path.open("wb") as f:
                f.truncate(BOUNDS[path.name].most + 1)

    def outside_now(self) -> dict[str, tuple[int, int, bytes]]:
        """Every file outside: its type, size and first bytes."""
        seen = {}
        for p in sorted(self.outside.rglob("*")):
            st = p.lstat()
            head = p.read_bytes()[:4096] if p.is_file() and not p.is_symlink() else b""
            seen[str(p.relative_to(self.outside))] = (st.st_mode, st.st_size, head)
        return seen


@pytest.mark.parametrize(
    ("command", "name", "kind", "outcome"),
    list(_cases()),
    ids=[f"{c}-{n}-{k}" for c, n, k, _ in _cases()],
)
def test_a_planted_name_is_refused_in_one_line_or_passed_by_as_documented(
    tmp_path: Path,
    fakes: Fakes,
    capfd: pytest.CaptureFixture[str],
    command: str,
    name: str,
    kind: str,
    outcome: str,
) -> None:
    world = World(tmp_path)
    planted = world.path(name)
    world.plant(planted, kind)
    before = world.outside_now()
    capfd.readouterr()
    status = cli.main(world.argv(command))
    out, err = capfd.readouterr()
    assert "Traceback" not in err, err
    if outcome == REFUSED:
        lines = err.strip().splitlines()
        assert status == 2 and len(lines) == 1, (status, err)
        assert str(planted) in lines[0] and re.search(SAYS[kind], lines[0]), lines[0]
    elif command == "status":  # what the lease file was still counts as held
        assert status == 0, err
        assert re.search(r"testbed a still holds .*unreadable lease", out), out
    else:  # the destroy runs all the same; a log it cannot keep is said
        assert status == 0 and ("destroy", "a") in fakes.calls, err
        if "logs" in name:
            assert "destroy: its output is not kept" in err, err
    assert world.outside_now() == before  # nothing outside written


# ------------------------------------------------- the files a report writes
def _plant_at(paths_: list[Path], kind: str, outside: Path) -> None:
    for i, path in enumerate(paths_):
        moved = outside / f"{i}-{path.name}"
        path.rename(moved)
        if kind == "link":
            path.symlink_to(moved)
        else:
            os.mkfifo(path)


def _written(folder: Path) -> list[Path]:
    """The files a report wrote in `folder` (not the stores, locks, logs it reads)."""
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file()
        and p.name not in ("results.jsonl", ".lock", ".lock.pid")
        and "logs" not in p.parts
        and p.parent.name not in ("a", "b")
    )


@pytest.mark.parametrize("kind", ["link", "fifo"])
@pytest.mark.parametrize("command", ["report", "campaign report"])
def test_each_file_a_report_writes_replaces_what_was_planted_at_its_name(
    tmp_path: Path, fakes: Fakes, capfd: pytest.CaptureFixture[str], command: str, kind: str
) -> None:
    world = World(tmp_path)
    folder = world.folders["R" if command == "report" else "O"]
    assert cli.main(world.argv(command)) == 0
    written = _written(folder)
    assert {"report.md", "report.html", "configurations.json", "configurations.csv"} <= {
        p.name for p in written
    } and any(p.suffix == ".png" for p in written), written
    _plant_at(written, kind, world.outside)
    before = world.outside_now()
    capfd.readouterr()
    assert cli.main(world.argv(command)) == 0, capfd.readouterr().err
    for path in written:  # each a regular file again, whole
        assert path.is_file() and not path.is_symlink() and path.stat().st_size, path
    assert world.outside_now() == before


def test_compare_output_replaces_a_file_whole(tmp_path: Path, fakes: Fakes) -> None:
    world = World(tmp_path)
    output = tmp_path / "comparison.md"
    output.write_text("old\n" * 10_000)
    assert cli.main(world.argv("compare")) == 0
    assert output.read_text().startswith("# Comparison") and "old" not in output.read_text()


def test_a_link_given_as_the_campaign_file_is_the_users_own_and_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    link = tmp_path / "latest.yaml"
    link.symlink_to(base(tmp_path))
    assert cli.main(["campaign", "plan", str(link)]) == 0, capsys.readouterr().err


# ------------------------------------------------ what the state files hold
STATE_FILES = ["C/owner.json", "C/a/local/terraform.tfstate", "C/a/local/leases/job.json"]
BODIES = st.one_of(
    st.binary(max_size=200),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=10),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
        max_leaves=10,
    ).map(lambda v: json.dumps(v).encode()),
    st.integers(min_value=1, max_value=3).map(lambda k: b"[" * (k * 5000)),  # nested deep
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=st.sampled_from(STATE_FILES), body=BODIES)
def test_whatever_a_state_file_holds_status_is_its_table_or_one_line(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    name: str,
    body: bytes,
) -> None:
    signal.alarm(TIMEOUT_S)  # no_hang's bound, per example: 30 of them outlast one
    tmp = tmp_path_factory.mktemp("state-file")
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp / "state"))
    world = World(tmp)
    world.path(name).write_bytes(body)
    capfd.readouterr()
    status = cli.main(world.argv("status"))
    out, err = capfd.readouterr()
    assert "Traceback" not in err and status in (0, 2), (status, err)
    if status == 2:
        # The file, or the folder it marks as this campaign's or another's
        named = str(world.path(name)) in err or f"{world.folders['C']} holds" in err
        assert len(err.strip().splitlines()) == 1 and named, err
    else:
        assert out.startswith("campaign t ") and not err, (out, err)
