"""A campaign on a Slurm partition through the real scheduler, with sbatch, squeue,
scontrol, sinfo and scancel stood in for by scripts on PATH that keep their contracts
(a job's state until scancel takes it; squeue --jobs=ID failing with "Invalid job id
specified" for a job it does not know): a job whose cancel fails is named on the
terminal, in the journal and by `campaign status`, with its scancel command; and
`campaign run --dry-run` prints what reaches sbatch, apart from the values it marks."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from hpcbench import cli
from hpcbench.campaign import runner
from hpcbench.measure import sweep
from hpcbench.schedulers import slurm as slurm_scheduler
from hpcbench.schedulers.slurm import SlurmScheduler
from tests.unit.test_slurm_scheduler import _fake as stand_in

SBATCH = r"""#!/bin/bash
if [ "$1" = --test-only ]; then cat >/dev/null; echo "sbatch: Job 1 to start" >&2; exit 0; fi
script=$(cat)
id=$(cat "$FAKE/next" 2>/dev/null || echo 4242)
echo $((id + 1)) > "$FAKE/next"
mkdir -p "$FAKE/jobs/$id" "$FAKE/scripts"
printf '%s\n' "$script" > "$FAKE/scripts/$id.sh"
out=$(printf '%s\n' "$script" | sed -n 's/^#SBATCH -o //p' | sed "s/%j/$id/")
err=$(printf '%s\n' "$script" | sed -n 's/^#SBATCH -e //p' | sed "s/%j/$id/")
case "$script" in
  *check_stack.py*)
    echo 'HPCBENCH_RESULT {"kind": "check", "ok": true, "checks": []}' > "$out"
    echo "HPCBENCH_SLURM_EXIT 0" >> "$out"; : > "$err"; echo COMPLETED > "$FAKE/jobs/$id/state" ;;
  *) if [ -e "$FAKE/hang" ]; then echo RUNNING > "$FAKE/jobs/$id/state"
     else
       echo "HPCBENCH_SLURM_EXIT 1" > "$out"
       printf 'Traceback (most recent call last):\n  File "x.py"\nRuntimeError: stand-in\n' > "$err"
       echo FAILED > "$FAKE/jobs/$id/state"
     fi ;;
esac
echo "$id;cluster"
"""
SQUEUE = r"""#!/bin/bash
for a; do case "$a" in --jobs=*) id=${a#--jobs=} ;; --format=*) fmt=${a#--format=} ;; esac; done
[ -n "$id" ] || exit 0
[ -d "$FAKE/jobs/$id" ] || { echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1; }
st=$(cat "$FAKE/jobs/$id/state")
case "$st" in PENDING|RUNNING|COMPLETING) ;; *) exit 0 ;; esac
case "$fmt" in *%i*) echo "$id $st" ;; *) echo "$st node1" ;; esac
"""
SCONTROL = r"""#!/bin/bash
id=${@: -1}
echo "JobId=$id JobState=$(cat "$FAKE/jobs/$id/state") BatchHost=node1 \
SubmitTime=2026-01-01T00:00:00 StartTime=2026-01-01T00:00:01"
"""
SINFO = r"""#!/bin/bash
case "$*" in *%c*) echo 4 ;; *) echo "p up 2 (null)" ;; esac
"""
SCANCEL = r"""#!/bin/bash
echo "$@" >> "$FAKE/scancel.log"
n=$(cat "$FAKE/scancel-fails" 2>/dev/null || echo 0)
if [ "$n" -gt 0 ]; then
  echo $((n - 1)) > "$FAKE/scancel-fails"
  echo "scancel: error: Kill job error on job id $1: Access/permission denied" >&2
  exit 1
fi
echo CANCELLED > "$FAKE/jobs/$1/state"
"""
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
    (tmp_path / "bin").mkdir()
    for name, text in (
        ("sbatch", SBATCH),
        ("squeue", SQUEUE),
        ("scontrol", SCONTROL),
        ("sinfo", SINFO),
        ("scancel", SCANCEL),
    ):
        stand_in(tmp_path, name, text)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
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
        f"STILL QUEUED OR RUNNING: slurm job {job} of testbed part may still be queued or "
        f"running since its sweep at {phase['at']} (scancel: scancel: error: Kill job error on "
        f"job id {job}: Access/permission denied; scancel tried 4 time(s)): {command}"
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
    [verify] = [r for r in journal(fake) if r.get("phase") == "verify"][-1:]
    assert verify["jobs_gone"] == [job]
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
        f"STILL QUEUED OR RUNNING: slurm job {left['job']} of testbed part may still be "
        f"queued or running since its sweep at {phase['at']} ({left['why']}): "
        f"`scancel {left['job']}` on this machine cancels it"
    )
    cells = [r for r in journal(fake) if r.get("kind") == "cell" and r["status"] == "failed"]
    assert cells and all(f"slurm job {left['job']} may still be" in r["why"] for r in cells)
