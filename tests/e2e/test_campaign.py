"""`hpcbench campaign run` end to end over the GPULab and jFed stand-ins.

One campaign of four testbeds, each deploy -> verify -> sweep of 1-2 workers ->
destroy, into one comparison report:
    gpulab-1x2   one job, two GPUs (1 and 2 workers in one job)
    vw-1g        Virtual Wall at 1 Gbit/s: the campaign is interrupted (SIGINT to its
                 process group, as Ctrl-C) once its first cell is measured
    broken       a GPULab job whose image has no sshd: its deploy fails
    gpulab-2x1   two jobs, one GPU each
then `--resume`. (A second Virtual Wall slice at 10 Gbit/s would differ only in the
RSpec's capacity and the rate the stand-in shapes, which tests/terraform's golden
virtualwall-10g.rspec and tests/terraform/test_artefacts.py check; it would add four
minutes to `make test`.) The tests show that the interrupted testbed is destroyed and
continued without re-running a finished cell, that the failed testbed is
reported and the next one still runs, and that after every path no container,
job, slice or lease is left.

These are also the e2e tests of `deploy`, `verify`, `scale` and `destroy` on the
two environments (a campaign runs the very functions the commands do): while
the campaign holds a testbed, the test looks at its leases, jobs and nodes
(Campaign.look), and checks them, the testbed's log and its store after.
test_gpulab.py and test_virtualwall.py keep what a campaign does not do: a
deploy interrupted or failing through the command line.

The stand-ins (tests/standins: gpulab-cli and jFed CLI 2, following the real
clients) run every job and node as a container of the local Docker engine.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from hpcbench.campaign import campaign_file
from hpcbench.campaign.state import state_root
from hpcbench.measure import analysis
from tests.e2e.conftest import TINY_SWEEP, campaign_run, hpcbench

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
GPULAB = REPO / "tests/standins/gpulab"
JFED = REPO / "tests/standins/jfed"
PASSWORD = "campaign pass"
STACK_URN = "urn:publicid:IDN+wall2.ilabt.iminds.be+image+hpcbench:STACK-E2E"
JFED_LABEL = "org.hpcbench.jfed-standin.slice"
JFED_SLICES = f"{JFED_LABEL}=hpcbench/hpcbench-cvw-"  # this campaign's slices (project/slice)
# What the boot script (the RSpec's <execute>) leaves on a jFed node.
STARTUP, BOOTSTRAP_DONE = "/var/tmp/startup-0.txt", "/var/lib/hpcbench/bootstrap.done"
ENDED = ("CANCELLED", "FAILED", "FINISHED")  # a GPULab job in one of these holds nothing
# Where each testbed's phase begins in its log (runner.Runner.phase).
PHASE = re.compile(r"^==== \d{4}-\d\d-\d\d \d\d:\d\d:\d\d ([a-z0-9-]+): (\w+)$", re.M)
sys.path.insert(0, str(GPULAB))
gpulab_cli = pytest.importorskip(
    "gpulab_cli",
    reason="the stand-in needs click, docker and imecilabt-gpulab-common (pip install '.[test]')",
)

# conftest.TINY_SWEEP; the all-reduce probe (which the report's predictions need) up
# to 1 MiB messages: its default 64M took 35 s a slice at 1 Gbit/s.
SWEEP = {**TINY_SWEEP, "batch": [4], "nodes": [1, 2], "probe_max_bytes": "1M"}
GPULAB_SIZE = {"cpus_per_gpu": 1, "memory_gb_per_gpu": 2, "start_timeout": 300}


PRICE = {"amount": 1.5, "currency": "EUR", "per": "node-hour"}


def _jfed(name: str, capacity: int, cidr: str, pem: Path, jar: Path) -> dict:
    return {
        "name": name,
        "env": "virtualwall",
        "title": f"jFed stand-in, {capacity // 1000} Gbit/s",
        "settings": {
            "project": "hpcbench",
            "pem_path": str(pem),
            "jfed_cli_jar": str(jar),
            "disk_image": STACK_URN,
            "node_count": 2,
            "slice_name": f"hpcbench-c{name}",
            "lan_cidr": cidr,
            "link_capacity_mbps": capacity,
            "bootstrap_wait_min": 3,
            "experiment_iface": "eth1",
        },
        # The stand-in's nodes boot an image that holds the stack (its group_vars.yml).
        "ansible": yaml.safe_load((JFED / "group_vars.yml").read_text()),
        # A planning figure for the forecast the report scores (not a measurement).
        "expect": {"images_per_s": 50},
    }


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:  # removed while it was listed
        return b""


@dataclass
class Campaign:
    root: Path
    file: Path
    environ: dict[str, str]
    # What each testbed held while the campaign had it deployed (look), by name.
    seen: dict[str, dict] = field(default_factory=dict)

    @property
    def out(self) -> Path:
        return self.root / "results"

    def env_state(self, testbed: str) -> Path:
        """The testbed's state folder (campaign.state.state_root), holding its leases."""
        env = "virtualwall" if testbed.startswith("vw-") else "gpulab"
        campaign = campaign_file.load(self.file)
        return state_root(campaign, campaign.testbed(testbed), self.root / "state") / env

    def hpcbench(self, *args: str, timeout: float = 2400) -> subprocess.CompletedProcess[str]:
        return hpcbench(self.environ, *args, timeout=timeout)

    def run(
        self, *args: str, stop: Callable[[dict[str, dict]], bool] | None = None
    ) -> tuple[int, str]:
        """`campaign run` as from a terminal, looking at each testbed once it is deployed;
        Ctrl-C (SIGINT to its process group) once `stop` says so of the cell states."""
        log = self.root / f"run-{len(list(self.root.glob('run-*.out')))}.out"

        def watch() -> bool:
            states = self.cell_states()
            for s in states.values():
                if s["status"] in ("deployed", "verified") and s["testbed"] not in self.seen:
                    self.seen[s["testbed"]] = self.look(s["testbed"])
            return stop is not None and stop(states)

        return campaign_run(self.file, args, self.environ, log, watch), log.read_text()

    def look(self, testbed: str) -> dict:
        """A deployed testbed's leases, whether the PEM's password is in its state, and
        its GPULab jobs or its jFed nodes' boot-script marks and link shaping."""
        state = self.env_state(testbed)
        seen: dict = {
            "leases": [json.loads(_read(p) or "{}") for p in state.glob("leases/*.json")],
            "secret": [str(p) for p in state.rglob("*") if PASSWORD.encode() in _read(p)],
        }
        if not testbed.startswith("vw-"):
            seen["jobs"] = self.jobs()
            return seen

        prefix = f"jfedsi-hpcbench-c{testbed}-"  # the stand-in's container names

        def on_node(node: str, *cmd: str) -> str:
            proc = subprocess.run(
                ["docker", "exec", f"{prefix}{node}", *cmd],
                capture_output=True,
                text=True,
                timeout=60,
            )
            return proc.stdout.strip() if proc.returncode == 0 else f"(failed: {proc.stderr})"

        seen["nodes"] = subprocess.run(
            [
                "docker",
                "ps",
                "-a",
                "--filter",
                f"label={JFED_LABEL}=hpcbench/hpcbench-c{testbed}",
                "--format",
                "{{.Names}}",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        for node in ("node0", "node1"):
            seen[f"{node} startup owner"] = on_node(node, "stat", "-c", "%U", STARTUP)
            seen[f"{node} bootstrap.done"] = on_node(node, "cat", BOOTSTRAP_DONE)
        seen["node1 qdisc"] = on_node("node1", "tc", "qdisc", "show")
        return seen

    def jobs(self) -> dict[str, str]:
        """Every job the GPULab stand-in knows: id -> status."""
        jobs = self.root / "standin" / "jobs"
        return {
            p.stem: json.loads(p.read_text())["job"]["state"]["status"] for p in jobs.glob("*.json")
        }

    def log(self, testbed: str, phase: str) -> list[str]:
        """The output of each time the testbed ran `phase`, from its log."""
        text = (self.out / "logs" / f"{testbed}.log").read_text()
        heads = list(PHASE.finditer(text))
        ends = [h.start() for h in heads[1:]] + [len(text)]
        return [
            text[h.end() : end]
            for h, end in zip(heads, ends, strict=True)
            if h.group(1) == testbed and h.group(2) == phase
        ]

    def journal(self) -> list[dict]:
        path = self.out / "results.jsonl"
        if not path.is_file():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def cell_states(self) -> dict[str, dict]:
        states: dict[str, dict] = {}
        for r in self.journal():
            if r.get("kind") == "cell":
                states[r["cell"]] = r
        return states

    def runs(self, testbed: str) -> list[dict]:
        path = self.out / testbed / "results.jsonl"
        if not path.is_file():
            return []
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return [r for r in records if r.get("kind") == "run"]

    def left_behind(self) -> list[str]:
        """Every container, job, slice or lease a testbed of the campaign could hold."""
        found = [f"GPULab job {j} {s}" for j, s in self.jobs().items() if s not in ENDED]
        gpulab_dir = self.root / "standin"

        def containers(*flags: str) -> list[str]:
            return subprocess.run(
                ["docker", "ps", *flags, "--format", "{{.Names}} {{.Labels}}"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.splitlines()

        # A job's container stays once it ended (as GPULab keeps it); a slice's nodes
        # are removed by DELETE.
        sid = gpulab_cli.standin_id(gpulab_dir)
        found += [line.split()[0] for line in containers() if f"{gpulab_cli.LABEL}={sid}" in line]
        found += [line.split()[0] for line in containers("-a") if JFED_SLICES in line]
        state = self.root / "state"
        found += [str(p) for p in state.rglob("leases/*.json")] if state.is_dir() else []
        found += (
            [
                str(p)
                for p in state.rglob("terraform.tfstate")
                if json.loads(p.read_text() or "{}").get("resources")
            ]
            if state.is_dir()
            else []
        )
        return found


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Campaign]:
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        pytest.fail("no Docker engine answers: `make tools` starts one")
    for image in ("hpcbench/node:latest", "hpcbench/stack:latest"):
        if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode:
            pytest.fail(f"{image} is missing: run `make images`")
    root = tmp_path_factory.mktemp("campaign")
    # What a user brings: a Fed4FIRE login PEM (certificate + encrypted key) and
    # jFed's CLI folder with experimenter-cli2.jar in it.
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-days",
            "2",
            "-subj",
            "/CN=e2e",
            "-keyout",
            str(root / "key.pem"),
            "-out",
            str(root / "cert.pem"),
            "-passout",
            f"pass:{PASSWORD}",
        ],
        check=True,
        capture_output=True,
    )
    pem = root / "login.pem"
    pem.write_text((root / "cert.pem").read_text() + (root / "key.pem").read_text())
    pem.chmod(0o600)
    jar = root / "jfed_cli" / "experimenter-cli2.jar"
    jar.parent.mkdir()
    jar.write_text("")
    gpulab = {
        "env": "gpulab",
        "settings": {
            "project": "e2eproj",
            "pem_path": str(pem),
            "stack_image": "hpcbench/stack:latest",
            **GPULAB_SIZE,
        },
    }
    spec = {
        "name": "e2e",
        "out": str(root / "results"),
        "sweep": SWEEP,
        "testbeds": [
            {
                **gpulab,
                "name": "gpulab-1x2",
                "title": "GPULab 1 job x 2",
                "settings": {**gpulab["settings"], "topology": "1x2"},
                "sweep": {"nodes": 1},
            },
            # A price for the plan's and the report's cost (an example figure).
            {**_jfed("vw-1g", 1000, "172.30.91.0/24", pem, jar), "price": PRICE},
            {
                **gpulab,
                "name": "broken",
                "title": "GPULab, an image without sshd",
                "settings": {
                    **gpulab["settings"],
                    "topology": "1x1",
                    "stack_image": "debian:bookworm-slim",
                },
                "sweep": {"nodes": 1},
            },
            {
                **gpulab,
                "name": "gpulab-2x1",
                "title": "GPULab 2 jobs x 1",
                "settings": {**gpulab["settings"], "topology": "2x1"},
            },
        ],
    }
    file = root / "e2e.yaml"
    file.write_text(yaml.safe_dump(spec, sort_keys=False))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_VAR_", "GPULAB_"))}
    venv_bin = str(Path(sys.executable).parent)
    environ = {
        **env,
        # The stand-ins first on PATH, as installing the real clients would put them.
        "PATH": os.pathsep.join([str(GPULAB / "bin"), str(JFED / "bin"), venv_bin, env["PATH"]]),
        "HPCBENCH_STATE": str(root / "state"),
        "GPULAB_STANDIN_DIR": str(root / "standin"),
        "JFED_STANDIN_IMAGES": json.dumps({STACK_URN: "hpcbench/stack:latest"}),
        "HPCBENCH_PEM_PASSWORD": PASSWORD,
    }
    bed = Campaign(root, file, environ)
    yield bed
    bed.hpcbench("campaign", "destroy", str(file), timeout=900)
    gpulab_cli.purge(root / "standin")
    for slice_name in ("hpcbench-cvw-1g",):  # a run killed before teardown
        for kind in ("container", "network"):
            ids = subprocess.run(
                [
                    "docker",
                    kind,
                    "ls",
                    *(["-a"] if kind == "container" else []),
                    "-q",
                    "--filter",
                    f"label={JFED_LABEL}=hpcbench/{slice_name}",
                ],
                capture_output=True,
                text=True,
            ).stdout.split()
            if ids:
                subprocess.run(
                    ["docker", kind, "rm", *(["-f"] if kind == "container" else []), *ids],
                    capture_output=True,
                )


def test_plan_lists_every_cell_and_creates_nothing(campaign: Campaign) -> None:
    proc = campaign.hpcbench("campaign", "plan", str(campaign.file), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # 2 cells on each testbed (1 and 2 workers), the broken one's single job: 1.
    assert "4 testbeds, 7 cells" in proc.stdout
    assert "node-hours at 1.5 EUR per node-hour)" in proc.stdout  # vw-1g's cost
    assert "cost: about" in proc.stdout and "3 testbed(s) without a price" in proc.stdout
    assert not campaign.out.exists() and not (campaign.root / "state").exists()


def test_interrupted_campaign_destroys_the_testbed_in_hand(campaign: Campaign) -> None:
    """Ctrl-C once vw-1g has a measured cell: the campaign stops, destroys that slice
    (no container, lease or state left), marks what it did not finish pending."""
    rc, output = campaign.run(
        stop=lambda states: any(
            s["testbed"] == "vw-1g" and s["status"] == "measured" for s in states.values()
        )
    )
    assert rc == 130, output[-4000:]
    assert "interrupted by SIGINT (Ctrl-C): destroying what this testbed holds" in output
    assert campaign.left_behind() == [], output[-4000:]
    states = campaign.cell_states()
    vw = [s for s in states.values() if s["testbed"] == "vw-1g"]
    assert sorted(s["status"] for s in vw) == ["measured", "pending"], vw
    assert all(s["status"] == "measured" for s in states.values() if s["testbed"] == "gpulab-1x2")


def test_resume_runs_what_is_left_past_a_failed_testbed(campaign: Campaign) -> None:
    """--resume: no finished cell runs again; the broken testbed fails at deploy with
    its cause and the next one still runs; one report compares them all."""
    before = {tb: campaign.runs(tb) for tb in ("gpulab-1x2", "vw-1g")}
    measured = {cid for cid, s in campaign.cell_states().items() if s["status"] == "measured"}
    rc, output = campaign.run("--resume")
    assert rc == 1, output[-5000:]  # one testbed failed
    assert "[testbed 1/3 vw-1g]" in output  # gpulab-1x2 was done: not re-entered
    assert not any(
        line.startswith("[testbed") and " gpulab-1x2]" in line for line in output.splitlines()
    )
    # No finished cell ran again: gpulab-1x2's store is as it was, vw-1g gained only
    # the runs of the cell that was interrupted.
    assert campaign.runs("gpulab-1x2") == before["gpulab-1x2"]
    vw_after = campaign.runs("vw-1g")
    assert vw_after[: len(before["vw-1g"])] == before["vw-1g"]
    new = vw_after[len(before["vw-1g"]) :]
    assert new and all(r["workers"] == 2 for r in new), new
    states = campaign.cell_states()
    assert {cid for cid in measured if states[cid]["status"] == "measured"} == measured
    broken = [s for s in states.values() if s["testbed"] == "broken"]
    assert broken and all(s["status"] == "failed" for s in broken)
    assert "deploy" in broken[0]["why"] and "FAILED" in broken[0]["why"], broken[0]
    phases = {
        (r["testbed"], r["phase"], r["status"])
        for r in campaign.journal()
        if r.get("kind") == "phase"
    }
    for tb, nodes in (("gpulab-1x2", 1), ("vw-1g", 2), ("gpulab-2x1", 2)):
        cells = [s for s in states.values() if s["testbed"] == tb]
        assert len(cells) == 2 and all(s["status"] == "measured" for s in cells), (tb, cells)
        # verify's checks passed (pytest exit 0) before the sweep; destroy released it all.
        assert {(tb, p, "ok") for p in ("deploy", "verify", "sweep", "destroy")} <= phases, tb
        # Two workers trained in step: on two nodes (jobs) but for GPULab's 1x2.
        two = [r for r in campaign.runs(tb) if r["workers"] == 2 and r["status"] == "ok"]
        assert two and all(
            r["weights_in_sync"] is True
            and r["nodes"] == nodes
            and r["env"] == campaign.env_state(tb).name
            for r in two
        ), tb
        assert analysis.run_stats(two[-1])["throughput"] > 0, tb
    assert campaign.left_behind() == []
    # destroy removed each testbed's state (keys, inventory, Terraform's state).
    for tb in ("gpulab-1x2", "vw-1g", "broken", "gpulab-2x1"):
        assert not campaign.env_state(tb).exists(), tb
    # The secret never reached a file the campaign wrote.
    for path in campaign.out.rglob("*"):
        if path.is_file():
            assert PASSWORD.encode() not in path.read_bytes(), path


@pytest.mark.parametrize(("testbed", "jobs"), [("gpulab-1x2", 1), ("gpulab-2x1", 2)])
def test_gpulab_testbed_held_a_lease_for_each_running_job(
    campaign: Campaign, testbed: str, jobs: int
) -> None:
    """As seen while the campaign held the testbed: the jobs
    ran their sshd (deploy and verify passed), the deploy waited for RUNNING with
    every job's id in a lease, no secret in the state; destroy cancelled every job."""
    seen = campaign.seen.get(testbed)
    assert seen, f"{testbed} was never seen deployed (test_resume_... runs first)"
    live = {job: status for job, status in seen["jobs"].items() if status not in ENDED}
    assert sorted(lease["what"].split()[-1] for lease in seen["leases"]) == sorted(live)
    assert len(live) == jobs and set(live.values()) == {"RUNNING"}, seen
    assert seen["secret"] == []
    now = campaign.jobs()
    assert {now[job] for job in live} == {"CANCELLED"}


@pytest.mark.parametrize(("testbed", "rate"), [("vw-1g", "1Gbit")])
def test_jfed_deploy_waits_for_the_boot_script_then_configures(
    campaign: Campaign, testbed: str, rate: str
) -> None:
    """jfed.sh, the RSpec and the boot script through the jFed stand-in: the create
    step waits for the boot script's marker on both nodes before Ansible; the script
    ran as the experimenter; the LAN is shaped to the link's capacity."""
    deploys = campaign.log(testbed, "deploy")
    assert deploys, f"no deploy in {testbed}'s log"
    for out in deploys:  # vw-1g: before the interrupt and on --resume
        assert "boot script finished on node0" in out and "boot script finished on node1" in out
        assert out.index("boot script finished on node1") < out.index("ansible-playbook site.yml")
        # Roles that cannot run in a container say which and why.
        assert "docker skipped on node0" in out and "nvidia_driver skipped on node0" in out
    seen = campaign.seen.get(testbed)
    assert seen, f"{testbed} was never seen deployed (test_resume_... runs first)"
    prefix = f"jfedsi-hpcbench-c{testbed}-"
    assert sorted(seen["nodes"]) == [f"{prefix}node0", f"{prefix}node1"], seen
    for node in ("node0", "node1"):
        # The <execute> ran through sudo as the experimenter, not root, after "ready".
        assert seen[f"{node} startup owner"] == "jfeduser", seen
        assert seen[f"{node} bootstrap.done"].startswith("20"), seen
    (lease,) = seen["leases"]
    assert lease["what"] == f"Virtual Wall slice hpcbench-c{testbed}", lease
    assert lease["cancel"][0] == "env", lease
    assert "tbf" in seen["node1 qdisc"] and f"rate {rate} " in seen["node1 qdisc"], seen
    assert seen["secret"] == []


def test_one_report_compares_every_testbed(campaign: Campaign) -> None:
    html = (campaign.out / "report.html").read_text()
    for title in (
        "GPULab 1 job x 2",
        "GPULab 2 jobs x 1",
        "jFed stand-in, 1 Gbit/s",
    ):
        assert title in html
    assert "Failed cells" in html and "broken" in html
    for name in ("throughput.png", "efficiency.png"):
        assert (campaign.out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The jFed testbed's forecast (from its expect: and its nominal link), made before
    # anything was booked and again before it was, set against what it measured.
    data = json.loads((campaign.out / "configurations.json").read_text())
    (two,) = [c for c in data["configurations"] if c["testbed"] == "vw-1g" and c["workers"] == 2]
    for made in ("plan", "booking"):
        assert two[f"forecast_{made}_efficiency"] is not None
        assert two[f"forecast_{made}_error"] == pytest.approx(
            two[f"forecast_{made}_efficiency"] - two["efficiency"]
        )
    assert "median |forecast - measured|" in html
    # Energy per image with its source, or why it is unknown (RAPL where the nodes may
    # read it); the priced testbed's cost per million images at its throughput.
    assert "Energy and cost" in html
    for c in data["configurations"]:
        if c["runs"]:
            assert c["energy_unit"] == "image" and c["energy_source"]
            assert (c["joules_per_sample"] is None) == c["energy_source"].startswith("unknown: ")
    assert two["price"] == "1.5 EUR per node-hour"
    assert two["cost_per_million_samples"] == pytest.approx(
        1.5 * two["nodes"] / (two["images_per_sec"] * 3600) * 1e6
    )
    systems = json.loads((campaign.out / "systems.json").read_text())
    assert {s["testbed"] for s in systems} == {"gpulab-1x2", "vw-1g", "gpulab-2x1"}
    assert all(s["number_of_nodes"] >= 1 and s["framework"].startswith("PyTorch") for s in systems)
    status = campaign.hpcbench("campaign", "status", str(campaign.file), "--json", timeout=300)
    table = json.loads(status.stdout)
    assert sorted({c["status"] for c in table["cells"]}) == ["failed", "measured"]
    assert table["held"] == {}


def test_the_second_testbeds_reforecast_is_as_close_as_the_plans_where_the_first_lent_it(
    campaign: Campaign,
) -> None:
    """vw-1g's forecast of E(2) just before its first booking, against what it measured:
    at least as close as the plan's where it took a figure gpulab-1x2 measured (its
    sources name that testbed); where it took none, the plan's own forecast."""
    data = json.loads((campaign.out / "configurations.json").read_text())
    (two,) = [c for c in data["configurations"] if c["testbed"] == "vw-1g" and c["workers"] == 2]
    measured, plan = two["efficiency"], two["forecast_plan_efficiency"]
    assert measured is not None and plan is not None, two
    bookings = [
        c
        for r in campaign.journal()
        if r.get("kind") == "forecast" and r["testbed"] == "vw-1g" and r["made"] == "booking"
        for c in r["cells"]
        if c["workers"] == 2
    ]
    assert bookings, "no forecast journaled before vw-1g was booked"
    first = bookings[0]  # before the interrupt: nothing of its own measured yet
    said = f"{first['single_source']}; {first['link_source']}"
    assert "this testbed" not in said, said
    if "gpulab-1x2" in said:
        assert abs(first["efficiency"] - measured) <= abs(plan - measured), (said, first, two)
    else:
        assert first["efficiency"] == pytest.approx(plan), (said, first, two)
