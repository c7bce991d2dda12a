"""The all-reduce probe's time budget (--probe-budget, a campaign's sweep.probe_budget):
bad values are one line and exit status 2; bench/allreduce.py stops starting sizes
once it is spent, every rank after the same size, and says so in its record; the
harness kills it GRACE_S after the budget; a sweep without the option gives each
probe a share of its own limit. And the probe leaves with exit status 0 once it has
written its record (Gloo's threads once aborted it at the interpreter's exit): the
real probe's run is tests/integration/test_probe_budget_processes.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcbench import cli
from hpcbench.campaign import campaign_file
from hpcbench.launchers.parse import BUDGET_S
from hpcbench.launchers.specs import ProbeSpec
from hpcbench.measure import probe, scale_options, store, sweep
from hpcbench.schedulers.base import Outcome
from hpcbench.testbeds.target import Target

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))


@pytest.fixture(autouse=True)
def _own_state(tmp_path, monkeypatch):
    """Testbed locks and campaign state in the test's folder, not the checkout's."""
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))


# ------------------------------------------------------------ the option
@pytest.mark.parametrize("command", ["scale", "probe"])
@pytest.mark.parametrize("value", ["0", "-5", "abc", "5x", "1.5m", "1e309", "9" * 40, "8d", ""])
def test_a_bad_probe_budget_is_one_line_and_exit_2(tmp_path, capsys, command, value):
    out = tmp_path / "out"
    argv = [command, "--env", "localhost", "--nodes", "2", "--out", str(out)]
    assert cli.main([*argv, f"--probe-budget={value}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("hpcbench")
    assert "argument --probe-budget: " in err  # its value refused, not the option unknown
    assert not out.exists()


def test_the_probe_budget_is_a_duration_and_absent_by_default():
    def spec(*argv: str) -> ProbeSpec:
        args = scale_options.scale_parser().parse_args(["--env", "localhost", *argv])
        return scale_options.sweep_spec(args).probe

    assert spec().budget_s is None  # the sweep's default rule decides
    assert spec("--probe-budget", "90").budget_s == 90
    assert spec("--probe-budget", "5m").budget_s == 300
    assert spec("--probe-budget", "2h").budget_s == 7200


# --------------------------------------------------------- the campaign key
def _campaign(tmp_path: Path, **sweep_keys: object) -> Path:
    doc = {
        "name": "budget",
        "out": str(tmp_path / "out"),
        "sweep": {"model": "resnet18", "batch": [8], "nodes": [1, 2], **sweep_keys},
        "testbeds": [{"name": "one", "env": "local", "settings": {"node_count": 2}}],
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    return path


DURATIONS = st.one_of(
    st.integers(BUDGET_S[0], BUDGET_S[1]),
    st.builds(lambda n, u: f"{n}{u}", st.integers(1, 100), st.sampled_from(["s", "m", "h"])),
)
NOT_DURATIONS = st.one_of(
    st.integers(max_value=0),
    st.integers(min_value=BUDGET_S[1] + 1, max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.lists(st.integers(1, 5), min_size=2, max_size=3) | st.just([]),  # [5] reads as 5
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.text(max_size=12).filter(lambda t: not t.strip().rstrip("smh").strip().isdigit()),
    st.sampled_from(["-1s", "0m", "1.5m", "8d", "1e3", "1 0m", "∞", "a\nb"]),
)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.one_of(st.tuples(st.just(True), DURATIONS), st.tuples(st.just(False), NOT_DURATIONS)))
def test_the_campaign_key_takes_a_duration_or_is_one_line_naming_it(tmp_path, capsys, case):
    good, value = case
    path = _campaign(tmp_path, probe_budget=value)
    code = cli.main(["campaign", "plan", str(path)])
    err = capsys.readouterr().err
    if good:
        assert code == 0, err
    else:
        assert code == 2, (value, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            f"hpcbench: error: {path}: sweep.probe_budget: "
        ), lines
        assert "not an option" not in lines[0]  # the value refused, not the key unknown
    assert not (tmp_path / "out").exists()


def test_the_campaign_key_bounds_time_and_leaves_the_cells_as_they_were(tmp_path):
    # Like budget and timeout: a finished cell stays finished when the key is added.
    before = campaign_file.load(_campaign(tmp_path))
    after = campaign_file.load(_campaign(tmp_path, probe_budget="3m"))
    assert [c.id for c in before.cells] == [c.id for c in after.cells]
    assert before.testbeds[0].fingerprint == after.testbeds[0].fingerprint
    assert after.testbeds[0].parts[0].sweep.probe.budget_s == 180
    assert before.testbeds[0].parts[0].sweep.probe.budget_s is None


# ------------------------------------------------------------ the default
@pytest.mark.parametrize(
    ("sweep_budget", "runs", "timeout", "probes", "expected"),
    [
        (3600, 30, 1800, 1, 360),  # a tenth of --budget
        (3600, 30, 1800, 3, 120),  # shared by three node counts: the floor
        (12 * 60, 6, 1800, 1, 120),  # campaigns/local.yaml's 12m: the floor
        (None, 6, 300, 1, 180),  # no --budget: 6 runs x --timeout 300
        (None, 90, 1800, 9, 1800),  # at most --timeout
        (3600, 30, 60, 1, 60),  # a --timeout under the floor still bounds it
    ],
)
def test_the_default_budget_is_a_share_of_the_sweeps_limit(
    sweep_budget, runs, timeout, probes, expected
):
    assert probe.default_budget_s(sweep_budget, runs, timeout, probes) == expected


# ----------------------------------------------- when a size may still start
def test_a_size_starts_only_while_the_budget_lasts_and_it_fits():
    import allreduce

    last = {"bytes": 1 << 20, "time_s": 0.01}  # 10 ms per MiB all-reduce
    # 4 MiB at 40 ms: 50 iterations + 2 warm-up, about 2.1 s.
    assert allreduce.budget_allows(last, 4 << 20, 2, left_s=10.0)
    assert not allreduce.budget_allows(last, 4 << 20, 2, left_s=1.0)  # would overrun
    assert not allreduce.budget_allows(last, 4 << 20, 2, left_s=-0.5)  # spent
    assert allreduce.budget_allows(last, 4 << 20, 2, left_s=float("inf"))  # no budget


# ------------------------------------------------------- the harness's side
class _FakeTarget:
    """What run_probe asks of a Target; the workload's record is the one given."""

    def __init__(self, workload: dict | None) -> None:
        self.workload, self.asked = workload, {}
        self.backend = "ddp"
        self.launcher = type("L", (), {"name": "torchrun"})()
        self.testbed = type("T", (), {"env": "localhost", "link_rate": None, "iface": "lo"})()

    def workers(self, nodes: int) -> int:
        return nodes

    def spec(self, script, args, nodes, workers, time_limit_s=0):
        self.asked.update(script=script, args=list(args), time_limit_s=time_limit_s)
        return "spec"

    def run(self, spec, timeout_s, echo=False):
        self.asked["timeout_s"] = timeout_s
        records = [self.workload] if self.workload else []
        return Outcome([0], records, ["tail"], launched_at=0.0, duration_s=1.0)


WORKLOAD = {
    "results": [{"bytes": 4096, "time_s": 1e-3, "algbw": 4e6, "busbw": 4e6, "cpu_s": 1e-4}],
    "device": "cpu",
    "stopped_early": True,
    "fingerprint": {},
}


def test_the_probe_gets_its_budget_and_is_killed_grace_after_it():
    target = _FakeTarget(WORKLOAD)
    record = probe.run_probe(target, 2, ProbeSpec(budget_s=45))
    args = target.asked["args"]
    assert args[args.index("--budget-s") + 1] == "45"
    assert target.asked["timeout_s"] == target.asked["time_limit_s"] == 45 + probe.GRACE_S
    assert record["budget_s"] == 45 and record["stopped_early"] is True
    assert store.record_problem({"kind": "probe", "env": "x", **record}) is None
    line = probe.budget_line(record)
    assert line == (
        "probe on 2 workers stopped at 4096 B within its budget of 45 s "
        "(--probe-budget); the prediction uses the sizes it measured"
    )
    assert probe.format_probe(record).splitlines()[-1] == line


def test_the_probe_alone_defaults_to_its_timeout_and_a_full_sweep_says_nothing():
    target = _FakeTarget({**WORKLOAD, "stopped_early": False})
    record = probe.run_probe(target, 2, ProbeSpec(timeout_s=600))
    assert target.asked["timeout_s"] == 600 + probe.GRACE_S and record["budget_s"] == 600
    assert probe.budget_line(record) is None and "budget" not in probe.format_probe(record)


@pytest.mark.parametrize(
    "bad", [{"stopped_early": "yes"}, {"budget_s": -1}, {"budget_s": "1m"}, {"budget_s": 1e9}]
)
def test_the_store_skips_a_probe_whose_budget_fields_do_not_fit(bad):
    record = {"kind": "probe", "env": "x", "backend": "ddp", "nodes": 2, "workers": 2}
    ok = {**record, "status": "ok", "results": WORKLOAD["results"]}
    assert store.record_problem({**ok, "budget_s": 120, "stopped_early": True}) is None
    assert store.record_problem({**ok, **bad}) is not None


def test_a_sweep_gives_its_probe_a_share_of_its_budget_and_says_when_it_stopped(
    tmp_path, capsys, monkeypatch
):
    asked: list[tuple[list[str], float]] = []

    def run(self, spec, timeout_s, echo=False):
        asked.append((list(spec.args), timeout_s))
        if spec.script == "allreduce.py":
            return Outcome([0], [WORKLOAD], [], launched_at=0.0, duration_s=1.0)
        t = 1.0
        record = {"workers": spec.workers, "window_times": [t, t, t], "steps": 20}
        return Outcome([0], [{**record, "fingerprint": {}}], [], launched_at=0.0, duration_s=0.01)

    monkeypatch.setattr(Target, "run", run)
    monkeypatch.setattr(Target, "prepare", lambda self: None)
    argv = "--env localhost --nodes 1-2 --batch 8 --backend ddp --repeats 1 --budget 2h"
    code = cli.main(["scale", "--out", str(tmp_path / "out"), "--model", "resnet18", *argv.split()])
    err = capsys.readouterr().err
    assert code == 0, err
    [(args, timeout)] = [(a, t) for a, t in asked if "--budget-s" in a]
    # A tenth of 2 h for the one node count probed (2): 720 s, killed GRACE_S later.
    assert args[args.index("--budget-s") + 1] == "720" and timeout == 720 + probe.GRACE_S
    assert "probing all-reduce on 2 node(s), within 720 s" in err
    assert "probe on 2 workers stopped at 4096 B within its budget of 720 s" in err
    [record] = sweep.Store(tmp_path / "out").probes()
    assert record["budget_s"] == 720 and record["stopped_early"] is True
