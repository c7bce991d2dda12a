"""A partition's `setup:` line (module load ...; source activate ...) as the batch
script runs it: in the script's own shell, so that it changes the environment the
steps get; a failing line, anywhere in it, ends the job before any srun, with the
line's own output (Lmod's "The following module(s) are unknown") as the first line of
the job's .err.

The rendered scripts run here under bash, with stand-ins for Lmod's `module`, srun
and scontrol on PATH."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcbench.launchers import Placement, RunSpec
from hpcbench.launchers.slurm import EXIT_MARKER, SlurmOptions, sbatch_script

pytestmark = pytest.mark.integration

# Lmod 8.6's (Debian 12) reply to an unknown module, on stderr, status 1.
FAKE_MODULE = """#!/bin/bash
if [ "$1" = load ] && [ "$2" != miniforge3 ]; then
  printf '\\nLmod has detected the following error:  The following module(s) are unknown:\\n'
  printf '"%s"\\n\\nPlease check the spelling or version number.\\n' "$2"
  exit 1
fi >&2
"""
# srun: records that it ran and the environment's HB_V, runs nothing.
FAKE_SRUN = """#!/bin/bash
echo "srun ${HB_V-unset}" >> "$FAKE_LOG"
"""


def tools(tmp: Path) -> dict[str, str]:
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (
        ("module", FAKE_MODULE),
        ("srun", FAKE_SRUN),
        ("scontrol", "#!/bin/bash\necho node1\n"),
    ):
        path = bin_dir / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "FAKE_LOG": str(tmp / "log"),
        "SLURM_JOB_NODELIST": "node1",
        "TMPDIR": str(tmp),
    }


def job(setup: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    """The batch script of a one-node run with `setup`, run as its job would be."""
    spec = RunSpec("train.py", (), "python", str(tmp), (Placement("node1", 1, None),))
    script = sbatch_script(spec, SlurmOptions(setup=setup), "ddp", job_name="j")
    return subprocess.run(
        ["bash", "-c", script], env=tools(tmp), capture_output=True, text=True, timeout=60
    )


def sruns(tmp: Path) -> list[str]:
    log = tmp / "log"
    return log.read_text().splitlines() if log.exists() else []


def test_an_unknown_module_ends_the_job_with_lmods_line_first(tmp_path):
    proc = job("module load no-such-module && source activate hpcbench", tmp_path)
    assert proc.returncode == 1
    err = proc.stderr.splitlines()
    assert err[0] == (
        "hpcbench: setup failed (exit 1): Lmod has detected the following error:  The following "
        'module(s) are unknown: "no-such-module"'
    ), err
    assert "Please check the spelling" in proc.stderr  # the whole of it, after
    assert proc.stdout.splitlines()[-1] == f"{EXIT_MARKER} 1"
    assert sruns(tmp_path) == []  # no step started
    assert not list(tmp_path.glob("tmp*"))  # its output kept aside, then removed


def test_a_working_line_changes_the_steps_environment_and_its_output_goes_to_out(tmp_path):
    (tmp_path / "activate").write_text('echo "activated $1"; export HB_V=$1\n')
    proc = job(f"module load miniforge3 && source {tmp_path}/activate hb", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "" and "activated hb" in proc.stdout
    assert sruns(tmp_path) == ["srun hb"]


def test_a_failure_without_output_names_the_line(tmp_path):
    proc = job("true; false; export HB_V=1", tmp_path)
    assert proc.returncode == 1
    assert (
        proc.stderr.splitlines()[0]
        == "hpcbench: setup failed (exit 1): no output from true; false; export HB_V=1"
    )
    assert sruns(tmp_path) == []


def test_a_line_that_ends_the_script_is_a_failure(tmp_path):
    proc = job("exit 0", tmp_path)
    assert proc.returncode == 1 and proc.stderr.startswith("hpcbench: setup failed (exit 1)")
    assert sruns(tmp_path) == []


COMMAND = st.sampled_from(["true", "false", "export HB_V=a", "export HB_V=b", "(exit 3)"])
LINE = st.lists(
    st.tuples(COMMAND, st.sampled_from([" && ", " || ", "; "])), min_size=1, max_size=5
).map(lambda parts: "".join(c + sep for c, sep in parts)[: -len(parts[-1][1])])


@settings(max_examples=150, deadline=None)
@given(LINE)
def test_the_line_fails_the_job_as_set_e_and_its_status_say(tmp_path_factory, line):
    """The job stops before any srun exactly where `set -e` stops the line alone or
    the line's last status is not 0 (as `a && b` can be, where set -e does not stop);
    else every step sees the environment the line left."""
    tmp = tmp_path_factory.mktemp("s")
    alone = subprocess.run(
        ["bash", "-e", "-c", f'{line}\nst=$?; echo "${{HB_V-unset}}"; exit "$st"'],
        capture_output=True,
        text=True,
        timeout=30,
    )
    proc = job(line, tmp)
    if alone.returncode:
        assert proc.returncode == alone.returncode, (line, proc.stderr)
        assert proc.stderr.startswith(f"hpcbench: setup failed (exit {alone.returncode}): ")
        assert sruns(tmp) == []
    else:
        assert proc.returncode == 0, (line, proc.stderr)
        assert sruns(tmp) == [f"srun {alone.stdout.strip()}"]
