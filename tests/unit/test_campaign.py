"""Campaigns without a testbed: the file's checks (one line naming the key path, exit
status 2, nothing created), cell identities, the plan, and the runner's order and
guarantees with deploy, verify, the sweep and destroy replaced by fakes that keep
the same contracts (a deployed testbed holds Terraform state and a lease until
destroyed). tests/e2e/test_campaign.py runs the real chain over the stand-ins."""

from __future__ import annotations

import csv
import json
import math
import os
import textwrap
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpcbench import cli
from hpcbench.campaign import campaign_file, cells, commands, estimate, lifecycle, runner
from hpcbench.core import paths
from hpcbench.core.errors import UsageError
from hpcbench.core.progress import format_duration
from hpcbench.measure import analysis, sweep
from hpcbench.measure.store import Store
from hpcbench.testbeds.deploy import DeployRequest, EnvRequest, VerifyRequest
from hpcbench.testbeds.kinds.deployed import Deployed
from hpcbench.testbeds.target import Target

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted((REPO / "campaigns").glob("*.yaml"))


def write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


BASE = """\
name: t
out: {out}
sweep:
  model: resnet18
  image_size: 32
  batch: [4, 8]
  nodes: [1, 2]
  repeats: 1
testbeds:
  - name: a
    env: local
    settings: {{node_count: 2, link_rate: 1gbit}}
  - name: b
    env: local
    settings: {{node_count: 2, link_rate: 100mbit}}
"""


def base(tmp_path: Path, **changes: Any) -> Path:
    data = yaml.safe_load(BASE.format(out=tmp_path / "out"))
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        node = data
        for key in parents:
            node = node[int(key)] if key.isdigit() else node[key]
        node[last] = value
    return write(tmp_path, yaml.safe_dump(data))


# ------------------------------------------------------------------ the file
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_campaigns_load(path: Path) -> None:
    campaign = campaign_file.load(path)
    assert campaign.cells and len({c.id for c in campaign.cells}) == len(campaign.cells)


def test_slices_is_the_seeds_matrix() -> None:
    campaign = campaign_file.load(REPO / "campaigns/slices.yaml")
    by_tb = {tb.name: tb for tb in campaign.testbeds}
    assert list(by_tb) == ["vwall-1g", "vwall-10g", "gpulab-1x10", "gpulab-10x1"]
    assert by_tb["vwall-10g"].env == "virtualwall-10g"
    for tb in campaign.testbeds:  # 1-10 workers at batch 32, 64 and 96
        workers = {(c.batch, c.workers) for c in tb.cells}
        assert workers == {(b, w) for b in (32, 64, 96) for w in range(1, 11)}, tb.name
    # One machine of ten GPUs: 1-10 workers on one node, a baseline per batch only.
    one = by_tb["gpulab-1x10"]
    assert {c.nodes for c in one.cells} == {1} and len(one.parts) == 10
    assert sum(1 for c in one.cells if c.workers == 1) == 3


def test_local_fits_two_testbeds_of_two_one_core_nodes() -> None:
    campaign = campaign_file.load(REPO / "campaigns/local.yaml")
    assert [dict(tb.settings)["link_rate"] for tb in campaign.testbeds] == ["200mbit", "1gbit"]
    names = [dict(tb.settings)["name"] for tb in campaign.testbeds]
    assert len(set(names)) == 2 and "hpcbench-local" not in names  # never `make deploy`'s


def test_local_lm_runs_the_transformer_under_ddp_and_fsdp2_beside_the_cnn_campaign() -> None:
    lm = campaign_file.load(REPO / "campaigns/local-lm.yaml")
    cnn = campaign_file.load(REPO / "campaigns/local.yaml")
    assert [dict(tb.settings)["link_rate"] for tb in lm.testbeds] == ["200mbit", "1gbit"]
    for tb in lm.testbeds:
        assert [(p.workload.model, p.workload.parallel) for p in tb.parts] == [
            ("gpt-tiny", "ddp"),
            ("gpt-tiny", "fsdp2"),
        ]
        assert {(c.nodes, c.parallel) for c in tb.cells} == {(1, "ddp"), (2, "ddp"), (2, "fsdp2")}
    # Testbeds of their own: neither campaign's nor `make deploy`'s names, subnets or ports.
    settings = [dict(tb.settings) for c in (lm, cnn) for tb in c.testbeds]
    for key in ("name", "subnet", "ssh_port_base", "jupyter_port"):
        assert len({s[key] for s in settings}) == 4, key
    assert lm.out != cnn.out


def test_identity_follows_what_is_measured_not_how_long_it_may_take(tmp_path: Path) -> None:
    ids = [c.id for c in campaign_file.load(base(tmp_path)).cells]
    assert ids == [c.id for c in campaign_file.load(base(tmp_path)).cells]  # stable
    same = {"sweep.budget": "2h", "sweep.timeout": 99}
    assert ids == [c.id for c in campaign_file.load(base(tmp_path, **same)).cells]
    for change in (
        {"sweep.warmup": 3},
        {"testbeds.0.settings.link_rate": "10gbit"},
        {"testbeds.0.ansible": {"stack_mode": "image"}},
    ):
        other = [c.id for c in campaign_file.load(base(tmp_path, **change)).cells]
        assert other != ids, change
    # Only testbed a's cells change with a's settings.
    changed = campaign_file.load(base(tmp_path, **{"testbeds.0.settings.link_rate": "10gbit"}))
    assert [c.id for c in changed.testbeds[1].cells] == ids[len(changed.testbeds[0].cells) :]


def test_exclusions_and_gpus_per_node_make_the_cells(tmp_path: Path) -> None:
    path = base(
        tmp_path,
        **{
            "testbeds.0.settings": {"topology": "1x4"},
            "testbeds.0.env": "gpulab",
            "testbeds.0.sweep": {"nodes": 1, "gpus_per_node": [1, 2, 4]},
            "testbeds.1.exclude": [{"batch": 8, "nodes": 2}],
        },
    )
    a, b = campaign_file.load(path).testbeds
    assert [(c.batch, c.nodes, c.workers) for c in a.cells] == [
        (4, 1, 1),
        (8, 1, 1),
        (4, 1, 2),
        (8, 1, 2),
        (4, 1, 4),
        (8, 1, 4),
    ]
    assert [p.gpus_per_node for p in a.parts] == [1, 2, 4]
    assert [(c.batch, c.nodes) for c in b.cells] == [(4, 1), (4, 2), (8, 1)]


BAD = [
    ("sweep.batch", {"sweep.batch": "4,x"}, "--batch"),
    ("sweep.modle", {"sweep.modle": "resnet18"}, "not an option of `hpcbench scale`"),
    ("sweep.model", {"sweep.model": "nosuch"}, "unknown model"),
    ("sweep.out", {"sweep.out": "x"}, "set by the campaign itself"),
    ("sweep.amp", {"sweep.amp": "sometimes"}, "invalid choice"),
    ("sweep.target_ci", {"sweep.target_ci": "90%"}, "out of range"),
    ("testbeds[0].env", {"testbeds.0.env": "nosuch"}, "unknown environment"),
    ("testbeds[1].name", {"testbeds.1.name": "a"}, "used twice"),
    ("testbeds[0].name", {"testbeds.0.name": "Bad Name"}, "not a label"),
    (
        "testbeds[0].settings.pem_password",
        {"testbeds.0.settings.pem_password": "x"},
        "looks like a secret",
    ),
    ("testbeds[0].settings.Node", {"testbeds.0.settings.Node": 2}, "variable name"),
    ("testbeds[0].sweep.nodes", {"testbeds.0.sweep": {"nodes": "1-4"}}, "the settings give 2"),
    (
        "testbeds[0].sweep.gpus_per_node",
        {
            "testbeds.0.env": "gpulab",
            "testbeds.0.settings": {"topology": "2x1"},
            "testbeds.0.sweep": {"gpus_per_node": 2},
        },
        "more than the 1 GPUs",
    ),
    ("testbeds[0].exclude", {"testbeds.0.exclude": [{"nodes": "1-2"}]}, "leaves no cell"),
    ("testbeds[0].exclude[0].rack", {"testbeds.0.exclude": [{"rack": 1}]}, "unknown key"),
    ("testbeds[0].expect.deploy", {"testbeds.0.expect": {"deploy": "soon"}}, "duration"),
    ("testbeds[0].keep_on_failure", {"testbeds.0.keep_on_failure": "yes"}, "true or false"),
    ("sweep.max_repeats", {"sweep.max_repeats": 1, "sweep.repeats": 3}, "below --repeats"),
    ("testbeds", {"testbeds": []}, "list of testbeds"),
    ("colour", {"colour": "red"}, "unknown key"),
]


@pytest.mark.parametrize(("where", "change", "says"), BAD, ids=[b[0] for b in BAD])
def test_bad_campaign_is_one_line_naming_the_key_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str, change: dict, says: str
) -> None:
    path = base(tmp_path, **change)
    for action in ("plan", "run", "status"):
        assert cli.main(["campaign", action, str(path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "Traceback" not in err[0], err
        assert f"{path}: {where}" in err[0] and says in err[0], err[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("sweep", "given", "said"),
    [
        (
            "model: resnet18, image_size: 32",
            "tokens_per_s",
            "testbeds[1].expect.tokens_per_s: is unused: the sweep's model resnet18 is a CNN, "
            "whose one worker is expect: images_per_s",
        ),
        (
            "model: gpt-tiny, backend: ddp, seq_len: 64, device: cpu",
            "images_per_s",
            "testbeds[1].expect.images_per_s: is unused: the sweep's model gpt-tiny is a "
            "transformer, whose one worker is expect: tokens_per_s",
        ),
    ],
)
def test_expect_in_the_unit_the_sweeps_model_is_not_measured_in_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sweep: str, given: str, said: str
) -> None:
    """`campaign plan` took it and used it nowhere: the forecast reads the figure of
    the model's unit only."""
    path = write(
        tmp_path,
        f"""\
        name: t
        out: {tmp_path / "out"}
        sweep: {{{sweep}, batch: [4], nodes: [1, 2], repeats: 1}}
        testbeds:
          - {{name: a, env: local, settings: {{node_count: 2}}}}
          - name: b
            env: local
            settings: {{node_count: 2}}
            expect: {{{given}: 100, deploy: 1m}}
        """,
    )
    for action in ("plan", "run", "status"):
        assert cli.main(["campaign", action, str(path)]) == 2
        assert capsys.readouterr().err.strip().splitlines() == [f"hpcbench: error: {path}: {said}"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("name: t\nname: u\n", "key 'name' is given twice"),
        ("testbeds: [\n", "not valid YAML (line"),
        ("- a\n- b\n", "must be a mapping"),
    ],
)
def test_unreadable_files_say_why(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(UsageError, match=r".*") as err:
        campaign_file.load(write(tmp_path, text))
    assert says in str(err.value)
    with pytest.raises(UsageError, match="no such campaign file"):
        campaign_file.load(tmp_path / "missing.yaml")


def test_a_campaign_from_before_new_options_keeps_its_cell_ids(tmp_path: Path) -> None:
    # Ids computed by an earlier version, before --step, --decode and the Slurm login
    # options existed: --resume of a journal from then must find the same cells.
    path = write(
        tmp_path,
        """\
        name: pinned
        out: /tmp/pinned-out
        sweep: {model: resnet18, image_size: 32, batch: [4, 8], nodes: [1, 2], repeats: 1}
        testbeds:
          - {name: a, env: local, settings: {node_count: 2, link_rate: 1gbit}}
        """,
    )
    assert [c.id for c in campaign_file.load(path).cells] == [
        "5322118a34c2",
        "6664d6ee3cb4",
        "70a946352bfa",
        "9b6517117507",
    ]


def test_yaml_on_off_reads_as_written(tmp_path: Path) -> None:
    path = base(tmp_path, **{"sweep.amp": True})  # YAML 1.1 reads `amp: on` as true
    assert campaign_file.load(path).testbeds[0].parts[0].workload.amp == "on"


# ------------------------------------------------------------------ the plan
def test_plan_estimates_from_expect_and_earlier_results_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = base(tmp_path, **{"testbeds.0.expect": {"images_per_s": 10, "deploy": "3m"}})
    assert cli.main(["campaign", "plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert "2 testbeds, 8 cells" in out and "deploy 3m00s (expect:)" in out
    assert "from 10 images/s given in expect:" in out
    assert "verify 5m00s (assumed)" in out  # a stated default, said to be one
    assert "unknown" in out and "give `expect: {images_per_s: N}`" in out  # testbed b
    assert not (tmp_path / "out").exists()
    # An earlier run of a cell: its measured length replaces the guess.
    campaign = campaign_file.load(path)
    cell = campaign.testbeds[0].cells[0]
    Store(campaign.testbed_out(campaign.testbeds[0])).append(
        fake_run("local", cell.batch, 1, 1, 1, duration_s=42.0)
    )
    assert cli.main(["campaign", "plan", str(path)]) == 0
    assert "1 x 42 s measured earlier" in capsys.readouterr().out


# ---------------------------------------------------------------- the runner
def fake_run(
    env: str,
    batch: int,
    nodes: int,
    workers: int,
    gpus_per_node: int,
    duration_s: float = 1.0,
    repeat: int = 0,
) -> dict[str, Any]:
    return {
        "kind": "run",
        "env": env,
        "model": "resnet18",
        "backend": "horovod",
        "batch": batch,
        "image_size": 32,
        "data": "synthetic",
        "nodes": nodes,
        "workers": workers,
        "gpus_per_node": gpus_per_node,
        "method": "m",
        "repeat": repeat,
        "status": "ok",
        "steps": 2,
        "window_times": [1.0, 1.1],
        "duration_s": duration_s,
        "weights_in_sync": True,
    }


class Fakes:
    """deploy/verify/destroy/check and sweep.events, keeping their contracts: a deployed
    testbed holds Terraform state with resources and a lease until destroyed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, str]] = []  # (what, testbed state folder name)
        self.fail: dict[str, str] = {}  # "deploy:<state root name>" -> why
        self.interrupt_after: int | None = None  # runs before a Ctrl-C in the sweep
        self.runs = 0
        self.destroy_rc = 0
        # A deployed kind's booking (hpcbench.testbeds.kinds.deployed), each looked up
        # when called, so that a test can wrap one of these.
        for method, fake in {
            "check_booking": lambda kind, env, settings: self.calls.append(("check", env)),
            "acquire": lambda kind, env, settings: self.deploy(DeployRequest(env, settings)),
            "verify": lambda kind, env: self.verify(VerifyRequest(env)),
            "release": lambda kind, env: self.destroy(EnvRequest(env)),
        }.items():
            monkeypatch.setattr(Deployed, method, fake)
        monkeypatch.setattr(sweep, "events", self.sweep)
        monkeypatch.setattr(sweep, "stop_on_signals", lambda: None)
        monkeypatch.setattr(runner, "stop_on_signals", lambda: None)

    def _call(self, what: str, env: str) -> None:
        who = paths.state_root().name
        self.calls.append((what, who))
        why = self.fail.get(f"{what}:{who}")
        if why:
            raise RuntimeError(why)

    def deploy(self, req: Any) -> int:
        """Holds a lease from the moment the paid resource exists, as the module
        scripts do; a failure after that leaves it for destroy."""
        state = paths.ensure_env_state(req.env)
        (state / "leases").mkdir(exist_ok=True)
        lease = {"what": f"job of {paths.state_root().name}", "cancel": ["false"]}
        (state / "leases" / "job.json").write_text(json.dumps(lease))
        self._call("deploy", req.env)
        (state / "terraform.tfstate").write_text(json.dumps({"resources": [{"x": 1}]}))
        # The inventory Terraform renders (local's link_rate defaults to 1gbit).
        given = dict(req.overrides)
        names = [f"node{i}" for i in range(1, int(given.get("node_count", 2)) + 1)]
        everyone = {
            "testbed_nodes": [{"name": n, "address": f"10.0.0.{i}"} for i, n in enumerate(names)],
            "testbed_head": names[0],
            "hpcbench_env": req.env,
            "link_rate": given.get("link_rate", "1gbit"),
        }
        hosts = {
            n: {"ansible_host": "127.0.0.1", "ansible_port": 2200 + i} for i, n in enumerate(names)
        }
        inventory = {"all": {"vars": everyone, "hosts": hosts}}
        (state / "inventory.yml").write_text(yaml.safe_dump(inventory))
        return 0

    def verify(self, req: Any) -> int:
        """pytest's exit status, as the real verify returns it."""
        try:
            self._call("verify", req.env)
        except RuntimeError:
            return 1
        return 0

    def destroy(self, req: Any) -> int:
        self._call("destroy", req.env)
        if self.destroy_rc:
            return self.destroy_rc
        import shutil

        shutil.rmtree(paths.env_state(req.env))
        return 0

    def sweep(self, workload: Any, target: Any, spec_: Any) -> Generator[sweep.Event, None, int]:
        self.calls.append(("sweep", paths.state_root().name))
        store = Store(spec_.out)
        live = analysis.LiveSummary(store.runs())
        resolved = Target.resolve(target)  # as `scale` resolves it: its records' keys
        for batch, nodes, workers in sorted(spec_.only):
            if self.interrupt_after is not None and self.runs >= self.interrupt_after:
                raise KeyboardInterrupt
            config = sweep.Config(batch, nodes, workers)
            record = {
                **fake_run(target.env, batch, nodes, workers, target.gpus_per_node or 1),
                **sweep.base_record(resolved, workload, spec_.seed, config, 0),
            }
            store.append(record)
            self.runs += 1
            summary = live.add(record)
            yield sweep.RunLanded(config, summary, record)
            yield sweep.ConfigFinished(config, summary)
        return 0

    def held(self) -> list[Path]:
        return sorted(paths.state_root().rglob("leases/*.json"))


def states(path: Path) -> dict[tuple[str, int, int], str]:
    campaign = campaign_file.load(path)
    return {
        (r["testbed"], r["batch"], r["workers"]): r["status"]
        for r in commands.status_rows(campaign)
    }


def test_each_testbed_deploy_verify_sweep_destroy_in_order(tmp_path: Path, fakes: Fakes) -> None:
    path = base(tmp_path)
    assert cli.main(["campaign", "run", str(path)]) == 0
    assert fakes.calls == [
        ("check", "local"),
        ("check", "local"),  # planned before any deploy
        ("deploy", "a"),
        ("verify", "a"),
        ("sweep", "a"),
        ("destroy", "a"),
        ("deploy", "b"),
        ("verify", "b"),
        ("sweep", "b"),
        ("destroy", "b"),
    ]
    assert set(states(path).values()) == {"measured"}
    assert fakes.held() == []
    assert (tmp_path / "out" / "report.html").is_file()
    # Everything done: a second run with --resume touches nothing.
    fakes.calls.clear()
    assert cli.main(["campaign", "run", str(path), "--resume"]) == 0
    assert fakes.calls == []


def test_the_report_holds_every_configurations_numbers_as_json_and_csv(
    tmp_path: Path, fakes: Fakes
) -> None:
    path = base(tmp_path)
    assert cli.main(["campaign", "run", str(path)]) == 0
    out = tmp_path / "out"
    document = json.loads((out / "configurations.json").read_text())
    assert document["schema"] == "hpcbench.configurations/1" and document["method"]
    configs = document["configurations"]
    measured = [
        r for r in commands.status_rows(campaign_file.load(path)) if r["status"] == "measured"
    ]
    assert sorted((c["testbed"], c["batch"], c["workers"]) for c in configs) == sorted(
        (r["testbed"], r["batch"], r["workers"]) for r in measured
    )
    one = next(c for c in configs if c["workers"] == 1)
    assert one["images_per_sec"] > 0 and one["efficiency"] in (None, 1.0)
    rows = list(csv.DictReader((out / "configurations.csv").open()))
    assert [(r["testbed"], int(r["workers"])) for r in rows] == [
        (c["testbed"], c["workers"]) for c in configs
    ]
    assert float(rows[0]["images_per_sec"]) == configs[0]["images_per_sec"]


def test_a_failed_deploy_is_recorded_and_the_next_testbed_runs(
    tmp_path: Path, fakes: Fakes, capfd: pytest.CaptureFixture[str]
) -> None:
    path = base(tmp_path)
    fakes.fail["deploy:a"] = "GPULab job 1 is FAILED (exit code 127), not RUNNING"
    assert cli.main(["campaign", "run", str(path)]) == 1
    assert ("sweep", "a") not in fakes.calls and ("sweep", "b") in fakes.calls
    assert ("destroy", "a") in fakes.calls  # what a failed create may hold is released
    rows = commands.status_rows(campaign_file.load(path))
    a = [r for r in rows if r["testbed"] == "a"]
    assert {r["status"] for r in a} == {"failed"}
    assert all("deploy: GPULab job 1 is FAILED" in str(r["why"]) for r in a)
    assert {r["status"] for r in rows if r["testbed"] == "b"} == {"measured"}
    assert "deploy FAILED" in capfd.readouterr().err
    assert fakes.held() == []


@pytest.mark.parametrize("fail", [None, "deploy:a"])
def test_the_eta_on_the_next_testbed_is_its_own_plan(
    tmp_path: Path, fakes: Fakes, capfd: pytest.CaptureFixture[str], fail: str | None
) -> None:
    # Once testbed a is done with (measured, or its deploy failed), the ETA is what b
    # has left by the plan, at the pace a kept against its own estimates (the fakes take
    # no time: the fastest pace the clock believes, a quarter). The sweep phase once
    # told the clock its cells' estimates a second time: "ETA 0s" with 8 minutes left.
    expect = {"images_per_s": 10, "deploy": "2m", "verify": "1m", "destroy": "30s"}
    path = base(
        tmp_path,
        **{"testbeds.0.expect": expect, "testbeds.1.expect": expect, "sweep.max_repeats": 3},
    )
    campaign = campaign_file.load(path)
    b = estimate.testbed(campaign, campaign.testbeds[1], [])  # as planned: nothing run yet
    left = b.wall_s() - b.phases["deploy"].seconds
    most = b.wall_max_s() - b.phases["deploy"].seconds
    assert most > left
    if fail:
        fakes.fail[fail] = "it broke"
    assert cli.main(["campaign", "run", str(path)]) == (1 if fail else 0)
    line = next(
        x for x in capfd.readouterr().err.splitlines() if x.startswith("[testbed 2/2 b] deploy ok")
    )
    assert line.endswith(
        f"ETA {format_duration(left / 4)} (at most {format_duration(most / 4)})"
    ), line


def test_the_eta_tells_each_piece_once_and_drops_what_a_testbed_left() -> None:
    clock = estimate.Clock()
    assert clock.eta() is None
    clock.plan(
        {"a": {"deploy": 100.0, "cell1": 500.0}, "b": {"deploy": 100.0}}, {"a": 900.0, "b": 0.0}
    )
    assert clock.eta() == (700.0, 1600.0)
    clock.finished("a", "deploy", 200.0)  # twice as slow as planned
    assert clock.eta() == (1200.0, 3000.0)
    clock.finished("a", "deploy", 200.0)  # told again: nothing more is done
    clock.finished("a", "sweep", 300.0)  # not in the plan (its cells are)
    assert clock.eta() == (1200.0, 3000.0)
    clock.settled("a")  # a failed: its cell will not run, nor can it take longer
    assert clock.eta() == (200.0, 200.0)


def test_a_testbed_with_nothing_left_adds_nothing_to_the_eta() -> None:
    clock = estimate.Clock()
    clock.plan({"a": {"cell1": 100.0}, "b": {"cell2": 100.0}}, {"a": 500.0, "b": 50.0})
    clock.finished("a", "cell1", 100.0)  # a's last piece: its extra cannot come
    assert clock.eta() == (100.0, 150.0)
    clock.finished("b", "cell2", 100.0)
    assert clock.eta() is None  # nothing left: no "ETA 0s (at most ...)"


def test_no_eta_after_the_last_cell(
    tmp_path: Path, fakes: Fakes, capfd: pytest.CaptureFixture[str]
) -> None:
    expect = {"images_per_s": 10, "deploy": "2m", "verify": "1m", "destroy": "30s"}
    path = base(tmp_path, **{"testbeds.0.expect": expect, "testbeds.1.expect": expect})
    total = len(campaign_file.load(path).cells)
    assert cli.main(["campaign", "run", str(path)]) == 0
    err = capfd.readouterr().err.splitlines()
    before = [x for x in err if "done, " in x and f"cell {total} of {total} done" not in x]
    assert before and all(", ETA " in x for x in before[1:]), before
    after = [x for x in err if f"cell {total} of {total} done" in x]
    assert after and not [x for x in after if "ETA" in x], after


def test_the_longest_a_testbed_may_take_is_capped_by_the_sweeps_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expect = {"images_per_s": 10, "deploy": "1m", "verify": "1m", "destroy": "1m"}

    def first(**changes: Any) -> estimate.TestbedEstimate:
        campaign = campaign_file.load(base(tmp_path, **{"testbeds.0.expect": expect, **changes}))
        return estimate.testbed(campaign, campaign.testbeds[0], [])

    est = first(**{"sweep.max_repeats": 6})
    phases, runs = est._phases_s(most=True), est._runs_s(None, most=True)
    # Every phase and run at its upper bound: given figures x 1.5 (expect:), the probe's
    # stated upper default, the runs' slow ends (docs/campaigns.md, "the plan").
    assert phases == pytest.approx(3 * 60 * estimate.GIVEN_MARGIN + estimate.DEFAULT_PROBE_MOST_S)
    assert est.wall_max_s() == pytest.approx(phases + 6 * runs)  # no budget: 6 repeats
    # A budget between the repeats every cell runs (1 here) and --max-repeats: no repeat
    # starts after it, and the last one started may run to its end.
    longest = max(e.upper or 0.0 for _, e in est.cells)
    budget = {"sweep.max_repeats": 6, "sweep.budget": f"{round(3 * runs)}s"}
    capped = phases + round(3 * runs) + longest
    assert first(**budget).wall_max_s() == pytest.approx(capped)
    path = base(tmp_path, **{"testbeds.0.expect": expect, **budget})
    assert cli.main(["campaign", "plan", str(path)]) == 0
    budget_s = format_duration(round(3 * runs))
    assert (
        f"up to {format_duration(capped)} if cells take up to "
        f"--max-repeats 6 within --budget {budget_s})"
    ) in capsys.readouterr().out
    # A budget shorter than the repeats every cell runs anyway bounds nothing.
    est = first(**{"sweep.budget": "1s"})
    assert est.wall_max_s() == pytest.approx(phases + runs)


def test_a_runs_bound_holds_however_fast_the_host(tmp_path: Path) -> None:
    # The local campaign's shape: windows of at least 12 s. A host four times faster than
    # the file's planning figure still runs 4 windows of 12 s; its runs are no longer
    # than the bound, and the bound is no shorter than what the windows alone take.
    from hpcbench.launchers.specs import WorkloadSpec

    workload = WorkloadSpec(
        model="resnet18", image_size=64, warmup=3, windows=4, steps=3, min_window_s=12.0
    )
    for ips in (40.0, 157.0, 1000.0):
        step = 64 / ips
        real = estimate.run_seconds(workload, step, overhead=30.0)
        assert real >= 4 * 12.0  # the windows' floor, whatever the rate
        bound = estimate.run_seconds(
            workload, 64 / (40.0 / estimate.GIVEN_MARGIN), estimate.DEFAULT_OVERHEAD_MOST_S
        )
        assert real <= bound, (ips, real, bound)


def test_keep_on_failure_keeps_the_failed_testbed_and_says_how_to_remove_it(
    tmp_path: Path, fakes: Fakes, capfd: pytest.CaptureFixture[str]
) -> None:
    path = base(tmp_path, keep_on_failure=True)
    fakes.fail["verify:a"] = "checks failed"
    assert cli.main(["campaign", "run", str(path)]) == 1
    assert ("destroy", "a") not in fakes.calls and ("destroy", "b") in fakes.calls
    err = capfd.readouterr().err
    assert "kept for debugging" in err and f"campaign destroy {path} --testbed a" in err
    assert len(fakes.held()) == 1
    assert cli.main(["campaign", "status", str(path)]) == 0
    assert "testbed a still holds" in capfd.readouterr().out
    assert cli.main(["campaign", "destroy", str(path)]) == 0
    assert fakes.held() == []


def test_a_stop_while_a_run_is_reported_closes_the_sweep_before_the_destroy(
    tmp_path: Path, fakes: Fakes, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The sweep is a generator the campaign iterates: a stop raised while the campaign
    # handles one of its events leaves it suspended, and the campaign closes it (its
    # store and testbed released) before the testbed is destroyed.
    path = base(tmp_path)
    events = fakes.sweep

    def sweep_events(*args: Any) -> Generator[sweep.Event, None, int]:
        try:
            return (yield from events(*args))
        finally:
            fakes.calls.append(("sweep closed", paths.state_root().name))

    def stop(*args: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep, "events", sweep_events)
    monkeypatch.setattr(cells.CellRecorder, "run_landed", stop)
    assert cli.main(["campaign", "run", str(path)]) == 130
    assert fakes.calls[-3:] == [("sweep", "a"), ("sweep closed", "a"), ("destroy", "a")]
    assert fakes.held() == []


def test_ctrl_c_destroys_the_testbed_in_hand_and_resume_runs_only_what_is_left(
    tmp_path: Path, fakes: Fakes, capfd: pytest.CaptureFixture[str]
) -> None:
    path = base(tmp_path)
    fakes.interrupt_after = 5  # testbed a's 4 cells, then one of b's
    assert cli.main(["campaign", "run", str(path)]) == 130
    assert fakes.calls[-1] == ("destroy", "b") and fakes.held() == []
    before = states(path)
    assert sorted(before.values()).count("measured") == 5
    assert "interrupted" in capfd.readouterr().err
    runs_before = {tb: len(Store(tmp_path / "out" / tb).runs()) for tb in ("a", "b")}
    fakes.calls.clear()
    fakes.interrupt_after = None
    assert cli.main(["campaign", "run", str(path), "--resume"]) == 0
    assert [c for c in fakes.calls if c[0] != "check"] == [
        ("deploy", "b"),
        ("verify", "b"),
        ("sweep", "b"),
        ("destroy", "b"),
    ]
    assert len(Store(tmp_path / "out" / "a").runs()) == runs_before["a"]  # a: untouched
    assert len(Store(tmp_path / "out" / "b").runs()) == runs_before["b"] + 3  # b: 3 left
    assert set(states(path).values()) == {"measured"}


def test_a_failed_destroy_says_what_is_held_and_how_to_release_it(
    tmp_path: Path, fakes: Fakes, capfd: pytest.CaptureFixture[str]
) -> None:
    path = base(tmp_path)
    fakes.destroy_rc = 1
    assert cli.main(["campaign", "run", str(path)]) == 1
    err = capfd.readouterr().err
    assert "STILL HELD: job of a" in err and "cancel it by hand: false" in err
    assert f"campaign destroy {path} --testbed a" in err
    assert ("deploy", "b") in fakes.calls  # the campaign went on
    assert len(fakes.held()) == 2
    fakes.destroy_rc = 0
    assert cli.main(["campaign", "destroy", str(path)]) == 0
    assert fakes.held() == []


def test_one_campaign_per_folder_and_no_silent_rerun(
    tmp_path: Path, fakes: Fakes, capfd: pytest.CaptureFixture[str]
) -> None:
    """(A folder a running campaign holds locked: tests/integration/test_campaign_processes.py.)"""
    path = base(tmp_path)
    assert cli.main(["campaign", "run", str(path)]) == 0
    capfd.readouterr()
    assert cli.main(["campaign", "run", str(path)]) == 2  # the journal holds it: --resume
    assert "add --resume" in capfd.readouterr().err
    other = write(
        tmp_path, BASE.format(out=tmp_path / "out").replace("name: t", "name: u"), "u.yaml"
    )
    assert cli.main(["campaign", "run", str(other), "--resume"]) == 2
    assert "holds campaign 't'" in capfd.readouterr().err


# ------------------------------------------------------- whatever else fails
def test_a_journal_that_cannot_be_written_still_releases_the_testbed(
    tmp_path: Path, fakes: Fakes, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # The disk fills (or the folder turns read-only) while testbed a is deployed: the
    # journal's next record fails. Before, the journal was written before the teardown
    # in the error path, so the destroy never ran and nobody was told.
    from hpcbench.campaign.journal import Journal
    from hpcbench.measure.store import StoreWriteError

    written = Journal.cell

    def full_after_deploy(self: Journal, cell: Any, status: str, *args: Any, **kw: Any) -> None:
        if status != "deployed" and any(c == ("deploy", "a") for c in fakes.calls):
            raise StoreWriteError("No space left on device: kept in /tmp/hpcbench-unsaved-x")
        written(self, cell, status, *args, **kw)

    monkeypatch.setattr(Journal, "cell", full_after_deploy)
    path = base(tmp_path)
    assert cli.main(["campaign", "run", str(path)]) == 1
    assert ("destroy", "a") in fakes.calls and fakes.held() == []
    err = capfd.readouterr().err
    assert "stopped by an error (StoreWriteError" in err and "destroying what" in err
    assert "the journal could not be written" in err


def test_two_campaigns_of_one_name_in_two_folders_keep_apart(tmp_path: Path) -> None:
    one = campaign_file.load(base(tmp_path))
    other = campaign_file.load(write(tmp_path, BASE.format(out=tmp_path / "elsewhere"), "o.yaml"))
    assert one.name == other.name == "t"
    tb = one.testbeds[0]
    assert runner.state_root(one, tb, tmp_path) != runner.state_root(
        other, other.testbeds[0], tmp_path
    )
    # A folder by the name alone is not looked for: it may be another campaign's
    # (tests/unit/test_campaign_state.py).
    legacy = tmp_path / "campaigns" / "t" / "a"
    legacy.mkdir(parents=True)
    assert runner.state_root(one, tb, tmp_path) != legacy


def test_resume_measures_again_what_the_journal_says_but_the_store_lost(
    tmp_path: Path, fakes: Fakes, capfd: pytest.CaptureFixture[str]
) -> None:
    path = base(tmp_path)
    assert cli.main(["campaign", "run", str(path)]) == 0
    import shutil

    shutil.rmtree(tmp_path / "out" / "b")  # b's store gone; the journal says measured
    assert "is measured in the journal but" in resume_measures_b_again(path, fakes, capfd)
    assert len(Store(tmp_path / "out" / "b").runs()) == 4


def resume_measures_b_again(path: Path, fakes: Fakes, capfd: pytest.CaptureFixture[str]) -> str:
    """`campaign run --resume` of base()'s campaign whose testbed b lost what it
    measured: b alone is deployed, measured and destroyed again. What it printed."""
    fakes.calls.clear()
    capfd.readouterr()
    assert cli.main(["campaign", "run", str(path), "--resume"]) == 0
    assert [c for c in fakes.calls if c[0] != "check"] == [
        ("deploy", "b"),
        ("verify", "b"),
        ("sweep", "b"),
        ("destroy", "b"),
    ]
    return capfd.readouterr().err


def test_a_journal_path_that_is_a_folder_and_an_out_that_is_a_file_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = base(tmp_path)
    (tmp_path / "out" / "results.jsonl").mkdir(parents=True)
    assert cli.main(["campaign", "run", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "results.jsonl is not a regular file" in err[0]
    filed = write(tmp_path, BASE.format(out=tmp_path / "a-file"), "f.yaml")
    (tmp_path / "a-file").write_text("x")
    assert cli.main(["campaign", "plan", str(filed)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "out: " in err[0] and "is a file" in err[0]


def test_status_tells_a_running_campaign_from_a_stopped_one(tmp_path: Path, fakes: Fakes) -> None:
    from hpcbench.core import locks

    path = base(tmp_path)
    fakes.destroy_rc = 1  # a's and b's leases stay held
    assert cli.main(["campaign", "run", str(path)]) == 1
    campaign = campaign_file.load(path)
    stopped = commands.status_lines(campaign)
    assert any("still holds" in line and "campaign destroy" in line for line in stopped)
    assert not any("running now" in line for line in stopped)
    journal = __import__("hpcbench.campaign.journal", fromlist=["J"]).Journal(
        campaign.out, campaign.name
    )
    fd = locks.hold_as_process(journal.store.lock_path, "busy")
    try:
        running = commands.status_lines(campaign)
    finally:
        os.close(fd)
    assert running[1] == f"running now (pid {os.getpid()}): `campaign run` holds {campaign.out}"
    assert not any("campaign destroy" in line for line in running)
    assert any("in use by the running campaign" in line for line in running)


# ------------------------------------------------------------- leases sized
def test_a_gpulab_job_is_booked_for_the_plans_bound_and_status_says_when_it_ends(
    tmp_path: Path, fakes: Fakes, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = base(
        tmp_path,
        **{
            "testbeds": [
                {
                    "name": "g",
                    "env": "gpulab",
                    "settings": {"topology": "2x1"},
                    "expect": {"images_per_s": 10, "deploy": "5m", "verify": "2m", "destroy": "1m"},
                }
            ]
        },
    )
    asked: list[dict[str, str]] = []
    deploy = fakes.deploy
    monkeypatch.setattr(
        fakes, "deploy", lambda req: asked.append(dict(req.overrides)) or deploy(req)
    )
    campaign = campaign_file.load(path)
    est = estimate.testbed(campaign, campaign.testbeds[0], [])
    lease = estimate.lease(est)
    assert lease is not None and lease.variable == "max_duration"
    assert lease.minutes == math.ceil(
        (est.wall_max_s() * estimate.MARGIN + estimate.LEASE_SLACK_S) / 60
    )
    fakes.destroy_rc = 1  # held after the run: status shows the lease
    assert cli.main(["campaign", "run", str(path)]) == 1
    assert asked[0]["max_duration"] == f"{lease.minutes}m"
    held = [line for line in commands.status_lines(campaign) if "still holds" in line]
    assert held and f"a lease (max_duration {lease.minutes}m) ending about " in held[0]


def test_a_lease_the_settings_give_is_kept_and_a_plan_too_long_for_one_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    given = base(
        tmp_path,
        **{
            "testbeds.0.env": "gpulab",
            "testbeds.0.settings": {"topology": "2x1", "max_duration": "90m"},
            "testbeds.0.expect": {"images_per_s": 10},
        },
    )
    campaign = campaign_file.load(given)
    lease = estimate.lease(estimate.testbed(campaign, campaign.testbeds[0], []))
    assert lease is not None and (lease.value, lease.source) == ("90m", "given in settings:")
    # A week of Virtual Wall is its longest slice: more is refused before anything runs.
    long = base(
        tmp_path,
        **{
            "testbeds.0.env": "virtualwall",
            "testbeds.0.settings": {"node_count": 2},
            "testbeds.0.expect": {"images_per_s": 0.01},
            "sweep.max_repeats": 50,
        },
    )
    for action in ("plan", "run"):
        assert cli.main(["campaign", action, str(long)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "its lease (expire_time_min) can be 10080 min at most" in err[0]
    assert not (tmp_path / "out").exists()


def test_a_testbeds_ansible_variables_are_written_0600_never_through_a_planted_link(
    tmp_path: Path, fakes: Fakes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """group_vars/all.yml sits beside the 0600 inventory and settings.json: 0600 too,
    and a link planted at its name is replaced, the file it points to untouched."""
    path = base(tmp_path, **{"testbeds.0.ansible": {"stack_mode": "image"}})
    victim = tmp_path / "victim"
    victim.write_text("not yours\n")
    seen: list[tuple[int, str]] = []
    deploy, write_group_vars = fakes.deploy, lifecycle.TestbedLife.write_group_vars

    def reading_group_vars(req: Any) -> int:
        written = paths.env_state(req.env) / "group_vars" / "all.yml"
        if written.exists() and not written.is_symlink():
            seen.append((written.stat().st_mode & 0o777, written.read_text()))
        return deploy(req)

    def planting_a_link_first(life: Any, tb: Any) -> None:
        folder = paths.ensure_env_state(tb.env) / "group_vars"
        folder.mkdir(mode=0o700, exist_ok=True)
        (folder / "all.yml").unlink(missing_ok=True)
        (folder / "all.yml").symlink_to(victim)
        write_group_vars(life, tb)

    monkeypatch.setattr(fakes, "deploy", reading_group_vars)
    monkeypatch.setattr(lifecycle.TestbedLife, "write_group_vars", planting_a_link_first)
    assert cli.main(["campaign", "run", str(path)]) == 0
    assert victim.read_text() == "not yours\n"
    assert len(seen) == 1 and seen[0][0] == 0o600 and "stack_mode: image" in seen[0][1]
