"""`hpcbench scale`: the weak-scaling sweep over node counts and batch sizes.

Every (batch, nodes) configuration runs --repeats times in random order; the
single-worker baseline of each batch runs first once, so that the progress
line can show each configuration's efficiency as soon as it has a run. The
store keeps raw measurements only; `report` (hpcbench.measure.analysis) derives every
figure from them (docs/method.md, "Measurement method"). A failed run is
stored with the tail of its output and the sweep goes on; --resume skips the
runs the store already holds (failed ones are retried).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import random
import sys
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from hpcbench.core import files, ssh
from hpcbench.core.bench import tokens, transformer_configs, workload_options, workload_record
from hpcbench.core.errors import UsageError
from hpcbench.core.progress import Progress, format_duration
from hpcbench.launchers import RunSpec
from hpcbench.launchers.slurm import shell_path
from hpcbench.launchers.specs import ProbeSpec, SweepSpec, TargetSpec, WorkloadSpec
from hpcbench.measure import analysis, fingerprint, probe
from hpcbench.measure.identity import method_label
from hpcbench.measure.probe import run_probe
from hpcbench.measure.store import Store, run_key
from hpcbench.schedulers import Outcome
from hpcbench.schedulers.base import stop_on_signals
from hpcbench.testbeds import kinds
from hpcbench.testbeds.target import Target


@dataclass(frozen=True)
class Config:
    batch: int
    nodes: int
    workers: int

    @property
    def label(self) -> str:
        return f"batch {self.batch}, {self.nodes} node(s), {self.workers} worker(s)"

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.batch, self.nodes, self.workers)


@dataclass(frozen=True)
class RunLanded:
    """A run stored: its record, and its configuration's summary with it."""

    config: Config
    summary: analysis.ConfigSummary
    record: dict


@dataclass(frozen=True)
class ConfigFinished:
    """A configuration that needs no further run, and its summary (None: no run)."""

    config: Config
    summary: analysis.ConfigSummary | None


# What a sweep yields as it goes (events): whoever iterates it handles each.
Event = RunLanded | ConfigFinished


def configurations(
    batches: Sequence[int],
    node_counts: Sequence[int],
    workers: Callable[[int], int],
    baselines: bool = True,
) -> list[Config]:
    """The configurations a sweep measures, each once, in their order: per batch its
    single-worker baseline, then each node count with workers(nodes) workers. A campaign
    lists its cells from here. baselines=False leaves a batch's baseline to another
    sweep of the same batches (a campaign's gpus_per_node after its first), unless a
    node count has the same configuration."""
    configs: dict[Config, None] = {}
    for batch in batches:
        shapes = [(1, 1)] if baselines else []
        shapes += [(n, workers(n)) for n in node_counts]
        configs.update(dict.fromkeys(Config(batch, nodes, w) for nodes, w in shapes))
    return list(configs)


def plan(
    target: Target, batches: Sequence[int], repeats: int, seed: int
) -> list[tuple[Config, int]]:
    """(configuration, repeat) pairs: baselines' first repeat first, then all else shuffled."""
    rng = random.Random(seed)
    configs = configurations(batches, target.node_counts, target.workers)
    first = [(c, 0) for c in configs if c.workers == 1]
    rest = [(c, r) for c in configs for r in range(repeats) if (c, r) not in first]
    rng.shuffle(first)
    rng.shuffle(rest)
    return first + rest


def workload_args(workload: WorkloadSpec, backend: str, batch: int) -> list[str]:
    """train.py's command line for one run: the batch, the backend, and the workload's
    options as bench/workload_options.py declares them."""
    return [
        "--batch",
        str(batch),
        "--backend",
        backend,
        *workload_options.argv(dataclasses.asdict(workload)),
        # A model read from a config.json: its shape too, as the nodes may not see the file.
        *transformer_configs.shape_argv(workload.model),
    ]


def base_record(
    target: Target, workload: WorkloadSpec, seed: int, config: Config, repeat: int
) -> dict:
    tb = target.testbed
    record = {
        "kind": "run",
        "env": tb.env,
        "model": workload.model,
        "backend": target.backend,
        "batch": config.batch,
        "image_size": workload.image_size,
        "data": workload.data,
        "nodes": config.nodes,
        "workers": config.workers,
        "gpus_per_node": target.gpus_per_node or tb.slots(tb.nodes[0]),
        "repeat": repeat,
        "warmup": workload.warmup,
        "windows": workload.windows,
        "steps": workload.steps,
        "link_rate": tb.link_rate,
        "launcher": target.launcher.name,
        "seed": seed,
    }
    shape = transformer_configs.read_shape(workload.model)
    if shape is not None:  # read from a config.json: for a report that reads the store
        record["model_shape"] = shape  # alone (a failed run's record too)
    # How it is measured (identity.method_label): the workload's options as asked (its
    # sequence resolved), the target's that decide it, the record's link and launcher.
    asked = dataclasses.asdict(workload)
    record["method"] = method_label({**asked, **record}, dict(target.given))
    return record


def complete(record: dict, outcome: Outcome) -> dict:
    """Fill a run record with what was measured: the workload's raw fields and the
    harness's timing. Derived figures (throughput, efficiency, band) are the analysis's."""
    record["launched_at"] = outcome.launched_at
    record["duration_s"] = outcome.duration_s
    record["command"] = outcome.argv
    if outcome.queue_wait_s is not None:  # a batch job's wait for its nodes: not the run's
        record["queue_wait_s"] = outcome.queue_wait_s
    if outcome.job_energy is not None:  # Slurm's accounting of the whole job
        record["slurm_energy"] = outcome.job_energy
    if not outcome.ok:
        record["status"] = "failed"
        record["error"] = outcome.error()
        return record
    result = outcome.records[-1]
    record["status"] = "ok"
    # The workload's own fields as it wrote them; the rest of a run record is the
    # configuration and the harness's timing.
    record.update({k: result.get(k) for k in workload_record.KEPT})
    # Windows sized by time (--min-window-s) hold more steps than asked: throughput counts
    # the steps run; the method keeps the steps asked.
    record["steps"] = result.get("steps") or record["steps"]
    record["fingerprint"] = {**result.get("fingerprint", {}), **record["fingerprint"]}
    timeline = result.get("timeline", {})
    record["timeline"] = {k: v - outcome.launched_at for k, v in timeline.items()}
    # Launch to first timed step: what the harness and the launcher cost per configuration.
    if "first_timed_step" in timeline:
        record["overhead_s"] = timeline["first_timed_step"] - outcome.launched_at
    if result.get("workers") != record["workers"]:
        record["status"] = "failed"
        record["error"] = f"ran {result.get('workers')} workers, expected {record['workers']}"
    return record


# Why a configuration's repeats stopped when a node it needs could not be reached.
UNREACHABLE = "node unreachable"


def unreached(record: dict, lost: dict[str, str], seconds: float) -> dict:
    """A run that was not launched because nodes it needs did not answer: failed, named."""
    record["launched_at"] = time.time()
    record["duration_s"] = seconds
    record["status"] = "failed"
    record["error"] = "; ".join(
        f"node {name} is unreachable before launch: {why}" for name, why in sorted(lost.items())
    )
    return record


def progress_detail(record: dict, summary: analysis.ConfigSummary) -> str:
    """The run's throughput and, once its series' baseline is known, its
    configuration's efficiency so far; a failed run's first error line; a batch job's
    wait in the queue."""
    queued = record.get("queue_wait_s")
    wait = f", queued {format_duration(queued)}" if isinstance(queued, int | float) else ""
    if record["status"] != "ok":
        return record["error"].splitlines()[0] + wait
    detail = f"{analysis.run_stats(record)['throughput']:.1f} {analysis.per_sec(summary)}"
    if summary.efficiency is not None:
        detail += f", efficiency {summary.efficiency:.3f} ± {summary.efficiency_ci95 or 0:.3f}"
    return detail + wait


def _stop_reason(summary: analysis.ConfigSummary | None, sweep: SweepSpec) -> str | None:
    """Why a configuration needs no further run ('target reached', 'max repeats'), or
    None while it should run again."""
    held = summary.runs + summary.failed if summary else 0
    rel = summary.relative_ci if summary else None
    if summary and summary.runs >= 2 and rel is not None and rel <= sweep.target_ci:
        return "target reached"
    if held >= sweep.max_repeats:
        return "max repeats"
    return None


def convergence_of(
    summary: analysis.ConfigSummary | None,
    sweep: SweepSpec,
    out_of_budget: bool,
    cut_short: str | None = None,
) -> dict:
    """Where one configuration's repeats stopped, and why (cut_short: a reason that came
    before the statistics', e.g. UNREACHABLE)."""
    reason = (
        _stop_reason(summary, sweep) or cut_short or ("budget" if out_of_budget else "max repeats")
    )
    return {
        "runs": summary.runs if summary else 0,
        "relative_ci": summary.relative_ci if summary else None,
        "stopped": reason,
    }


def as_run(workload: WorkloadSpec, config: Config) -> WorkloadSpec:
    """The workload as one configuration runs it: HSDP's shard group --shard-group, else
    a node's workers as the plan counts them (on --env localhost a 'node' is its share
    of this machine's processes, which one torchrun starts together); a single worker,
    which trains unwrapped, with no tensor parallelism. ValueError with one line where a
    group does not fit the workers (bench/transformer_configs.py, shard_group and
    check_tp_workers)."""
    per_node = config.workers // config.nodes
    group = transformer_configs.shard_group(
        workload.parallel, workload.shard_group, config.workers, per_node
    )
    tp = workload.tp if config.workers > 1 else 1
    transformer_configs.check_tp_workers(tp, config.workers, per_node, workload.parallel, group)
    if workload.parallel == "hsdp" and config.workers > 1:  # the node's group, said
        workload = dataclasses.replace(workload, shard_group=group)
    return dataclasses.replace(workload, tp=tp)


def run_spec(target: Target, workload: WorkloadSpec, sweep: SweepSpec, config: Config) -> RunSpec:
    script_args = workload_args(as_run(workload, config), target.backend, config.batch)
    return target.spec("train.py", script_args, config.nodes, config.workers, sweep.timeout_s)


def check_data(target: Target, workload: WorkloadSpec, ask_login: bool = True) -> None:
    """--data where the workers will read it, before anything is submitted or started:
    a path not starting with / from bench/, where they start (bench/train.py takes its
    abspath). Looked up here where the ranks start from this machine (localhost, a
    partition whose login node this is); over --slurm-login with one bounded `test -d`
    (ask_login: not in a dry run, which asks the cluster nothing). A deployed
    testbed's or a host list's nodes have file systems of their own: the run finds it.
    A path inside one of the user's container mounts exists in the container only."""
    data, tb, scheduler = workload.data, target.testbed, target.scheduler
    if data == "synthetic":
        return
    # sbatch's login node, where it is reached over SSH and sees what the nodes read.
    login = scheduler.login() if kinds.of(tb).login_sees_node_files() else None
    if scheduler.container_only(data, tb.bench_dir):
        return
    transformer = transformer_configs.is_transformer(workload.model)
    kind = "token file" if transformer else "directory"
    relative = not data.startswith("/")
    path = f"{tb.bench_dir.rstrip('/')}/{data}" if relative else data
    where = f" in {tb.bench_dir}, where the workers start" if relative else ""
    if login is not None:
        if not ask_login:
            return
        test = "-f" if transformer else "-d"
        reply = ssh.call(login, f"test {test} {shell_path(path)} && echo yes || echo no")
        if not reply.ok or reply.stdout.strip() not in ("yes", "no"):
            raise UsageError(
                f"login node {login.host} is unreachable over SSH: {reply.problem or 'no answer'}"
            )
        if reply.stdout.strip() == "no":
            raise UsageError(
                f"--data {data[:80]}: no such {kind} on login node {login.host}{where} "
                "(or say 'synthetic')"
            )
    elif tb.on_controller and transformer:
        check_token_file(workload, Path(path))
    elif tb.on_controller:
        if not Path(path).is_dir():
            raise UsageError(f"--data {data[:80]}: no such directory{where} (or say 'synthetic')")
        if not holds_images(Path(path)):
            raise UsageError(
                f"--data {data[:80]}: holds no <class>/<image> files{where}: give an "
                "ImageNet-layout folder, DIR/train/<class>/<image>.JPEG (or say 'synthetic')"
            )


def check_token_file(workload: WorkloadSpec, path: Path) -> None:
    """A transformer's --data: a token file whose header fits the model (its ids are
    checked on the nodes, bench/tokens.py)."""
    config = transformer_configs.resolve(workload.model)
    try:  # the file the user named: a FIFO, device or folder there is one line
        fd = files.open_regular(path, os.O_RDONLY, root=path)
    except OSError as err:
        raise UsageError(f"--data {workload.data[:80]}: {err.strerror or err}") from None
    with os.fdopen(fd, "rb") as f:
        raw, size = f.read(tokens.HEADER.size), os.fstat(f.fileno()).st_size
    try:
        header = tokens.parse_header(raw, size, f"--data {workload.data}")
        tokens.check_fits(header, config.vocab, workload.seq_len, f"--data {workload.data}")
    except tokens.TokenFileError as err:
        raise UsageError(str(err)) from None


# The files torchvision's ImageFolder takes as images (torchvision/datasets/folder.py,
# IMG_EXTENSIONS), which bench/inputs.py reads the folder with.
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
SCAN_LIMIT = 256  # entries looked at per folder: a look at the layout, not a census


def holds_images(root: Path) -> bool:
    """Whether root (or its train/, as bench/inputs.py reads it) has a class folder
    holding an image among its first SCAN_LIMIT entries."""
    folder = root / "train" if (root / "train").is_dir() else root
    try:
        with os.scandir(folder) as top:
            classes = [e for e in itertools.islice(top, SCAN_LIMIT) if e.is_dir()]
        for entry in classes:
            with os.scandir(entry.path) as found:
                for item in itertools.islice(found, SCAN_LIMIT):
                    if item.name.lower().endswith(IMAGE_SUFFIXES) and item.is_file():
                        return True
    except OSError:
        return False
    return False


def run(workload: WorkloadSpec, target_spec: TargetSpec, sweep: SweepSpec) -> int:
    """`scale`: the sweep to its end, its events left unread; its exit status."""
    with closing(events(workload, target_spec, sweep)) as sweeping:
        while True:
            try:
                next(sweeping)
            except StopIteration as done:
                return int(done.value)


def events(
    workload: WorkloadSpec, target_spec: TargetSpec, sweep: SweepSpec
) -> Generator[Event, None, int]:
    """The sweep, run as it is iterated: each run as it lands and each configuration
    once it needs no further run, as events; the exit status when it ends. Nothing
    starts before the first next(); whoever stops iterating early closes it (close()),
    which releases the store and the testbed as an exception would."""
    stop_on_signals()
    target = Target.resolve(target_spec)
    check_data(target, workload, ask_login=not sweep.dry_run)
    store = Store(sweep.out)
    try:
        held = store.runs()
    except UsageError as err:  # a link, a FIFO, a folder, an oversized file at its name
        raise UsageError(f"--out {sweep.out}: {err}") from None
    if held and not sweep.resume:
        raise UsageError(
            f"{store.path} already holds {len(held)} runs: add --resume to skip "
            "them and run the rest, or choose another --out"
        )
    only = sweep.only
    allowed = (lambda c: True) if only is None else (lambda c: c.key in only)
    todo = [(c, r) for c, r in plan(target, sweep.batches, sweep.repeats, sweep.seed) if allowed(c)]
    done = store.done_keys()
    todo = [
        (c, r)
        for c, r in todo
        if run_key(base_record(target, workload, sweep.seed, c, r)) not in done
    ]
    configs = [
        c
        for c in dict.fromkeys(c for c, _ in plan(target, sweep.batches, 1, sweep.seed))
        if allowed(c)
    ]
    for config in configs:  # HSDP's and TP's groups, before anything is launched
        try:
            as_run(workload, config)
        except ValueError as err:
            raise UsageError(f"{err} ({config.label})") from None
    if not todo:
        held_live = analysis.LiveSummary(held)
        summaries = {
            c: held_live.of(base_record(target, workload, sweep.seed, c, 0)) for c in configs
        }
        if all(_stop_reason(summaries[c], sweep) for c in configs):
            for config in configs:
                yield ConfigFinished(config, summaries[config])
            print(f"nothing to do: {store.path} holds every run", file=sys.stderr)
            return 0

    # Before anything is launched, not after the first run; and in a dry run, which
    # says what a run would do (the check creates nothing).
    store.check_writable()
    if sweep.dry_run:  # in the order they would run: the probes, then the runs
        probing, counts = planned_probes(target, sweep, store, todo)
        for nodes in counts:
            spec = probe.probe_spec(target, nodes, probing)
            print(f"# all-reduce probe on {nodes} node(s)\n{target.describe(spec)}\n")
        for config, repeat in todo:
            spec = run_spec(target, workload, sweep, config)
            print(f"# {config.label}, repeat {repeat + 1}\n{target.describe(spec)}\n")
        return 0
    target.prepare()
    # One sweep at a time appends to a store, and measures on a testbed; locked only
    # now so that bad input, refused above, leaves no results directory or lock behind.
    with target.exclusive():
        store.lock()
        try:
            return (yield from _Measurement(workload, target, sweep, store, todo, configs).run())
        finally:
            store.release()


def planned_probes(
    target: Target, sweep: SweepSpec, store: Store, todo: list[tuple[Config, int]]
) -> tuple[ProbeSpec, list[int]]:
    """The sweep's probe settings, its budget set, and the node counts of several
    workers that its store holds no probe of yet (none without --probe): a probe
    counts where it timed every collective the sweep's asks for (an all-reduce alone
    does not serve an FSDP2 sweep, whose forecast fits its all-gathers)."""
    if sweep.probe is None:
        return ProbeSpec(), []
    asked = [c for c in sweep.probe.collectives if c != "all_reduce"]
    probed = {
        (p["env"], p["workers"], p["backend"])
        for p in store.probes()
        if p.get("status") == "ok" and all(p.get(c) for c in asked)
    }
    to_probe = [
        nodes
        for nodes in sorted({c.nodes for c, _ in todo if c.workers > 1})
        if (target.testbed.env, target.workers(nodes), target.backend) not in probed
    ]
    probe_spec = sweep.probe
    if probe_spec.budget_s is None:
        # A share of what bounds the sweep: slow nodes cost a bounded part of it.
        budget = probe.default_budget_s(sweep.budget_s, len(todo), sweep.timeout_s, len(to_probe))
        probe_spec = dataclasses.replace(probe_spec, budget_s=budget)
    return probe_spec, to_probe


class _Measurement:
    """One sweep's runs once its store is locked: the probes, the planned runs, then
    rounds of extra repeats while intervals are wide. What the runs so far tell is kept
    here: each configuration's summary (live), the seconds its runs took (took), its
    planned runs not yet made (planned), the nodes found unreachable (down) and the
    configurations that needed one (stopped)."""

    # Set once the probes are done, as the planned runs start.
    controller: dict  # the fingerprint of this machine every run record holds
    progress: Progress
    sweep_started: float  # time.monotonic(): what --budget counts from

    def __init__(
        self,
        workload: WorkloadSpec,
        target: Target,
        sweep: SweepSpec,
        store: Store,
        todo: list[tuple[Config, int]],
        configs: list[Config],
    ) -> None:
        self.workload, self.target, self.sweep, self.store = workload, target, sweep, store
        self.todo, self.configs = todo, configs
        # Seeded once from the store; each probe and run is added as it lands.
        self.live = analysis.LiveSummary(store.runs(), store.probes())
        # Seconds each configuration's runs took: an extra repeat is judged against the
        # budget by its own configuration's length (a 1-node run is a fraction of a
        # 4-node one).
        self.took: dict[str, list[float]] = {}
        # Planned runs not yet made, per configuration: one is finished only when none
        # is left.
        self.planned = {c: sum(1 for d, _ in todo if d == c) for c in configs}
        # Nodes a run found unreachable (name -> why), and the configurations that need
        # one: they make no further run, the others go on.
        self.down: dict[str, str] = {}
        self.stopped: dict[Config, str] = {}
        self.out_of_budget = False
        self.finished: set[Config] = set()  # each is said finished once

    def run(self) -> Generator[Event, None, int]:
        """The probes, the planned runs, then extra repeats while intervals are wide; the
        events of each as it goes, the exit status at the end."""
        if self.sweep.probe is not None:
            self.probe_nodes()
        tb = self.target.testbed
        self.controller = fingerprint.controller(
            tb.env, tb.link_rate, tb.iface, self.target.launcher.name
        )
        self.progress = Progress(len(self.todo))
        self.sweep_started = time.monotonic()
        for config, repeat in self.todo:
            if config in self.stopped:
                self.progress.total -= 1  # a run that will not be made
                continue
            yield from self.measure(config, repeat)
        yield from self.extra_repeats()
        return (yield from self.conclude())

    def probe_nodes(self) -> None:
        """The all-reduce probe on each node count of several workers not yet probed."""
        target, store = self.target, self.store
        probe_spec, to_probe = planned_probes(target, self.sweep, store, self.todo)
        for nodes in to_probe:
            print(
                f"probing all-reduce on {nodes} node(s), within {probe_spec.budget_s} s ...",
                file=sys.stderr,
            )
            record = run_probe(target, nodes, probe_spec)
            store.append(record)
            self.live.add_probe(record)
            stopped = probe.budget_line(record)
            if stopped:
                print(stopped, file=sys.stderr)

    def expected_s(self, config: Config) -> float:
        own = self.took.get(config.label)
        return sum(own) / len(own) if own else self.progress.mean_duration()

    def stop_those_needing_down_nodes(self) -> None:
        for config in self.configs:
            lost = [n for n in self.target.nodes_of(config.nodes, config.workers) if n in self.down]
            if lost and config not in self.stopped:
                self.stopped[config] = f"node {lost[0]} is unreachable ({self.down[lost[0]]})"
                self.progress.note(f"{config.label}: no further run, {self.stopped[config]}")

    def measure(self, config: Config, repeat: int) -> Iterator[Event]:
        """One run of the configuration: stored, summarised and shown; yielded as it
        landed, then as its configuration finished where it needs no further run."""
        target, sweep, progress = self.target, self.sweep, self.progress
        label = f"{config.label}, repeat {repeat + 1}"
        progress.start(label)
        record = base_record(target, self.workload, sweep.seed, config, repeat)
        record["fingerprint"] = dict(self.controller)
        started = time.monotonic()
        spec = run_spec(target, self.workload, sweep, config)
        lost = target.unreachable(spec)  # seconds, where a dead node would cost --timeout
        if lost:
            self.down.update(lost)
            record = unreached(record, lost, time.monotonic() - started)
        else:
            outcome = target.run(spec, timeout_s=sweep.timeout_s, echo=sweep.verbose)
            record = complete(record, outcome)
        self.store.append(record)
        summary = self.live.add(record)
        ok = record["status"] == "ok"
        self.took.setdefault(config.label, []).append(time.monotonic() - started)
        progress.finish(label, ok, self.took[config.label][-1], progress_detail(record, summary))
        self.planned[config] = max(0, self.planned.get(config, 0) - 1)
        yield RunLanded(config, summary, record)
        if not self.planned[config] and _stop_reason(summary, sweep) is not None:
            self.finished.add(config)
            yield ConfigFinished(config, summary)
        if lost:
            self.stop_those_needing_down_nodes()

    def summary_of(self, config: Config) -> analysis.ConfigSummary | None:
        return self.live.of(base_record(self.target, self.workload, self.sweep.seed, config, 0))

    def width(self, config: Config) -> float:
        summary = self.summary_of(config)
        rel = summary.relative_ci if summary else None
        return math.inf if rel is None else rel

    def fits(self, config: Config) -> bool:
        return self.sweep.budget_s is None or (
            time.monotonic() - self.sweep_started + self.expected_s(config) <= self.sweep.budget_s
        )

    def extra_repeats(self) -> Iterator[Event]:
        """Rounds of one more run for each configuration still short of its target, the
        widest interval first, so that the runs the budget pays for go where they
        narrow the most; a configuration whose next run would overrun the budget is
        left and a shorter one may still run. Rounds, not one configuration at a time:
        this machine's cores change speed in spells, and runs of one configuration
        back to back would share a spell."""
        rng = random.Random(self.sweep.seed + 1)
        progress = self.progress
        while True:
            wanted = [
                c
                for c in self.configs
                if c not in self.stopped and _stop_reason(self.summary_of(c), self.sweep) is None
            ]
            rng.shuffle(wanted)  # ties (no interval yet) in a seeded order
            wanted.sort(key=self.width, reverse=True)
            if not any(self.fits(c) for c in wanted):
                self.out_of_budget = self.out_of_budget or bool(wanted)
                break
            progress.total += len(wanted)
            for config in wanted:
                if not self.fits(config):
                    self.out_of_budget = True
                    progress.total -= 1
                    continue
                so_far = self.summary_of(config)
                yield from self.measure(config, so_far.runs + so_far.failed if so_far else 0)

    def conclude(self) -> Generator[Event, None, int]:
        """The convergence record, each configuration yielded finished, the summary
        lines; 1 if a run failed."""
        sweep, store = self.sweep, self.store
        self.progress.total = self.progress.done
        self.progress.close()
        convergence = {
            "kind": "convergence",
            "target_ci": sweep.target_ci,
            "max_repeats": sweep.max_repeats,
            "budget_s": sweep.budget_s,
            "configs": [
                {
                    "label": c.label,
                    **convergence_of(
                        self.summary_of(c),
                        sweep,
                        self.out_of_budget,
                        UNREACHABLE if c in self.stopped else None,
                    ),
                }
                for c in self.configs
            ],
        }
        store.append(convergence)
        for config in self.configs:  # those not said finished as their last run landed
            if config not in self.finished:
                yield ConfigFinished(config, self.summary_of(config))
        for line in analysis.convergence_lines(convergence):
            print(line, file=sys.stderr)
        print(
            f"results in {store.path}; `python -m hpcbench report --out {sweep.out}` makes "
            "the report",
            file=sys.stderr,
        )
        return 1 if self.progress.failed else 0
