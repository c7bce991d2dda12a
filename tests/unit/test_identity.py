"""A run's identity (hpcbench/measure/identity.py): every option that decides what a run
measures names its runs apart, in the store, --resume, the report and compare, while the
stores and journals written before read and resume as they did."""

from __future__ import annotations

import collections
import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpcbench import cli
from hpcbench.campaign import campaign_file
from hpcbench.measure import analysis, identity, scale_options, sweep
from hpcbench.measure.store import Store
from hpcbench.reports import report
from hpcbench.schedulers.base import Outcome
from hpcbench.testbeds.target import Target

FIXTURES = Path(__file__).parent / "fixtures" / "identity"


@pytest.fixture(autouse=True)
def _own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))


def _planned(argv: list[str]) -> dict[str, Any]:
    """The record `scale` plans for its one configuration (as --resume matches it)."""
    args = scale_options.scale_parser().parse_args(
        ["--env", "localhost", "--nodes", "1", "--batch", "8", *argv]
    )
    target = Target.resolve(scale_options.target_spec(args))
    [(config, repeat)] = sweep.plan(target, [8], 1, 0)
    return sweep.base_record(target, scale_options.workload_spec(args), 0, config, repeat)


# ------------------------------------------------ what was written before reads the same
def test_cell_ids_and_method_labels_written_before_are_computed_the_same() -> None:
    # Computed by f9d93ca, before the label named every option: a journal's cells and a
    # store's runs from then are found again by --resume.
    expected = json.loads((FIXTURES / "expected.json").read_text())
    for name, cells in expected["cells"].items():
        campaign = campaign_file.load(FIXTURES / "campaigns" / f"{name}.yaml")
        assert [[c.testbed, c.label, c.id] for c in campaign.cells] == cells, name
    for argv, want in expected["labels"].items():
        record = _planned(shlex.split(argv))
        assert record["method"] == want["method"], argv
        assert list(sweep.run_key(record)) == want["run_key"], argv


def test_a_store_written_before_pools_its_runs_as_it_did() -> None:
    # The same series and configurations, each of the same runs (its throughput is now
    # work over the mean step: hpcbench/measure/analysis.py run_stats).
    store = Store(FIXTURES / "store")
    summaries = analysis.summarise(store.runs(), store.probes())
    expected = json.loads((FIXTURES / "store" / "summaries.json").read_text())["summaries"]
    got = [
        {"series": [str(v) for v in s.series], "workers": s.workers, "runs": s.runs}
        for s in summaries
    ]
    assert got == [{k: e[k] for k in ("series", "workers", "runs")} for e in expected]
    for s, e in zip(summaries, expected, strict=True):
        assert s.throughput == pytest.approx(e["images_per_sec"], rel=0.01)


# ------------------------------------------------------------ every option names its runs
# A value other than its default for each option that decides how a run measures; an
# option added to `scale` that decides it and has none here fails the test below.
OTHER_VALUE = {
    "model": "resnet34",
    "backend": "ddp",
    "image_size": "64",
    "data": "./data",
    "seq_len": "32",
    "parallel": "fsdp2",
    "shard_group": "2",
    "decode": "workers",
    "data_workers": "2",
    "warmup": "3",
    "windows": "9",
    "steps": "7",
    "min_window_s": "2",
    "device": "cpu",
    "threads": "1",
    "amp": "off",
    "step": "compile",
    "fp16_allreduce": None,  # a switch
    "fusion_threshold_mb": "64",
    "bucket_cap_mb": "100",
    "horovod_controller": "mpi",
    "slurm_mpi": "pmix",
    "tp": "2",
    "grad_accum": "2",
    "activation_checkpoint": "full",
    "compile_backend": "aot_eager",
}
# What a transformer needs beside the options only it takes.
TRANSFORMER = {"seq_len", "parallel", "shard_group", "tp", "grad_accum", "activation_checkpoint"}
# Options that need more workers than the one here (a shard group, a tensor-parallel
# group inside a node): their own test below.
GROUPS = ("shard_group", "tp")


def _deciding_options() -> list[str]:
    """scale's options that decide a run and its label names (not the configuration's
    own fields, nor where it ran, nor the sweep's)."""
    out = []
    for action in scale_options.scale_parser()._actions:
        dest = action.dest
        if (
            action.option_strings
            and identity.decides(dest)
            and dest not in (*identity.CONFIG_FIELDS, *identity.PLACE, "nodes")
        ):
            out.append(dest)
    return out


def test_every_option_that_decides_a_run_has_a_value_here() -> None:
    missing = [d for d in _deciding_options() if d not in OTHER_VALUE]
    assert not missing, f"add a non-default value of {missing} to OTHER_VALUE"


@pytest.mark.parametrize("dest", [d for d in _deciding_options() if d not in GROUPS])
def test_every_option_that_decides_a_run_names_its_runs_apart(dest: str) -> None:
    base = ["--model", "gpt-tiny", "--backend", "ddp"] if dest in TRANSFORMER else []
    if dest == "slurm_mpi":
        base += ["--backend", "horovod"]
    if dest == "bucket_cap_mb":  # DDP's setting (Horovod's is refused: grouping_problem)
        base += ["--backend", "ddp"]
    if dest == "compile_backend":
        base += ["--step", "compile"]
    flag = "--" + dest.replace("_", "-")
    value = OTHER_VALUE[dest]
    other = [flag] if value is None else [f"{flag}={value}"]
    assert _planned(base)["method"] != _planned([*base, *other])["method"], dest


@pytest.mark.parametrize("dest", GROUPS)
def test_a_group_of_workers_names_its_runs_apart(dest: str) -> None:
    values = {f: "v" for f in identity.METHOD_FIELDS}
    assert identity.method_label(values) != identity.method_label({**values, dest: 2})


def test_the_configuration_fields_sweep_and_excluded_options_are_real_options() -> None:
    dests = {a.dest for a in scale_options.scale_parser()._actions}
    for table in (identity.NOT_IDENTITY, identity.SWEEP):
        assert set(table) <= dests, set(table) - dests
        assert all(why.strip() for why in table.values())  # each says why
    assert set(identity.TESTBED_OPTIONS) <= dests


def test_where_a_run_ran_is_not_how_it_measured() -> None:
    # A partition's job options are the testbed, as env is: not in a run's label (so
    # that the labels of partitions' runs before stay), but in the cell's id.
    plain = _planned([])
    assert (
        _planned(["--partition=gpu", "--slurm-setup=module load x"])["method"] == (plain["method"])
    )


@given(
    st.dictionaries(
        st.sampled_from(["fusion_threshold_mb", "step", "decode", "data_workers"]),
        st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20),
    ),
    st.dictionaries(
        st.sampled_from(["horovod_controller", "slurm_mpi"]),
        st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20),
    ),
)
def test_a_labels_fields_read_back_as_written_whatever_their_text(
    workload: dict[str, str], target: dict[str, str]
) -> None:
    values = {f: f"v{i}" for i, f in enumerate(identity.METHOD_FIELDS)}
    label = identity.method_label({**values, **workload}, target)
    fields = identity.label_fields(label)
    defaults = {"step": "eager", "decode": "auto", "data_workers": 4, "fusion_threshold_mb": None}
    for name, text in {**workload, **target}.items():
        if name in defaults and text == defaults[name]:
            continue
        assert fields[name] == text, (label, name)
    assert all(fields[f] == values[f] for f in identity.METHOD_FIELDS)


# -------------------------------------------- a tuning sweep into one store, as a user makes it
class _FakeRuns:
    """Target.run: every run answers windows of its own length (1 s for 1 worker, 1.6 s
    for 2), and the test counts the launches by configuration."""

    def __init__(self) -> None:
        self.launched: collections.Counter[int] = collections.Counter()

    def __call__(self, spec: Any, timeout_s: int, echo: bool = False) -> Outcome:
        workers = spec.workers
        self.launched[workers] += 1
        t = 1.0 if workers == 1 else 1.6
        record = {"workers": workers, "window_times": [t, t * 1.01, t], "steps": 20}
        return Outcome([0], [record], [], launched_at=0.0, duration_s=0.01)


TUNING = "--env localhost --nodes 1-2 --batch 8 --backend ddp --no-probe --repeats 2"


def _scale(out: Path, *extra: str) -> int:
    return cli.main(
        ["scale", "--out", str(out), "--model", "resnet18", *shlex.split(TUNING), *extra]
    )


def test_a_tuning_sweep_into_one_store_keeps_each_setting_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = _FakeRuns()
    monkeypatch.setattr(
        Target, "run", lambda self, spec, timeout_s, echo=False: fake(spec, timeout_s)
    )
    monkeypatch.setattr(Target, "prepare", lambda self: None)
    out = tmp_path / "r"
    settings = [
        ["--bucket-cap-mb", "25"],
        ["--bucket-cap-mb", "100"],
        ["--bucket-cap-mb", "25", "--fp16-allreduce"],
        ["--bucket-cap-mb", "100", "--fp16-allreduce"],
    ]
    assert _scale(out) == 0  # DDP's own default bucket: a fifth setting
    for setting in settings:
        before = sum(fake.launched.values())
        assert _scale(out, "--resume", *setting) == 0
        # Each new setting runs its 1- and 2-worker configurations twice: none is "done".
        assert sum(fake.launched.values()) - before == 4, setting
    # Asked again, each is whole: --resume runs nothing.
    for setting in settings:
        before = sum(fake.launched.values())
        assert _scale(out, "--resume", *setting) == 0
        assert sum(fake.launched.values()) == before, setting
    capsys.readouterr()
    summaries = analysis.summarise(Store(out).runs())
    two = [s for s in summaries if s.workers == 2]
    assert len(two) == 5 and all(s.runs == 2 for s in two)  # never pooled
    methods = {s.method for s in two}
    assert len(methods) == 5
    labels = [identity.label_fields(m or "") for m in methods]
    assert sorted((f.get("bucket_cap_mb", "-"), f.get("fp16_allreduce", "-")) for f in labels) == (
        sorted([("-", "-"), ("25.0", "-"), ("100.0", "-"), ("25.0", "True"), ("100.0", "True")])
    )
    # The report shows each as a configuration of its own, its method named.
    page = report.build_report(str(out))[0].read_text()
    assert page.count("bucket_cap_mb=100.0") >= 2 and "fp16_allreduce=True" in page


def test_compare_pairs_a_configuration_across_testbeds_but_never_across_methods(
    tmp_path: Path,
) -> None:
    def held(folder: Path, env: str, link: str, **method: Any) -> None:
        label_values = {"link_rate": link, "launcher": "torchrun", "warmup": 10}
        for workers in (1, 2):
            Store(folder).append(
                {
                    "kind": "run",
                    "status": "ok",
                    "env": env,
                    "model": "resnet18",
                    "backend": "ddp",
                    "batch": 8,
                    "image_size": 224,
                    "data": "synthetic",
                    "nodes": workers,
                    "workers": workers,
                    "gpus_per_node": 1,
                    "repeat": 0,
                    "steps": 20,
                    "window_times": [1.0, 1.1],
                    "method": identity.method_label({**label_values, **method}),
                }
            )

    held(tmp_path / "a", "local", "1gbit")
    held(tmp_path / "b", "virtualwall", "10gbit")  # another testbed, the same method
    held(tmp_path / "c", "virtualwall", "10gbit", fp16_allreduce=True)
    held(tmp_path / "d", "virtualwall", "10gbit", step="graph")
    paired = report.comparison(str(tmp_path / "a"), str(tmp_path / "b"))
    assert "| resnet18 | ddp | 8 | 2 | 2 |" in paired
    for other in ("c", "d"):
        text = report.comparison(str(tmp_path / "a"), str(tmp_path / other))
        assert "| resnet18 | ddp | 8 |" not in text, other
