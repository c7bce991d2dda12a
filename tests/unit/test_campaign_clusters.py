"""Campaign testbeds that hpcbench does not deploy: a Slurm partition (sbatch here or
on a login node) and hosts you have, beside deployed ones in one file. Their file
checks, cell identities and plan (node- and GPU-hours, queue waits), the dry run of
the shipped campaigns/lrz.yaml and campaigns/gwdg.yaml without a cluster, and the
runner's life cycle for them (preflight, stack check as verify, sweep; nothing
deployed or destroyed) with the cluster calls replaced by fakes keeping their
contracts. tests/e2e/test_campaign_slurm.py runs it against a real Slurm."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpcbench import cli
from hpcbench.campaign import campaign_file, comparison, estimate, runner
from hpcbench.core.errors import UsageError
from hpcbench.measure import sweep
from hpcbench.measure.store import Store
from hpcbench.schedulers.slurm import JobLeftBehind, LeftJob
from hpcbench.testbeds import deploy as testbeds_deploy
from hpcbench.testbeds import kinds, readiness
from tests.unit.test_campaign import fake_run

REPO = Path(__file__).resolve().parents[2]

MIXED = """\
name: mixed
out: {out}
sweep: {{model: resnet18, image_size: 32, batch: [4], nodes: [1, 2], repeats: 1,
         no_probe: true, backend: ddp}}
testbeds:
  - name: fast
    slurm: {{partition: fast, nodes: 2, login: me@login.example.org, python: /opt/py/bin/python,
             gpus_per_node: 1, time: 10m, sbatch: [--exclusive]}}
  - name: mine
    hosts: [h1:1, h2:1]
  - name: built
    env: local
    settings: {{node_count: 2, link_rate: 1gbit}}
"""


@pytest.fixture(autouse=True)
def _own_state(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))


def write(tmp_path: Path, text: str = MIXED, **fill: Any) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(text).format(out=tmp_path / "out", **fill))
    return path


def test_a_partition_hosts_and_a_deployed_testbed_in_one_file(tmp_path):
    campaign = campaign_file.load(write(tmp_path))
    fast, mine, built = campaign.testbeds
    assert (fast.kind.name, mine.kind.name, built.kind.name) == ("slurm", "hosts", "local")
    assert [tuple(t.kind.phases) for t in campaign.testbeds] == [
        ("verify",),
        ("verify",),
        ("deploy", "verify", "destroy"),
    ]
    target = fast.parts[0].target
    assert target.env == "slurm" and target.slurm.partition == "fast"
    assert target.slurm.login is not None and target.slurm.login.host == "login.example.org"
    assert target.slurm.python == "/opt/py/bin/python" and target.slurm.time_min == 10
    assert target.slurm.extra == ("--exclusive",)
    assert [h.name for h in mine.parts[0].target.hosts] == ["h1", "h2"]
    assert fast.nodes_available == 2 and mine.nodes_available == 2
    assert fast.where == "partition fast via me@login.example.org"
    # Each store is the testbed's own, whatever its kind.
    assert fast.parts[0].sweep.out == tmp_path / "out" / "fast"


def test_a_partitions_identity_is_what_it_measures_not_how_long_it_may_wait(tmp_path):
    ids = [c.id for c in campaign_file.load(write(tmp_path)).testbeds[0].cells]
    waited = MIXED.replace("time: 10m", "time: 20m, queue_wait: 2h")
    assert [c.id for c in campaign_file.load(write(tmp_path, waited)).testbeds[0].cells] == ids
    other = MIXED.replace("partition: fast", "partition: other")
    assert [c.id for c in campaign_file.load(write(tmp_path, other)).testbeds[0].cells] != ids


def test_a_partitions_key_and_known_hosts_go_with_its_login(tmp_path):
    keyed = MIXED.replace(
        "login: me@login.example.org,",
        "login: me@login.example.org, "
        f"ssh_key: {tmp_path / 'key'}, known_hosts: {tmp_path / 'kh'},",
    )
    target = campaign_file.load(write(tmp_path, keyed)).testbeds[0].parts[0].target
    login = target.slurm.login
    assert login is not None and login.key_file == str(tmp_path / "key")
    assert login.known_hosts == str(tmp_path / "kh")


def test_a_job_dir_in_the_logins_home_goes_with_its_login(tmp_path):
    homed = MIXED.replace("time: 10m,", "time: 10m, job_dir: ~/jobs,")
    target = campaign_file.load(write(tmp_path, homed)).testbeds[0].parts[0].target
    assert target.slurm.job_dir == "~/jobs"  # resolved on the login node before any job


BAD = [
    ("testbeds[0]", "- name: fast\n", "- name: fast\n    env: local\n", None, "give one of env:"),
    ("testbeds[0].slurm.partition", "partition: fast, ", "", None, "name the partition"),
    (
        "testbeds[0].slurm.login",
        "login: me@login.example.org",
        "login: 'me@bad host'",
        None,
        "is not [user@]host[:port]",
    ),
    ("testbeds[0].slurm.colour", "nodes: 2,", "nodes: 2, colour: red,", None, "unknown key"),
    ("testbeds[0].slurm", "python: /opt/py/bin/python,", "", None, "needs --slurm-python"),
    ("testbeds[0].slurm.time", "time: 10m", "time: soon", None, "duration"),
    ("testbeds[0].sweep.nodes", "nodes: 2, login", "nodes: 1, login", None, "slurm: nodes gives 1"),
    (
        "testbeds[0].slurm",
        "login: me@login.example.org,",
        "ssh_key: /k, known_hosts: /kh,",
        None,
        "is for --slurm-login: give both, or neither",
    ),
    (
        "testbeds[0].slurm.job_dir",
        "login: me@login.example.org, python: /opt/py/bin/python,",
        "job_dir: ~/jobs,",
        None,
        "~ is the home of a --slurm-login node",
    ),
    ("testbeds[1].hosts", "[h1:1, h2:1]", "[h1:1, h1:1]", None, "listed twice"),
    (
        "testbeds[1].settings",
        "hosts: [h1:1, h2:1]",
        "hosts: [h1:1, h2:1]\n    settings: {{a: 1}}",
        None,
        "is for testbeds of env: (a testbed hpcbench deploys), not hosts:",
    ),
]


@pytest.mark.parametrize(("where", "old", "new", "_", "says"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_partition_or_host_list_is_one_line_naming_the_key(
    tmp_path, capsys, where, old, new, _, says
):
    assert old in MIXED
    path = write(tmp_path, MIXED.replace(old, new, 1))
    assert cli.main(["campaign", "plan", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{path}: {where}" in err[0] and says in err[0], err
    assert not (tmp_path / "out").exists() and not (tmp_path / "state").exists()


def test_the_plan_books_a_partitions_jobs_and_learns_its_queue_wait(tmp_path, capsys):
    expect = "    expect: {{images_per_s: 100}}\n"
    text = MIXED.replace("  - name: mine\n", expect + "  - name: mine\n")
    text = text.replace("  - name: built\n", expect + "  - name: built\n")
    path = write(tmp_path, text)
    assert cli.main(["campaign", "plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert "partition fast via me@login.example.org: each job books its own nodes" in out
    assert "queue wait per job unknown (unknown until a job has run)" in out
    assert "hosts h1:1,h2:1: your own machines, nothing booked" in out
    assert "verify 2m00s (assumed)" in out and "deploy" not in out.split("testbed 3/3")[0]
    # Jobs that ran: their waits replace the unknown, and every cell's estimate pays them.
    campaign = campaign_file.load(path)
    store = Store(campaign.testbed_out(campaign.testbeds[0]))
    for wait in (30.0, 90.0):
        store.append(
            {
                "kind": "run",
                "env": "slurm",
                "model": "resnet18",
                "backend": "ddp",
                "batch": 4,
                "image_size": 32,
                "data": "synthetic",
                "nodes": 1,
                "workers": 1,
                "gpus_per_node": 1,
                "method": "m",
                "repeat": 0,
                "status": "failed",
                "error": "x",
                "duration_s": 5.0,
                "queue_wait_s": wait,
            }
        )
    assert cli.main(["campaign", "plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert "queue wait per job 1m00s (mean of 2 job(s) measured)" in out
    assert "+ 1 x 60 s queue wait" in out


def shipped(name: str, tmp_path: Path) -> Path:
    """A shipped campaign file with its `out:` under tmp_path, written there; a model it
    gives as a config.json path beside it (relative: campaigns/) is named from there."""
    data = yaml.safe_load((REPO / "campaigns" / name).read_text())
    data["out"] = str(tmp_path / "out")
    for keys in [data["sweep"], *(tb.get("sweep") or {} for tb in data["testbeds"])]:
        model = keys.get("model")
        if isinstance(model, str) and model.endswith(".json"):
            keys["model"] = str((REPO / "campaigns" / model).resolve())
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def skipped_cells(campaign: campaign_file.Campaign) -> set[str]:
    """The cells `campaign run` skips: too big for their testbed's GPUs."""
    return {cid for tb in campaign.testbeds for cid in estimate.testbed_memory(tb).skipped()}


@pytest.mark.parametrize("name", ["lrz.yaml", "gwdg.yaml", "lrz-lm.yaml", "gwdg-lm.yaml"])
def test_the_shipped_cluster_campaigns_dry_run_without_a_cluster(
    name, tmp_path, capsys, monkeypatch
):
    path = shipped(name, tmp_path)
    assert cli.main(["campaign", "plan", str(path)]) == 0
    capsys.readouterr()
    assert cli.main(["campaign", "run", "--dry-run", str(path)]) == 0
    out = capsys.readouterr().out
    campaign = campaign_file.load(path)
    repeats = campaign.testbeds[0].parts[0].sweep.repeats
    skipped = skipped_cells(campaign)  # none but the transformers' too big for their GPUs
    runs = [c for c in campaign.cells if c.id not in skipped]
    booked = [tb for tb in campaign.testbeds if any(c.id not in skipped for c in tb.cells)]
    checks = len(booked)
    probes = out.count("\n# all-reduce probe on ")  # each node count of several workers
    assert probes > 0
    assert out.count("#!/bin/bash\n") == checks + probes + repeats * len(runs)
    for tb in booked:
        assert f"#SBATCH --partition={tb.parts[0].target.slurm.partition}\n" in out
    assert out.rstrip().endswith(
        "nothing was checked, created or submitted; `campaign run` runs it"
    )
    assert not (tmp_path / "out").exists() and not (tmp_path / "state").exists()


@pytest.mark.parametrize(
    "name, parallel, launch",
    [
        # LRZ's way: NVIDIA's image through pyxis, the workload's step in it.
        ("lrz-lm.yaml", {"fsdp2"}, "'--container-image=nvcr.io#nvidia/pytorch:24.05-py3'"),
        # GWDG's: the conda environment, set up before the steps.
        ("gwdg-lm.yaml", {"fsdp2", "hsdp"}, "module load miniforge3 && source activate hpcbench"),
    ],
)
def test_the_cluster_transformer_campaigns_forecast_every_cell_and_print_its_scripts(
    name, parallel, launch, tmp_path, capsys
):
    path = shipped(name, tmp_path)
    campaign = campaign_file.load(path)
    skipped = skipped_cells(campaign)
    assert {p.workload.parallel for tb in campaign.testbeds for p in tb.parts} == parallel
    assert cli.main(["campaign", "plan", str(path)]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if " pending " in line]
    assert len(rows) == len(campaign.cells)
    for cell in campaign.cells:  # a figure, an E and a length, each from a named source
        [row] = [r for r in rows if r.lstrip().startswith(cell.id)]
        assert "unknown" not in row and ("tokens/s" in row or cell.id in skipped), row
        assert cell.label in row, row
    # The sources: the accelerator's peak and the stated MFU, FLOPs per token, the links.
    assert "% MFU x 312 TFLOPS bf16 (A100: https://" in out
    assert "GFLOP per token (bench/transformer_configs.py)" in out
    assert "parameters gathered in bf16 per block, reduce-scatter" in out
    assert cli.main(["campaign", "run", "--dry-run", str(path)]) == 0
    out = capsys.readouterr().out
    trains = [line for line in out.splitlines() if " train.py " in line]
    runs = [c for c in campaign.cells if c.id not in skipped]
    assert len(trains) == campaign.testbeds[0].parts[0].sweep.repeats * len(runs)
    for p in parallel:
        assert any(f"--parallel {p}" in t and "--backend ddp" in t for t in trains), p
    if name.startswith("lrz"):
        assert all(launch in t for t in trains)
    assert launch in out
    assert not (tmp_path / "out").exists() and not (tmp_path / "state").exists()


# What the plan may not know before a job has run: a partition's queue wait.
QUEUE_UNKNOWN = (
    "queue wait per job unknown (unknown until a job has run)",
    "queue waits are unknown until a job has run, and left out",
)


@pytest.mark.parametrize(
    "name, fits, too_big",
    [
        # The 70B fits 4 DGX A100 nodes, checkpointed or split by TP, not 2; the 13B
        # fits 8 A100 80GB, no V100 partition.
        (
            "lrz-lm.yaml",
            {"dgx-a100x8-70b": {32}, "dgx-a100x8-70b-tp8": {32}, "dgx-a100x8-13b": {8}},
            {"dgx-a100x8-70b": {1, 16}, "dgx1-v100x8-13b": {1, 8}, "v100x2-13b": {1, 2}},
        ),
        # GPT-2 medium fits each of Grete's layouts, the 70B none up to 2 nodes.
        ("gwdg-lm.yaml", {"grete": {1, 2, 4, 8}}, {"grete-70b": {1, 4, 8}}),
    ],
)
def test_the_lm_cluster_campaigns_name_the_layouts_that_fit_each_partition_and_run_those_alone(
    name, fits, too_big, tmp_path, capsys
):
    path = shipped(name, tmp_path)
    campaign = campaign_file.load(path)
    assert cli.main(["campaign", "plan", str(path)]) == 0
    out = capsys.readouterr().out
    known = [line for line in out.splitlines() if line.strip() not in QUEUE_UNKNOWN]
    assert not [line for line in known if "unknown" in line]
    lines = out.splitlines()
    memory: dict[tuple[str, int], list[str]] = {}  # (testbed, workers): each cell's line
    for tb in campaign.testbeds:
        size = estimate.testbed_memory(tb).size
        assert size is not None, tb.name  # every accelerator named gives its memory
        assert f"  memory per GPU beside {tb.hardware.accelerator}'s {size // 10**9} GB (" in out
        for cell in tb.cells:  # each row, then its memory line
            row = next(i for i, line in enumerate(lines) if line.startswith(f"  {cell.id}  "))
            line = lines[row + 1].strip()
            assert line.startswith("memory ") and " GB per GPU" in line, line
            memory.setdefault((tb.name, cell.workers), []).append(line)
    for tb_name, workers in fits.items():
        for w in workers:
            assert all(" GB per GPU of " in m for m in memory[(tb_name, w)]), (tb_name, w)
    for tb_name, workers in too_big.items():
        for w in workers:
            assert all(": does not fit in " in m for m in memory[(tb_name, w)]), (tb_name, w)
    # The dry run: the skipped ones named with why, the scripts of the others alone.
    assert cli.main(["campaign", "run", "--dry-run", str(path)]) == 0
    out = capsys.readouterr().out
    skipped = skipped_cells(campaign)
    said = [line for line in out.splitlines() if line.startswith("# not run: ")]
    assert len(said) == len(skipped) and all(": does not fit in " in line for line in said)
    trains = [line for line in out.splitlines() if " train.py " in line]
    repeats = campaign.testbeds[0].parts[0].sweep.repeats
    assert len(trains) == repeats * (len(campaign.cells) - len(skipped))
    sections = out.split("## testbed ")[1:]  # each testbed's part, in the file's order
    for tb, section in zip(campaign.testbeds, sections, strict=True):
        booked = f"#SBATCH --partition={tb.parts[0].target.slurm.partition}\n" in section
        assert booked == any(c.id not in skipped for c in tb.cells), tb.name
    assert not (tmp_path / "out").exists() and not (tmp_path / "state").exists()


class Cluster:
    """readiness.preflight/check and sweep.events in place of a cluster: they record the
    calls and keep the contracts (a refused partition is a UsageError before anything
    runs; a failed check says which check)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, str]] = []
        self.refuse: str | None = None
        self.check_fails: str | None = None
        self.left_behind: LeftJob | None = None  # a job the scheduler could not cancel
        monkeypatch.setattr(readiness, "preflight", self.preflight)
        monkeypatch.setattr(readiness, "check", self.check)
        monkeypatch.setattr(sweep, "events", self.sweep)
        monkeypatch.setattr(sweep, "stop_on_signals", lambda: None)
        monkeypatch.setattr(runner, "stop_on_signals", lambda: None)
        for name in ("check", "deploy", "verify", "destroy"):  # a deployed kind's
            monkeypatch.setattr(testbeds_deploy, name, self.forbidden(name))

    def forbidden(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError(f"{name} called for a testbed hpcbench does not deploy")

        return call

    def preflight(self, target: Any) -> None:
        self.calls.append(("preflight", target.testbed.env))
        if self.refuse:
            raise UsageError(self.refuse)

    def check(self, target: Any, workload: Any) -> readiness.CheckResult:
        self.calls.append(("check", target.testbed.env))
        if self.check_fails:
            return readiness.CheckResult(False, self.check_fails, queue_wait_s=3.0)
        return readiness.CheckResult(True, "", [{"name": "stack imports", "ok": True}], 2.0)

    def sweep(self, workload: Any, target: Any, spec_: Any) -> Generator[sweep.Event, None, int]:
        from hpcbench.measure import analysis

        kind = kinds.for_target(target).reported_as
        self.calls.append(("sweep", kind))
        if self.left_behind and kind == "slurm":
            raise JobLeftBehind(self.left_behind)
        store = Store(spec_.out)
        live = analysis.LiveSummary(store.runs())
        for batch, nodes, workers in sorted(spec_.only):
            record = {
                "kind": "run",
                "env": kind,
                "model": "resnet18",
                "backend": "ddp",
                "batch": batch,
                "image_size": 32,
                "data": "synthetic",
                "nodes": nodes,
                "workers": workers,
                "gpus_per_node": 1,
                "method": "m",
                "repeat": 0,
                "status": "ok",
                "steps": 2,
                "window_times": [1.0, 1.1],
                "duration_s": 1.0,
                "weights_in_sync": True,
                "queue_wait_s": 4.0,
                "gpu": {"util_mean": 90.0, "mem_used_max_mib": 1000.0},
            }
            store.append(record)
            config, summary = sweep.Config(batch, nodes, workers), live.add(record)
            yield sweep.RunLanded(config, summary, record)
            yield sweep.ConfigFinished(config, summary)
        return 0


CLUSTERS_ONLY = MIXED.split("  - name: built")[0]


def test_a_partition_and_hosts_are_checked_first_then_verified_and_swept(
    tmp_path, monkeypatch, capfd
):
    cluster = Cluster(monkeypatch)
    path = write(tmp_path, CLUSTERS_ONLY)
    assert cli.main(["campaign", "run", str(path)]) == 0
    assert cluster.calls == [
        ("preflight", "slurm"),
        ("preflight", "hosts"),
        ("check", "slurm"),
        ("sweep", "slurm"),
        ("check", "hosts"),
        ("sweep", "hosts"),
    ]
    err = capfd.readouterr().err
    assert "check job waited 2s in the queue" in err
    assert (tmp_path / "out" / "report.html").is_file()
    # The report describes each system as it ran: where, GPU use, and a job's queue wait.
    systems = {s["testbed"]: s for s in json.loads((tmp_path / "out" / "systems.json").read_text())}
    fast, mine = systems["fast"], systems["mine"]
    assert (fast["kind"], mine["kind"]) == ("slurm", "hosts")
    assert fast["where"] == "partition fast via me@login.example.org"
    assert fast["queue_wait_per_job"] == "median 4s over 2 jobs (4s-4s)"
    assert fast["gpu_busy"] == "90% mean over 2 runs (90-90%)"
    assert fast["gpu_memory_peak"] == "1000 MiB"
    assert "median 4s over 2 jobs" in (tmp_path / "out" / "report.md").read_text()
    # Nothing held, nothing to destroy: `campaign destroy` says so and touches nothing.
    assert cli.main(["campaign", "destroy", str(path)]) == 0
    assert "holds nothing" in capfd.readouterr().err


def test_a_refused_partition_stops_the_campaign_before_anything_runs(tmp_path, monkeypatch, capfd):
    cluster = Cluster(monkeypatch)
    cluster.refuse = "partition 'fast' does not exist on login.example.org: `sinfo -s` lists"
    path = write(tmp_path, CLUSTERS_ONLY)
    assert cli.main(["campaign", "run", str(path)]) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert err[-1] == (
        f"hpcbench: error: {path}: testbeds[0] (fast): partition 'fast' does "
        "not exist on login.example.org: `sinfo -s` lists"
    )
    assert cluster.calls == [("preflight", "slurm")]
    assert not (tmp_path / "out" / "fast").exists()


def test_a_failed_stack_check_fails_the_partitions_cells_and_the_next_testbed_runs(
    tmp_path, monkeypatch
):
    cluster = Cluster(monkeypatch)
    cluster.check_fails = "GPUs and driver: 0 CUDA device(s) visible, 1 wanted"
    path = write(tmp_path, CLUSTERS_ONLY)
    assert cli.main(["campaign", "run", str(path)]) == 1
    rows = {
        r["testbed"]: r
        for r in __import__("hpcbench.campaign.commands", fromlist=["x"]).status_rows(
            campaign_file.load(path)
        )
    }
    assert rows["fast"]["status"] == "failed" and "0 CUDA device(s)" in rows["fast"]["why"]
    assert ("sweep", "slurm") not in cluster.calls


def test_a_job_left_behind_is_journaled_with_its_scancel_and_shown_by_status(
    tmp_path, monkeypatch, capfd
):
    """The scheduler's line for a job it could not cancel fails the partition's cells
    with it as their cause, which `campaign status` shows; the next testbed runs."""
    cluster = Cluster(monkeypatch)
    cluster.left_behind = LeftJob(
        "4242", "scancel 4242", "on the login node me@login.example.org", "scancel: error"
    )
    path = write(tmp_path, CLUSTERS_ONLY)
    assert cli.main(["campaign", "run", str(path)]) == 1
    assert ("sweep", "hosts") in cluster.calls
    capfd.readouterr()
    assert cli.main(["campaign", "status", str(path)]) == 0
    fast = [line for line in capfd.readouterr().out.splitlines() if line.startswith("fast ")]
    assert fast and all(
        "failed" in line and line.endswith(f"sweep: {cluster.left_behind.line()}") for line in fast
    )


def test_the_report_gives_the_given_link_the_nodes_cpus_and_no_character_references(tmp_path):
    # A partition whose runs record no line rate, with `hardware: link` given, on nodes
    # of one CPU (a quota) on a machine of two cores; a failure cause with brackets.
    text = MIXED.split("  - name: mine")[0].replace(
        "sbatch: [--exclusive]}}", "sbatch: [--exclusive]}}\n    hardware: {{link: 1gbit}}"
    )
    campaign = campaign_file.load(write(tmp_path, text))
    (fast,) = campaign.testbeds
    store = Store(campaign.testbed_out(fast))
    per_host = {"cpus": 1.0, "cpu_limit": "cgroup quota 100000/100000 us, not pinned"}
    for workers, seconds in ((1, 1.0), (2, 1.2)):
        store.append(
            {
                **fake_run("slurm", 4, workers, workers, 1),
                "backend": "ddp",
                "window_times": [seconds, seconds],
                "fingerprint": {"cores": 2, "cpu": "[virt] CPU"},
                "nodes_use": {"per_host": [per_host] * workers},
            }
        )
    probe = {"kind": "probe", "env": "slurm", "backend": "ddp", "nodes": 2, "workers": 2}
    store.append(
        {**probe, "status": "ok", "results": [{"bytes": 2**24, "time_s": 0.2, "busbw": 1e8}]}
    )
    comparison.build(campaign)
    (system,) = json.loads((tmp_path / "out" / "systems.json").read_text())
    assert system["host_networking"] == "1gbit (given)"
    assert system["measured_bus_bandwidth"] == "0.100 GB/s on 2 workers (80% of 1gbit (given))"
    assert system["host_processor_core_count"] == "2"
    assert system["node_cpus"].startswith("1 (cgroup quota 100000/100000 us")
    md = (tmp_path / "out" / "report.md").read_text()
    glance = next(line for line in md.splitlines() if line.startswith("| fast"))
    assert "| 1gbit (given) |" in glance
    assert "| host_processor_core_count: cores of the machine the node runs on | 2 |" in md
    assert "| CPUs a node may use (its quota, else the CPUs it may run on) | 1 (" in md
    assert "&#91;" not in md and "\\[virt] CPU" in md


def test_a_failed_checks_own_line_is_the_cause_in_the_status_and_the_report(
    tmp_path, monkeypatch, capfd
):
    """The check job's cause as readiness gives it (the job's .err line) is the cells'
    cause on the terminal, in campaign status and in the report's failed cells."""
    import html

    cause = "[ERROR] No such file or directory: /images/x.sqsh (exit status [1])"
    cluster = Cluster(monkeypatch)

    def check(target: Any, workload: Any) -> readiness.CheckResult:  # the partition's alone
        if target.testbed.env == "slurm":
            return readiness.CheckResult(False, cause)
        return cluster.check(target, workload)

    monkeypatch.setattr(readiness, "check", check)
    path = write(tmp_path, CLUSTERS_ONLY)
    assert cli.main(["campaign", "run", str(path)]) == 1
    assert f"verify FAILED in 0s: verify: {cause}" in capfd.readouterr().err
    assert cli.main(["campaign", "status", str(path)]) == 0
    fast = [x for x in capfd.readouterr().out.splitlines() if x.startswith("fast ")]
    assert fast and all(x.endswith(f"failed    verify: {cause}") for x in fast)
    out = tmp_path / "out"
    assert f"verify: {cause}" in (out / "report.html").read_text()
    md = html.unescape((out / "report.md").read_text())
    assert f"verify: {cause}" in md.replace("\\[", "[")  # Markdown's escaped '['
