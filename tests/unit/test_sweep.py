import collections
import dataclasses
import json
import shlex

import pytest
import yaml

from hpcbench import cli, launchers
from hpcbench.launchers.parse import HostSlots
from hpcbench.launchers.specs import TargetSpec, WorkloadSpec
from hpcbench.measure import scale_options, sweep
from hpcbench.testbeds import nodeset
from hpcbench.testbeds.kinds import hosts, localhost
from hpcbench.testbeds.target import Target

args_of = shlex.split  # an argument list written as one line


@pytest.fixture(autouse=True)
def _own_state(tmp_path, monkeypatch):
    """Testbed locks (each kind's lock_files) in the test's folder, not the checkout's."""
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))


def _target(nodes=(1, 2, 4), per_node=None, tb=None):
    tb = tb or hosts.testbed([HostSlots(f"h{i}", 2) for i in range(4)])
    return Target(
        tb, list(nodes), per_node, "horovod", launchers.get(TargetSpec("localhost", (1,)))
    )


def test_plan_runs_each_baseline_first_then_everything_shuffled():
    target = _target()
    todo = sweep.plan(target, [32, 64], repeats=3, seed=1)
    configs = {(c.batch, c.nodes, c.workers) for c, _ in todo}
    # A single-worker baseline, then 1, 2 and 4 nodes of 2 workers each, per batch.
    assert configs == {(b, n, w) for b in (32, 64) for n, w in [(1, 1), (1, 2), (2, 4), (4, 8)]}
    assert len(todo) == len(configs) * 3 == len(set(todo))
    assert {(c.batch, c.workers, r) for c, r in todo[:2]} == {(32, 1, 0), (64, 1, 0)}
    assert todo == sweep.plan(target, [32, 64], repeats=3, seed=1)
    assert todo != sweep.plan(target, [32, 64], repeats=3, seed=2)
    # Shuffled: the rest is not in generation order.
    assert [c.workers for c, _ in todo[2:]] != sorted(c.workers for c, _ in todo[2:])


def test_one_worker_per_node_has_one_baseline():
    todo = sweep.plan(_target(per_node=1), [8], repeats=2, seed=0)
    assert collections.Counter((c.nodes, c.workers) for c, _ in todo) == {
        (1, 1): 2,
        (2, 2): 2,
        (4, 4): 2,
    }


def test_localhost_nodes_are_processes_on_one_host():
    target = _target(nodes=(1, 2), tb=localhost.testbed(cores=2))
    assert target.workers(2) == 2
    assert [(p.host, p.slots) for p in target.placements(2, 2)] == [("localhost", 2)]
    spec = target.spec("train.py", [], 2, 2)
    assert spec.on_controller and spec.workers == 2 and spec.master_addr == "127.0.0.1"


def test_baseline_uses_one_slot_of_the_first_node():
    target = _target()
    assert [(p.host, p.slots) for p in target.placements(1, 1)] == [("h0", 1)]
    assert [(p.host, p.slots) for p in target.placements(2, 4)] == [("h0", 2), ("h1", 2)]


# Bad input: one line, exit status 2, nothing launched.


# A sweep of one and two workers, twice each, that a test's fake runs answer.
TWO_WORKERS = "--env localhost --nodes 1-2 --batch 8 --backend ddp --no-probe --repeats 2"


def _scale(tmp_path, *extra):
    return cli.main(["scale", "--out", str(tmp_path / "out"), "--model", "resnet18", *extra])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--env", "localhost", "--nodes", "0"], "--nodes: 0 is out of range"),
        (["--env", "localhost", "--nodes", "5-2"], "runs backwards"),
        (["--env", "localhost", "--nodes", "1-999"], "but the testbed has"),
        (["--env", "localhost", "--nodes", "1", "--batch", "abc"], "--batch: 'abc'"),
        (["--env", "localhost", "--nodes", "1", "--model", "alexnet9"], "unknown model"),
        (["--env", "nowhere", "--nodes", "1"], "unknown environment 'nowhere'"),
        (["--env", "localhost", "--nodes", "1", "--data", "/no/such/dir"], "no such directory"),
        (["--env", "localhost", "--nodes", "1", "--repeats", "0"], "--repeats"),
        (
            ["--env", "localhost", "--nodes", "1-2", "--backend", "horovod", "--launcher", "local"],
            "one worker only",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, argv, message):
    assert _scale(tmp_path, *argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("hpcbench: error: ")
    assert not (tmp_path / "out").exists()


def _deploy_local(tmp_path, monkeypatch) -> None:
    """A deployed 'local' testbed of four nodes, as its inventory has it."""
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))
    monkeypatch.setattr(nodeset.paths, "environments", lambda: ["local"])
    (tmp_path / "state" / "local").mkdir(parents=True)
    nodes = [{"name": f"n{i}", "address": f"10.0.0.{i}", "gpus": 0} for i in range(4)]
    hosts = {n["name"]: {"ansible_host": "127.0.0.1", "ansible_port": 1} for n in nodes}
    inventory = {"all": {"vars": {"testbed_nodes": nodes, "testbed_head": "n0"}, "hosts": hosts}}
    (tmp_path / "state" / "local" / "inventory.yml").write_text(yaml.safe_dump(inventory))


def test_more_nodes_than_the_deployed_testbed(tmp_path, capsys, monkeypatch):
    _deploy_local(tmp_path, monkeypatch)
    assert _scale(tmp_path, "--env", "local", "--nodes", "1-5") == 2
    assert "asks for 5 nodes but the testbed has 4" in capsys.readouterr().err


def _held_run() -> dict:
    """A run record the store accepts (it skips records analysis cannot use)."""
    return {
        "kind": "run",
        "status": "ok",
        "env": "localhost",
        "model": "resnet18",
        "backend": "horovod",
        "batch": 32,
        "image_size": 224,
        "data": "synthetic",
        "nodes": 1,
        "workers": 1,
        "gpus_per_node": 1,
        "repeat": 0,
        "steps": 20,
        "window_times": [1.0, 1.1],
    }


def test_a_full_store_needs_resume(tmp_path, capsys):
    out = tmp_path / "out"
    sweep.Store(out).append(_held_run())
    assert _scale(tmp_path, "--env", "localhost", "--nodes", "1") == 2
    assert "add --resume" in capsys.readouterr().err


def test_a_store_in_use_by_another_sweep_is_refused(tmp_path, capsys):
    other = sweep.Store(tmp_path / "out")
    other.lock()
    try:
        assert _scale(tmp_path, "--env", "localhost", "--nodes", "1") == 2
    finally:
        other.release()
    assert "in use by another sweep" in capsys.readouterr().err


def test_a_probe_into_a_store_in_use_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(Target, "prepare", lambda self: None)
    other = sweep.Store(tmp_path / "out")
    other.lock()
    try:
        argv = ["probe", "--env", "localhost", "--nodes", "1", "--out", str(tmp_path / "out")]
        assert cli.main(argv) == 2
    finally:
        other.release()
    assert "in use by another sweep or probe" in capsys.readouterr().err


def test_workload_args_pass_the_options_through():
    workload = WorkloadSpec(
        model="resnet18",
        image_size=32,
        data="synthetic",
        warmup=1,
        windows=2,
        steps=3,
        device="cpu",
        threads=0,
        data_workers=2,
        amp="auto",
        fp16_allreduce=True,
        fusion_threshold_mb=None,
        bucket_cap_mb=5.0,
    )
    argv = sweep.workload_args(workload, "ddp", 16)
    assert argv[argv.index("--batch") + 1] == "16"
    # At their defaults, the workload's options are left to train.py's same defaults.
    assert "--step" not in argv and "--decode" not in argv and "--threads" not in argv
    graph = sweep.workload_args(dataclasses.replace(workload, step="graph"), "ddp", 16)
    assert graph[graph.index("--step") + 1] == "graph"
    assert "--fp16-allreduce" in argv and argv[argv.index("--bucket-cap-mb") + 1] == "5.0"
    assert "--fusion-threshold-mb" not in argv


def _held_like_this_sweep(tmp_path, **workload) -> None:
    """Store the run that `_scale(... --nodes 1 --batch 32)` would make, as if measured."""
    from hpcbench.launchers.specs import TargetSpec

    target = Target.resolve(TargetSpec(env="localhost", node_counts=(1,), backend="horovod"))
    spec = WorkloadSpec(model="resnet18", image_size=224, **workload)
    [(config, repeat)] = sweep.plan(target, [32], 1, 0)
    record = sweep.base_record(target, spec, 0, config, repeat)
    record.update(status="ok", window_times=[1.0, 1.1])
    sweep.Store(tmp_path / "out").append(record)


@pytest.mark.parametrize(
    ("extra", "todo"),
    [
        ([], False),
        (["--steps", "7"], True),
        (["--warmup", "3"], True),
        (["--windows", "9"], True),
        (["--amp", "off"], True),
        (["--threads", "1"], True),
        (["--step", "compile"], True),
        (["--decode", "device"], True),
        (["--step", "compile", "--compile-backend", "aot_eager"], True),
        (["--fp16-allreduce"], True),
        # The fields' defaults are what every run before them did: same method.
        (["--step", "eager", "--decode", "auto"], False),
    ],
)
def test_resume_never_counts_a_run_made_another_way(tmp_path, capsys, extra, todo):
    _held_like_this_sweep(tmp_path)
    argv = [
        "--env",
        "localhost",
        "--nodes",
        "1",
        "--batch",
        "32",
        "--repeats",
        "1",
        "--backend",
        "horovod",
        "--resume",
        "--dry-run",
        *extra,
    ]
    assert _scale(tmp_path, *argv) == 0
    out = capsys.readouterr()
    assert ("nothing to do" in out.err) is (not todo), out


def test_a_method_label_from_before_the_step_modes_is_an_eager_one():
    from hpcbench.measure import identity

    values = {f: f"v{i}" for i, f in enumerate(identity.METHOD_FIELDS)}
    before = " ".join(f"{f}={values[f]}" for f in identity.METHOD_FIELDS)  # the old label
    assert identity.method_label(values) == before
    assert identity.method_label({**values, "step": "eager", "decode": "auto"}) == before
    graph = identity.method_label({**values, "step": "graph"})
    assert graph == before + " step=graph" and "decode" not in graph


def test_the_report_never_pools_runs_made_another_way():
    from hpcbench.measure import analysis

    base = _held_run()
    a = {**base, "method": "link_rate=1gbit steps=20"}
    b = {**base, "method": "link_rate=100mbit steps=20", "window_times": [2.0, 2.2]}
    series = analysis.summarise([a, b])
    assert {s.method for s in series} == {a["method"], b["method"]}
    assert all(s.runs == 1 for s in series)


class _FakeRuns:
    """Target.run stand-in: each configuration's n-th run takes the n-th window time of its
    list (seconds per window), so a test decides which configurations are noisy."""

    def __init__(self, times: dict[int, list[float]]) -> None:
        self.times, self.calls = times, collections.Counter()

    def __call__(self, spec, timeout_s, echo=False):
        from hpcbench.schedulers.base import Outcome

        workers = spec.workers if hasattr(spec, "workers") else 1
        key = workers
        t = self.times[key][self.calls[key] % len(self.times[key])]
        self.calls[key] += 1
        record = {"workers": workers, "window_times": [t, t, t], "steps": 20, "fingerprint": {}}
        return Outcome([0], [record], [], launched_at=0.0, duration_s=0.01)


def _adaptive(tmp_path, monkeypatch, times, *extra):
    fake = _FakeRuns(times)
    monkeypatch.setattr(
        Target, "run", lambda self, spec, timeout_s, echo=False: fake(spec, timeout_s, echo)
    )
    monkeypatch.setattr(Target, "prepare", lambda self: None)
    code = _scale(tmp_path, *args_of(TWO_WORKERS), *extra)
    records = list(sweep.Store(tmp_path / "out").records())
    return code, fake, records


def test_adaptive_repeats_stop_at_the_target_or_the_maximum(tmp_path, monkeypatch, capsys):
    # One worker: identical runs (converged after --repeats); two: alternating 1 s / 2 s.
    code, fake, records = _adaptive(
        tmp_path, monkeypatch, {1: [1.0], 2: [1.0, 2.0]}, "--max-repeats", "6", "--target-ci", "5%"
    )
    assert code == 0
    assert fake.calls == {1: 2, 2: 6}
    [conv] = [r for r in records if r["kind"] == "convergence"]
    stopped = {c["label"]: c["stopped"] for c in conv["configs"]}
    assert sorted(stopped.values()) == ["max repeats", "target reached"]
    assert "--max-repeats reached" in capsys.readouterr().err


def test_no_extra_repeats_without_max_repeats(tmp_path, monkeypatch, capsys):
    code, fake, _ = _adaptive(tmp_path, monkeypatch, {1: [1.0], 2: [1.0, 2.0]})
    assert code == 0 and fake.calls == {1: 2, 2: 2}
    assert "wider than --target-ci 5.0%" in capsys.readouterr().err


def _events(tmp_path, *argv):
    """The sweep `scale` makes of argv, as the generator a campaign iterates."""
    args = scale_options.scale_parser().parse_args(
        ["--out", str(tmp_path / "out"), "--model", "resnet18", *argv]
    )
    specs = scale_options.workload_spec(args), scale_options.target_spec(args)
    return sweep.events(*specs, scale_options.sweep_spec(args))


def test_a_sweeps_events_are_each_run_as_it_lands_and_each_configuration_once_done(
    tmp_path, monkeypatch
):
    fake = _FakeRuns({1: [1.0], 2: [1.0]})
    monkeypatch.setattr(Target, "run", lambda self, spec, timeout_s, echo=False: fake(spec, 0))
    monkeypatch.setattr(Target, "prepare", lambda self: None)
    sweeping, seen = _events(tmp_path, *args_of(TWO_WORKERS)), []
    with pytest.raises(StopIteration) as done:
        while True:
            seen.append(next(sweeping))
    assert done.value.value == 0  # the exit status `scale` returns
    runs = [sweep.run_key(e.record) for e in seen if isinstance(e, sweep.RunLanded)]
    stored = sweep.Store(tmp_path / "out").records()
    assert runs == [sweep.run_key(r) for r in stored if r["kind"] == "run"]  # in their order
    # Each configuration is said finished once: as its last run landed.
    for config in {e.config for e in seen}:
        mine = [type(e) for e in seen if e.config == config]
        assert mine == [sweep.RunLanded] * 2 + [sweep.ConfigFinished]


def test_a_sweep_left_after_its_first_run_and_closed_releases_its_store_and_testbed(
    tmp_path, monkeypatch, capsys
):
    fake = _FakeRuns({1: [1.0], 2: [1.0]})
    monkeypatch.setattr(Target, "run", lambda self, spec, timeout_s, echo=False: fake(spec, 0))
    monkeypatch.setattr(Target, "prepare", lambda self: None)
    sweeping = _events(tmp_path, *args_of(TWO_WORKERS))
    assert isinstance(next(sweeping), sweep.RunLanded)
    # Suspended, it still holds the testbed: a second sweep is refused.
    assert _scale(tmp_path, *args_of(TWO_WORKERS), "--resume") == 2
    assert "in use by another sweep" in capsys.readouterr().err
    sweeping.close()
    assert _scale(tmp_path, *args_of(TWO_WORKERS), "--resume") == 0
    assert sum(fake.calls.values()) == 4  # the first run kept, the other three made now


def test_budget_stops_extra_repeats(tmp_path, monkeypatch, capsys):
    clock = iter(range(0, 10**6, 100))  # every reading of the clock: 100 s later
    monkeypatch.setattr(sweep.time, "monotonic", lambda: next(clock))
    code, fake, records = _adaptive(
        tmp_path, monkeypatch, {1: [1.0], 2: [1.0, 2.0]}, "--max-repeats", "50", "--budget", "30m"
    )
    assert code == 0 and 2 < fake.calls[2] < 50
    [conv] = [r for r in records if r["kind"] == "convergence"]
    assert "budget" in {c["stopped"] for c in conv["configs"]}
    assert "--budget ran out" in capsys.readouterr().err


def _timed(monkeypatch, times: dict[int, list[float]], seconds: dict[int, float]) -> _FakeRuns:
    """_FakeRuns on a clock that each run moves on by its configuration's seconds."""
    now = [0.0]
    monkeypatch.setattr(sweep.time, "monotonic", lambda: now[0])
    fake = _FakeRuns(times)

    def run(self, spec, timeout_s, echo=False):
        now[0] += seconds[spec.workers]
        return fake(spec, timeout_s, echo)

    monkeypatch.setattr(Target, "run", run)
    monkeypatch.setattr(Target, "prepare", lambda self: None)
    return fake


def test_budget_judges_an_extra_repeat_by_its_own_configurations_length(tmp_path, monkeypatch):
    # One worker: noisy, 60 s a run; two workers: steady, 600 s a run. After the planned
    # 2 + 2 runs (1320 s) a 1500 s budget has room for three more 60 s runs, though not
    # for one run of the sweep's mean length (330 s).
    fake = _timed(monkeypatch, {1: [1.0, 2.0], 2: [1.0]}, {1: 60.0, 2: 600.0})
    code = _scale(tmp_path, *args_of(f"{TWO_WORKERS} --max-repeats 50 --budget 1500s"))
    assert code == 0
    assert fake.calls == {1: 5, 2: 2}


def test_a_run_too_long_for_the_budget_leaves_room_for_shorter_ones(tmp_path, monkeypatch):
    # Both noisy; one worker 60 s a run, two 600 s. After the planned 2 + 2 (1320 s) a
    # 1500 s budget has no room for a 2-worker run but for three 1-worker ones, whichever
    # comes first in the round.
    fake = _timed(monkeypatch, {1: [1.0, 2.0], 2: [1.0, 2.0]}, {1: 60.0, 2: 600.0})
    code = _scale(tmp_path, *args_of(f"{TWO_WORKERS} --max-repeats 50 --budget 1500s"))
    assert code == 0
    assert fake.calls == {1: 5, 2: 2}
    [conv] = [r for r in sweep.Store(tmp_path / "out").records() if r["kind"] == "convergence"]
    assert {c["stopped"] for c in conv["configs"]} == {"budget"}


@pytest.mark.parametrize("seed", [str(s) for s in range(8)])
def test_the_budgets_last_run_goes_to_the_widest_interval(tmp_path, monkeypatch, seed):
    # 60 s a run; room for one run past the planned 2 + 2. One worker: 1.0 and 1.05 s
    # (an interval of about 31%); two: 1 and 2 s (over 100%): the extra run is the
    # two-worker one whatever the seed's shuffle.
    fake = _timed(monkeypatch, {1: [1.0, 1.05], 2: [1.0, 2.0]}, {1: 60.0, 2: 60.0})
    code = _scale(
        tmp_path,
        *args_of(f"{TWO_WORKERS} --max-repeats 50 --target-ci 1% --budget 300s --seed"),
        seed,
    )
    assert code == 0
    assert fake.calls == {1: 2, 2: 3}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--target-ci", "0"], "--target-ci"),
        (["--target-ci", "x%"], "--target-ci"),
        (["--max-repeats", "2", "--repeats", "3"], "--max-repeats 2 is below --repeats 3"),
        (["--budget", "10d"], "--budget"),
    ],
)
def test_bad_adaptive_options(tmp_path, capsys, argv, message):
    assert _scale(tmp_path, "--env", "localhost", "--nodes", "1", *argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


# --out that no record could go to: refused up front, before anything is launched.


@pytest.fixture
def no_launch(monkeypatch):
    """Target.prepare and Target.run recorded, never done."""
    calls: list[str] = []
    monkeypatch.setattr(Target, "prepare", lambda self: calls.append("prepare"))
    monkeypatch.setattr(Target, "run", lambda self, *a, **kw: calls.append("run"))
    return calls


def _unwritable_out(tmp_path, how):
    if how == "a file":
        out = tmp_path / "out"
        out.write_text("not a folder\n")
    elif how == "a file's child":
        (tmp_path / "file").write_text("")
        out = tmp_path / "file" / "out"
    elif how == "results file is a folder":
        out = tmp_path / "out"
        (out / "results.jsonl").mkdir(parents=True)
    else:  # a folder where no file can be made, root or not
        out = "/sys/hpcbench-out"
    return str(out)


@pytest.mark.parametrize("command", ["scale", "probe", "scale --dry-run"])
@pytest.mark.parametrize(
    "how", ["a file", "a file's child", "results file is a folder", "an unwritable folder"]
)
def test_an_out_no_record_could_go_to_is_refused_before_launching(
    tmp_path, capsys, no_launch, command, how
):
    """A dry run too: it says what a run would do, and this run would do nothing."""
    out = _unwritable_out(tmp_path, how)
    before = sorted(tmp_path.rglob("*"))
    argv = [*command.split(), "--env", "localhost", "--nodes", "1", "--out", out]
    assert cli.main(argv + (["--model", "resnet18"] if "scale" in command else [])) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("hpcbench: error: ") and "--out" in err
    assert no_launch == [] and sorted(tmp_path.rglob("*")) == before


# A store that fails in the middle of a sweep: one line, exit 1, the run kept.


def _break_store(out, how, tmp_path, monkeypatch):
    """Breaks the store as a run ends: its file turns into a folder (no write can land),
    its folder turns into a file (no file can be made there either), or that and no
    temporary folder."""
    if how == "beside the store":
        (out / "results.jsonl").mkdir(parents=True)
        return
    out.rename(out.with_name("moved"))
    out.write_text("")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir() if how == "in the temporary folder" else None


@pytest.mark.parametrize("how", ["beside the store", "in the temporary folder", "on stdout"])
def test_a_store_that_fails_mid_sweep_is_one_line_and_keeps_the_run(
    tmp_path, capsys, monkeypatch, how
):
    out = tmp_path / "out"
    fake = _FakeRuns({1: [1.0]})

    def run(self, spec, timeout_s, echo=False):
        if not fake.calls:
            _break_store(out, how, tmp_path, monkeypatch)
        return fake(spec, timeout_s, echo)

    monkeypatch.setattr(Target, "run", run)
    monkeypatch.setattr(Target, "prepare", lambda self: None)
    code = _scale(
        tmp_path,
        *args_of("--env localhost --nodes 1 --batch 8 --backend ddp --no-probe --repeats 2"),
    )
    captured = capsys.readouterr()
    failure = [line for line in captured.err.splitlines() if line.startswith("hpcbench:")]
    assert code == 1 and len(failure) == 1 and "Traceback" not in captured.err
    assert f"cannot write {out / 'results.jsonl'}: " in failure[0]
    assert fake.calls[1] == 1  # the sweep stopped at the record it could not store
    if how == "on stdout":
        kept = captured.out
    else:
        folder = out if how == "beside the store" else tmp_path / "tmp"
        [path] = folder.glob("*unsaved*.jsonl")
        assert str(path) in failure[0]
        kept = path.read_text()
    [record] = [json.loads(line) for line in kept.splitlines() if line.startswith("{")]
    assert record["kind"] == "run" and record["window_times"] == [1.0, 1.0, 1.0]


# One sweep or probe at a time on a testbed, whatever its --out.


@pytest.mark.parametrize("env", ["localhost", "local"])
@pytest.mark.parametrize("second", ["scale", "probe"])
def test_a_second_sweep_or_probe_on_a_busy_testbed_is_refused(
    tmp_path, capsys, monkeypatch, second, env
):
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))
    if env == "local":
        _deploy_local(tmp_path, monkeypatch)
    monkeypatch.setattr(Target, "prepare", lambda self: None)
    monkeypatch.setattr(Target, "unreachable", lambda self, spec: {})  # its nodes are fakes
    fake = _FakeRuns({1: [1.0]})
    seconds: list[tuple[int, str]] = []
    other = tmp_path / "other"

    def run(self, spec, timeout_s, echo=False):
        if not seconds:  # while the first sweep measures, a second command on its testbed
            argv = [second, "--env", env, "--nodes", "1", "--out", str(other)]
            capsys.readouterr()  # the first sweep's progress so far
            code = cli.main(argv + (["--model", "resnet18"] if second == "scale" else []))
            seconds.append((code, capsys.readouterr().err))
        return fake(spec, timeout_s, echo)

    monkeypatch.setattr(Target, "run", run)
    one_run = ["--env", env, "--nodes", "1", "--batch", "8", "--backend", "ddp", "--no-probe"]
    assert _scale(tmp_path, *one_run, "--repeats", "1") == 0
    [(code, err)] = seconds
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"hpcbench: error: testbed {env} is in use by another sweep")
    assert fake.calls[1] == 1 and not other.exists()  # the second launched nothing
    # Once the first is done, the testbed is free again.
    again = ["scale", "--out", str(other), "--model", "resnet18", *one_run, "--repeats", "1"]
    assert cli.main(again) == 0
    assert fake.calls[1] == 2


# A node that died mid-sweep costs seconds, and only the configurations that need it.


def test_nodes_that_are_processes_here_are_not_probed(monkeypatch):
    def no_ssh(*args, **kwargs):
        raise AssertionError("probed a node of --env localhost")

    monkeypatch.setattr("hpcbench.core.bounded.run", no_ssh)
    target = _target(nodes=(1, 2), tb=localhost.testbed(cores=2))
    assert target.unreachable(target.spec("train.py", [], 2, 2)) == {}


def test_an_interval_within_the_target_from_one_run_is_not_called_wider():
    """One run's windows give an interval, but the target counts repeats: the line says
    the interval met it from one run, never that it was wider."""
    from hpcbench.measure import analysis

    record = {
        "target_ci": 0.05,
        "configs": [
            {"label": "one", "runs": 1, "relative_ci": 0.041, "stopped": "max repeats"},
            {"label": "wide", "runs": 3, "relative_ci": 0.2, "stopped": "budget"},
        ],
    }
    one, wide = analysis.convergence_lines(record)
    assert "CI 4.1% after 1 run(s), within --target-ci 5.0% but from one run" in one
    assert "wider" not in one
    assert "CI 20.0% after 3 run(s), wider than --target-ci 5.0%: --budget ran out" in wide


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--backend", "horovod", "--bucket-cap-mb", "50"], "--bucket-cap-mb is DDP's"),
        (["--backend", "ddp", "--fusion-threshold-mb", "64"], "--fusion-threshold-mb is Horovod's"),
    ],
)
def test_a_backends_message_size_given_to_the_other_is_refused_not_ignored(
    tmp_path, capsys, argv, says
):
    assert _scale(tmp_path, "--env", "localhost", "--nodes", "1", "--dry-run", *argv) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()
