"""A campaign whose terminal goes away releases what it booked, and says so.

A real `python -m hpcbench campaign run` runs on a stand-in testbed that needs no
Docker: Terraform is a stand-in CLI on PATH (tofu) that books "machines" on apply
and a lease (a paid resource with its own cancel command) beside them, the way the
module scripts do; the node-side steps (ansible, ssh, testinfra, the sweep) are
stand-ins installed by a sitecustomize. Everything else is the project's own code:
preflight, deploy, destroy and its lease cancelling, the console, the journal, the
signal handling. Each stand-in step can hold at a named phase until the test has
done its damage: the pipe the output goes to closed under it (`| tee` exiting)
and a Ctrl-C, or the pty it runs on closed (SIGHUP). Nothing may stay booked.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pty
import select
import signal
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hpcbench import bounded
from hpcbench.campaign import campaign_file
from hpcbench.campaign.console import Console
from hpcbench.campaign.journal import Journal
from hpcbench.schedulers.base import stop_on_signals
from tests.interrupt import as_from_a_terminal

REPO = Path(__file__).resolve().parents[2]
PHASES = ["deploy", "verify", "sweep", "destroy"]
STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # each stops a campaign as Ctrl-C
WAIT_S = 30.0  # the most any step here waits for another; a run takes a few seconds

# Shared by the stand-ins (module standin_hold): hold at the phase the test names
# until it says go.
HOLD = """
import os, pathlib, signal, sys, time
def hold(phase):
    if os.environ.get("STANDIN_HOLD") != phase:
        return
    signal.signal(signal.SIGINT, lambda *_: sys.exit(130))  # stopped as a tool would be
    base = pathlib.Path(os.environ["STANDIN"])
    (base / f"at-{phase}").touch()
    deadline = time.monotonic() + 30
    while not (base / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
if __name__ == "__main__":
    hold(sys.argv[1])
"""

# terraform/tofu as the project calls it: init, providers schema, plan -out, show,
# apply of a saved plan (create or destroy), output. Apply books machines; a lease
# file (the module scripts' contract, hpcbench/leases.py) books the paid resource,
# which only its cancel command releases.
FAKE_TF = f"""#!{sys.executable} -S
import json, os, pathlib, sys
from standin_hold import hold
argv = sys.argv[1:]
base = pathlib.Path(os.environ["STANDIN"])
state = pathlib.Path(os.environ["TF_VAR_state_dir"])
name = state.parent.name  # the campaign's testbed
booked = base / "booked"
if argv[0] == "providers":
    print(json.dumps({{"provider_schemas": {{}}}}))
elif argv[0] == "plan":
    out = [a[5:] for a in argv if a.startswith("-out=")][0]
    pathlib.Path(out).write_text(json.dumps({{"destroy": "-destroy" in argv}}))
    sys.exit(2)
elif argv[0] == "show":
    print("{{}}")
elif argv[0] == "output":
    print(json.dumps({{"nodes": {{"value": []}}}}))
elif argv[0] == "apply":
    plan = json.loads(pathlib.Path(argv[-1]).read_text())
    if plan["destroy"]:
        hold("destroy")
        if os.environ.get("STANDIN_DESTROY") == "fail":
            print("Error: the testbed did not answer", file=sys.stderr)
            sys.exit(1)
        (booked / f"machines-{{name}}").unlink(missing_ok=True)
        (state / "terraform.tfstate").write_text(json.dumps({{"resources": []}}))
    else:
        booked.mkdir(exist_ok=True)
        (booked / f"machines-{{name}}").touch()
        (booked / f"lease-{{name}}").touch()
        (state / "leases").mkdir(exist_ok=True)
        cancel = [sys.executable, "-c", "import pathlib, sys; "
                  "pathlib.Path(sys.argv[1]).unlink(missing_ok=True)",
                  str(booked / f"lease-{{name}}")]
        lease = {{"what": f"stand-in job of {{name}}", "cancel": cancel}}
        (state / "leases" / "job.json").write_text(json.dumps(lease))
        (state / "terraform.tfstate").write_text(json.dumps({{"resources": [{{"x": 1}}]}}))
        pathlib.Path(os.environ["TF_VAR_inventory_path"]).write_text("all: {{}}\\n")
        hold("deploy")
"""

# The node-side steps, in the campaign's own process (not in its children: the
# marker goes with it); and every uncaught exception, in a thread or at exit,
# written down (the terminal it would go to is gone).
SITECUSTOMIZE = """
import os, sys
if os.environ.pop("STANDIN_CAMPAIGN", None):
    import pathlib, threading, traceback
    seen = pathlib.Path(os.environ["STANDIN"]) / "tracebacks"

    def note(text):
        with seen.open("a") as f:
            f.write(text)

    def on_exception(kind, value, tb, _hook=sys.excepthook):
        note("".join(traceback.format_exception(kind, value, tb)))
        _hook(kind, value, tb)

    def on_thread(args, _hook=threading.excepthook):
        note("".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback)))
        _hook(args)

    def on_unraisable(u, _hook=sys.unraisablehook):
        note(f"unraisable: {u.exc_type.__name__}: {u.exc_value} in {u.object!r}\\n")
        _hook(u)

    sys.excepthook, threading.excepthook, sys.unraisablehook = (
        on_exception, on_thread, on_unraisable)

    from hpcbench import analysis, bounded, deploy, reach, sweep
    from hpcbench.campaign import lifecycle
    from hpcbench.store import Store

    def step(phase):  # a tool of the phase, in its own process as the real ones are
        return bounded.run([sys.executable, "-m", "standin_hold", phase], bounded.VERIFY).returncode

    def sweep_events(workload, target, spec):
        from tests.unit.test_campaign import fake_run

        step("sweep")
        store = Store(spec.out)
        live = analysis.LiveSummary(store.runs())
        for batch, nodes, workers in sorted(spec.only):
            record = fake_run(target.env, batch, nodes, workers, 1)
            store.append(record)
            config, summary = sweep.Config(batch, nodes, workers), live.add(record)
            yield sweep.RunLanded(config, summary, record)
            yield sweep.ConfigFinished(config, summary)
        return 0

    reach.wait = lambda inventory, known_hosts, *a, **k: None
    deploy.run_ansible = lambda env, extra=None: (step("ansible"), {"changed": 0, "failed": 0})[1]
    lifecycle.verify = lambda req: step("verify")
    sweep.events = sweep_events
"""

CAMPAIGN = """\
name: lost
out: {out}
sweep: {{model: resnet18, image_size: 32, batch: [4], nodes: [1, 2], repeats: 1}}
testbeds:
  - {{name: a, env: local, settings: {{node_count: 2, link_rate: 1gbit}}}}
"""


class Standin:
    """The stand-in testbed's files, and a campaign on it."""

    def __init__(self, tmp_path: Path) -> None:
        self.base = tmp_path / "standin"
        (self.base / "booked").mkdir(parents=True)
        bin_dir, site = tmp_path / "bin", tmp_path / "site"
        bin_dir.mkdir()
        site.mkdir()
        for name in ("tofu", "terraform"):
            (bin_dir / name).write_text(FAKE_TF)
            (bin_dir / name).chmod(0o755)
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
        (site / "standin_hold.py").write_text(HOLD)
        self.out = tmp_path / "out"
        self.file = tmp_path / "lost.yaml"
        self.file.write_text(CAMPAIGN.format(out=self.out))
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("TF_VAR_", "PYTHON"))},
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": f"{site}{os.pathsep}{REPO}",
            "HPCBENCH_STATE": str(tmp_path / "state"),
            "TOOLS_DIR": str(tmp_path / "no-tools"),
            "STANDIN": str(self.base),
            "STANDIN_CAMPAIGN": "1",
        }
        self.started: list[subprocess.Popen] = []

    def start(self, action: str, hold: str, tty: bool, **env: str) -> tuple[subprocess.Popen, int]:
        """`python -m hpcbench campaign ACTION FILE` held at `hold`; its output goes to a
        pipe (returned: its read end) or, with tty, to a pty whose slave is its
        controlling terminal (returned: the master)."""
        environ = {**self.env, "STANDIN_HOLD": hold, **env}
        argv = [sys.executable, "-m", "hpcbench", "campaign", action, str(self.file)]
        if not tty:
            proc = subprocess.Popen(
                argv,
                cwd=REPO,
                env=environ,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                preexec_fn=as_from_a_terminal,
            )
            self.started.append(proc)
            assert proc.stdout is not None
            return proc, proc.stdout.fileno()
        try:
            master, slave = pty.openpty()
        except OSError as err:  # a container without /dev/ptmx
            pytest.skip(f"no pseudo-terminal here: {err}")

        def controlling_terminal() -> None:  # after setsid: the pty is the session's
            as_from_a_terminal()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        proc = subprocess.Popen(
            argv,
            cwd=REPO,
            env=environ,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            preexec_fn=controlling_terminal,
        )
        self.started.append(proc)
        os.close(slave)
        return proc, master

    def wait_at(self, phase: str, proc: subprocess.Popen, output: int) -> bytes:
        """What the campaign said until it reached `phase`, read as a terminal would."""
        said = b""
        deadline = time.monotonic() + WAIT_S
        while not (self.base / f"at-{phase}").exists():
            assert proc.poll() is None, (proc.returncode, said.decode(errors="replace"))
            assert time.monotonic() < deadline, said.decode(errors="replace")
            if select.select([output], [], [], 0.02)[0]:
                try:
                    said += os.read(output, 65536)
                except OSError as err:  # a pty's master reads EIO once the slave is shut
                    assert err.errno == errno.EIO
        return said

    def go(self) -> None:
        (self.base / "go").touch()

    def booked(self) -> list[str]:
        return sorted(p.name for p in (self.base / "booked").iterdir())

    def tracebacks(self) -> str:
        seen = self.base / "tracebacks"
        return seen.read_text() if seen.exists() else ""

    def logs(self) -> str:
        return "".join(p.read_text() for p in sorted((self.out / "logs").glob("*.log")))

    def journal(self) -> list[dict[str, Any]]:
        return Journal(self.out, "lost").records()


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[Standin]:
    testbed = Standin(tmp_path)
    yield testbed
    for proc in testbed.started:  # a test that failed half-way leaves no campaign running
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def shut(proc: subprocess.Popen, output: int) -> None:
    """The reading end of the campaign's output closed: its pipe's, or its pty's."""
    if proc.stdout is not None:
        proc.stdout.close()
    else:
        os.close(output)


def lose_terminal(proc: subprocess.Popen, output: int, tty: bool) -> None:
    """`| tee` exits and the Ctrl-C reaches the campaign; or the pty is closed."""
    shut(proc, output)
    if not tty:
        os.kill(proc.pid, signal.SIGINT)


def finished(proc: subprocess.Popen) -> int:
    try:
        return proc.wait(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise


def cells(records: list[dict[str, Any]]) -> dict[str, str]:
    return {r["cell"]: r["status"] for r in records if r["kind"] == "cell"}


@pytest.mark.parametrize("tty", [False, True], ids=["pipe-reader-exits+ctrl-c", "pty-closed"])
@pytest.mark.parametrize("phase", PHASES)
def test_a_lost_terminal_at_any_phase_leaves_nothing_booked(
    standin: Standin, phase: str, tty: bool
) -> None:
    proc, output = standin.start("run", phase, tty)
    standin.wait_at(phase, proc, output)
    lose_terminal(proc, output, tty)
    standin.go()  # a destroy held by the test may finish now
    rc = finished(proc)
    assert standin.tracebacks() == ""
    assert rc == 130, rc  # stopped as by Ctrl-C: "interrupted", not an error
    assert standin.booked() == []  # machines destroyed, the lease cancelled
    records = standin.journal()
    destroys = [r for r in records if r["kind"] == "phase" and r["phase"] == "destroy"]
    assert [r["status"] for r in destroys] == ["ok"]
    left = cells(records)
    assert len(left) == 2
    if phase == "destroy":  # measured before the terminal went
        assert set(left.values()) == {"measured"}
    else:  # nothing stays "deployed" or "verified" once the testbed is gone
        assert set(left.values()) == {"pending"}
        assert "interrupted: destroying what this testbed holds" in standin.logs()
    assert "Traceback" not in standin.logs()


def test_a_pipe_reader_that_exits_alone_is_no_error_of_the_campaign(standin: Standin) -> None:
    # `campaign run | head`: the reader goes, no signal comes; the campaign measures
    # and releases everything as if its lines had been read.
    proc, output = standin.start("run", "verify", tty=False)
    standin.wait_at("verify", proc, output)
    shut(proc, output)
    standin.go()
    rc = finished(proc)
    assert standin.tracebacks() == ""
    assert rc == 0 and standin.booked() == []
    records = standin.journal()
    assert set(cells(records).values()) == {"measured"}
    assert [r["status"] for r in records if r["kind"] == "phase"] == ["ok"] * 4
    assert "report: " in (standin.out / "logs" / "campaign.terminal.log").read_text()


def test_a_destroy_that_fails_after_the_terminal_is_lost_is_journaled_and_logged(
    standin: Standin,
) -> None:
    proc, output = standin.start("run", "sweep", tty=False, STANDIN_DESTROY="fail")
    standin.wait_at("sweep", proc, output)
    lose_terminal(proc, output, tty=False)
    rc = finished(proc)
    assert standin.tracebacks() == ""
    assert rc == 130
    assert standin.booked() == ["machines-a"]  # the lease was cancelled all the same
    records = standin.journal()
    (destroy,) = [r for r in records if r["kind"] == "phase" and r["phase"] == "destroy"]
    assert destroy["status"] == "failed"
    assert destroy["still_held"][0] == "STILL HELD: machines in Terraform's state"
    assert f"campaign destroy {standin.file} --testbed a" in destroy["still_held"][-1]
    assert set(cells(records).values()) == {"pending"}
    assert "STILL HELD: machines in Terraform's state" in standin.logs()


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM], ids=["SIGHUP", "SIGTERM"])
def test_campaign_destroy_finishes_its_destroy_before_a_signal_stops_it(
    standin: Standin, sig: int
) -> None:
    proc, output = standin.start("run", "", tty=False, STANDIN_DESTROY="fail")
    rc = finished(proc)
    shut(proc, output)
    assert rc == 1 and standin.booked() == ["machines-a"]  # its destroy failed: still held
    proc, output = standin.start("destroy", "destroy", tty=False)
    standin.wait_at("destroy", proc, output)
    os.kill(proc.pid, sig)  # its terminal closed, or a stop asked, in the middle
    standin.go()
    rc = finished(proc)
    shut(proc, output)
    assert standin.tracebacks() == ""
    assert rc == 130 and standin.booked() == []


# ----------------------------------------------------- the console on its own
def test_a_console_whose_terminal_is_gone_says_the_rest_in_the_log(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CAMPAIGN.format(out=tmp_path / "out"))
    campaign = campaign_file.load(path)
    read, write = os.pipe()
    os.close(read)  # the reader exited: every write is EPIPE
    term = os.fdopen(write, "w", buffering=1)
    console = Console(campaign, Journal(campaign.out, campaign.name), term)
    console.say("between testbeds")
    console.tb, console.tb_number = campaign.testbeds[0], (1, 1)
    console.say("destroying")
    assert console.term_lost
    term.close()  # what was left in its buffer goes nowhere, without an error
    logs = campaign.out / "logs"
    assert (logs / "campaign.terminal.log").read_text() == "between testbeds\n"
    assert (logs / "a.log").read_text() == "[testbed 1/1 a] destroying\n"


# ------------------------------------------------ interrupts during a clean-up
@pytest.fixture
def stop_signals() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raising KeyboardInterrupt, as in a campaign; the
    test process's own handlers after."""
    before = {sig: signal.getsignal(sig) for sig in STOPS}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    stop_on_signals()
    yield
    for sig, handler in before.items():
        signal.signal(sig, handler)


@pytest.mark.parametrize("sig", STOPS, ids=lambda s: signal.Signals(s).name)
def test_a_stop_signal_during_a_clean_up_comes_after_it(stop_signals: None, sig: int) -> None:
    done = []
    with pytest.raises(KeyboardInterrupt), bounded.ctrl_c_deferred():
        os.kill(os.getpid(), sig)
        os.kill(os.getpid(), signal.SIGHUP)  # a terminal closed after the Ctrl-C
        done.append("destroyed")
        with bounded.ctrl_c_deferred():  # a clean-up inside one keeps it for the outer
            os.kill(os.getpid(), sig)
            done.append("cancelled")
        done.append("journaled")
    assert done == ["destroyed", "cancelled", "journaled"]
