"""A Slurm cluster stood in for by scripts on PATH: sbatch, squeue, scontrol, sinfo and
scancel, each keeping its real contract (Slurm 25.05, src/squeue and src/scancel at
commit 284c3b95): a job's state until scancel takes it; squeue lists only pending,
running and completing jobs, one that ended not at all (print.c:3206-3213
_filter_job), and fails with "Invalid job id specified", exit 1, for an id slurmctld no
longer holds (squeue.c:371-383); scancel of a job that ended, or of such an id, says
nothing and exits 0 (scancel.c:917-919, 963-975).

The cluster's folder ($FAKE) holds each job (jobs/<id>/state, name), every call in
order (calls.log), and switches a test touches: `queue` (a job waits PENDING), `hang`
(it runs), `scancel-fails` (so many scancels fail), `kill-on-poll` and `kill-in-sbatch`
(the pid in them is sent the signal in `kill-signal` as squeue first polls a waiting
job, or once sbatch has queued one, before its id is back).
"""

from __future__ import annotations

from pathlib import Path

SBATCH = r"""#!/bin/bash
if [ "$1" = --test-only ]; then cat >/dev/null; echo "sbatch: Job 1 to start" >&2; exit 0; fi
script=$(cat)
id=$(cat "$FAKE/next" 2>/dev/null || echo 4242)
echo $((id + 1)) > "$FAKE/next"
mkdir -p "$FAKE/jobs/$id" "$FAKE/scripts"
printf '%s\n' "$script" > "$FAKE/scripts/$id.sh"
printf '%s\n' "$script" | sed -n 's/^#SBATCH --job-name=//p' > "$FAKE/jobs/$id/name"
echo "sbatch $id" >> "$FAKE/calls.log"
out=$(printf '%s\n' "$script" | sed -n 's/^#SBATCH -o //p' | sed "s/%j/$id/")
err=$(printf '%s\n' "$script" | sed -n 's/^#SBATCH -e //p' | sed "s/%j/$id/")
case "$script" in
  *check_stack.py*)
    echo 'HPCBENCH_RESULT {"kind": "check", "ok": true, "checks": []}' > "$out"
    echo "HPCBENCH_SLURM_EXIT 0" >> "$out"; : > "$err"; echo COMPLETED > "$FAKE/jobs/$id/state" ;;
  *) if [ -e "$FAKE/hang" ]; then echo RUNNING > "$FAKE/jobs/$id/state"
     elif [ -e "$FAKE/queue" ]; then echo PENDING > "$FAKE/jobs/$id/state"
     else
       echo "HPCBENCH_SLURM_EXIT 1" > "$out"
       printf 'Traceback (most recent call last):\n  File "x.py"\nRuntimeError: stand-in\n' > "$err"
       echo FAILED > "$FAKE/jobs/$id/state"
     fi
     # The job is in the queue; the process that ran sbatch is killed before the id
     # reaches it (a SIGKILL, the OOM killer).
     if [ -e "$FAKE/kill-in-sbatch" ]; then
       pid=$(cat "$FAKE/kill-in-sbatch"); rm -f "$FAKE/kill-in-sbatch"; kill -KILL "$pid"
     fi ;;
esac
echo "$id;cluster"
"""
SQUEUE = r"""#!/bin/bash
for a; do case "$a" in
  --jobs=*) id=${a#--jobs=} ;; --name=*) name=${a#--name=} ;; --format=*) fmt=${a#--format=} ;;
esac; done
echo "squeue $*" >> "$FAKE/calls.log"
if [ -n "$name" ]; then  # the jobs of that name still pending, running or completing
  for d in "$FAKE"/jobs/*; do
    [ "$(cat "$d/name" 2>/dev/null)" = "$name" ] || continue
    st=$(cat "$d/state")
    case "$st" in PENDING|RUNNING|COMPLETING) echo "${d##*/} $st" ;; esac
  done
  exit 0
fi
[ -n "$id" ] || exit 0
[ -d "$FAKE/jobs/$id" ] || { echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1; }
st=$(cat "$FAKE/jobs/$id/state")
# The process polling a job that waits in the queue is killed (SIGKILL, the OOM killer).
if [ "$st" = PENDING ] && [ -e "$FAKE/kill-on-poll" ]; then
  pid=$(cat "$FAKE/kill-on-poll"); rm -f "$FAKE/kill-on-poll"  # taken before the kill
  kill -"$(cat "$FAKE/kill-signal")" "$pid"
fi
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
echo "scancel $*" >> "$FAKE/calls.log"
n=$(cat "$FAKE/scancel-fails" 2>/dev/null || echo 0)
if [ "$n" -gt 0 ]; then
  echo $((n - 1)) > "$FAKE/scancel-fails"
  echo "scancel: error: Kill job error on job id $1: Access/permission denied" >&2
  exit 1
fi
case "$1" in
  --name=*) ids=$(for d in "$FAKE"/jobs/*; do
                    [ "$(cat "$d/name" 2>/dev/null)" = "${1#--name=}" ] && echo "${d##*/}"
                  done) ;;
  *) ids=$1 ;;
esac
for id in $ids; do  # one that ended, or an id Slurm does not hold: nothing said, exit 0
  [ -e "$FAKE/jobs/$id/state" ] || continue
  case "$(cat "$FAKE/jobs/$id/state")" in
    PENDING|RUNNING) echo CANCELLED > "$FAKE/jobs/$id/state" ;;
  esac
done
exit 0
"""

SCRIPTS = {
    "sbatch": SBATCH,
    "squeue": SQUEUE,
    "scontrol": SCONTROL,
    "sinfo": SINFO,
    "scancel": SCANCEL,
}


def install(folder: Path) -> Path:
    """The stand-ins in folder/bin, their state in `folder`; the bin folder, to go first
    on PATH."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in SCRIPTS.items():
        path = bin_dir / name
        path.write_text(text.replace("$FAKE", str(folder)))
        path.chmod(0o755)
    return bin_dir
