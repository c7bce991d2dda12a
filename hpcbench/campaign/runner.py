"""`hpcbench campaign run`: per testbed, deploy -> verify -> probe and sweep -> destroy.

Each testbed has a state folder of its own (campaign/state.py) and goes through
its life in campaign/lifecycle.py; what the campaign tells goes to the terminal,
the testbed's log and the journal (campaign/console.py); cells are measured by
`scale` sweeps (campaign/cells.py).

Failures: a testbed whose deploy or verify fails, or whose runs all fail, is
recorded with its cause and the campaign goes on with the next. Ctrl-C (or
SIGTERM, SIGHUP) stops the campaign: the testbed in hand is destroyed with
the guarantees of `hpcbench destroy` (leases cancelled; a lease that cannot
be is printed with the command that releases it) and `--resume` continues.
Every Slurm job is in the journal from submission to its end (slurm.booked), so
a run killed outright leaves it named, and the next run cancels it before it
submits anything (cancel_open_jobs). A transformer cell that does not fit its GPUs
(campaign/estimate.py, testbed_memory) is never launched: it is journaled skipped
with its memory line before anything is booked, and a testbed left with no cell to
run is neither checked nor booked.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import TextIO

from hpcbench.campaign import before_booking, comparison, estimate, forecast
from hpcbench.campaign.campaign_file import Campaign, Cell, SweepPart, TestbedPlan
from hpcbench.campaign.console import Console, Stopped, logged
from hpcbench.campaign.journal import CellState, Journal, left_line, why_line
from hpcbench.campaign.lifecycle import TestbedLife, widest
from hpcbench.campaign.state import (
    campaign_folder,
    check_owner,
    claim,
    remove_if_released,
    state_root,
    testbed_state,
)
from hpcbench.core import bounded, paths
from hpcbench.core.errors import UsageError
from hpcbench.core.progress import format_duration
from hpcbench.launchers.parse import HostSlots
from hpcbench.measure import sweep
from hpcbench.measure.store import config_key, done_configs
from hpcbench.schedulers import slurm
from hpcbench.schedulers.base import stop_on_signals
from hpcbench.testbeds import readiness
from hpcbench.testbeds.here import NodeLimits
from hpcbench.testbeds.target import Target


class Runner:
    def __init__(self, campaign: Campaign, term: TextIO) -> None:
        self.campaign = campaign
        self.journal = Journal(campaign.out, campaign.name)
        self.console = Console(campaign, self.journal, term)
        self.base = paths.state_root()
        self.still_held: list[str] = []  # testbeds whose destroy failed
        self.leases: dict[str, estimate.Lease | None] = {}  # sized from the plan, by testbed
        # Each testbed's forecast before anything is booked: what sized its lease.
        self.plan_forecasts: dict[str, list[forecast.CellForecast]] = {}
        # The cells that do not fit their GPUs, each with its memory line: never run.
        self.skipped: dict[str, str] = {}
        # Every node's image and limits (the first's first) of each testbed whose nodes
        # are this machine's cores, as its booking check planned them (Kind.check_booking).
        self.node_limits: dict[str, tuple[NodeLimits, ...]] = {}

    def say(self, text: str) -> None:
        self.console.say(text)

    # ------------------------------------------------------------ the run
    def run(self, resume: bool) -> int:
        stop_on_signals()
        journal = self.journal
        if journal.store.exists():
            journal.check_owner()
            if not resume and journal.records():
                raise UsageError(
                    f"{journal.path} already holds this campaign: add --resume to run what "
                    "is left, or give the campaign another `out:`"
                )
        # Another campaign's state folder: refused before anything is written.
        check_owner(self.campaign, campaign_folder(self.campaign, self.base))
        self.size_leases()
        journal.lock()
        try:
            return self._run()
        finally:
            journal.release()

    def size_leases(self) -> None:
        """Each deployed testbed's lease from its plan (estimate.lease), before anything
        is created: a plan longer than a testbed's lease allows stops here, in one line."""
        records = self.journal.records() if self.journal.store.exists() else []
        phase_records = self.journal.phases(records)
        for tb in self.campaign.testbeds:
            cells = forecast.testbed_forecast(self.campaign, tb)
            self.plan_forecasts[tb.name] = cells
            try:
                est = estimate.testbed(self.campaign, tb, phase_records, cells)
                self.leases[tb.name] = estimate.lease(est)
            except UsageError as err:
                raise UsageError(f"{self.campaign.path}: {err}") from None
            self.skipped.update(est.skipped)

    def _run(self) -> int:
        campaign, console = self.campaign, self.console
        blocked = self.cancel_open_jobs()
        records = self.journal.records()
        states = self.journal.cell_states(records)
        journaled = {cid for cid, state in states.items() if state.status == "measured"}
        measured = self.still_measured(journaled)
        self.journal_skipped(states, measured)
        done = measured | set(self.skipped)
        todo = []
        for tb in campaign.testbeds:
            with testbed_state(state_root(campaign, tb, self.base)):
                holding = tb.kind.held(tb.env)
            if holding or any(c.id not in done for c in tb.cells):
                todo.append(tb)
        console.cells_done = sum(1 for c in campaign.cells if c.id in done)
        if not todo:
            also = " or does not fit" if self.skipped else ""
            self.say(f"nothing to do: every cell of {campaign.name} is measured{also}")
            return self._finish()
        console.clock.plan(*estimate.remaining(campaign, records, measured, todo))
        self.preflight(todo)
        self.measure_before_booking()
        self.journal_plan_forecasts()
        left = console.cells_total - console.cells_done
        self.say(
            f"{campaign.name}: {len(todo)} testbed(s) to run, {left} cell(s) left; "
            f"journal {self.journal.path}"
        )
        for k, tb in enumerate(todo, 1):
            console.tb, console.tb_number = tb, (k, len(todo))
            try:
                if tb.name in blocked:
                    self.say(
                        "not run: a slurm job of it may still be queued or running (named "
                        "above); `campaign run --resume` runs it once that job is gone"
                    )
                    continue
                self.reforecast(tb)
                self.run_testbed(tb, done)
            except KeyboardInterrupt as err:
                self.not_started(todo[k - 1 :], f"interrupted by {bounded.stop_name(err)}")
                raise
            finally:
                console.tb = None
                console.clock.settled(tb.name)
        return self._finish()

    def journal_skipped(self, states: dict[str, CellState], measured: set[str]) -> None:
        """The cells that do not fit, journaled skipped with their memory line and said,
        before anything is booked; one journaled so already is left as it is, and so is
        one measured (on GPUs the file named otherwise then): its runs stand."""
        for tb in self.campaign.testbeds:
            for cell in tb.cells:
                why = self.skipped.get(cell.id)
                if why is None or cell.id in measured:
                    continue
                state = states.get(cell.id)
                if state is None or (state.status, state.why) != ("skipped", why_line(why)):
                    self.journal.cell(cell, "skipped", why)
                    self.say(f"{tb.name}: {cell.label}: not run, {why}")

    def not_started(self, testbeds: list[TestbedPlan], why: str) -> None:
        """After a stop: the cells of these testbeds that the journal holds nothing of
        are pending with its cause, as far as the journal can be written (a second stop
        waits for it)."""
        with bounded.ctrl_c_deferred():
            try:
                states = self.journal.cell_states()
            except Exception:  # an unreadable journal: the next read says why
                return
            for tb in testbeds:
                self.life(tb).back_to_pending([c for c in tb.cells if c.id not in states], why)

    def journal_plan_forecasts(self) -> None:
        """Each testbed's forecast as made before anything is booked (the one that sized
        its lease), once: a resumed campaign keeps its first (the report scores it)."""
        made = {r["testbed"] for r in self.journal.forecasts() if r["made"] == "plan"}
        for tb in self.campaign.testbeds:
            if tb.name not in made:
                cells = self.plan_forecasts[tb.name]
                self.journal.forecast(tb, "plan", [f.record() for f in cells])

    def reforecast(self, tb: TestbedPlan) -> None:
        """Just before the testbed is booked: its forecast again from what the earlier
        testbeds measured (forecast.testbed_forecast), said, journaled, and its lease
        sized from it. A lease the new forecast would make longer than the testbed
        allows keeps the one sized at the start (said so)."""
        campaign = self.campaign
        cells = forecast.testbed_forecast(campaign, tb)
        phase_records = self.journal.phases()
        est = estimate.testbed(campaign, tb, phase_records, cells)
        try:
            self.leases[tb.name] = estimate.lease(est)
        except UsageError as err:
            self.say(f"{err}; keeping the lease sized at the start")
        lease = self.leases.get(tb.name)
        self.say("forecast before booking, from what is measured so far:")
        for line in forecast.sources(cells) + forecast.cell_lines(cells):
            self.say(f"  {line}")
        booked = None
        if lease is not None and lease.value:
            self.say(f"  lease: {lease.variable} {lease.value} ({lease.source})")
            booked = {"variable": lease.variable, "value": lease.value, "ends_at": None}
        self.journal.forecast(tb, "booking", [f.record() for f in cells], booked)

    def still_measured(self, journaled: set[str]) -> set[str]:
        """The cells the journal calls measured whose runs their testbed's store still
        holds, matched as `scale --resume` matches them: by the whole configuration and
        its method (store.config_key of the record sweep.base_record makes for the
        cell). A store lost, or replaced since by runs of another model, testbed or
        method at the same batch, nodes and workers, is measured again, not trusted."""
        kept = set()
        for tb in self.campaign.testbeds:
            if not any(c.id in journaled for c in tb.cells):
                continue
            store = self.campaign.testbed_store(tb)
            runs = store.runs() if store.exists() else []
            done = done_configs(runs)
            rates = {r["link_rate"] for r in runs if isinstance(r.get("link_rate"), str)}
            for part in tb.parts:
                targets = planned_targets(self.campaign, tb, part, self.base, rates) if done else []
                for cell in (c for c in part.cells if c.id in journaled):
                    planned = {
                        config_key(
                            sweep.base_record(t, part.workload, part.sweep.seed, cell.config, 0)
                        )
                        for t in targets
                    }
                    if planned & done:
                        kept.add(cell.id)
                    else:
                        self.say(
                            f"{tb.name}: {cell.label} is measured in the journal but "
                            f"{store.path} holds no run of it as this campaign measures it: "
                            "measuring it again"
                        )
        return kept

    def _finish(self) -> int:
        states = self.journal.cell_states()
        cells = self.campaign.cells

        def now(status: str) -> list[Cell]:
            return [c for c in cells if states.get(c.id) and states[c.id].status == status]

        failed, skipped = now("failed"), now("skipped")
        left = [
            c
            for c in cells
            if not states.get(c.id) or states[c.id].status not in ("measured", "failed", "skipped")
        ]
        try:
            written = comparison.build(self.campaign)
            self.say(f"report: {written[0]}")
        except UsageError as err:  # nothing measured yet: no report to make
            self.say(f"no report: {err}")
        measured = len(cells) - len(failed) - len(skipped) - len(left)
        took = format_duration(time.monotonic() - self.console.started)
        too_big = f"{len(skipped)} skipped (they do not fit), " if skipped else ""
        self.say(
            f"{measured} of {len(cells)} cells measured, {len(failed)} failed, "
            f"{too_big}{len(left)} not run; {took}"
        )
        for name in self.still_held:
            self.say(
                f"testbed {name} is still held: `python -m hpcbench campaign destroy "
                f"{self.campaign.path} --testbed {name}` releases it"
            )
        jobs = self.journal.jobs_left()
        for job in jobs:  # last, where a terminal shows it without scrolling back
            self.say(f"STILL QUEUED OR RUNNING: {left_line(job)}")
        return 1 if failed or left or self.still_held or jobs else 0

    def preflight(self, todo: list[TestbedPlan]) -> None:
        """Before the first deploy or job, every testbed checked without creating
        anything: a deployed one's settings and credentials by the plan `deploy` makes
        (in a folder removed after), a partition's existence and a test submission and
        its --data folder (sweep.check_data), a host list's reachability
        (hpcbench.testbeds.readiness)."""
        for k, tb in enumerate(todo, 1):
            where = f"{self.campaign.path}: testbeds[{tb.index - 1}] ({tb.name})"
            if not tb.kind.booking_check:  # nothing booked: its nodes are checked as they are
                self.say(
                    f"checking testbed {k}/{len(todo)} {tb.name}: {tb.where}, nothing submitted"
                )
                part = widest(tb)
                try:
                    target = Target.resolve(part.target)
                    readiness.preflight(target)
                    sweep.check_data(target, part.workload)  # before the check job
                except UsageError as err:
                    raise UsageError(f"{where}: {err}") from None
                continue
            self.say(
                f"checking testbed {k}/{len(todo)} {tb.name}: {tb.kind.booking_check}, "
                "nothing created"
            )
            scratch = Path(tempfile.mkdtemp(prefix="hpcbench-check-"))
            try:
                log = self.console.log_path(tb)
                with testbed_state(scratch), logged(log, root=self.campaign.out):
                    limits = tb.kind.check_booking(tb.env, tb.settings)
                if limits:
                    self.node_limits[tb.name] = limits
            except UsageError as err:
                raise UsageError(f"{where}: {err}") from None
            except RuntimeError as err:
                raise UsageError(f"{where}: cannot plan it: {err}") from None
            finally:
                shutil.rmtree(scratch, ignore_errors=True)

    def measure_before_booking(self) -> None:
        """One worker on this machine for each testbed of its cores whose plan has no
        measured figure yet (campaign/before_booking.py); where one was made, the plan
        is made again from it before it is journaled."""
        if before_booking.measure_all(self.campaign, self.node_limits, self.say):
            for tb in self.campaign.testbeds:
                self.plan_forecasts[tb.name] = forecast.testbed_forecast(self.campaign, tb)

    def life(self, tb: TestbedPlan) -> TestbedLife:
        return TestbedLife(self.campaign, self.journal, self.console, self.base, self.leases, tb)

    def run_testbed(self, tb: TestbedPlan, done: set[str]) -> None:
        """The testbed's cells not done (measured, or skipped as too big for its GPUs)."""
        claim(self.campaign, self.base)  # marked as this campaign's before it holds state
        life = self.life(tb)
        with slurm.booked(self.book(tb)):
            life.run([c for c in tb.cells if c.id not in done])
        if life.still_held:
            self.still_held.append(tb.name)

    def book(self, tb: TestbedPlan) -> functools.partial[None]:
        """Where the testbed's Slurm jobs are written down as they come and go."""
        return functools.partial(self.journal.job, tb)

    def cancel_open_jobs(self, testbeds: list[TestbedPlan] | None = None) -> set[str]:
        """Before anything is submitted: every Slurm job the journal holds open of these
        testbeds (None: all), left by a run killed outright or by a cancel that failed,
        cancelled again and confirmed gone, as its job records then say. The testbeds
        of which a job may still be queued or running (each named, with its scancel
        command): none of them gets another job in this run."""
        jobs = self.journal.jobs_left()
        blocked = set()
        for tb in self.campaign.testbeds if testbeds is None else testbeds:
            mine = [j for j in jobs if j["testbed"] == tb.name]
            if not mine:  # only a kind that queues jobs journals them
                continue
            scheduler = Target.resolve(widest(tb).target).scheduler
            with slurm.booked(self.book(tb)):
                for job in mine:
                    handle = job["job"]
                    self.say(
                        f"testbed {tb.name}: slurm job {handle} was left by an earlier run: "
                        "cancelling it"
                    )
                    if scheduler.cancel_left(handle):
                        self.say(
                            f"testbed {tb.name}: slurm job {handle}: gone (squeue lists it no more)"
                        )
                    else:
                        blocked.add(tb.name)
        # Journaled above as job records: not for the next phase of another testbed.
        slurm.take_left()
        slurm.take_gone()
        return blocked


def planned_targets(
    campaign: Campaign, tb: TestbedPlan, part: SweepPart, base: Path, rates: set[str]
) -> list[Target]:
    """The Target the part's sweep resolves (Target.resolve, as `scale` does), where it
    is known without deploying anything: a partition's, a host list's, a deployed
    testbed's while its inventory is there. Of a deployed testbed that is not, its
    nodes stood in by a host list of the planned shape, with its environment's name
    and the link rate its settings or variant give; where neither gives one, the
    Terraform default is not known here, and each rate the store's runs carry stands
    in (the link alone then goes unchecked). Empty: it does not resolve (the preflight
    says why), so nothing is trusted."""
    try:
        with testbed_state(state_root(campaign, tb, base)):
            if tb.kind.nodes_known(tb.env):
                return [Target.resolve(part.target)]
        count = max(part.target.node_counts)
        shape = tuple(HostSlots(f"node{i}", part.gpus_per_node) for i in range(1, count + 1))
        stand_in = Target.resolve(dataclasses.replace(part.target, hosts=shape))
    except UsageError:
        return []
    values = forecast.given_settings(tb)
    # The inventory's link_rate as nodeset reads it: empty where unshaped.
    given = [str(values["link_rate"] or "")] if "link_rate" in values else sorted(rates)
    return [
        dataclasses.replace(
            stand_in,
            testbed=dataclasses.replace(
                stand_in.testbed, env=tb.env, kind=tb.kind.name, link_rate=rate
            ),
        )
        for rate in given
    ]


def dry_run(campaign: Campaign) -> int:
    """`campaign run --dry-run`: what each testbed would do, the cells it would skip as
    too big for its GPUs and why, and every job script or command line a partition's or
    host list's runs would launch; nothing is checked against a cluster, created,
    submitted or written."""
    for tb in campaign.testbeds:
        print(f"## testbed {tb.index}/{len(campaign.testbeds)} {tb.name} ({tb.title})")
        skipped = estimate.testbed_memory(tb).skipped()
        for cell in (c for c in tb.cells if c.id in skipped):
            print(f"# not run: {cell.label} ({cell.id}): {skipped[cell.id]}")
        runs = [c for c in tb.cells if c.id not in skipped]
        if not runs:
            print("nothing is booked: no cell of it fits\n")
            continue
        if "deploy" in tb.kind.phases:  # its nodes are made first: no command line yet
            settings = " ".join(f"{k}={v}" for k, v in tb.settings)
            print(
                f"deploy {tb.env} ({settings or 'its defaults'}), verify, measure "
                f"{len(runs)} cell(s), destroy; its runs' command lines depend on the "
                "deployed nodes (`scale --dry-run` shows them once it is deployed)\n"
            )
            continue
        part = widest(tb)
        target = Target.resolve(part.target)
        print(
            f"# the stack check (verify), {tb.where}\n"
            f"{target.describe(readiness.check_spec(target, part.workload))}\n"
        )
        for part in tb.parts:
            only = frozenset(c.config.key for c in part.cells if c.id not in skipped)
            if only:
                spec = dataclasses.replace(part.sweep, dry_run=True, only=only)
                sweep.run(part.workload, part.target, spec)
    print("nothing was checked, created or submitted; `campaign run` runs it")
    return 0


def run(campaign: Campaign, resume: bool) -> int:
    term = os.fdopen(os.dup(2), "w", buffering=1)
    try:
        return Runner(campaign, term).run(resume)
    finally:
        term.close()


def destroy_held(campaign: Campaign, names: list[str]) -> int:
    """`campaign destroy`: every testbed of the campaign that still holds something."""
    # Names checked before anything is locked or written (a typo is one line, exit 2).
    chosen = [campaign.testbed(n) for n in names] if names else list(campaign.testbeds)
    check_owner(campaign, campaign_folder(campaign))  # never another campaign's testbeds
    term = os.fdopen(os.dup(2), "w", buffering=1)
    runner = Runner(campaign, term)
    runner.journal.lock()
    status = 0
    try:
        if runner.journal.store.exists() and runner.cancel_open_jobs(chosen):
            status = 1  # each job that may still run is named, with its scancel command
        for k, tb in enumerate(chosen, 1):
            runner.console.tb, runner.console.tb_number = tb, (k, len(chosen))
            with testbed_state(state_root(campaign, tb, runner.base)):
                if not tb.kind.held(tb.env):
                    runner.say("holds nothing")
                    continue
                try:
                    runner.life(tb).teardown(tb, keep=False)
                except Stopped:
                    status = 1
        runner.console.tb = None
        # Nothing held by any of its testbeds: its state folder goes too (state.py).
        said = remove_if_released(campaign, runner.base) if status == 0 else ""
        if said:
            runner.say(said)
    finally:
        runner.journal.release()
        term.close()
    return status
