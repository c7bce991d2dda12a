"""A campaign on a Slurm partition through the real scheduler, with sbatch, squeue,
scontrol, sinfo and scancel stood in for by scripts on PATH that keep their contracts
(tests/standins/slurm.py). Every job is journaled from before sbatch runs, so a
`campaign run` killed with SIGKILL leaves it named by `campaign status` and cancelled by
`--resume` before anything else is submitted; a job whose cancel fails is named on the
terminal, in the journal and by `campaign status`, with its scancel command; and
`campaign run --dry-run` prints what reaches sbatch, apart from the values it marks."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hpcbench import cli
from hpcbench.campaign import runner
from hpcbench.campaign.journal import Journal
from hpcbench.measure import sweep
from hpcbench.schedulers import slurm as slurm_scheduler
from hpcbench.schedulers.slurm import SlurmScheduler
from tests.interrupt import as_from_a_terminal
from tests.standins import slurm as slurm_standin

pytestmark = pytest.mark.integration

CAMPAIGN = """\
name: jobs
out: {out}
sweep: {{model: resnet18, image_size: 32, batch: [4], nodes: [1, 2], repeats: 3,
         max_repeats: 3, backend: ddp, device: cpu, timeout: 60}}
testbeds:
  - name: part
    slurm: {{partition: p, nodes: 2, job_dir: {jobs}, time: 10m, queue_wait: 10m}}
"""


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    bin_dir = slurm_standin.install(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))
    monkeypatch.setattr(slurm_scheduler, "POLL_MIN_S", 0.01)
    monkeypatch.setattr(slurm_scheduler, "POLL_MAX_S", 0.02)
    monkeypatch.setattr(slurm_scheduler, "CANCEL_BACKOFF_S", 0.01)
    monkeypatch.setattr(sweep, "stop_on_signals", lambda: None)
    monkeypatch.setattr(runner, "stop_on_signals", lambda: None)
    path = tmp_path / "c.yaml"
    path.write_text(CAMPAIGN.format(out=tmp_path / "out", jobs=tmp_path / "jobdir"))
    return path


def interrupt_a_running_job(monkeypatch: pytest.MonkeyPatch, fake: Path) -> None:
    """Ctrl-C while a job other than the check runs (as SIGINT raises it, in the poll)."""
    (fake / "hang").touch()
    real = SlurmScheduler.state

    def state(self: SlurmScheduler, job: str) -> tuple[str, str]:
        found = real(self, job)
        if found[0] == "RUNNING" and (fake / "hang").exists():
            raise KeyboardInterrupt
        return found

    monkeypatch.setattr(SlurmScheduler, "state", state)


def journal(fake: Path) -> list[dict]:
    return [json.loads(x) for x in (fake / "out" / "results.jsonl").read_text().splitlines()]


def test_ctrl_c_with_a_scancel_that_cannot_succeed_names_the_job_everywhere(
    cluster, monkeypatch, capfd
):
    fake = cluster.parent
    (fake / "scancel-fails").write_text("99")
    interrupt_a_running_job(monkeypatch, fake)
    assert cli.main(["campaign", "run", str(cluster)]) == 130
    [job] = [p.name for p in (fake / "jobs").iterdir() if (p / "state").read_text() == "RUNNING\n"]
    command = f"`scancel {job}` on this machine cancels it"
    said = [x for x in capfd.readouterr().err.splitlines() if "STILL QUEUED OR RUNNING" in x]
    assert said == [
        f"[testbed 1/1 part] STILL QUEUED OR RUNNING: slurm job {job} may still be queued or "
        "running (scancel: scancel: error: Kill job error on job id "
        f"{job}: Access/permission denied; scancel tried 4 time(s)): {command}"
    ]
    [phase] = [r for r in journal(fake) if r.get("phase") == "sweep"]
    assert phase["status"] == "interrupted"
    assert [(j["job"], j["scancel"], j["where"]) for j in phase["jobs_left"]] == [
        (job, f"scancel {job}", "on this machine")
    ]
    assert cli.main(["campaign", "status", str(cluster)]) == 0
    lines = capfd.readouterr().out.splitlines()
    cells = [x for x in lines if x.startswith("part ")]
    assert cells and all(f"slurm job {job} may still be queued or running; " in x for x in cells)
    assert [x for x in lines if x.startswith("STILL")] == [
        f"STILL QUEUED OR RUNNING: slurm job {job} of testbed part on partition p may still be "
        f"queued or running since its sweep at {phase['at']} (scancel: scancel: error: Kill "
        f"job error on job id {job}: Access/permission denied; scancel tried 4 time(s)): "
        f"{command}"
    ]
    assert cli.main(["campaign", "status", "--json", str(cluster)]) == 0
    [left] = json.loads(capfd.readouterr().out)["jobs_left"]
    assert (left["job"], left["scancel"], left["testbed"]) == (job, f"scancel {job}", "part")

    # --resume cancels it again before anything is submitted; once gone, it is said no more.
    (fake / "hang").unlink()
    (fake / "scancel-fails").write_text("0")
    assert cli.main(["campaign", "run", "--resume", str(cluster)]) == 1  # the stand-in's runs
    err = capfd.readouterr().err
    assert f"slurm job {job} was left by an earlier run: cancelling it" in err
    assert f"slurm job {job}: gone (squeue lists it no more)" in err
    assert (fake / "jobs" / job / "state").read_text() == "CANCELLED\n"
    last = [r for r in journal(fake) if r.get("kind") == "job" and r["job"] == job][-1]
    assert (last["status"], last["why"]) == ("gone", "cancelled: squeue lists it no more")
    assert cli.main(["campaign", "status", str(cluster)]) == 0
    assert "may still be" not in capfd.readouterr().out


def test_ctrl_c_with_a_scancel_that_fails_twice_leaves_nothing_said(cluster, monkeypatch, capfd):
    fake = cluster.parent
    (fake / "scancel-fails").write_text("2")
    interrupt_a_running_job(monkeypatch, fake)
    assert cli.main(["campaign", "run", str(cluster)]) == 130
    states = {p.name: (p / "state").read_text().strip() for p in (fake / "jobs").iterdir()}
    assert "RUNNING" not in states.values() and "CANCELLED" in states.values()
    assert len((fake / "scancel.log").read_text().splitlines()) == 3
    assert "may still be" not in capfd.readouterr().err
    assert not any("jobs_left" in r for r in journal(fake))
    assert cli.main(["campaign", "status", str(cluster)]) == 0
    assert "may still be" not in capfd.readouterr().out


MARK = re.compile(r"@SUBMIT:(\w+)@")
SCRIPT = re.compile(r'^#!/bin/bash\n.*?^exit "\$rc"\n', re.M | re.S)


def as_pattern(dry: str) -> re.Pattern[str]:
    """A dry run's script as a pattern of the script submitted: each marked value any
    run of word characters, the same one wherever the same mark stands."""
    out, seen, at = [], set(), 0
    for found in MARK.finditer(dry):
        out.append(re.escape(dry[at : found.start()]))
        what = found[1]
        out.append(f"(?P={what})" if what in seen else rf"(?P<{what}>\w+)")
        seen.add(what)
        at = found.end()
    return re.compile("".join(out) + re.escape(dry[at:]))


def test_the_dry_run_prints_the_scripts_that_reach_sbatch(cluster, capfd):
    """The check job, the 2-node probe and every run, in order: equal to what the
    stand-in sbatch was given apart from the marked values (the job names' random
    digits, --cpus-per-task from sinfo, the rendezvous port)."""
    assert cli.main(["campaign", "run", "--dry-run", str(cluster)]) == 0
    printed = capfd.readouterr().out
    dry = SCRIPT.findall(printed)
    assert not (cluster.parent / "out").exists()
    assert cli.main(["campaign", "run", str(cluster)]) == 1  # the stand-in's runs fail
    scripts = sorted((cluster.parent / "scripts").iterdir(), key=lambda p: int(p.stem))
    submitted = [p.read_text() for p in scripts]
    kinds = [("check_stack.py" in s, "allreduce.py" in s) for s in submitted]
    assert kinds == [(True, False), (False, True)] + [(False, False)] * 6  # 2 cells x 3
    assert len(dry) == len(submitted)
    for shown, sent in zip(dry, submitted, strict=True):
        found = as_pattern(shown).fullmatch(sent)
        assert found, (shown, sent)
        assert set(found.groupdict()) == {"random", "sinfo", "port"}
        assert re.fullmatch(r"[0-9a-f]{8}", found["random"]) and found["sinfo"] in ("2", "4")


def test_the_pattern_tells_a_difference_apart_from_the_marks():
    dry = "#SBATCH --job-name=hpcbench-@SUBMIT:random@\n-o x-hpcbench-@SUBMIT:random@\n"
    assert as_pattern(dry).fullmatch("#SBATCH --job-name=hpcbench-1a\n-o x-hpcbench-1a\n")
    assert not as_pattern(dry).fullmatch("#SBATCH --job-name=hpcbench-1a\n-o x-hpcbench-2b\n")
    assert not as_pattern(dry).fullmatch("#SBATCH --job-name=hpcbench-1a\n-o y-hpcbench-1a\n")


def test_a_job_left_after_its_run_gave_up_on_it_is_said_last_and_kept(cluster, monkeypatch, capfd):
    """Not a stop: Slurm no longer says the job's state, its cancel fails, the sweep
    stops on it; the cells fail with it as their cause and the campaign's last line
    names the job and its scancel command."""
    fake = cluster.parent
    (fake / "hang").touch()
    (fake / "scancel-fails").write_text("99")
    real = SlurmScheduler.state

    def state(self: SlurmScheduler, job: str) -> tuple[str, str]:
        found = real(self, job)
        return ("UNKNOWN", "") if found[0] == "RUNNING" else found

    monkeypatch.setattr(SlurmScheduler, "state", state)
    assert cli.main(["campaign", "run", str(cluster)]) == 1
    err = capfd.readouterr().err.strip().splitlines()
    [phase] = [r for r in journal(fake) if r.get("phase") == "sweep"]
    assert phase["status"] == "failed" and "may still be queued or running" in phase["why"]
    [left] = phase["jobs_left"]
    assert err[-1] == (
        f"STILL QUEUED OR RUNNING: slurm job {left['job']} of testbed part on partition p may "
        f"still be queued or running since its sweep at {phase['at']} ({left['why']}): "
        f"`scancel {left['job']}` on this machine cancels it"
    )
    cells = [r for r in journal(fake) if r.get("kind") == "cell" and r["status"] == "failed"]
    assert cells and all(f"slurm job {left['job']} may still be" in r["why"] for r in cells)


# ------------------------------------------------- a run killed with a job queued
REPO = Path(__file__).resolve().parents[2]


def killed(argv: list[str], fake: Path, trigger: str, sig: str = "KILL") -> int:
    """`python -m hpcbench ARGV` in a process of its own, sent `sig` by the stand-in
    Slurm at `trigger`: "kill-on-poll", as squeue is first asked of a job that waits in
    the queue; "kill-in-sbatch", once sbatch has queued a job, before its id is back.
    bash writes its own pid where the stand-in reads it, then becomes the command
    (exec keeps the pid), so the pid is there before the command starts. Its exit
    status (-9: killed by SIGKILL)."""
    (fake / "kill-signal").write_text(sig)
    line = f'echo $$ > {fake / trigger}; exec "$@"'
    proc = subprocess.run(
        ["bash", "-c", line, "bash", sys.executable, "-m", "hpcbench", *argv],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=as_from_a_terminal,  # SIGINT raises there, however this test started
    )
    assert not (fake / trigger).exists(), proc.stderr  # the stand-in took it
    return proc.returncode


def calls(fake: Path) -> list[str]:
    """sbatch's submissions, squeue's and scancel's calls, in order."""
    path = fake / "calls.log"
    return path.read_text().splitlines() if path.exists() else []


def states(fake: Path) -> dict[str, str]:
    return {p.name: (p / "state").read_text().strip() for p in (fake / "jobs").iterdir()}


def test_a_job_queued_when_campaign_run_is_killed_is_named_and_cancelled_before_the_next(
    cluster, capfd
):
    """SIGKILL while a job waits in the queue: `campaign status` names it with its id
    and partition, and `--resume` cancels it, confirmed gone by squeue, before it
    submits anything; then it is named no more."""
    fake = cluster.parent
    (fake / "queue").touch()
    assert killed(["campaign", "run", str(cluster)], fake, "kill-on-poll") == -signal.SIGKILL
    [job] = [j for j, state in states(fake).items() if state == "PENDING"]
    assert cli.main(["campaign", "status", str(cluster)]) == 0
    lines = capfd.readouterr().out.splitlines()
    named = [x for x in lines if x.startswith("STILL QUEUED OR RUNNING: ")]
    assert len(named) == 1, lines  # the job, and nothing else
    said = named[0]
    assert said.startswith(
        f"STILL QUEUED OR RUNNING: slurm job {job} of testbed part on partition p may "
        "still be queued or running since it was submitted at "
    )
    assert said.endswith(f": `scancel {job}` on this machine cancels it")
    assert cli.main(["campaign", "status", "--json", str(cluster)]) == 0
    [left] = json.loads(capfd.readouterr().out)["jobs_left"]
    assert (left["job"], left["partition"], left["testbed"]) == (job, "p", "part")

    (fake / "queue").unlink()  # the next jobs fail at once
    before = len(calls(fake))
    assert cli.main(["campaign", "run", "--resume", str(cluster)]) == 1  # the stand-in's runs
    after = calls(fake)[before:]
    first = next(k for k, call in enumerate(after) if call.startswith("sbatch "))
    assert after[0] == f"scancel {job}", after
    assert any(f"squeue --noheader --jobs={job} " in call for call in after[1:first]), after
    assert states(fake)[job] == "CANCELLED"
    err = capfd.readouterr().err
    assert f"slurm job {job} was left by an earlier run: cancelling it" in err
    assert cli.main(["campaign", "status", str(cluster)]) == 0
    assert "may still be" not in capfd.readouterr().out
    records = [r for r in journal(fake) if r.get("kind") == "job"]
    [name] = {r["name"] for r in records if r["job"] == job and r["name"]}
    assert [r["status"] for r in records if r["name"] == name] == ["sbatch", "queued"]
    assert [(r["job"], r["status"]) for r in records if not r["name"]] == [(job, "gone")]


def test_a_job_sbatch_queued_as_campaign_run_was_killed_is_found_by_its_name(cluster, capfd):
    """Killed before sbatch's answer came back: the job is in the queue, its id known to
    nobody; its unique name, journaled before sbatch ran, finds and cancels it."""
    fake = cluster.parent
    (fake / "queue").touch()
    assert killed(["campaign", "run", str(cluster)], fake, "kill-in-sbatch") == -signal.SIGKILL
    [job] = [j for j, state in states(fake).items() if state == "PENDING"]
    name = (fake / "jobs" / job / "name").read_text().strip()
    assert re.fullmatch(r"hpcbench-[0-9a-f]{8}", name)
    assert cli.main(["campaign", "status", str(cluster)]) == 0
    lines = capfd.readouterr().out.splitlines()
    named = [x for x in lines if x.startswith("STILL")]
    assert len(named) == 1, lines
    said = named[0]
    assert said.startswith(f"STILL QUEUED OR RUNNING: slurm job {name} of testbed part on ")
    assert said.endswith(f"`scancel --name={name}` on this machine cancels it")

    (fake / "queue").unlink()
    before = len(calls(fake))
    assert cli.main(["campaign", "run", "--resume", str(cluster)]) == 1
    after = calls(fake)[before:]
    assert after[0] == f"scancel --name={name}", after
    assert states(fake)[job] == "CANCELLED"
    capfd.readouterr()
    assert cli.main(["campaign", "status", str(cluster)]) == 0
    assert "may still be" not in capfd.readouterr().out


@pytest.mark.parametrize("sig", ["TERM", "HUP", "INT"])
def test_scale_stopped_while_its_job_waits_in_the_queue_cancels_it_by_its_id(cluster, sig):
    """`scale --env slurm` keeps no journal of its jobs (docs/slurm.md): a stop signal
    cancels the job in flight, confirmed by squeue, before it exits."""
    fake = cluster.parent
    (fake / "queue").touch()
    argv = ["scale", "--env", "slurm", "--partition", "p", "--slurm-job-dir"]
    argv += [str(fake / "jobdir"), "--nodes", "1", "--batch", "4", "--model", "resnet18"]
    argv += ["--image-size", "32", "--device", "cpu", "--repeats", "1", "--no-probe"]
    assert killed([*argv, "--out", str(fake / "r")], fake, "kill-on-poll", sig) == 130
    [job] = states(fake)
    assert states(fake)[job] == "CANCELLED"
    assert [c for c in calls(fake) if c.startswith("scancel")] == [f"scancel {job}"]


def test_a_job_is_open_from_its_name_to_its_end_whichever_handle_ends_it(tmp_path):
    """By its name until sbatch answers, by its id after; a cancel by either closes it,
    a phase that left it adds why, and a job of another testbed (another cluster's
    ids) is its own."""
    book = Journal(tmp_path, "c")

    def job(status: str, job: str = "", name: str = "hpcbench-0123abcd", **more: str) -> None:
        record = {"kind": "job", "campaign": "c", "testbed": "part", "name": name, "job": job}
        scancel = f"scancel {job}" if job else f"scancel --name={name}"
        record |= {"partition": "p", "where": "here", "scancel": scancel, "status": status}
        book.store.append({**record, "why": "", "at": "t0", **more})

    def left() -> list[tuple[str, str, str]]:
        return [(j["testbed"], j["job"], j["why"]) for j in book.jobs_left()]

    job("sbatch")
    assert left() == [("part", "hpcbench-0123abcd", "sbatch did not return its id")]
    job("queued", "4242", at="t1")
    assert left() == [("part", "4242", "")] and book.jobs_left()[0]["at"] == "t0"
    job("gone", "4242", name="")  # cancelled by its id alone
    assert left() == []

    job("queued", "4243", name="hpcbench-1")
    job("queued", "4243", name="hpcbench-2", testbed="other")
    left_job = {"job": "4243", "scancel": "scancel 4243", "where": "here", "why": "refused"}
    book.store.append(
        {"kind": "phase", "campaign": "c", "testbed": "part", "phase": "sweep"}
        | {"status": "interrupted", "seconds": 1.0, "at": "t2", "jobs_left": [left_job]}
    )
    assert left() == [("other", "4243", ""), ("part", "4243", "refused")]
    [part] = [j for j in book.jobs_left() if j["testbed"] == "part"]
    assert (part["phase"], part["partition"], part["name"]) == ("sweep", "p", "hpcbench-1")
    job("gone", name="hpcbench-1")  # cancelled by its name
    assert left() == [("other", "4243", "")]


def test_a_job_resume_cannot_confirm_gone_keeps_its_testbed_from_any_new_job(cluster, capfd):
    """scancel refused on every try: the testbed is not run (nothing submitted there),
    the job stays named with why, and the run exits 1."""
    fake = cluster.parent
    (fake / "queue").touch()
    assert killed(["campaign", "run", str(cluster)], fake, "kill-on-poll") == -signal.SIGKILL
    [job] = [j for j, state in states(fake).items() if state == "PENDING"]
    (fake / "scancel-fails").write_text("99")
    before = len(calls(fake))
    assert cli.main(["campaign", "run", "--resume", str(cluster)]) == 1
    after = calls(fake)[before:]
    assert not [c for c in after if c.startswith("sbatch ")], after
    assert after.count(f"scancel {job}") == slurm_scheduler.CANCEL_TRIES
    err = capfd.readouterr().err
    assert "[testbed 1/1 part] not run: a slurm job of it may still be queued or running" in err
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith(
            f"STILL QUEUED OR RUNNING: slurm job {job} of testbed part on partition p may still "
            "be queued or running since it was submitted at "
        )
    )
    assert "Access/permission denied; scancel tried 4 time(s)" in err.strip().splitlines()[-1]
    assert states(fake)[job] == "PENDING"


def test_campaign_destroy_cancels_a_job_a_killed_run_left(cluster, capfd):
    fake = cluster.parent
    (fake / "queue").touch()
    assert killed(["campaign", "run", str(cluster)], fake, "kill-on-poll") == -signal.SIGKILL
    [job] = [j for j, state in states(fake).items() if state == "PENDING"]
    assert cli.main(["campaign", "destroy", str(cluster)]) == 0
    assert states(fake)[job] == "CANCELLED"
    capfd.readouterr()
    assert cli.main(["campaign", "status", str(cluster)]) == 0
    assert "may still be" not in capfd.readouterr().out
