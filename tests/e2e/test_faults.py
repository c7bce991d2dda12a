"""Faults on the local testbed: what the harness does when things go wrong.

- Ctrl-C, once and then twice, during the shared testbed's first deploys: exit 130 and
  one line, no terraform, ansible or ssh left running, no state lock; the half-made
  testbed is what test_local_testbed.py's deploy test then converges and verifies.
- A results folder turned read-only or full during a sweep: one line naming the path
  and the cause, exit 1, the measured run kept whole in a file of its own; an --out the
  sweep could never write is refused before anything is launched.
- A sweep measuring while a second sweep (another --out) and a probe start on the same
  testbed: both refused in one line, the first unaffected.
- One sweep of three 2-node runs, each hit by a fault once its ranks train: a node
  paused, its link cut to 8 kbit/s, the node killed. Each run is stored as failed with
  its cause within its --timeout and a bounded margin, the sweep goes on to its next
  configuration, and no rank is left on any node.
- A node removed by hand before `destroy`: destroy still leaves nothing.

Everything runs on the shared e2e testbed (tests/e2e/conftest.py orders the tests: the
Ctrl-C tests before the deploy test, the rest after test_kill.py, the destroy last but
one). The results-folder tests run on `--env localhost` (this machine's processes: what
they exercise is the store, and a run there costs seconds). Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hpcbench.core import bounded
from tests.e2e.conftest import E2E_VARS, REPO, TINY_RUN, DeployedTestbed, var_args
from tests.e2e.test_kill import baseline_record
from tests.interrupt import as_from_a_terminal

pytestmark = pytest.mark.e2e

NODES = int(E2E_VARS["node_count"])
SSH_PORTS = {int(E2E_VARS["ssh_port_base"]) + i for i in range(1, NODES + 1)}
# In the environment of every process a command of these tests starts (terraform,
# ansible-playbook and its workers, ssh): what is left of it is found by this.
TAG = "HPCBENCH_FAULT_TAG"
DEPLOY_TO_ANSIBLE_S = 600  # terraform and the nodes' sshd, then Ansible's first tasks
LEFT_S = 15  # what the interrupted deploy started has this long to be gone
# The fault sweep: 2-node runs of three batch sizes (three configurations), their
# baselines already in the store. FAULT_TIMEOUT_S bounds each run; the fault comes once
# the ranks train (TRAINING_BYTES through node2's interface: the parameters' broadcast
# and a step's all-reduce, resnet18's gradients being 47 MB), about 20 s after launch.
FAULT_BATCHES = (5, 6, 7)
FAULT_TIMEOUT_S = 60
FAULT_RUN = [*TINY_RUN, "--warmup", "20", "--timeout", str(FAULT_TIMEOUT_S), "--no-probe"]
TRAINING_BYTES = 150e6
RUN_START_S = 300  # a run's ranks on both nodes: torch's import on 0.6 of a core
MARGIN_S = 30  # the harness's own bounded stops (TERM, KILL, its readers) after a timeout
RANKS_GONE_S = 30


def node(n: int) -> str:
    return f"{E2E_VARS['name']}-node{n}"


class Watched:
    """A command started as a terminal's foreground job would be (a process group of
    its own, SIGINT at its default), its output read line by line as it comes."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hpcbench", *argv],
            cwd=REPO,
            env=env,
            text=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=as_from_a_terminal,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self.readers = [
            threading.Thread(target=self._read, args=(stream, lines), daemon=True)
            for stream, lines in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))
        ]
        for reader in self.readers:
            reader.start()

    @staticmethod
    def _read(stream, lines: list[str]) -> None:
        for line in stream:
            lines.append(line.rstrip("\n"))

    def wait_for(self, seen: Callable[[list[str]], bool], timeout_s: float) -> bool:
        """Whether `seen(stdout lines so far)` held before the command ended or the time ran out."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.proc.poll() is None:
            if seen(list(self.out)):
                return True
            time.sleep(0.1)
        return seen(list(self.out))

    def interrupt(self) -> None:
        """Ctrl-C: SIGINT to the foreground process group."""
        os.killpg(self.proc.pid, signal.SIGINT)

    def finish(self, timeout_s: float) -> int | None:
        """The exit status, or None if it did not end in time (then it is killed)."""
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            code = None
        self.kill()
        for reader in self.readers:
            reader.join(10)
        return code

    def kill(self) -> None:
        """Ctrl-C (the command stops what it started), then SIGKILL if it hangs."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.interrupt()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(bounded.GRACE_S + 10)
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def tail(self) -> str:
        return "\n".join(self.out[-40:] + self.err[-20:])


def bounded_wait(done: Callable[[], object], timeout_s: float, every_s: float = 0.5) -> object:
    """done()'s first true value within timeout_s, else its last (false) one."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = done()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(every_s)


def left_after(find: Callable[[], list | dict], timeout_s: float) -> list | dict:
    """What find() still finds once it found nothing, or timeout_s passed."""
    found = find()
    deadline = time.monotonic() + timeout_s
    while found and time.monotonic() < deadline:
        time.sleep(0.5)
        found = find()
    return found


# --- Ctrl-C during deploy ----------------------------------------------------------


def tagged(tag: str) -> list[str]:
    """Processes with `tag` in their environment, as pid and command line."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and f"{TAG}={tag}".encode() in (proc / "environ").read_bytes():
                found.append(f"{proc.name}: {(proc / 'cmdline').read_bytes()[:200]!r}")
        except OSError:  # gone meanwhile, or a kernel thread
            continue
    return found


def connected_to_nodes() -> list[str]:
    """Processes with a TCP connection to a node's sshd (its port on 127.0.0.1): ssh's
    connection masters among them, which rewrite their environment (no tag to find)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "01" and int(fields[2].rsplit(":", 1)[1], 16) in SSH_PORTS:
                inodes.add(f"socket:[{fields[9]}]")  # 01: established
    found = []
    for fd in Path("/proc").glob("[0-9]*/fd/*"):
        with contextlib.suppress(OSError):
            if os.readlink(fd) in inodes:
                pid = fd.parts[2]
                found.append(f"{pid}: {Path(f'/proc/{pid}/cmdline').read_bytes()[:200]!r}")
    return found


def interrupted_deploy(
    testbed: DeployedTestbed, presses: int, ready: Callable[[list[str]], bool]
) -> tuple[Watched, int | None, float, str]:
    """The e2e testbed's deploy, Ctrl-C pressed `presses` times (0.2 s apart) once its
    output satisfies `ready`: the command, its exit status, the seconds from the first
    press to its end, and its tag."""
    tag = uuid.uuid4().hex
    deploy = Watched(["deploy", "--env", "local", *var_args()], {**testbed.environ, TAG: tag})
    try:
        assert deploy.wait_for(ready, DEPLOY_TO_ANSIBLE_S), deploy.tail()
        pressed = time.monotonic()
        for press in range(presses):
            time.sleep(0.2 if press else 0)
            deploy.interrupt()
        code = deploy.finish(bounded.GRACE_S + 30)
        return deploy, code, time.monotonic() - pressed, tag
    finally:
        deploy.kill()


def assert_stopped_cleanly(
    testbed: DeployedTestbed, deploy: Watched, code: int | None, tag: str
) -> None:
    assert code == 130, (code, deploy.tail())
    assert deploy.err == ["hpcbench: interrupted"], deploy.err  # one line, no traceback
    assert not any(line.startswith("hpcbench: deployed") for line in deploy.out)
    left = left_after(lambda: tagged(tag) + connected_to_nodes(), LEFT_S)
    assert not left, f"still running {LEFT_S} s after the deploy ended: {left}"
    state = testbed.state / "local"
    assert not (state / ".terraform.tfstate.lock.info").exists()
    with (state / "terraform.tfstate").open("rb+") as f:  # Terraform's lock: fcntl on the state
        fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if someone holds it
    assert len(testbed.docker_names("container")) == NODES  # half-made, for the re-deploy


@pytest.mark.stage("deploy interrupted")
def test_ctrl_c_while_ansible_runs_stops_the_deploy_and_leaves_nothing_running(
    testbed: DeployedTestbed,
) -> None:
    """The first deploy of the shared testbed, interrupted at Ansible's third task."""
    deploy, code, took, tag = interrupted_deploy(
        testbed, 1, lambda out: sum(line.startswith("TASK [") for line in out) >= 3
    )
    print(f"ctrl-c once: the deploy ended {took:.1f} s after it")
    assert_stopped_cleanly(testbed, deploy, code, tag)
    assert "hpcbench: [4/4] ansible-playbook site.yml on 3 nodes" in deploy.out


@pytest.mark.stage("deploy interrupted")
def test_ctrl_c_twice_stops_the_deploy_at_once_and_leaves_nothing_running(
    testbed: DeployedTestbed,
) -> None:
    """The second deploy of the half-made testbed, interrupted twice as Ansible changes
    the nodes: the second press kills what the first asked to stop, without waiting."""
    deploy, code, took, tag = interrupted_deploy(
        testbed, 2, lambda out: any(line.startswith("changed: ") for line in out)
    )
    print(f"ctrl-c twice: the deploy ended {took:.1f} s after the first")
    assert_stopped_cleanly(testbed, deploy, code, tag)
    assert took < bounded.GRACE_S, took  # not the grace a single Ctrl-C gives


# --- the results folder --------------------------------------------------------------


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A small tmpfs of this test's own, unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "hpcbench-fault", str(mnt)],
        check=True,
        timeout=60,
    )
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True, timeout=60)


def remount_read_only(mnt: Path) -> None:
    proc = subprocess.run(
        ["mount", "-o", "remount,ro", str(mnt)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, f"mount -o remount,ro {mnt}: {proc.stderr.strip()}"


def fill(mnt: Path) -> None:
    """Write zeros until the tmpfs is full (bounded by its size)."""
    fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for _ in range(1000):  # 4 MB: more than the tmpfs holds
            try:
                os.write(fd, b"\0" * 4096)
            except OSError:
                return
    finally:
        os.close(fd)
    raise AssertionError(f"{mnt} never filled up")


def localhost_sweep(out: Path) -> list[str]:
    """A sweep of one run, on this machine's processes, into `out`."""
    return [
        "scale",
        "--env",
        "localhost",
        "--nodes",
        "1",
        *TINY_RUN,
        "--no-probe",
        "--out",
        str(out),
    ]


@pytest.mark.stage("faults")
@pytest.mark.parametrize("fault", ["read-only", "full"])
def test_a_results_folder_that_fails_mid_sweep_is_one_line_and_the_run_is_kept(
    testbed: DeployedTestbed, tmpfs: Path, tmp_path: Path, fault: str
) -> None:
    out, kept = tmpfs / "out", tmp_path / "tmp"
    kept.mkdir()
    sweep = Watched(localhost_sweep(out), {**testbed.environ, "TMPDIR": str(kept)})
    try:
        # The store is locked once the checks passed, just before the run is launched.
        assert bounded_wait(
            lambda: (out / ".lock").exists() or sweep.proc.poll() is not None, 120, 0.05
        ), "the sweep never locked its store"
        assert sweep.proc.poll() is None, sweep.tail()
        remount_read_only(tmpfs) if fault == "read-only" else fill(tmpfs)
        code = sweep.finish(300)
    finally:
        sweep.kill()
    cause = "Read-only file system" if fault == "read-only" else "No space left on device"
    said = [line for line in sweep.err if line.startswith("hpcbench:")]
    assert code == 1 and len(said) == 1 and "Traceback" not in sweep.tail(), sweep.tail()
    assert said[0].startswith(f"hpcbench: failed: cannot write {out / 'results.jsonl'}: {cause}; ")
    [path] = kept.glob("hpcbench-unsaved-*.jsonl")
    assert f"the record is kept in {path} " in said[0]
    [record] = [json.loads(line) for line in path.read_text().splitlines()]
    assert record["kind"] == "run" and record["status"] == "ok", record.get("error")
    assert len(record["window_times"]) == 2 and record["batch"] == 4
    assert not (out / "results.jsonl").exists() or not (out / "results.jsonl").read_text()


@pytest.mark.stage("faults")
@pytest.mark.parametrize("where", ["a file", "read-only"])
def test_an_out_no_record_could_go_to_is_refused_before_anything_is_launched(
    testbed: DeployedTestbed, tmpfs: Path, where: str
) -> None:
    if where == "a file":
        out = tmpfs / "results"
        out.write_text("not a folder\n")
    else:
        out = tmpfs / "out"
        remount_read_only(tmpfs)
    started = time.monotonic()
    proc = testbed.hpcbench(*localhost_sweep(out), timeout=120)
    error = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(error) == 1, proc.stderr
    why = (
        "a file, not a folder"
        if where == "a file"
        else "cannot write there (Read-only file system)"
    )
    assert error[0] == f"hpcbench: error: --out {out}: {why}; choose another --out", error
    assert proc.stdout == "" and time.monotonic() - started < 60  # nothing launched
    assert sorted(p.name for p in tmpfs.iterdir()) == (["results"] if where == "a file" else [])
    if where == "a file":
        assert out.read_text() == "not a folder\n"


# --- on the shared testbed, after the other tests' sweeps ---------------------------


@pytest.fixture(scope="module")
def deployed(testbed: DeployedTestbed, request: pytest.FixtureRequest) -> DeployedTestbed:
    """The shared testbed, deployed and configured: by test_local_testbed.py's deploy
    test, which the ordering runs first; run alone, this module deploys it itself."""
    names = {item.name for item in request.session.items}
    if "test_deploy_creates_and_configures_every_node" not in names:
        proc = testbed.hpcbench("deploy", "--env", "local", *var_args())
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (testbed.state / "local" / "inventory.yml").is_file()
    return testbed


def ranks(container: str, batch: int | None = None) -> list[str]:
    """The workload's processes on a node (of the run of one batch size)."""
    out = subprocess.run(
        ["docker", "top", container, "-eo", "pid,args"], capture_output=True, text=True, timeout=60
    ).stdout
    return [
        line
        for line in out.splitlines()[1:]
        if " train.py " in line and (batch is None or f" --batch {batch} " in line)
    ]


def ranks_left(batch: int) -> dict[str, list[str]]:
    return {n: r for n in map(node, range(1, NODES + 1)) if (r := ranks(n, batch))}


def assert_no_rank_left(batch: int) -> None:
    """No rank of the run of `batch` on any node, within RANKS_GONE_S of its record."""
    since = time.monotonic()
    left = left_after(lambda: ranks_left(batch), RANKS_GONE_S)
    assert not left, f"ranks outlived their run by {RANKS_GONE_S} s: {left}"
    print(f"batch {batch}: no rank left {time.monotonic() - since:.1f} s after its record")


def running_batches() -> set[int]:
    """The batch sizes whose runs have ranks on node1 and on node2."""
    on = [
        {int(b) for b in re.findall(r" --batch (\d+) ", "\n".join(ranks(node(n))))} for n in (1, 2)
    ]
    return on[0] & on[1]


def seeded_store(
    tb: DeployedTestbed,
    out: Path,
    argv: list[str],
    batches: tuple[int, ...],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The store `argv` (a sweep with --resume) writes to, holding the 1-worker baselines
    of `batches` as if measured already: the sweep goes straight to its 2-node runs."""
    out.mkdir()
    records = [baseline_record(tb, [*argv, "--batch", str(b)], monkeypatch) for b in batches]
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.mark.stage("faults")
def test_a_second_sweep_or_a_probe_on_a_busy_testbed_is_refused_and_the_first_goes_on(
    deployed: DeployedTestbed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "first"
    argv = [
        "scale",
        "--env",
        "local",
        "--nodes",
        "2",
        *TINY_RUN,
        "--no-probe",
        "--resume",
        "--out",
        str(out),
    ]
    seeded_store(deployed, out, argv, (4,), monkeypatch)
    first = Watched(argv, deployed.environ)
    try:
        # The first holds the testbed and its store from now until its run is stored.
        assert bounded_wait(
            lambda: (out / ".lock").exists() or first.proc.poll() is not None, RUN_START_S, 0.1
        ), "the first sweep never locked its store"
        assert first.proc.poll() is None, first.tail()
        seconds = {
            "scale": deployed.hpcbench(
                "scale",
                "--env",
                "local",
                "--nodes",
                "1",
                *TINY_RUN,
                "--out",
                str(tmp_path / "second"),
                timeout=120,
            ),
            "probe": deployed.hpcbench(
                "probe",
                "--env",
                "local",
                "--nodes",
                "2",
                "--out",
                str(tmp_path / "probe"),
                timeout=120,
            ),
        }
        assert first.proc.poll() is None, "the first sweep ended before the others came back"
        code = first.finish(RUN_START_S)
    finally:
        first.kill()
    for command, proc in seconds.items():
        assert proc.returncode == 2, (command, proc.stdout[-2000:] + proc.stderr[-2000:])
        assert proc.stderr.splitlines() == [
            "hpcbench: error: testbed local is in use by another sweep or probe: wait for it "
            "to finish"
        ], (command, proc.stderr)
        assert not (tmp_path / ("second" if command == "scale" else "probe")).exists()
    assert code == 0, first.tail()
    runs = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    two = [r for r in runs if r["kind"] == "run" and r["nodes"] == 2]
    assert [r["status"] for r in two] == ["ok"] and two[0]["weights_in_sync"], two


class FaultSweep:
    """One sweep of FAULT_BATCHES' 2-node runs, which the tests below hit in turn."""

    def __init__(self, tb: DeployedTestbed, out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        argv = [
            "scale",
            "--env",
            "local",
            "--nodes",
            "2",
            *FAULT_RUN,
            "--resume",
            "--batch",
            ",".join(map(str, FAULT_BATCHES)),
            "--out",
            str(out),
        ]
        seeded_store(tb, out, argv, FAULT_BATCHES, monkeypatch)
        self.out = out
        self.seen: list[int] = []
        self.pending: int | None = None  # a run that started, not yet hit
        self.sweep = Watched(argv, tb.environ)

    def take(self) -> int:
        """The run to hit next: the one that started after the last fault, or the first."""
        batch, self.pending = self.pending or self.next_run(), None
        return batch

    def goes_on(self) -> None:
        """The sweep moved on: its next configuration's run has ranks on both nodes."""
        self.pending = self.next_run()

    def next_run(self) -> int:
        """The batch size of the next run, once its ranks are on node1 and node2."""
        started = bounded_wait(
            lambda: (running_batches() - set(self.seen)) or self.sweep.proc.poll() is not None,
            RUN_START_S,
        )
        assert isinstance(started, set) and started, f"no new run started: {self.sweep.tail()}"
        [batch] = started
        self.seen.append(batch)
        return batch

    def wait_training(self) -> None:
        """Until TRAINING_BYTES went through node2's testbed interface (from the host:
        the container's network namespace, no process in the node needed)."""
        pid = subprocess.run(
            ["docker", "inspect", "-f", "{{.State.Pid}}", node(2)],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.strip()

        def moved() -> int:
            lines = Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]
            counts = [line.split(":", 1)[1].split() for line in lines if "lo:" not in line]
            return sum(int(c[0]) + int(c[8]) for c in counts)  # received + sent bytes

        before = moved()
        assert bounded_wait(lambda: moved() - before >= TRAINING_BYTES, FAULT_TIMEOUT_S, 0.1), (
            f"the run never trained: {moved() - before} bytes through node2"
        )
        assert self.sweep.proc.poll() is None, self.sweep.tail()

    def record(self, batch: int) -> dict | None:
        """The run record of `batch`, once the store holds it."""
        with contextlib.suppress(OSError, ValueError):
            for line in (self.out / "results.jsonl").read_text().splitlines():
                r = json.loads(line)
                if r.get("kind") == "run" and r.get("nodes") == 2 and r.get("batch") == batch:
                    return r
        return None

    def failed_in_time(self, batch: int, fault_at: float) -> dict:
        """Its run's record: failed, with a cause, within its timeout and the margin."""
        record = bounded_wait(lambda: self.record(batch), FAULT_TIMEOUT_S + MARGIN_S)
        took = time.monotonic() - fault_at
        assert isinstance(record, dict), (
            f"no record {took:.0f} s after the fault: {self.sweep.tail()}"
        )
        assert record["status"] == "failed", record
        cause = record["error"].splitlines()[0]
        assert re.fullmatch(r"timed out after \d+ s|exit status \[.*\]", cause), record["error"]
        assert record["duration_s"] <= FAULT_TIMEOUT_S + MARGIN_S, record["duration_s"]
        print(
            f"batch {batch}: '{cause}' after {record['duration_s']:.0f} s, {took:.0f} s "
            "after the fault"
        )
        return record

    def hit(self, inject: Callable[[], object], undo: Callable[[], object] = lambda: None) -> None:
        """The next run, hit by `inject` once it trains: stored as failed in time, `undo`
        done once it is, then no rank of it left on any node."""
        batch = self.take()
        self.wait_training()
        inject()
        fault_at = time.monotonic()
        try:
            self.failed_in_time(batch, fault_at)
        finally:
            undo()
        assert_no_rank_left(batch)

    def stop(self) -> None:
        self.sweep.kill()


@pytest.fixture(scope="module")
def fault_sweep(
    deployed: DeployedTestbed, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FaultSweep]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        sweep = FaultSweep(deployed, tmp_path_factory.mktemp("faults") / "out", monkeypatch)
    try:
        yield sweep
    finally:
        sweep.stop()
        subprocess.run(["docker", "unpause", node(2)], capture_output=True, timeout=60)


def docker(*args: str) -> None:
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, (args, proc.stderr)


def pause(container: str, tries: int = 5) -> None:
    """docker pause, tried again while it fails: under cgroup v1 a freeze takes only
    once every task of the cgroup stops, and a task in an uninterruptible wait (a read
    of the NFS share on a loaded host) holds it in FREEZING until runc gives up and
    thaws the cgroup (docker pause exits 1). The fault is the pause, not its first try."""
    for _ in range(tries - 1):
        proc = subprocess.run(["docker", "pause", container], capture_output=True, timeout=60)
        if proc.returncode == 0:
            return
        time.sleep(1)
    docker("pause", container)


@pytest.mark.stage("faults")
def test_a_paused_node_fails_its_run_in_time_and_the_sweep_goes_on(
    fault_sweep: FaultSweep,
) -> None:
    # Its frozen ranks can only go once it runs again.
    fault_sweep.hit(lambda: pause(node(2)), lambda: docker("unpause", node(2)))
    fault_sweep.goes_on()


def root_qdisc(container: str) -> dict:
    """The tbf qdisc that shapes the node's testbed interface (the link_shaping role's)."""
    out = subprocess.run(
        ["docker", "exec", container, "tc", "-j", "qdisc", "show"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    [tbf] = [q for q in json.loads(out) if q.get("root") and q["kind"] == "tbf"]
    return tbf


def shape(container: str, dev: str, rate: str, burst: int, latency: str) -> None:
    docker(
        "exec",
        container,
        "tc",
        "qdisc",
        "replace",
        "dev",
        dev,
        "root",
        "tbf",
        "rate",
        rate,
        "burst",
        str(burst),
        "latency",
        latency,
    )


@pytest.mark.stage("faults")
def test_a_node_cut_to_8_kbits_fails_its_run_in_time_and_the_sweep_goes_on(
    fault_sweep: FaultSweep,
) -> None:
    shaped = root_qdisc(node(2))
    dev, opts = shaped["dev"], shaped["options"]
    fault_sweep.hit(
        lambda: shape(node(2), dev, "8kbit", 1600, "50ms"),
        # The testbed's own rate, as the link_shaping role set it.
        lambda: shape(node(2), dev, f"{opts['rate'] * 8}bit", opts["burst"], f"{opts['lat']}us"),
    )
    assert root_qdisc(node(2))["options"] == opts
    fault_sweep.goes_on()


@pytest.mark.stage("faults")
def test_a_killed_node_fails_its_run_in_time_and_the_sweep_ends_with_every_run_stored(
    fault_sweep: FaultSweep,
) -> None:
    """The last fault (the node stays down; destroy follows): the sweep's last run."""
    fault_sweep.hit(lambda: docker("kill", node(2)))
    code = fault_sweep.sweep.finish(MARGIN_S)
    assert code == 1, fault_sweep.sweep.tail()  # runs failed
    assert f"{len(FAULT_BATCHES)} runs in " in fault_sweep.sweep.tail()
    records = [
        json.loads(line) for line in (fault_sweep.out / "results.jsonl").read_text().splitlines()
    ]
    runs = [r for r in records if r["kind"] == "run" and r["nodes"] == 2]
    assert sorted(r["batch"] for r in runs) == sorted(FAULT_BATCHES)  # every one, in turn
    assert {r["status"] for r in runs} == {"failed"} and records[-1]["kind"] == "convergence"


# --- destroy ---------------------------------------------------------------------------


@pytest.mark.stage("faults")
def test_destroy_after_a_node_was_removed_by_hand_leaves_nothing(testbed: DeployedTestbed) -> None:
    """node3 removed with `docker rm -f` (and node2 left killed by the test above, when
    it ran): destroy removes the rest and the state, and says so. test_destroy_leaves_nothing
    then finds nothing deployed."""
    docker("rm", "-f", node(3))
    proc = testbed.hpcbench("destroy", "--env", "local", timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "hpcbench: destroying local" in proc.stdout
    assert re.search(r"Apply complete! Resources: 0 added, 0 changed, \d+ destroyed", proc.stdout)
    assert f"hpcbench: removed {testbed.state / 'local'}" in proc.stdout
    assert testbed.docker_names("container") == []
    assert testbed.docker_names("network") == []
    assert testbed.docker_names("volume") == []
    assert not (testbed.state / "local").exists()  # the state and any lease with it
