"""One testbed's life in a campaign: deploy (or nothing, for a partition or hosts),
verify, probe and sweep its cells left, then release it on every path, whatever
failed on the way. hpcbench.campaign.runner takes the testbeds in turn."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import yaml

from hpcbench.campaign.campaign_file import Campaign, Cell, SweepPart, TestbedPlan
from hpcbench.campaign.cells import fail, measure_part
from hpcbench.campaign.console import Console, Stopped
from hpcbench.campaign.estimate import Lease
from hpcbench.campaign.journal import Journal
from hpcbench.campaign.state import state_root, testbed_state
from hpcbench.core import bounded, files, paths
from hpcbench.core.errors import UsageError
from hpcbench.core.progress import format_duration
from hpcbench.testbeds import leases, readiness
from hpcbench.testbeds.target import Target


class TestbedLife:
    """One testbed of the campaign in hand, from deploy to release. `finished` holds
    its cells that got their final status; `still_held` says its destroy failed."""

    def __init__(
        self,
        campaign: Campaign,
        journal: Journal,
        console: Console,
        base: Path,
        leases: dict[str, Lease | None],
        tb: TestbedPlan,
    ) -> None:
        self.campaign, self.journal, self.console = campaign, journal, console
        self.base, self.leases = base, leases  # the state folders' root; leases by testbed
        self.tb = tb
        self.finished: set[str] = set()
        self.still_held = False

    def say(self, text: str) -> None:
        self.console.say(text)

    def run(self, pending: list[Cell]) -> None:
        """Measure the cells left, then release the testbed, on every path: a stop
        signal from the start to the end of the measuring unwinds into the release,
        and one after it (or a second one) waits until the release is done."""
        tb = self.tb
        failed = False
        with testbed_state(state_root(self.campaign, tb, self.base)), bounded.StopGate() as gate:
            try:
                try:
                    if pending:
                        failed = not self.measure_testbed(tb, pending)
                finally:
                    gate.hold()  # shut already where a signal was raised here
            except BaseException as err:  # Ctrl-C, SIGHUP, a journal that cannot be written, a bug
                why = (
                    f"interrupted by {bounded.stop_name(err)}"
                    if isinstance(err, KeyboardInterrupt)
                    else f"stopped by an error ({type(err).__name__}: {err})"
                )
                self.say(f"{why}: {self.releasing()}")
                try:  # what it holds goes first; the journal is told after, if it can be
                    self.teardown(tb, keep=False)
                except Stopped:  # said with what is held; the stop goes on
                    self.still_held = True
                finally:
                    left = [c for c in pending if c.id not in self.finished]
                    self.back_to_pending(left, why)
                raise
            try:
                self.teardown(tb, keep=failed and tb.keep_on_failure)
            except Stopped:  # said on the terminal, with what is held; go on with the next
                self.still_held = True

    def releasing(self) -> str:
        """What a stop does to what the testbed holds, as its kind says."""
        return self.tb.kind.releasing

    def back_to_pending(self, cells: list[Cell], why: str) -> None:
        """Cells a stop left unmeasured go back to pending, as far as the journal can be
        written; a journal that cannot is said, not raised over what stopped the run."""
        try:
            for cell in cells:
                self.journal.cell(cell, "pending", f"{why}: `campaign run --resume` runs it")
        except Exception as err:  # the store's own error says where the record was kept
            self.say(
                f"the journal could not be written ({err}); `campaign run --resume` "
                "measures these cells again"
            )

    def measure_testbed(self, tb: TestbedPlan, pending: list[Cell]) -> bool:
        """deploy, verify, sweep; False when a phase failed or a cell did."""
        console = self.console
        try:
            if "deploy" in tb.kind.phases:  # its kind makes its nodes for the campaign
                with console.phase(tb, "deploy") as record:
                    self.write_group_vars(tb)
                    settings, booked = self.with_lease(tb)
                    try:
                        tb.kind.acquire(tb.env, settings)
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

    def with_lease(
        self, tb: TestbedPlan
    ) -> tuple[tuple[tuple[str, str], ...], dict[str, Any] | None]:
        """The testbed's settings with its lease sized from the plan (estimate.lease),
        and what the journal keeps of the lease for `campaign status`."""
        lease = self.leases.get(tb.name)
        if lease is None or not lease.value:
            return tb.settings, None
        self.say(f"lease: {lease.variable} {lease.value} ({lease.source})")
        settings = tuple((k, v) for k, v in tb.settings if k != lease.variable)
        ends = time.time() + lease.minutes * 60 if lease.minutes else None
        return (*settings, (lease.variable, lease.value)), {
            "variable": lease.variable,
            "value": lease.value,
            "ends_at": ends,
        }

    def verify_testbed(self, tb: TestbedPlan) -> None:
        """The checks of the testbed's kind (a deployed one's testinfra), else a stack
        check on one node (a job on the partition, a process on the first host)."""
        rc = tb.kind.verify(tb.env)
        if rc is not None:
            if rc != 0:
                raise Stopped(
                    f"verify: the testbed's checks failed (pytest exit {rc}); "
                    f"see {self.console.log_path(tb)}"
                )
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
        target, root = folder / "all.yml", paths.state_root()  # no link followed below root
        if not tb.ansible:
            files.remove(target, root)
            return
        files.make_folder(folder, root, 0o700)
        text = f"# written by `hpcbench campaign run` from {self.campaign.path}\n"
        # 0600 as the inventory beside it; a link planted at its name is replaced.
        files.write_atomic(
            target, text + yaml.safe_dump(tb.ansible, default_flow_style=False), 0o600, root
        )

    def teardown(self, tb: TestbedPlan, keep: bool) -> None:
        """destroy, unless the testbed failed and the campaign keeps failures; either way
        the journal, the terminal and the log say what is still held and how to release
        it, whatever failed on the way (the destroy, the journal, the terminal itself:
        no write comes before the destroy that could stop it). A partition or a host
        list holds nothing: each job or run was cancelled or ended with its run.

        Nothing cuts it short: an interrupt (Ctrl-C, SIGTERM, the SIGHUP of a closed
        terminal) is taken once the destroy and the lease cancelling are done."""
        if "destroy" not in tb.kind.phases:
            return
        with bounded.ctrl_c_deferred():
            self._teardown(tb, keep)

    def _teardown(self, tb: TestbedPlan, keep: bool) -> None:
        if not tb.kind.held(tb.env):
            shutil.rmtree(paths.env_state(tb.env), ignore_errors=True)
            return
        if keep:
            self.journal.phase(tb, "keep", "ok", 0.0, "kept on failure for debugging")
            self.say(
                f"kept for debugging (keep_on_failure): HPCBENCH_STATE={paths.state_root()} "
                f"python -m hpcbench verify --env {tb.env}; `python -m hpcbench campaign "
                f"destroy {self.campaign.path} --testbed {tb.name}` removes it"
            )
            return
        try:
            with self.console.phase(tb, "destroy", must_run=True) as record:
                try:
                    rc = tb.kind.release(tb.env)
                except (UsageError, RuntimeError) as err:
                    raise self.still_holding(tb, record, f"destroy: {err}") from None
                if rc != 0:
                    why = "destroy: some paid resources are still held"
                    raise self.still_holding(tb, record, why)
            states = self.journal.cell_states()
            for cell in tb.cells:  # what was deployed or verified is so no longer
                if cell.id in states and states[cell.id].status in ("deployed", "verified"):
                    self.journal.cell(
                        cell, "pending", "its testbed was destroyed before it was measured"
                    )
        except BaseException:
            self.tell_what_is_held(tb)
            raise

    def still_holding(self, tb: TestbedPlan, record: dict[str, Any], why: str) -> Stopped:
        """A destroy that left something held: what, for the phase's journal record."""
        record["still_held"] = self.held_lines(tb)
        return Stopped(why)

    def held_lines(self, tb: TestbedPlan) -> list[str]:
        """What the testbed still holds and how to release each thing; empty: nothing."""
        try:
            lines = [f"STILL HELD: {what}" for what in tb.kind.held(tb.env)]
            lines += [lease.by_hand() for lease in leases.held(paths.env_state(tb.env))]
        except (UsageError, OSError) as err:  # a state file that cannot be read
            lines = [f"STILL HELD: unknown ({err}); see {paths.env_state(tb.env)}"]
        if lines:
            lines.append(
                f"to retry: python -m hpcbench campaign destroy {self.campaign.path} "
                f"--testbed {tb.name}"
            )
        return lines

    def tell_what_is_held(self, tb: TestbedPlan) -> None:
        """What the testbed still holds, on the terminal and in the testbed's log (the
        log alone once the terminal is gone); the journal has it in the failed destroy's
        record. Neither failing stops the other."""
        for line in self.held_lines(tb):
            self.console.say(line, keep=True)


def widest(tb: TestbedPlan) -> SweepPart:
    """The part with the most workers per node: what a partition must accept."""
    return max(tb.parts, key=lambda p: p.gpus_per_node)
