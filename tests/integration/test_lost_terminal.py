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

Beside the deployed testbed, a Slurm partition whose tools (sbatch, squeue, scancel,
...) and jobs are stand-ins runs the real readiness check, probe, sweep and Slurm
scheduler; SIGINT, SIGTERM and SIGHUP come at each step boundary of both testbeds'
lives, and nothing may stay booked, queued or running, with the journal naming the
signal.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import pty
import select
import signal
import subprocess
import sys
import termios
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hpcbench.campaign import campaign_file
from hpcbench.campaign.console import Console
from hpcbench.campaign.journal import Journal
from hpcbench.core import bounded
from hpcbench.schedulers.base import stop_on_signals
from tests.integration.test_bounded_processes import _gone
from tests.interrupt import as_from_a_terminal

pytestmark = pytest.mark.integration

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
# file (the module scripts' contract, hpcbench/testbeds/leases.py) books the paid resource,
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
        (base / "applied").touch()
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

    from hpcbench.measure import analysis, sweep
    from hpcbench.core import bounded
    from hpcbench.testbeds import deploy, reach
    from hpcbench.campaign import lifecycle
    from hpcbench.measure.store import Store

    def step(phase):  # a tool of the phase, in its own process as the real ones are
        return bounded.run([sys.executable, "-m", "standin_hold", phase], bounded.VERIFY).returncode

    real_events = sweep.events

    def sweep_events(workload, target, spec):
        from tests.unit.test_campaign import fake_run

        if target.env != "local":  # a partition: the real sweep, Slurm's tools stood in
            return (yield from real_events(workload, target, spec))
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
    deploy.verify = lambda req: step("verify")
    sweep.events = sweep_events

    from hpcbench.schedulers import slurm

    slurm.POLL_MIN_S, slurm.POLL_MAX_S = 0.05, 0.1  # the stand-in jobs take 0.2 s

    # STANDIN_AT=FILE:QUALNAME:call|return:N sends STANDIN_SIGNAL to this process as
    # the Nth call of that function starts or ends (its code untouched: a profile hook).
    if os.environ.get("STANDIN_AT"):
        import signal

        where, name, event, nth = os.environ["STANDIN_AT"].split(":")
        sig = getattr(signal, os.environ["STANDIN_SIGNAL"])
        met = []

        def at_step(frame, what, arg):
            code = frame.f_code
            if what != event or code.co_qualname != name or not code.co_filename.endswith(where):
                return
            met.append(1)
            if len(met) == int(nth):
                sys.setprofile(None)
                (pathlib.Path(os.environ["STANDIN"]) / "signalled").touch()
                os.kill(os.getpid(), sig)

        sys.setprofile(at_step)
"""

CAMPAIGN = """\
name: lost
out: {out}
sweep: {{model: resnet18, image_size: 32, batch: [4], nodes: [1, 2], repeats: 1}}
testbeds:
  - {{name: a, env: local, settings: {{node_count: 2, link_rate: 1gbit}}}}
"""

# Slurm's tools for one partition whose jobs are processes of this machine: sbatch
# queues the script and starts its job (the workload's stand-in: it answers as the
# bench/ script the job runs would, 0.2 s later); squeue, scontrol and sacct read
# the queue; scancel ends a job and kills its process. They start with the allow-listed
# environment of a launcher only: the queue's folder is in their text.
SLURM = """#!{python} -S
import fcntl, json, os, pathlib, re, shlex, signal, subprocess, sys, time
QUEUE = pathlib.Path({queue!r})
ACTIVE = ("PENDING", "RUNNING")
tool, args = pathlib.Path(sys.argv[0]).name, sys.argv[1:]


def lock():
    handle = open(QUEUE / "lock", "a")
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def jobs():
    return {{int(p.stem): json.loads(p.read_text()) for p in QUEUE.glob("*.json")}}


def save(job_id, job):
    (QUEUE / "tmp").write_text(json.dumps(job))
    (QUEUE / "tmp").replace(QUEUE / f"{{job_id}}.json")


def options(tokens):
    found, rest, i = {{}}, [], 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.startswith("--") and "=" in tok:
            key, _, value = tok[2:].partition("=")
            found[key] = value
        elif tok in ("-o", "-e", "-J", "-n", "-j", "-p", "-N"):
            found[tok[1:]] = tokens[i + 1]
            i += 1
        elif tok.startswith("-"):
            found[tok.lstrip("-")] = ""
        else:
            rest.append(tok)
        i += 1
    return found, rest


def render(fmt, values):
    return re.sub(r"%(\\w)", lambda m: str(values.get(m[1], "")), fmt)


def job_record(job):
    if job["kind"] == "check":
        return {{"kind": "check", "ok": True, "host": "node1",
                 "checks": [{{"name": "stack imports", "ok": True, "detail": "stand-in"}}]}}
    if job["kind"] == "probe":
        point = {{"bytes": 4096, "iters": 3, "time_s": 0.001, "cpu_s": 0.0005,
                  "algbw": 4.1e6, "busbw": 4.1e6}}
        return {{"kind": "probe_workload", "workers": job["workers"], "device": "cpu",
                 "cpus": 2, "results": [point], "stopped_early": False, "fingerprint": {{}}}}
    return {{"workers": job["workers"], "steps": 2, "window_times": [1.0, 1.1],
             "weights_in_sync": True, "device": "cpu", "fingerprint": {{}}}}


if tool == "job":  # the job itself: its output, then COMPLETED, unless cancelled first
    job_id = int(args[0])
    with lock():  # sbatch holds it until the job is saved
        held = jobs()[job_id]["signalled"]
    time.sleep(60 if held else 0.2)  # the job in flight at the signal runs till cancelled
    with lock():
        job = jobs()[job_id]
        if job["state"] == "RUNNING":
            line = "HPCBENCH_RESULT " + json.dumps(job_record(job))
            pathlib.Path(job["out"]).write_text(f"{{line}}\\nHPCBENCH_SLURM_EXIT 0\\n")
            pathlib.Path(job["err"]).write_text("")
            job["state"] = "COMPLETED"
            save(job_id, job)
elif tool == "sbatch":
    script = sys.stdin.read()
    given = [t for line in script.splitlines() if line.startswith("#SBATCH ")
             for t in shlex.split(line[len("#SBATCH "):])]
    found, _ = options(given + args)
    if "test-only" in found:
        print("sbatch: Job 1 to start at 2026-01-01T00:00:00 on node1", file=sys.stderr)
        sys.exit(0)
    kind = ("check" if "check_stack.py" in script
            else "probe" if "allreduce.py" in script else "train")
    workers = int(found.get("nodes", 1)) * int(found.get("ntasks-per-node", 1))
    asked = (QUEUE / "signal-at").read_text().split() if (QUEUE / "signal-at").exists() else []
    with lock():
        job_id = max(jobs(), default=41) + 1
        out = {{k: found.get(k, "/tmp/slurm-%j." + k).replace("%j", str(job_id))
                for k in ("o", "e")}}
        job = {{"name": found.get("job-name") or found.get("J", "sbatch"), "state": "RUNNING",
                "out": out["o"], "err": out["e"], "kind": kind, "workers": workers,
                "signalled": bool(asked) and int(asked[0]) == len(jobs()) + 1}}
        runner = subprocess.Popen(
            [sys.executable, "-S", str(QUEUE.parent / "bin" / "job"), str(job_id)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        job["pid"] = runner.pid
        save(job_id, job)
    if job["signalled"]:  # "N SIGNAL" asked: the campaign is signalled as job N is queued
        pid = os.getppid()
        while b"hpcbench" not in pathlib.Path(f"/proc/{{pid}}/cmdline").read_bytes():
            pid = int(pathlib.Path(f"/proc/{{pid}}/stat").read_text().rsplit(")", 1)[1].split()[1])
        (QUEUE.parent / "standin" / "signalled").touch()
        os.kill(pid, getattr(signal, asked[1]))
    print(job_id)
elif tool == "squeue":
    found, _ = options(args)
    names = (found.get("name") or found.get("n") or "").split(",")
    ids = (found.get("jobs") or found.get("j") or "").split(",")
    for job_id, job in sorted(jobs().items()):
        if job["state"] in ACTIVE and (names == [""] or job["name"] in names) and (
            ids == [""] or str(job_id) in ids
        ):
            values = {{"i": job_id, "T": job["state"], "B": "node1", "j": job["name"],
                       "N": "node[1-2]", "P": "fast"}}
            print(render(found.get("format") or found.get("o") or "%i %T", values))
elif tool == "scontrol":
    job = jobs().get(int(args[-1])) if args[-1].isdigit() else None
    if job is None:
        print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr)
        sys.exit(1)
    print(f"JobId={{args[-1]}} JobName={{job['name']}} JobState={{job['state']}} BatchHost=node1 "
          "SubmitTime=2026-01-01T00:00:00 StartTime=2026-01-01T00:00:01")
elif tool == "scancel":
    found, rest = options(args)
    name = found.get("name") or found.get("n")
    with lock():
        for job_id, job in jobs().items():
            if job["state"] in ACTIVE and (str(job_id) in rest or job["name"] == name):
                job["state"] = "CANCELLED"
                save(job_id, job)
                try:
                    os.killpg(job["pid"], signal.SIGKILL)
                except ProcessLookupError:
                    pass
elif tool == "sinfo":
    found, _ = options(args)
    values = {{"P": "fast", "a": "up", "D": 2, "G": "(null)", "c": 2, "N": "node[1-2]"}}
    print(render(found.get("format") or found.get("o") or "%P %a %D %N", values))
# sacct: nothing kept (no accounting)
"""

CAMPAIGN_WITH_PARTITION = (
    CAMPAIGN
    + """\
  - name: p
    slurm: {{partition: fast, nodes: 2, job_dir: {jobs}}}
"""
)


class Standin:
    """The stand-in testbed's files, and a campaign on it."""

    def __init__(self, tmp_path: Path, partition: bool = False) -> None:
        self.base = tmp_path / "standin"
        (self.base / "booked").mkdir(parents=True)
        bin_dir, site = tmp_path / "bin", tmp_path / "site"
        bin_dir.mkdir()
        site.mkdir()
        for name in ("tofu", "terraform"):
            (bin_dir / name).write_text(FAKE_TF)
            (bin_dir / name).chmod(0o755)
        self.queue = tmp_path / "queue"  # the stand-in partition's jobs
        self.queue.mkdir()
        slurm = SLURM.format(python=sys.executable, queue=str(self.queue))
        for name in ("sbatch", "squeue", "scontrol", "scancel", "sinfo", "sacct", "job"):
            (bin_dir / name).write_text(slurm)
            (bin_dir / name).chmod(0o755)
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
        (site / "standin_hold.py").write_text(HOLD)
        self.out = tmp_path / "out"
        self.file = tmp_path / "lost.yaml"
        text = CAMPAIGN_WITH_PARTITION if partition else CAMPAIGN
        self.file.write_text(text.format(out=self.out, jobs=tmp_path / "jobs"))
        self.tag = uuid.uuid4().hex  # in the environment of every process it starts
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("TF_VAR_", "PYTHON"))},
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": f"{site}{os.pathsep}{REPO}",
            "HPCBENCH_STATE": str(tmp_path / "state"),
            "TOOLS_DIR": str(tmp_path / "no-tools"),
            "STANDIN": str(self.base),
            "STANDIN_CAMPAIGN": "1",
            "STANDIN_TAG": self.tag,
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
        # The pipe's case is a Ctrl-C; the pty's, the hang-up of its closing.
        by = "SIGHUP (terminal closed)" if tty else "SIGINT (Ctrl-C)"
        assert f"interrupted by {by}: destroying what this testbed holds" in standin.logs()
        assert {r["why"] for r in records if r["status"] == "interrupted"} == {f"by {by}"}
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


# ------------------------------------------- a stop at every step of the life cycle
# Where a stop signal comes, on a deployed testbed (a) and then a partition (p): as a
# step of the real code starts or ends (STANDIN_AT: FILE:FUNCTION:call|return:NTH),
# or as the stand-in sbatch queues the Nth job ("sbatch N").
STEPS = {
    "a-deploy-starts": "hpcbench/testbeds/deploy.py:deploy:call:1",
    "a-machines-booked": "hpcbench/testbeds/terraform.py:TerraformEnv.apply:return:1",
    "a-deploy-ends": "hpcbench/testbeds/deploy.py:deploy:return:1",
    "a-verify-ends": "hpcbench/campaign/lifecycle.py:TestbedLife.verify_testbed:return:1",
    "a-cell-measured": "hpcbench/campaign/cells.py:CellRecorder.cell_done:return:1",
    "a-sweep-ends": "hpcbench/campaign/cells.py:measure_part:return:1",
    "a-teardown-starts": "hpcbench/campaign/lifecycle.py:TestbedLife.teardown:call:1",
    "a-destroy-ends": "hpcbench/testbeds/deploy.py:destroy:return:1",
    "a-released": "hpcbench/campaign/lifecycle.py:TestbedLife.run:return:1",
    "p-check-job-queued": "sbatch 1",
    "p-verify-ends": "hpcbench/campaign/lifecycle.py:TestbedLife.verify_testbed:return:2",
    "p-probe-job-queued": "sbatch 2",
    "p-run-job-queued": "sbatch 3",
    "p-run-lands": "hpcbench/schedulers/slurm.py:SlurmScheduler.run:return:3",
    "p-sweep-ends": "hpcbench/campaign/cells.py:measure_part:return:2",
    "p-released": "hpcbench/campaign/lifecycle.py:TestbedLife.run:return:2",
}

# The steps within the partition's life (its cells measured or pending after).
PARTITION_STEPS = {STEPS[k] for k in STEPS if k.startswith("p-") and k != "p-released"}


def read_to_end(proc: subprocess.Popen, output: int) -> str:
    """The campaign's output until it exits (bounded)."""
    said = b""
    deadline = time.monotonic() + 3 * WAIT_S
    while time.monotonic() < deadline:
        if select.select([output], [], [], 0.1)[0]:
            chunk = os.read(output, 65536)
            if not chunk:
                break
            said += chunk
    finished(proc)
    return said.decode(errors="replace")


def tagged(tag: str) -> list[str]:
    """Processes with STANDIN_TAG=tag in their environment that still run."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            mine = proc.name.isdigit() and f"STANDIN_TAG={tag}".encode() in (
                (proc / "environ").read_bytes()
            )
            if mine and not _gone(int(proc.name)):
                found.append(f"{proc.name}: {(proc / 'cmdline').read_bytes()[:200]!r}")
        except OSError:  # gone meanwhile
            continue
    return found


def jobs_left(queue: Path) -> list[str]:
    """Jobs of the stand-in partition that squeue would list, or whose process runs."""
    left = []
    for path in queue.glob("*.json"):
        job = json.loads(path.read_text())
        if job["state"] in ("PENDING", "RUNNING") or not _gone(job["pid"]):
            left.append(f"{path.stem}: {job['kind']} {job['state']}")
    return left


@pytest.mark.parametrize("sig", STOPS, ids=lambda s: signal.Signals(s).name)
@pytest.mark.parametrize("step", list(STEPS.values()), ids=list(STEPS))
def test_a_stop_signal_at_any_step_releases_everything_and_is_journaled(
    tmp_path: Path, step: str, sig: int
) -> None:
    testbed = Standin(tmp_path, partition=True)
    name = signal.Signals(sig).name
    env = {"STANDIN_SIGNAL": name}
    if step.startswith("sbatch "):
        (testbed.queue / "signal-at").write_text(f"{step.split()[1]} {name}")
    else:
        env["STANDIN_AT"] = step
    proc, output = testbed.start("run", "", tty=False, **env)
    testbed.started.append(proc)
    try:
        said = read_to_end(proc, output)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (testbed.base / "signalled").exists(), f"the step was never reached: {said}"
    assert testbed.tracebacks() == ""
    assert proc.returncode == 130, said
    assert said.splitlines()[-1] == "hpcbench: interrupted", said
    # Nothing held, queued or running once the campaign has ended.
    assert testbed.booked() == []
    assert jobs_left(testbed.queue) == []
    if step.startswith("sbatch "):  # the job then in flight was cancelled, not run out
        (job,) = [
            j
            for j in map(json.loads, map(Path.read_text, testbed.queue.glob("*.json")))
            if j["signalled"]
        ]
        assert job["state"] == "CANCELLED"
    assert tagged(testbed.tag) == []
    # The journal: every phase cut short names the signal; the deployed testbed is
    # destroyed once where it was booked; each cell is measured, or pending with the
    # signal as its cause (none left deployed, verified or failed).
    records = testbed.journal()
    by = bounded.SIGNAL_NAMES[signal.Signals(sig)]
    cut = [r for r in records if r["kind"] == "phase" and r["status"] == "interrupted"]
    assert all(r["why"] == f"by {by}" for r in cut), cut
    destroys = [r["status"] for r in records if r["kind"] == "phase" and r["phase"] == "destroy"]
    assert destroys == (["ok"] if (testbed.base / "applied").exists() else [])
    campaign = campaign_file.load(testbed.file)
    last = {r["cell"]: r for r in records if r["kind"] == "cell"}
    assert set(last) == {c.id for c in campaign.cells}
    assert {r["status"] for r in last.values()} <= {"measured", "pending"}, last
    pending = [r["why"] for r in last.values() if r["status"] == "pending"]
    assert all(why.startswith(f"interrupted by {by}: ") for why in pending), pending
    # What the stop does to each testbed, said as it is: a partition destroys nothing.
    stopped = [line for line in said.splitlines() if "] interrupted by " in line]
    deployed = f"[testbed 1/2 a] interrupted by {by}: destroying what this testbed holds"
    partition = (
        f"[testbed 2/2 p] interrupted by {by}: its job in flight, if any, is cancelled; "
        "nothing else is held"
    )
    assert set(stopped) <= {deployed, partition}, stopped
    assert (partition in stopped) == (step in PARTITION_STEPS), stopped
