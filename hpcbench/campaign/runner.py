"""`hpcbench campaign run`: per testbed, deploy -> verify -> probe and sweep -> destroy.

Each testbed has a state folder of its own (campaign/state.py); what the
campaign tells goes to the terminal, the testbed's log and the journal
(campaign/console.py); cells are measured by `scale` sweeps (campaign/cells.py).

Failures: a testbed whose deploy or verify fails, or whose runs all fail, is
recorded with its cause and the campaign goes on with the next. Ctrl-C (or
SIGTERM, SIGHUP) stops the campaign: the testbed in hand is destroyed with
the guarantees of `hpcbench destroy` (leases cancelled; a lease that cannot
be is printed with the command that releases it) and `--resume` continues.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

import yaml

from hpcbench import leases, paths, readiness, sweep
from hpcbench.campaign import estimate, report
from hpcbench.campaign.cells import fail, measure_part
from hpcbench.campaign.console import Console, Stopped, logged
from hpcbench.campaign.journal import Journal
from hpcbench.campaign.spec import Campaign, Cell, SweepPart, TestbedPlan
from hpcbench.campaign.state import held, state_root, testbed_state
from hpcbench.deploy import DeployRequest, EnvRequest, VerifyRequest, check, deploy, destroy, verify
from hpcbench.errors import UsageError
from hpcbench.progress import format_duration
from hpcbench.schedulers.base import stop_on_signals
from hpcbench.store import Store
from hpcbench.target import Target


class Runner:
    def __init__(self, campaign: Campaign, term: TextIO) -> None:
        self.campaign = campaign
        self.journal = Journal(campaign.out, campaign.name)
        self.console = Console(campaign, self.journal, term)
        self.base = paths.state_root()
        self.finished: set[str] = set()  # cells of the testbed in hand that got a final status
        self.still_held: list[str] = []  # testbeds whose destroy failed
        self.leases: dict[str, estimate.Lease | None] = {}  # sized from the plan, by testbed

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
            try:
                self.leases[tb.name] = estimate.lease(estimate.testbed(self.campaign, tb,
                                                                       phase_records))  # fmt: skip
            except UsageError as err:
                raise UsageError(f"{self.campaign.path}: {err}") from None

    def _run(self) -> int:
        campaign, console = self.campaign, self.console
        records = self.journal.records()
        states = self.journal.cell_states(records)
        journaled = {cid for cid, state in states.items() if state.status == "measured"}
        measured = self.still_measured(journaled)
        todo = []
        for tb in campaign.testbeds:
            holding: list[str] = []
            if tb.deployed:
                with testbed_state(state_root(campaign, tb, self.base)):
                    holding = held(tb.env)
            if holding or any(c.id not in measured for c in tb.cells):
                todo.append(tb)
        console.cells_done = sum(1 for c in campaign.cells if c.id in measured)
        if not todo:
            self.say(f"nothing to do: every cell of {campaign.name} is measured")
            return self._finish()
        console.clock.plan(*estimate.remaining(campaign, records, measured, todo))
        self.preflight(todo)
        left = console.cells_total - console.cells_done
        self.say(f"{campaign.name}: {len(todo)} testbed(s) to run, {left} cell(s) left; "
                 f"journal {self.journal.path}")  # fmt: skip
        for k, tb in enumerate(todo, 1):
            console.tb, console.tb_number = tb, (k, len(todo))
            try:
                self.run_testbed(tb, measured)
            finally:
                console.tb = None
                console.clock.settled(tb.name)
        return self._finish()

    def still_measured(self, journaled: set[str]) -> set[str]:
        """The cells the journal calls measured whose runs their testbed's store still
        holds: a store lost or replaced since is measured again, not trusted."""
        kept = set()
        for tb in self.campaign.testbeds:
            cells = [c for c in tb.cells if c.id in journaled]
            if not cells:
                continue
            store = Store(self.campaign.testbed_out(tb))
            held_runs = {(r.get("batch"), r.get("nodes"), r.get("workers"))
                         for r in (store.runs() if store.exists() else [])
                         if r.get("status") == "ok"}  # fmt: skip
            for cell in cells:
                if cell.config.key in held_runs:
                    kept.add(cell.id)
                else:
                    self.say(f"{tb.name}: {cell.label} is measured in the journal but "
                             f"{store.path} holds no run of it: measuring it again")  # fmt: skip
        return kept

    def _finish(self) -> int:
        states = self.journal.cell_states()
        cells = self.campaign.cells
        failed = [c for c in cells if states.get(c.id) and states[c.id].status == "failed"]
        left = [c for c in cells
                if not states.get(c.id) or states[c.id].status not in ("measured", "failed")]
        try:
            written = report.build(self.campaign)
            self.say(f"report: {written[0]}")
        except UsageError as err:  # nothing measured yet: no report to make
            self.say(f"no report: {err}")
        measured = len(cells) - len(failed) - len(left)
        took = format_duration(time.monotonic() - self.console.started)
        self.say(f"{measured} of {len(cells)} cells measured, {len(failed)} failed, "
                 f"{len(left)} not run; {took}")  # fmt: skip
        for name in self.still_held:
            self.say(f"testbed {name} is still held: `python -m hpcbench campaign destroy "
                     f"{self.campaign.path} --testbed {name}` releases it")  # fmt: skip
        return 1 if failed or left or self.still_held else 0

    def preflight(self, todo: list[TestbedPlan]) -> None:
        """Before the first deploy or job, every testbed checked without creating
        anything: a deployed one's settings and credentials by the plan `deploy` makes
        (in a folder removed after), a partition's existence and a test submission, a
        host list's reachability (hpcbench.readiness)."""
        for k, tb in enumerate(todo, 1):
            where = f"{self.campaign.path}: testbeds[{tb.index - 1}] ({tb.name})"
            if not tb.deployed:
                self.say(f"checking testbed {k}/{len(todo)} {tb.name}: {tb.where}, nothing "
                         "submitted")  # fmt: skip
                try:
                    readiness.preflight(Target.resolve(widest(tb).target))
                except UsageError as err:
                    raise UsageError(f"{where}: {err}") from None
                continue
            self.say(f"checking testbed {k}/{len(todo)} {tb.name}: terraform plan, nothing created")
            scratch = Path(tempfile.mkdtemp(prefix="hpcbench-check-"))
            try:
                with testbed_state(scratch), logged(self.console.log_path(tb)):
                    check(DeployRequest(tb.env, tb.settings))
            except UsageError as err:
                raise UsageError(f"{where}: {err}") from None
            except RuntimeError as err:
                raise UsageError(f"{where}: cannot plan it: {err}") from None
            finally:
                shutil.rmtree(scratch, ignore_errors=True)

    def run_testbed(self, tb: TestbedPlan, measured: set[str]) -> None:
        pending = [c for c in tb.cells if c.id not in measured]
        failed = False
        self.finished = set()
        with testbed_state(state_root(self.campaign, tb, self.base)):
            try:
                if pending:
                    failed = not self.measure_testbed(tb, pending)
            except BaseException as err:  # Ctrl-C, a journal that cannot be written, a bug
                why = ("interrupted" if isinstance(err, KeyboardInterrupt)
                       else f"stopped by an error ({type(err).__name__}: {err})")  # fmt: skip
                self.say(f"{why}: destroying what this testbed holds")
                try:  # what it holds goes first; the journal is told after, if it can be
                    self.teardown(tb, keep=False)
                finally:
                    self.back_to_pending([c for c in pending if c.id not in self.finished], why)
                raise
            try:
                self.teardown(tb, keep=failed and tb.keep_on_failure)
            except Stopped:  # said on the terminal, with what is held; go on with the next
                self.still_held.append(tb.name)

    def back_to_pending(self, cells: list[Cell], why: str) -> None:
        """Cells a stop left unmeasured go back to pending, as far as the journal can be
        written; a journal that cannot is said, not raised over what stopped the run."""
        try:
            for cell in cells:
                self.journal.cell(cell, "pending", f"{why}: `campaign run --resume` runs it")
        except Exception as err:  # the store's own error says where the record was kept
            self.say(f"the journal could not be written ({err}); `campaign run --resume` "
                     "measures these cells again")  # fmt: skip

    def measure_testbed(self, tb: TestbedPlan, pending: list[Cell]) -> bool:
        """deploy, verify, sweep; False when a phase failed or a cell did."""
        console = self.console
        try:
            if tb.deployed:
                with console.phase(tb, "deploy") as record:
                    self.write_group_vars(tb)
                    settings, booked = self.with_lease(tb)
                    try:
                        deploy(DeployRequest(tb.env, settings))
                    except (UsageError, RuntimeError) as err:
                        raise Stopped(f"deploy: {err}") from None
                    if booked is not None:
                        record["lease"] = booked
                for cell in pending:
                    self.journal.cell(cell, "deployed")
            with console.phase(tb, "verify"):
                self.verify_testbed(tb)
            for cell in pending:
                self.journal.cell(cell, "verified")
        except Stopped as err:
            fail(console, pending, self.finished, str(err))
            return False
        ok = True
        for part in tb.parts:
            todo = [c for c in part.cells if c in pending]
            if todo:
                ok = measure_part(console, tb, part, todo, self.finished) and ok
        return ok

    def with_lease(self, tb: TestbedPlan
                   ) -> tuple[tuple[tuple[str, str], ...], dict[str, Any] | None]:  # fmt: skip
        """The testbed's settings with its lease sized from the plan (estimate.lease),
        and what the journal keeps of the lease for `campaign status`."""
        lease = self.leases.get(tb.name)
        if lease is None or not lease.value:
            return tb.settings, None
        self.say(f"lease: {lease.variable} {lease.value} ({lease.source})")
        settings = tuple((k, v) for k, v in tb.settings if k != lease.variable)
        ends = time.time() + lease.minutes * 60 if lease.minutes else None
        return (*settings, (lease.variable, lease.value)), {
            "variable": lease.variable, "value": lease.value, "ends_at": ends}

    def verify_testbed(self, tb: TestbedPlan) -> None:
        """A deployed testbed's testinfra checks; a stack check on one node of the
        others (a job on the partition, a process on the first host)."""
        if tb.deployed:
            rc = verify(VerifyRequest(tb.env))
            if rc != 0:
                raise Stopped(f"verify: the testbed's checks failed (pytest exit {rc}); "
                              f"see {self.console.log_path(tb)}")  # fmt: skip
            return
        part = widest(tb)
        try:
            result = readiness.check(Target.resolve(part.target), part.workload)
        except (UsageError, RuntimeError) as err:
            raise Stopped(f"verify: {err}") from None
        for c in result.checks:
            print(f"{'ok' if c.get('ok') else 'FAILED'}: {c.get('name')}: {c.get('detail')}")
        if result.queue_wait_s is not None:
            self.say(f"check job waited {format_duration(result.queue_wait_s)} in the queue")
        if not result.ok:
            raise Stopped(f"verify: {result.why}")

    def write_group_vars(self, tb: TestbedPlan) -> None:
        """The campaign's Ansible variables for this testbed, beside the inventory
        Terraform renders (the last inventory source: its group_vars win)."""
        folder = paths.ensure_env_state(tb.env) / "group_vars"
        target = folder / "all.yml"
        if not tb.ansible:
            target.unlink(missing_ok=True)
            return
        folder.mkdir(mode=0o700, exist_ok=True)
        text = f"# written by `hpcbench campaign run` from {self.campaign.path}\n"
        target.write_text(text + yaml.safe_dump(tb.ansible, default_flow_style=False))

    def teardown(self, tb: TestbedPlan, keep: bool) -> None:
        """destroy, unless the testbed failed and the campaign keeps failures; either way
        the terminal says what is still held and how to release it, whatever failed on
        the way (the destroy, the journal, the terminal itself). A partition or a host
        list holds nothing: each job or run was cancelled or ended with its run."""
        if not tb.deployed:
            return
        if not held(tb.env):
            shutil.rmtree(paths.env_state(tb.env), ignore_errors=True)
            return
        if keep:
            self.journal.phase(tb, "keep", "ok", 0.0, "kept on failure for debugging")
            self.say(f"kept for debugging (keep_on_failure): HPCBENCH_STATE={paths.state_root()} "
                     f"python -m hpcbench verify --env {tb.env}; `python -m hpcbench campaign "
                     f"destroy {self.campaign.path} --testbed {tb.name}` removes it")  # fmt: skip
            return
        try:
            with self.console.phase(tb, "destroy"):
                try:
                    rc = destroy(EnvRequest(tb.env))
                except (UsageError, RuntimeError) as err:
                    raise Stopped(f"destroy: {err}") from None
                if rc != 0:
                    raise Stopped("destroy: some paid resources are still held")
            states = self.journal.cell_states()
            for cell in tb.cells:  # what was deployed or verified is so no longer
                if cell.id in states and states[cell.id].status in ("deployed", "verified"):
                    self.journal.cell(cell, "pending", "its testbed was destroyed before it "
                                      "was measured")  # fmt: skip
        except BaseException:
            self.tell_what_is_held(tb)
            raise

    def tell_what_is_held(self, tb: TestbedPlan) -> None:
        """What the testbed still holds and how to release each thing, by every way left:
        the terminal and the testbed's log; neither failing stops the other."""
        lines = [f"STILL HELD: {what}" for what in held(tb.env)]
        lines += [lease.by_hand() for lease in leases.held(paths.env_state(tb.env))]
        if not lines:
            return
        lines.append(f"to retry: python -m hpcbench campaign destroy {self.campaign.path} "
                     f"--testbed {tb.name}")  # fmt: skip
        for line in lines:
            with contextlib.suppress(OSError, ValueError):
                self.say(line)
        with contextlib.suppress(OSError), self.console.log_path(tb).open("a") as log:
            log.write("".join(f"{line}\n" for line in lines))


def widest(tb: TestbedPlan) -> SweepPart:
    """The part with the most workers per node: what a partition must accept."""
    return max(tb.parts, key=lambda p: p.gpus_per_node)


def dry_run(campaign: Campaign) -> int:
    """`campaign run --dry-run`: what each testbed would do, and every job script or
    command line a partition's or host list's runs would launch; nothing is checked
    against a cluster, created, submitted or written."""
    for tb in campaign.testbeds:
        print(f"## testbed {tb.index}/{len(campaign.testbeds)} {tb.name} ({tb.title})")
        if tb.deployed:
            settings = " ".join(f"{k}={v}" for k, v in tb.settings)
            print(f"deploy {tb.env} ({settings or 'its defaults'}), verify, measure "
                  f"{len(tb.cells)} cell(s), destroy; its runs' command lines depend on the "
                  "deployed nodes (`scale --dry-run` shows them once it is deployed)\n")
            continue
        part = widest(tb)
        target = Target.resolve(part.target)
        print(f"# the stack check (verify), {tb.where}\n"
              f"{target.launcher.describe(readiness.check_spec(target, part.workload))}\n")
        for part in tb.parts:
            only = frozenset(c.config.key for c in part.cells)
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
    term = os.fdopen(os.dup(2), "w", buffering=1)
    runner = Runner(campaign, term)
    runner.journal.lock()
    status = 0
    try:
        for k, tb in enumerate(chosen, 1):
            runner.console.tb, runner.console.tb_number = tb, (k, len(chosen))
            with testbed_state(state_root(campaign, tb, runner.base)):
                if not tb.deployed or not held(tb.env):
                    runner.say("holds nothing")
                    continue
                try:
                    runner.teardown(tb, keep=False)
                except Stopped:
                    status = 1
    finally:
        runner.journal.release()
        term.close()
    return status
