"""`hpcbench deploy` and `destroy` against a stand-in terraform on PATH.

The stand-in does what the real CLI does with what matters here: a saved plan
holds every TF_VAR_* value in clear (as Terraform's plan file does), `apply`
writes state and the rendered inventory, `show -json` returns a plan's changes.
It logs each call's argv and the environment it got, so that the tests can
say where the PEM password went and where it did not.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpcbench import cli
from hpcbench.testbeds import deploy, hostkeys

pytestmark = pytest.mark.integration

PASSWORD = "pw-Zq8!not-on-disk"

FAKE_TF = f"""#!{sys.executable}
import json, os, pathlib, sys, time
argv = sys.argv[1:]
scenario = json.loads(pathlib.Path(os.environ["FAKE_TF_SCENARIO"]).read_text())
with open(os.environ["FAKE_TF_LOG"], "a") as log:
    seen = {{k: v for k, v in os.environ.items() if k.startswith(("TF_VAR_", "HPCBENCH_PEM"))}}
    log.write(json.dumps({{"argv": argv, "env": seen, "pid": os.getpid()}}) + "\\n")
cmd = argv[0]
state_dir = pathlib.Path(os.environ["TF_VAR_state_dir"])
if cmd == "init" or cmd == "providers":
    print(json.dumps({{"provider_schemas": {{}}}}))
elif cmd == "plan":
    out = [a[5:] for a in argv if a.startswith("-out=")]
    if out:  # a saved plan holds every variable's value
        values = {{k: v for k, v in os.environ.items() if k.startswith("TF_VAR_")}}
        pathlib.Path(out[0]).write_text(json.dumps(values))
    sys.exit(2)
elif cmd == "show":
    print(json.dumps(scenario.get("show", {{}})))
elif cmd == "apply":
    mode = scenario.get("apply", "ok")
    if mode == "hang":
        time.sleep(600)
    if mode == "fail":
        print("Error: the testbed said no", file=sys.stderr)
        sys.exit(1)
    destroying = scenario.get("destroying", False)
    (state_dir / "terraform.tfstate").write_text(
        json.dumps({{"resources": [] if destroying else [{{"type": "x"}}]}}))
    if not destroying:
        pathlib.Path(os.environ["TF_VAR_inventory_path"]).write_text(scenario.get("inventory", ""))
elif cmd == "output":
    print(json.dumps({{"nodes": {{"value": scenario.get("nodes", [])}}}}))
"""


class FakeTf:
    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        for name in ("tofu", "terraform"):
            path = self.bin / name
            path.write_text(FAKE_TF)
            path.chmod(path.stat().st_mode | stat.S_IXUSR)
        self.log = tmp_path / "tf.log"
        self.scenario_file = tmp_path / "scenario.json"
        self.state_root = tmp_path / "hpcbench-state"
        self.state = self.state_root / "local"
        self.scenario({})
        monkeypatch.setenv("PATH", f"{self.bin}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setenv("FAKE_TF_LOG", str(self.log))
        monkeypatch.setenv("FAKE_TF_SCENARIO", str(self.scenario_file))
        monkeypatch.setenv("HPCBENCH_STATE", str(self.state_root))
        monkeypatch.setenv("TOOLS_DIR", str(tmp_path / "no-tools"))
        for key in [k for k in os.environ if k.startswith("TF_VAR_")]:
            monkeypatch.delenv(key)

    def scenario(self, data: dict[str, Any]) -> None:
        self.scenario_file.write_text(json.dumps(data))

    def calls(self) -> list[dict[str, Any]]:
        if not self.log.is_file():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def commands(self) -> list[str]:
        return [c["argv"][0] for c in self.calls()]


@pytest.fixture
def fake_tf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeTf:
    return FakeTf(tmp_path, monkeypatch)


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    return err[0]


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


INVENTORY_OK = yaml.safe_dump(
    {
        "all": {
            "vars": {
                "testbed_nodes": [{"name": "node1", "address": "10.0.0.1"}],
                "testbed_head": "node1",
            },
            "hosts": {"node1": {"ansible_host": "127.0.0.1", "ansible_port": 22901}},
        }
    }
)


# --- secrets -----------------------------------------------------------------


def test_pem_password_var_is_refused_before_anything_runs(fake_tf: FakeTf, capsys) -> None:
    rc = cli.main(["deploy", "--env", "local", "--var", f"pem_password={PASSWORD}"])
    assert rc == 2
    line = one_error_line(capsys)
    assert "HPCBENCH_PEM_PASSWORD" in line and PASSWORD not in line
    assert fake_tf.calls() == [] and not fake_tf.state.exists()


@pytest.mark.parametrize("name", ["api_token", "os_password", "client_secret"])
def test_secret_looking_vars_are_refused(fake_tf: FakeTf, capsys, name: str) -> None:
    assert cli.main(["deploy", "--env", "local", "--var", f"{name}=x"]) == 2
    assert name in one_error_line(capsys)
    assert fake_tf.calls() == []


def test_password_reaches_terraform_only_through_its_environment(
    fake_tf: FakeTf, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("HPCBENCH_PEM_PASSWORD", PASSWORD)
    monkeypatch.setenv("TF_VAR_pem_password", PASSWORD)  # what the old docs said to export
    fake_tf.scenario({"inventory": INVENTORY_OK})
    assert cli.main(["deploy", "--env", "local", "--skip-ansible", "--var", "node_count=2"]) == 0
    calls = fake_tf.calls()
    assert {c["argv"][0] for c in calls} >= {"init", "plan", "show", "apply", "output"}
    for call in calls:
        assert call["env"].get("HPCBENCH_PEM_PASSWORD") == PASSWORD  # module scripts read it
        assert "TF_VAR_pem_password" not in call["env"]  # would land in the saved plan
        assert not any(PASSWORD in arg for arg in call["argv"])
    state = fake_tf.state
    assert not (state / "apply.plan").exists()
    for path in files_under(state):
        assert PASSWORD.encode() not in path.read_bytes(), path
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert stat.S_IMODE(fake_tf.state_root.stat().st_mode) == 0o700
    assert stat.S_IMODE((state / "settings.json").stat().st_mode) == 0o600
    assert json.loads((state / "settings.json").read_text()) == {"node_count": "2"}
    # Ansible and testinfra never see it.
    assert "HPCBENCH_PEM_PASSWORD" not in deploy.tool_environ()


def test_state_dir_is_never_wider_than_0700(
    fake_tf: FakeTf, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[tuple[str, int]] = []
    real_mkdir = os.mkdir

    def watch(path, mode=0o777, *args, **kwargs):  # noqa: ANN001, ANN202
        made.append((str(path), mode))
        return real_mkdir(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", watch)
    fake_tf.scenario({"inventory": INVENTORY_OK})
    assert cli.main(["deploy", "--env", "local", "--skip-ansible"]) == 0
    ours = [(p, m) for p, m in made if p.startswith(str(fake_tf.state_root))]
    assert ours and all(m & 0o077 == 0 for _, m in ours), ours


def test_a_remembered_password_is_forgotten(fake_tf: FakeTf, capsys) -> None:
    fake_tf.state.mkdir(parents=True)
    (fake_tf.state / "settings.json").write_text(
        json.dumps({"pem_password": PASSWORD, "node_count": "3"})
    )
    fake_tf.scenario({"inventory": INVENTORY_OK})
    assert cli.main(["deploy", "--env", "local", "--skip-ansible"]) == 0
    assert "forgot the remembered pem_password" in capsys.readouterr().out
    assert json.loads((fake_tf.state / "settings.json").read_text()) == {"node_count": "3"}
    assert all("TF_VAR_pem_password" not in c["env"] for c in fake_tf.calls())


def test_sensitive_variables_terraform_reports_are_not_remembered(fake_tf: FakeTf) -> None:
    show = {"configuration": {"root_module": {"variables": {"cloud": {"sensitive": True}}}}}
    fake_tf.state.mkdir(parents=True)
    (fake_tf.state / "settings.json").write_text(json.dumps({"cloud": "c", "node_count": "2"}))
    fake_tf.scenario({"inventory": INVENTORY_OK, "show": show})
    assert cli.main(["deploy", "--env", "local", "--skip-ansible"]) == 0
    assert json.loads((fake_tf.state / "settings.json").read_text()) == {"node_count": "2"}


def test_sensitive_variable_given_with_var_is_refused_and_plan_removed(
    fake_tf: FakeTf, capsys
) -> None:
    show = {"configuration": {"root_module": {"variables": {"cloud": {"sensitive": True}}}}}
    fake_tf.scenario({"inventory": INVENTORY_OK, "show": show})
    assert cli.main(["deploy", "--env", "local", "--var", "cloud=c"]) == 2
    assert "cloud" in one_error_line(capsys)
    assert "apply" not in fake_tf.commands()
    assert not (fake_tf.state / "apply.plan").exists()


def test_a_setting_no_variable_declares_is_refused_naming_it(fake_tf: FakeTf, capsys) -> None:
    """Terraform ignores a TF_VAR_ nothing declares: `node_cout=2` would deploy the
    default node count without a word. Refused at plan, nothing created or kept."""
    declared = {"node_count": {}, "link_rate": {}, "env": {}}
    show = {"configuration": {"root_module": {"variables": declared}}}
    fake_tf.scenario({"inventory": INVENTORY_OK, "show": show})
    assert cli.main(["deploy", "--env", "local", "--var", "node_cout=2"]) == 2
    line = one_error_line(capsys)
    assert "node_cout is not a setting" in line and "node_count" in line
    assert "apply" not in fake_tf.commands()
    assert not fake_tf.state.exists()  # a testbed that never existed leaves no folder


# --- saved plans never outlive the apply ---------------------------------------


def test_plan_removed_when_apply_fails(fake_tf: FakeTf, capsys) -> None:
    fake_tf.scenario({"apply": "fail"})
    assert cli.main(["deploy", "--env", "local", "--skip-ansible"]) == 1
    assert "apply failed" in capsys.readouterr().err
    assert not (fake_tf.state / "apply.plan").exists()


def test_plan_removed_on_ctrl_c(fake_tf: FakeTf, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(self, plan: Path) -> None:  # noqa: ANN001
        assert plan.is_file()  # there until the apply ends
        raise KeyboardInterrupt

    monkeypatch.setattr(deploy.TerraformEnv, "apply", interrupted)
    assert cli.main(["deploy", "--env", "local", "--skip-ansible"]) == 130
    assert not (fake_tf.state / "apply.plan").exists()


def test_apply_that_hangs_is_stopped_with_the_limit_named(
    fake_tf: FakeTf, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("HPCBENCH_APPLY_TIMEOUT_S", "2")
    fake_tf.scenario({"apply": "hang"})
    assert cli.main(["deploy", "--env", "local", "--skip-ansible"]) == 1
    line = one_error_line(capsys)
    assert "terraform apply" in line and "HPCBENCH_APPLY_TIMEOUT_S" in line
    pid = [c["pid"] for c in fake_tf.calls() if c["argv"][0] == "apply"][0]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not (fake_tf.state / "apply.plan").exists()


def test_ctrl_c_while_terraform_applies_stops_it_and_leaves_nothing_running(
    fake_tf: FakeTf,
) -> None:
    # Ctrl-C from a terminal (SIGINT to the process group) while `terraform apply` runs,
    # not only while Ansible does (tests/e2e/test_faults.py): terraform is asked to stop,
    # gone when hpcbench exits, in one line, and the saved plan with it.
    from tests.interrupt import as_from_a_terminal

    fake_tf.scenario({"apply": "hang"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpcbench", "deploy", "--env", "local", "--skip-ansible"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=as_from_a_terminal,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        for _ in range(600):  # bounded: 60 s for the apply to start
            applies = [c for c in fake_tf.calls() if c["argv"][0] == "apply"]
            if applies:
                break
            time.sleep(0.1)
        assert applies, proc.communicate(timeout=30)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert proc.returncode == 130, (out, err)
    assert err.strip().splitlines()[-1] == "hpcbench: interrupted", err
    with pytest.raises(ProcessLookupError):
        os.kill(applies[0]["pid"], 0)  # terraform ended with hpcbench, not after it
    assert not (fake_tf.state / "apply.plan").exists()


def test_bad_timeout_setting_is_a_usage_error(
    fake_tf: FakeTf, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("HPCBENCH_TERRAFORM_TIMEOUT_S", "soon")
    assert cli.main(["deploy", "--env", "local"]) == 2
    assert "HPCBENCH_TERRAFORM_TIMEOUT_S" in one_error_line(capsys)


def test_ansible_that_hangs_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_ansible(tmp_path, monkeypatch, playbook="echo started\nexec sleep 600", ssh="exit 0")
    monkeypatch.setenv("HPCBENCH_ANSIBLE_TIMEOUT_S", "1")
    with pytest.raises(deploy.bounded.Timeout, match="HPCBENCH_ANSIBLE_TIMEOUT_S"):
        deploy.run_ansible("local")


# What ssh leaves in the control folder for each master: a Unix socket at each path.
MASTERS = (
    f"{sys.executable} -c 'import socket, sys; "
    "[socket.socket(socket.AF_UNIX).bind(p) for p in sys.argv[1:]]'"
)


def _fake_ansible(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, playbook: str, ssh: str) -> Path:
    """ansible-playbook and ssh stand-ins (shell script bodies) first on PATH; the log
    that the ssh stand-in may write to."""
    for name, body in (("ansible-playbook", playbook), ("ssh", ssh)):
        (tmp_path / name).write_text(f"#!/bin/sh\n{body}\n")
        (tmp_path / name).chmod(0o755)
    path = f"{tmp_path}{os.pathsep}{os.environ['PATH']}"
    monkeypatch.setenv("PATH", path)
    monkeypatch.setattr(
        deploy, "tool_environ", lambda **extra: {**os.environ, "PATH": path, **extra}
    )
    return tmp_path / "ssh.log"


@pytest.mark.parametrize("ends", ["exits", "hangs"])
def test_ansible_ssh_masters_are_ended_with_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ends: str
) -> None:
    """ssh detaches its connection masters from the playbook's process group, so that
    stopping the group (Ctrl-C, a timeout) would leave them: each run gets a control
    folder of its own, and each master in it is told to exit when the run ends."""
    log = _fake_ansible(
        tmp_path,
        monkeypatch,
        f'{MASTERS} "$ANSIBLE_SSH_CONTROL_PATH_DIR/0123456789"\n'
        + ("exec sleep 600" if ends == "hangs" else "exit 0"),
        f'echo "$@" >> {tmp_path / "ssh.log"}',
    )
    monkeypatch.setenv("HPCBENCH_ANSIBLE_TIMEOUT_S", "1")
    if ends == "hangs":
        with pytest.raises(deploy.bounded.Timeout):
            deploy.run_ansible("local")
    else:
        deploy.run_ansible("local")
    (call,) = log.read_text().splitlines()
    assert call.startswith("-O exit -o ControlPath=") and call.split()[3].endswith("/0123456789")
    assert not Path(call.split()[3].removeprefix("ControlPath=")).parent.exists()


@pytest.mark.usefixtures("ctrl_c_raises")
def test_a_second_ctrl_c_while_the_masters_are_ended_comes_after_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each `ssh -O exit` meets a Ctrl-C (to this process) first.
    log = _fake_ansible(
        tmp_path,
        monkeypatch,
        f'cd "$ANSIBLE_SSH_CONTROL_PATH_DIR" && {MASTERS} a b c',
        f'kill -INT $PPID\nsleep 0.2\necho "$@" >> {tmp_path / "ssh.log"}',
    )
    with pytest.raises(KeyboardInterrupt):
        deploy.run_ansible("local")
    assert sorted(line.split("/")[-1].split()[0] for line in log.read_text().splitlines()) == [
        "a",
        "b",
        "c",
    ]


# --- bad input: one line, exit 2, nothing launched -------------------------------


@pytest.mark.parametrize(
    "content",
    ["{not json", "[1, 2]", '{"node_count": 3}', '{"Bad-Name": "x"}', "\udcff"],
    ids=["syntax", "list", "number", "name", "bytes"],
)
def test_bad_settings_json(fake_tf: FakeTf, capsys, content: str) -> None:
    fake_tf.state.mkdir(parents=True)
    path = fake_tf.state / "settings.json"
    path.write_bytes(content.encode("utf-8", "surrogateescape"))
    assert cli.main(["deploy", "--env", "local"]) == 2
    assert "settings.json" in one_error_line(capsys)
    assert fake_tf.calls() == []
    assert path.read_bytes() == content.encode("utf-8", "surrogateescape")  # nothing lost


@pytest.mark.parametrize(
    "host",
    [{"ansible_host": "127.0.0.1", "ansible_port": "abc"}, "not-a-mapping"],
    ids=["port-abc", "entry"],
)
def test_malformed_inventory_stops_before_ansible(
    fake_tf: FakeTf, monkeypatch: pytest.MonkeyPatch, capsys, host: object
) -> None:
    inventory = {
        "all": {
            "vars": {"testbed_nodes": [{"name": "node1"}], "testbed_head": "node1"},
            "hosts": {"node1": host},
        }
    }
    fake_tf.scenario({"inventory": yaml.safe_dump(inventory)})
    launched: list[str] = []
    monkeypatch.setattr(deploy, "run_ansible", lambda env, extra=None: launched.append(env))
    monkeypatch.setattr(deploy.reach, "argv", lambda *a: launched.append("ssh") or ["true"])
    assert cli.main(["deploy", "--env", "local"]) == 2
    assert "inventory" in one_error_line(capsys)
    assert launched == []


# --- known_hosts: only replaced machines lose their keys ---------------------------


def _key_line(tmp_path: Path, name: str) -> tuple[str, str]:
    key = tmp_path / f"hostkey-{name}"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    kind, blob = Path(f"{key}.pub").read_text().split()[:2]
    return kind, blob


def _known_hosts(tmp_path: Path, path: Path, ports: list[int]) -> None:
    lines = []
    for port in ports:
        kind, blob = _key_line(tmp_path, str(port))
        lines.append(f"[127.0.0.1]:{port} {kind} {blob}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


NODES = [{"name": f"node{i + 1}", "ssh_host": "127.0.0.1", "ssh_port": 22901 + i} for i in range(3)]


def _show(changes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "prior_state": {"values": {"outputs": {"nodes": {"value": NODES}}}},
        "resource_changes": changes,
    }


DOCKER = "registry.opentofu.org/kreuzwerker/docker"


def _change(
    address: str, actions: list[str], index: object = None, provider: str = DOCKER
) -> dict[str, Any]:
    change = {
        "address": address,
        "mode": "managed",
        "provider_name": provider,
        "change": {"actions": actions},
    }
    if index is not None:
        change["index"] = index
    return change


def test_replaced_hosts_from_plan() -> None:
    replaced = _change("docker_container.node[1]", ["delete", "create"], 1)
    updated = _change("docker_container.node[0]", ["update"], 0)
    a_file = _change("local_file.x", ["delete", "create"], provider="hashicorp/local")
    assert hostkeys.replaced_hosts(_show([replaced, updated, a_file])) == [("127.0.0.1", 22902)]
    slice_ = _change("terraform_data.experiment", ["create", "delete"])
    assert len(hostkeys.replaced_hosts(_show([slice_]))) == 3
    by_name = _change('x.node["node3"]', ["delete"], "node3")
    assert hostkeys.replaced_hosts(_show([by_name])) == [("127.0.0.1", 22903)]
    assert hostkeys.replaced_hosts({"resource_changes": [replaced]}) == []  # first deploy


@pytest.mark.parametrize("hashed", [False, True])
def test_deploy_forgets_only_replaced_host_keys(
    fake_tf: FakeTf, tmp_path: Path, hashed: bool
) -> None:
    known = fake_tf.state / "ssh" / "known_hosts"
    _known_hosts(tmp_path, known, [22901, 22902, 22903])
    if hashed:  # Debian's ssh_config hashes the names it learns
        subprocess.run(["ssh-keygen", "-H", "-f", str(known)], capture_output=True, check=True)
        Path(f"{known}.old").unlink()
    show = _show([_change("docker_container.node[1]", ["delete", "create"], 1)])
    fake_tf.scenario({"inventory": INVENTORY_OK, "show": show})
    assert cli.main(["deploy", "--env", "local", "--skip-ansible"]) == 0

    def knows(port: int) -> bool:
        name = f"[127.0.0.1]:{port}"
        found = subprocess.run(["ssh-keygen", "-F", name, "-f", str(known)], capture_output=True)
        return found.returncode == 0

    assert [knows(p) for p in (22901, 22902, 22903)] == [True, False, True]
    assert not Path(f"{known}.old").exists()


# --- destroy: leases of paid resources --------------------------------------------


def _lease(state: Path, name: str, cancel: list[str], what: str = "GPULab job 42") -> Path:
    folder = state / "leases"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"what": what, "created": "2026-11-23T07:00:00Z", "cancel": cancel}))
    path.chmod(0o600)
    return path


def _deployed(fake_tf: FakeTf) -> None:
    fake_tf.state.mkdir(parents=True, mode=0o700)
    (fake_tf.state / "terraform.tfstate").write_text(json.dumps({"resources": [{"type": "x"}]}))
    fake_tf.scenario({"destroying": True})


def test_destroy_cancels_leftover_leases_then_removes_state(
    fake_tf: FakeTf, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _deployed(fake_tf)
    seen = tmp_path / "cancel.env"
    _lease(fake_tf.state, "job0", ["sh", "-c", f'echo "$HPCBENCH_PEM_PASSWORD" > {seen}'])
    monkeypatch.setenv("HPCBENCH_PEM_PASSWORD", PASSWORD)
    assert cli.main(["destroy", "--env", "local"]) == 0
    assert seen.read_text().strip() == PASSWORD  # the cancel got the password, from the env
    assert not fake_tf.state.exists()


def test_destroy_keeps_state_and_names_what_is_held(fake_tf: FakeTf, capsys) -> None:
    _deployed(fake_tf)
    lease = _lease(fake_tf.state, "job0", ["sh", "-c", "echo quota; exit 3"], "GPULab job 42")
    assert cli.main(["destroy", "--env", "local"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "GPULab job 42" in err[0] and "sh -c 'echo quota; exit 3'" in err[0]
    assert lease.is_file() and fake_tf.state.is_dir()


def test_destroy_cancels_leases_when_terraform_destroy_fails(
    fake_tf: FakeTf, tmp_path: Path, capsys
) -> None:
    _deployed(fake_tf)
    fake_tf.scenario({"apply": "fail"})
    done = tmp_path / "cancelled"
    _lease(fake_tf.state, "slice", ["touch", str(done)], "Virtual Wall slice hpcbench-vw")
    assert cli.main(["destroy", "--env", "local"]) == 1
    assert done.is_file()  # cancelled although Terraform failed
    assert fake_tf.state.is_dir()  # Terraform still holds state: kept
    assert not (fake_tf.state / "destroy.plan").exists()
    assert "apply failed" in capsys.readouterr().err


def test_destroy_with_a_lease_but_no_state(fake_tf: FakeTf, tmp_path: Path) -> None:
    # Ctrl-C while a job was queued: the script wrote the lease, Terraform no state.
    done = tmp_path / "cancelled"
    _lease(fake_tf.state, "job0", ["touch", str(done)])
    assert cli.main(["destroy", "--env", "local"]) == 0
    assert done.is_file() and not fake_tf.state.exists()
    assert "apply" not in fake_tf.commands()


def test_failed_apply_that_left_a_lease_says_how_to_cancel(fake_tf: FakeTf, capsys) -> None:
    _lease(fake_tf.state, "job0", ["true"], "GPULab job 42")  # the script's, before it failed
    fake_tf.scenario({"apply": "fail"})
    assert cli.main(["deploy", "--env", "local", "--skip-ansible"]) == 1
    out = capsys.readouterr().out
    assert "GPULab job 42" in out and "hpcbench destroy --env local" in out
    assert (fake_tf.state / "leases" / "job0.json").is_file()


def test_verify_that_hangs_is_stopped(
    fake_tf: FakeTf, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    fake_tf.state.mkdir(parents=True)
    (fake_tf.state / "inventory.yml").write_text(INVENTORY_OK)
    python = tmp_path / "python"  # stands in for `python -m pytest tests/infra`
    python.write_text("#!/bin/sh\nexec sleep 600\n")
    python.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(python))
    monkeypatch.setenv("HPCBENCH_VERIFY_TIMEOUT_S", "1")
    assert cli.main(["verify", "--env", "local"]) == 1
    line = one_error_line(capsys)
    assert "verify" in line and "HPCBENCH_VERIFY_TIMEOUT_S" in line


def test_verify_gives_testinfra_one_ssh_master_per_node_and_ends_them(
    fake_tf: FakeTf, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """testinfra multiplexes its ssh only where the config it reads names a control path
    (one handshake per command otherwise: verify took twice as long). The ssh command
    testinfra itself builds for a node of the inventory, under verify's environment,
    keeps its master in a folder of verify's own, which is gone after."""
    fake_tf.state.mkdir(parents=True)
    (fake_tf.state / "inventory.yml").write_text(INVENTORY_OK)
    seen = tmp_path / "seen.json"
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import json, os, sys\n"
        "from testinfra.utils.ansible_runner import AnsibleRunner\n"
        "inventory = os.environ['HPCBENCH_INVENTORY']\n"
        "backend = AnsibleRunner(inventory).get_host('node1').backend\n"
        "cmd, args = backend._build_ssh_command('true')\n"
        "config = os.environ['ANSIBLE_CONFIG']\n"
        "json.dump({'ssh': ' '.join(cmd) % tuple(args), 'config': config,\n"
        "           'roles': open(config).read()}, open(sys.argv[1], 'w'))\n"
    )
    python = tmp_path / "python"  # stands in for `python -m pytest tests/infra`
    venv_bin = Path(sys.executable).parent
    python.write_text(f"#!/bin/sh\nPATH={venv_bin}:$PATH exec {sys.executable} {probe} {seen}\n")
    python.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(python))
    assert cli.main(["verify", "--env", "local"]) == 0
    got = json.loads(seen.read_text())
    folder = Path(got["config"]).parent
    assert f"-o ControlPath={folder}/%C" in got["ssh"] and "ControlMaster=auto" in got["ssh"]
    assert f"roles_path = {deploy.ANSIBLE_DIR / 'roles'}" in got["roles"]
    assert not folder.exists()


def test_a_failed_module_script_is_named_by_its_own_last_line(tmp_path: Path) -> None:
    """Terraform re-wraps a failed local-exec's whole output behind its command; the
    one line a deploy (and a campaign's journal) reports is the script's own error,
    as the real CLI prints it (terraform_data is built in: no provider needed)."""
    from hpcbench.testbeds.terraform import find_binary, summarize_error

    said = "GPULab job 42 is FAILED (exit code 127), not RUNNING (gpulab-cli log 42: empty)"
    (tmp_path / "main.tf").write_text(
        'resource "terraform_data" "job" {\n  provisioner "local-exec" {\n'
        f"    command = \"echo submitting job 42; echo '{said}' >&2; exit 1\"\n  }}\n}}\n"
    )
    env = {**os.environ, "TF_IN_AUTOMATION": "1", "CHECKPOINT_DISABLE": "1"}
    env.pop("TF_CLI_CONFIG_FILE", None)
    tf = find_binary()
    subprocess.run(
        [tf, "init", "-no-color"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        check=True,
        timeout=120,
    )
    out = subprocess.run(
        [tf, "apply", "-auto-approve", "-no-color"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0
    assert summarize_error(out.stdout + out.stderr) == said


def test_envs_lists_every_environment_one_a_line(capsys) -> None:
    assert cli.main(["envs"]) == 0
    listed = capsys.readouterr().out.split()
    assert "local" in listed
    assert listed == sorted(listed)
