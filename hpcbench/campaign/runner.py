"""`hpcbench campaign run`: per testbed, deploy -> verify -> probe and sweep -> destroy.

Every testbed lives in a state folder of its own under
`<state>/campaigns/<campaign>/<testbed>/` (never the user's `.hpcbench/<env>`),
so a campaign neither reuses nor destroys a testbed the user deployed by hand,
and two testbeds of one environment (GPULab 1x10 and 10x1) never share state.
Each phase's output (Terraform, Ansible, pytest, the sweep) goes to
`<out>/logs/<testbed>.log`; the terminal gets one line per step and per run.

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
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import yaml

from hpcbench import analysis, leases, options, paths, sweep
from hpcbench.campaign import estimate, report
from hpcbench.campaign.journal import Journal, one_line
from hpcbench.campaign.spec import Campaign, Cell, SweepPart, TestbedPlan
from hpcbench.deploy import DeployRequest, EnvRequest, VerifyRequest, check, deploy, destroy, verify
from hpcbench.errors import UsageError
from hpcbench.progress import format_duration
from hpcbench.schedulers.base import stop_on_signals
from hpcbench.terraform import TerraformEnv


def state_root(campaign: Campaign, tb: TestbedPlan, base: Path | None = None) -> Path:
    """Where one testbed of a campaign keeps its Terraform state, keys and inventory."""
    return (base or paths.state_root()) / "campaigns" / campaign.name / tb.name


@contextlib.contextmanager
def testbed_state(root: Path) -> Iterator[None]:
    """hpcbench.paths, and every child (Terraform's scripts, testinfra), see `root` as
    the state folder while a testbed of the campaign is handled."""
    before = os.environ.get("HPCBENCH_STATE")
    os.environ["HPCBENCH_STATE"] = str(root)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("HPCBENCH_STATE", None)
        else:
            os.environ["HPCBENCH_STATE"] = before


@contextlib.contextmanager
def logged(path: Path) -> Iterator[None]:
    """This process's stdout and stderr (and so every child's) appended to `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (fd, *saved):
            os.close(f)


def held(env: str) -> list[str]:
    """What a testbed still holds in the current state folder: machines in Terraform's
    state, leases of paid resources (empty: nothing)."""
    out = []
    if TerraformEnv(env, {}).has_resources():
        out.append("machines in Terraform's state")
    out += [lease.what for lease in leases.held(paths.env_state(env))]
    return out


class Stopped(Exception):
    """A phase failed; the testbed's remaining cells fail with this cause."""


class Runner:
    def __init__(self, campaign: Campaign, term: TextIO) -> None:
        self.campaign = campaign
        self.term = term
        self.journal = Journal(campaign.out, campaign.name)
        self.base = paths.state_root()
        self.started = time.monotonic()
        self.clock = estimate.Clock()
        self.cells_total = len(campaign.cells)
        self.cells_done = 0
        self.tb: TestbedPlan | None = None
        self.tb_number = (0, 0)
        self.finished: set[str] = set()  # cells of the testbed in hand that got a final status
        self.still_held: list[str] = []  # testbeds whose destroy failed

    # ------------------------------------------------------------- output
    def say(self, text: str) -> None:
        prefix = ""
        if self.tb is not None:
            k, n = self.tb_number
            prefix = f"[testbed {k}/{n} {self.tb.name}] "
        self.term.write(f"{prefix}{text}\n")
        self.term.flush()

    def progress(self) -> str:
        elapsed = time.monotonic() - self.started
        eta = self.clock.eta()
        eta_text = ""
        if eta is not None:
            about, most = (format_duration(seconds) for seconds in eta)
            eta_text = f", ETA {about}" + (f" (at most {most})" if most != about else "")
        return (f"cell {self.cells_done} of {self.cells_total} done, "
                f"{format_duration(elapsed)} elapsed{eta_text}")  # fmt: skip

    def log_path(self, tb: TestbedPlan) -> Path:
        return self.campaign.out / "logs" / f"{tb.name}.log"

    @contextlib.contextmanager
    def phase(self, tb: TestbedPlan, name: str, label: str = "") -> Iterator[None]:
        """One phase: its output to the testbed's log, its time and outcome to the journal
        and the ETA's clock."""
        log = self.log_path(tb)
        shown = label or name
        self.say(f"{shown} ... (output: {log})")
        started = time.monotonic()
        try:
            with logged(log):
                print(f"==== {time.strftime('%Y-%m-%d %H:%M:%S')} {tb.name}: {name}", flush=True)
                yield
        except KeyboardInterrupt:
            self.journal.phase(tb, name, "interrupted", time.monotonic() - started)
            raise
        except Stopped as err:
            took = time.monotonic() - started
            self.journal.phase(tb, name, "failed", took, str(err))
            self.clock.finished(tb.name, name, took)
            self.say(f"{shown} FAILED in {format_duration(took)}: {one_line(str(err), 300)}")
            raise
        took = time.monotonic() - started
        self.journal.phase(tb, name, "ok", took)
        self.clock.finished(tb.name, name, took)
        self.say(f"{shown} ok in {format_duration(took)}; {self.progress()}")

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
        journal.lock()
        try:
            return self._run()
        finally:
            journal.release()

    def _run(self) -> int:
        campaign = self.campaign
        records = self.journal.records()
        states = self.journal.cell_states(records)
        measured = {cid for cid, s in states.items() if s.status == "measured"}
        todo = []
        for tb in campaign.testbeds:
            with testbed_state(state_root(campaign, tb, self.base)):
                holding = held(tb.env)
            if holding or any(c.id not in measured for c in tb.cells):
                todo.append(tb)
        self.cells_done = sum(1 for c in campaign.cells if c.id in measured)
        if not todo:
            self.say(f"nothing to do: every cell of {campaign.name} is measured")
            return self._finish()
        self.clock.plan(*estimate.remaining(campaign, records, measured, todo))
        self.preflight(todo)
        left = self.cells_total - self.cells_done
        self.say(f"{campaign.name}: {len(todo)} testbed(s) to run, {left} cell(s) left; "
                 f"journal {self.journal.path}")  # fmt: skip
        for k, tb in enumerate(todo, 1):
            self.tb, self.tb_number = tb, (k, len(todo))
            try:
                self.run_testbed(tb, measured)
            finally:
                self.tb = None
                self.clock.settled(tb.name)
        return self._finish()

    def _finish(self) -> int:
        states = self.journal.cell_states()
        failed = [c for c in self.campaign.cells if states.get(c.id) and
                  states[c.id].status == "failed"]  # fmt: skip
        left = [c for c in self.campaign.cells
                if not states.get(c.id) or states[c.id].status not in ("measured", "failed")]
        try:
            written = report.build(self.campaign)
            self.say(f"report: {written[0]}")
        except UsageError as err:  # nothing measured yet: no report to make
            self.say(f"no report: {err}")
        measured = self.cells_total - len(failed) - len(left)
        self.say(f"{measured} of {self.cells_total} cells measured, {len(failed)} failed, "
                 f"{len(left)} not run; {format_duration(time.monotonic() - self.started)}")
        for name in self.still_held:
            self.say(f"testbed {name} is still held: `python -m hpcbench campaign destroy "
                     f"{self.campaign.path} --testbed {name}` releases it")  # fmt: skip
        return 1 if failed or left or self.still_held else 0

    def preflight(self, todo: list[TestbedPlan]) -> None:
        """Every testbed's settings and credentials, checked by the plan `deploy` makes
        (nothing created, in a folder removed after), before the first deploy."""
        for k, tb in enumerate(todo, 1):
            self.say(f"checking testbed {k}/{len(todo)} {tb.name}: terraform plan, nothing created")
            scratch = Path(tempfile.mkdtemp(prefix="hpcbench-check-"))
            try:
                with testbed_state(scratch), logged(self.log_path(tb)):
                    check(DeployRequest(tb.env, tb.settings))
            except UsageError as err:
                raise UsageError(f"{self.campaign.path}: testbeds[{tb.index - 1}] "
                                 f"({tb.name}): {err}") from None  # fmt: skip
            except RuntimeError as err:
                raise UsageError(f"{self.campaign.path}: testbeds[{tb.index - 1}] "
                                 f"({tb.name}): cannot plan it: {err}") from None  # fmt: skip
            finally:
                shutil.rmtree(scratch, ignore_errors=True)

    def run_testbed(self, tb: TestbedPlan, measured: set[str]) -> None:
        root = state_root(self.campaign, tb, self.base)
        pending = [c for c in tb.cells if c.id not in measured]
        failed = False
        self.finished = set()
        with testbed_state(root):
            try:
                if pending:
                    failed = not self.measure_testbed(tb, pending)
            except BaseException as err:  # Ctrl-C, or an error of hpcbench's own
                why = ("interrupted" if isinstance(err, KeyboardInterrupt)
                       else f"stopped by an error ({type(err).__name__}: {err})")  # fmt: skip
                for cell in pending:
                    if cell.id not in self.finished:
                        self.journal.cell(cell, "pending", f"{why}: `campaign run --resume` "
                                          "runs it")  # fmt: skip
                self.say(f"{why}: destroying what this testbed holds")
                self.teardown(tb, keep=False)
                raise
            try:
                self.teardown(tb, keep=failed and tb.keep_on_failure)
            except Stopped:  # said on the terminal, with what is held; go on with the next
                self.still_held.append(tb.name)

    def measure_testbed(self, tb: TestbedPlan, pending: list[Cell]) -> bool:
        """deploy, verify, sweep; False when a phase failed or a cell did."""
        try:
            with self.phase(tb, "deploy"):
                self.write_group_vars(tb)
                try:
                    deploy(DeployRequest(tb.env, tb.settings))
                except (UsageError, RuntimeError) as err:
                    raise Stopped(f"deploy: {err}") from None
            for cell in pending:
                self.journal.cell(cell, "deployed")
            with self.phase(tb, "verify"):
                rc = verify(VerifyRequest(tb.env))
                if rc != 0:
                    raise Stopped(f"verify: the testbed's checks failed (pytest exit {rc}); "
                                  f"see {self.log_path(tb)}")  # fmt: skip
            for cell in pending:
                self.journal.cell(cell, "verified")
        except Stopped as err:
            for cell in pending:
                self.finished.add(cell.id)
                self.journal.cell(cell, "failed", str(err))
                self.cells_done += 1
            return False
        ok = True
        for part in tb.parts:
            todo = [c for c in part.cells if c in pending]
            if todo:
                ok = self.sweep_part(tb, part, todo) and ok
        return ok

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

    def sweep_part(self, tb: TestbedPlan, part: SweepPart, todo: list[Cell]) -> bool:
        """One `scale` sweep over the cells left; each cell's status as its runs land."""
        by_config = {c.config: c for c in todo}
        out = self.campaign.testbed_out(tb)
        args = estimate.scale_args(part, tb.env, out)
        workload, target, spec = (options.workload_spec(args), options.target_spec(args),
                                  options.sweep_spec(args))  # fmt: skip
        spec = dataclasses.replace(spec, resume=True, only=frozenset(by_config))
        cell_seconds: dict[str, float] = {}

        def observe(config: sweep.Config, summary: analysis.ConfigSummary | None,
                    record: dict[str, Any] | None, finished: bool) -> None:  # fmt: skip
            cell = by_config.get(config.key)
            if cell is None or cell.id in self.finished:
                return
            if record is not None:
                took = float(record.get("duration_s") or 0.0)
                cell_seconds[cell.id] = cell_seconds.get(cell.id, 0.0) + took
                detail = sweep.progress_detail(record, summary) if summary else ""
                status = "ok" if record.get("status") == "ok" else "FAILED"
                self.say(f"{cell.label}, repeat {int(record.get('repeat', 0)) + 1}: {status} "
                         f"{detail}")  # fmt: skip
            if not finished:
                return
            self.finished.add(cell.id)
            self.cells_done += 1
            self.clock.finished(tb.name, cell.id, cell_seconds.get(cell.id, 0.0))
            figures = {}
            if summary is not None and summary.images_per_sec:
                figures = {"runs": summary.runs, "images_per_s": summary.images_per_sec,
                           "ci95": summary.ci95}  # fmt: skip
            if summary is not None and summary.runs:
                self.journal.cell(cell, "measured", **figures)
                self.say(f"cell {cell.label}: measured; {self.progress()}")
            else:
                errors = (summary.errors if summary else None) or ["no run finished"]
                why = errors[-1].splitlines()[0] if errors[-1] else "failed"
                self.journal.cell(cell, "failed", f"runs: {why}", runs=0)
                self.say(f"cell {cell.label}: FAILED ({one_line(why, 200)}); {self.progress()}")

        label = f"sweep (gpus_per_node {part.gpus_per_node})" if len(tb.parts) > 1 else ""
        try:
            with self.phase(tb, "sweep", label):
                try:
                    sweep.run(workload, target, spec, observe=observe)
                except (UsageError, RuntimeError) as err:
                    raise Stopped(f"sweep: {err}") from None
        except Stopped as err:
            for cell in todo:
                if cell.id not in self.finished:
                    self.finished.add(cell.id)
                    self.cells_done += 1
                    self.journal.cell(cell, "failed", str(err))
            return False
        states = self.journal.cell_states()
        return all(states[c.id].status == "measured" for c in todo if c.id in states)

    def teardown(self, tb: TestbedPlan, keep: bool) -> None:
        """destroy, unless the testbed failed and the campaign keeps failures; either way
        the terminal says what is still held and how to release it."""
        if not held(tb.env):
            shutil.rmtree(paths.env_state(tb.env), ignore_errors=True)
            return
        root = paths.state_root()
        if keep:
            self.journal.phase(tb, "keep", "ok", 0.0, "kept on failure for debugging")
            self.say(f"kept for debugging (keep_on_failure): HPCBENCH_STATE={root} "
                     f"python -m hpcbench verify --env {tb.env}; `python -m hpcbench campaign "
                     f"destroy {self.campaign.path} --testbed {tb.name}` removes it")  # fmt: skip
            return
        try:
            with self.phase(tb, "destroy"):
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
        except (Stopped, KeyboardInterrupt):
            for what in held(tb.env):
                self.say(f"STILL HELD: {what}")
            for lease in leases.held(paths.env_state(tb.env)):
                self.say(lease.by_hand())
            self.say(f"to retry: python -m hpcbench campaign destroy {self.campaign.path} "
                     f"--testbed {tb.name}")  # fmt: skip
            raise


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
            runner.tb, runner.tb_number = tb, (k, len(chosen))
            with testbed_state(state_root(campaign, tb, runner.base)):
                if not held(tb.env):
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
