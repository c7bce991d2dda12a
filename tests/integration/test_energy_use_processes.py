"""Slurm's ConsumedEnergy read by the Slurm scheduler after the job, from sacct and the
other Slurm tools as stand-in scripts run here (the figures themselves:
tests/unit/test_energy_use.py)."""

from __future__ import annotations

import stat

import pytest

from tests.unit.test_slurm_scheduler import _scheduler, _spec

pytestmark = pytest.mark.integration


FAKE_SACCT = """#!/bin/bash
# --allocations --format=ConsumedEnergyRaw,ElapsedRaw: one line for the job
echo "$@" > "$FAKE/sacct.args"
echo "864000|60"
"""


def test_the_slurm_scheduler_keeps_the_jobs_consumed_energy(fake_slurm):
    sacct = fake_slurm / "bin" / "sacct"
    sacct.write_text(FAKE_SACCT.replace("$FAKE", str(fake_slurm)))
    sacct.chmod(sacct.stat().st_mode | stat.S_IXUSR)
    (fake_slurm / "mode").write_text("ok")
    outcome = _scheduler(fake_slurm).run(_spec(), timeout_s=30)
    assert outcome.job_energy == {"joules": 864000.0, "seconds": 60.0, "exclusive_only": True}
    args = (fake_slurm / "sacct.args").read_text()
    assert "--jobs=4242" in args and "--format=ConsumedEnergyRaw,ElapsedRaw" in args


def test_without_sacct_the_outcome_says_why(fake_slurm):
    (fake_slurm / "mode").write_text("ok")
    outcome = _scheduler(fake_slurm).run(_spec(), timeout_s=30)
    assert outcome.job_energy is not None
    assert outcome.job_energy["unknown"].startswith("sacct gives no ConsumedEnergy")
