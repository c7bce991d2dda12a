"""The local testbed, deployed once for the e2e tests and destroyed after them.

It gets its own name, subnet, ports and state folder, so that it never
touches a testbed the user deployed with `make deploy ENV=local`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hpcbench.testbeds import nodeset
from tests.conftest import GROUPS, group_of
from tests.interrupt import as_from_a_terminal

REPO = Path(__file__).resolve().parents[2]
E2E_VARS = {
    "name": "hpcbench-e2e",
    "subnet": "172.30.9.0/24",
    "ssh_port_base": "22900",
    "jupyter_port": "28999",
    "node_count": "3",
    "cpus_per_node": "0.6",
    "link_rate": "1gbit",
    # One testbed for all e2e tests (a deploy costs minutes): Slurm too, with two
    # partitions that differ in their links (test_campaign_slurm.py): fast is node1 and
    # node2 at link_rate, slow node1 and node3, shaped to 200 Mbit/s. The first is the
    # default partition, which the other Slurm tests use (1-2 nodes).
    "enable_slurm": "true",
    "node_link_rates": '{"node3":"200mbit"}',
    "slurm_partitions": '[{"name":"fast","nodes":["node1","node2"]},'
    '{"name":"slow","nodes":["node1","node3"]}]',
    # The stack as a .sqsh for pyxis (images/enroot-export.sh), where make deploy
    # SLURM=true keeps it: every node sees it read-only at /images.
    "image_store": str(Path.home() / ".cache" / "hpcbench" / "images"),
}
STACK_SQSH = Path(E2E_VARS["image_store"]) / "hpcbench+stack.sqsh"
# A training run small enough for a 2-core machine: as a campaign file's sweep has it,
# and as `scale` options.
TINY_SWEEP = {
    "model": "resnet18",
    "image_size": 32,
    "batch": 4,
    "warmup": 1,
    "windows": 2,
    "steps": 2,
    "repeats": 1,
    "data_workers": 0,
    "device": "cpu",
    "timeout": 300,
}
TINY_RUN = [a for k, v in TINY_SWEEP.items() for a in (f"--{k.replace('_', '-')}", str(v))]


def hpcbench(
    environ: dict[str, str], *args: str, timeout: float = 1800
) -> subprocess.CompletedProcess[str]:
    """`python -m hpcbench ARGS` from the repository in `environ`, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "hpcbench", *args],
        cwd=REPO,
        env=environ,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@dataclass
class SqshExport:
    """images/enroot-export.sh --cached STACK_SQSH, started with the session and run
    beside the first tests (on a fresh machine it takes one or two minutes; nothing
    before the deploy's end reads the file): what make deploy SLURM=true exports first
    (make stack-sqsh), kept while the stack image is the same."""

    proc: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def start(cls, log: Path) -> SqshExport:
        STACK_SQSH.parent.mkdir(parents=True, exist_ok=True)  # the testbed mounts it
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [str(REPO / "images" / "enroot-export.sh"), "--cached", str(STACK_SQSH)],
                env={**os.environ, "ENROOT_EXPORT_CHECK": "0"},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # the tests' signals to their groups miss it
            )
        return cls(proc, log)

    def wait(self) -> None:
        """Until STACK_SQSH is exported (at once after the first call)."""
        returncode = self.proc.wait(timeout=1800)
        assert returncode == 0, self.log.read_text(errors="replace")[-4000:]


@dataclass
class DeployedTestbed:
    state: Path
    environ: dict[str, str]
    sqsh: SqshExport

    def hpcbench(self, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
        return hpcbench(self.environ, *args, timeout=timeout)

    def docker_names(self, kind: str) -> list[str]:
        listing = ["docker", kind, "ls", *(["-a"] if kind == "container" else [])]
        out = subprocess.run(
            [
                *listing,
                "--filter",
                f"name={E2E_VARS['name']}",
                "--format",
                "{{.Name}}" if kind != "container" else "{{.Names}}",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return [n for n in out.split() if n.startswith(E2E_VARS["name"])]

    def remove_leftovers(self) -> None:
        """A run killed before its teardown leaves its containers (they restart with
        dockerd): remove them by their test-only name so this run can deploy."""
        for kind in ("container", "network", "volume"):
            names = self.docker_names(kind)
            if names:
                rm = ["docker", kind, "rm", *(["-f"] if kind == "container" else []), *names]
                subprocess.run(rm, capture_output=True, check=True)


def campaign_run(
    file: Path,
    args: tuple[str, ...],
    environ: dict[str, str],
    log: Path,
    interrupt: Callable[[], bool],
) -> int:
    """`campaign run FILE ARGS` as from a terminal, its output in `log`; `interrupt()` is
    asked every second (bounded: 40 minutes) and True presses Ctrl-C (SIGINT to its
    process group). Its exit status."""
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hpcbench", "campaign", "run", str(file), *args],
            cwd=REPO,
            env=environ,
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            preexec_fn=as_from_a_terminal,
        )
    try:
        deadline = time.monotonic() + 2400
        while proc.poll() is None:
            if interrupt():
                os.killpg(proc.pid, signal.SIGINT)
                proc.wait(timeout=600)
                break
            assert time.monotonic() < deadline, log.read_text()[-4000:]
            time.sleep(1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    return proc.returncode


def lean_local(name: str, title: str, settings: dict, **keys: object) -> dict:
    """A campaign's local testbed that the campaign deploys, without NFS and JupyterLab:
    what the campaign tests show is the kinds and the cells; test_local_testbed.py
    checks those two on the e2e testbed."""
    return {
        "name": name,
        "env": "local",
        "title": title,
        "settings": settings,
        **keys,
        "ansible": {"enable_nfs": False, "enable_jupyter": False},
    }


def containers(prefix: str) -> list[str]:
    """The containers, running or not, of a testbed named `prefix` (its nodes are
    PREFIX-node1, ...)."""
    out = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"name={prefix}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return [n for n in out.split() if n.startswith(f"{prefix}-")]


def var_args(**overrides: str) -> list[str]:
    out: list[str] = []
    for key, value in {**E2E_VARS, **overrides}.items():
        out += ["--var", f"{key}={value}"]
    return out


@pytest.fixture(scope="session")
def testbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeployedTestbed]:
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        pytest.fail("no Docker engine answers: `make tools` starts one")
    state = tmp_path_factory.mktemp("state")
    sqsh = SqshExport.start(tmp_path_factory.mktemp("sqsh") / "enroot-export.log")
    bed = DeployedTestbed(state, {**os.environ, "HPCBENCH_STATE": str(state)}, sqsh)
    bed.remove_leftovers()
    yield bed
    sqsh.proc.wait(timeout=1800)  # not left writing after the session
    bed.hpcbench("destroy", "--env", "local", timeout=600)


def head(bed: DeployedTestbed) -> nodeset.Node:
    return nodeset.load_inventory(bed.state / "local" / "inventory.yml").head_node()


@pytest.fixture(scope="module")
def deployed(testbed: DeployedTestbed) -> DeployedTestbed:
    """The shared testbed, deployed here when a module that needs it runs alone."""
    if not (testbed.state / "local" / "inventory.yml").is_file():
        proc = testbed.hpcbench("deploy", "--env", "local", *var_args(), timeout=1800)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    testbed.sqsh.wait()  # pyxis's jobs run the stack from it
    return testbed


def partition(bed: DeployedTestbed, name: str) -> dict:
    """A testbed of the campaign file: a partition of the e2e testbed over SSH."""
    access = head(bed).access
    assert access is not None
    return {
        "name": name,
        "title": f"e2e Slurm, partition {name}",
        "slurm": {
            "partition": name,
            "nodes": 2,
            "login": f"{access.user}@{access.host}:{access.port}",
            "ssh_key": access.key_file,
            "known_hosts": access.known_hosts,
            "python": "/opt/hpcbench/venv/bin/python",
            "bench_dir": "/opt/hpcbench/bench",
            "time": "10m",
            "queue_wait": "10m",
        },
    }


# The shared local testbed's life, in the order its tests run. Each test of the
# testbed group (tests/conftest.py GROUPS) declares its stage, @pytest.mark.stage(NAME)
# (a module's pytestmark for all of its tests); within a stage, modules go in the order
# GROUPS lists them and tests as defined. A test that declares none, or one not here,
# stops the run at collection, so that no rename moves a test.
STAGES = (
    "undeployed",  # refusals that need no testbed
    "deploy interrupted",  # Ctrl-C in the first deploys; the deploy converges what they left
    "deploy",
    "slurm campaigns",  # the campaigns over the testbed's Slurm partitions (CNNs) ...
    "lm campaign",  # ... the transformer's ...
    "slurm jobs",  # ... and jobs stopped in every way: each needs the testbed deployed
    "deployed",  # verify, the second deploy, the sweeps
    "kill",  # a sweep killed, on the testbed rather than one of its own
    "faults",  # faults on the nodes; the last removes a node by hand and destroys
    "destroy",
)


def stage_of(item: pytest.Item) -> tuple[int, int]:
    """Where an item of the testbed group runs: the index in STAGES of the stage it
    declares, then its module's in GROUPS (a renamed module is named there again)."""
    mark = item.get_closest_marker("stage")
    name = mark.args[0] if mark and mark.args else None
    if name not in STAGES:
        said = f"its stage {name!r} is not one" if name else "it declares none"
        raise pytest.UsageError(f"{item.nodeid}: {said} of STAGES in tests/e2e/conftest.py")
    module = item.nodeid.split("::")[0]
    return STAGES.index(name), GROUPS["testbed"].index(module)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The testbed group's tests in the order of their declared stages (STAGES); every
    other test where pytest put it."""
    strays = sorted(
        {
            i.nodeid.split("::")[0]
            for i in items
            if i.nodeid.startswith("tests/e2e/") and group_of(i.nodeid) is None
        }
    )
    if strays:  # it would run beside a group whose testbed it may share
        raise pytest.UsageError(f"{', '.join(strays)}: add it to GROUPS in tests/conftest.py")
    slots = [n for n, i in enumerate(items) if group_of(i.nodeid) == "testbed"]
    ordered = sorted((items[n] for n in slots), key=stage_of)  # sorted() is stable
    for n, item in zip(slots, ordered, strict=True):
        items[n] = item
