"""A run interrupted between a configuration change and its
handler must not lose the restart. Every role checks first whether a service
it restarts runs an older configuration than the one on disk
(ansible/plugins/modules/stale_service.py) and notifies its own handler if so.
No testbed: Ansible runs on this machine against a fake systemctl (`make test`
runs these, `verify` skips them: conftest.py)."""

from __future__ import annotations

import fnmatch
import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from tests.infra.test_role_inputs import ANSIBLE, ansible_env

ROLES = ANSIBLE / "roles"


def _module() -> ModuleType:
    path = ANSIBLE / "plugins/modules/stale_service.py"
    spec = importlib.util.spec_from_file_location("hpcbench_module_stale_service", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RUNNING = {"LoadState": "loaded", "ActiveState": "active", "NeedDaemonReload": "no"}


@pytest.mark.parametrize(
    ("props", "mtimes", "stale"),
    [
        # Started at monotonic 100 s; realtime = monotonic + 1000 s.
        ({**RUNNING, "ActiveEnterTimestampMonotonic": "100000000"}, {"/c": 1099.0}, False),
        ({**RUNNING, "ActiveEnterTimestampMonotonic": "100000000"}, {"/c": 1100.5}, True),
        ({**RUNNING, "ActiveEnterTimestampMonotonic": "100000000"}, {}, False),
        (
            {**RUNNING, "ActiveState": "inactive", "ActiveEnterTimestampMonotonic": "0"},
            {"/c": 2000.0},
            False,
        ),
        ({**RUNNING, "LoadState": "not-found"}, {"/c": 2000.0}, False),
        (
            {**RUNNING, "ActiveEnterTimestampMonotonic": "100000000", "NeedDaemonReload": "yes"},
            {},
            True,
        ),
    ],
)
def test_staleness(props: dict[str, str], mtimes: dict[str, float], stale: bool) -> None:
    assert _module().staleness(props, mtimes, 1000.0)[0] is stale


FAKE_SYSTEMCTL = """\
#!{python}
# systemctl for one running unit: `show` prints its state, `restart` restarts it.
import pathlib, sys, time
d = pathlib.Path({state!r})
if sys.argv[1] == "show":
    print("LoadState=loaded\\nActiveState=active\\nNeedDaemonReload=no")
    print("ActiveEnterTimestampMonotonic=" + (d / "started").read_text())
elif sys.argv[1] == "restart":
    (d / "started").write_text(str(time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000))
    with open(d / "restarts", "a") as f:
        f.write("restart\\n")
"""


def converge_play(conf: Path, interrupt: bool) -> dict:
    """A role in miniature: check, write the configuration, (be interrupted), handler."""
    return {
        "name": "a role with a handler",
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "tasks": [
            {
                "name": "Restart fake if it runs an older configuration",
                "stale_service": {"name": "fake.service", "paths": [str(conf)]},
                "notify": "Restart fake",
            },
            {
                "name": "Write the configuration",
                "ansible.builtin.copy": {
                    "content": "setting = 2\n",
                    "dest": str(conf),
                    "mode": "0644",
                },
                "notify": "Restart fake",
            },
            {
                "name": "Interrupted here",
                "ansible.builtin.fail": {"msg": "interrupted"},
                "when": interrupt,
            },
        ],
        "handlers": [
            {
                "name": "Restart fake",
                "ansible.builtin.command": "systemctl restart fake.service",
                "changed_when": True,
            },
        ],
    }


def recap_changed(stdout: str) -> int:
    m = re.search(r"localhost\s*:.*?changed=(\d+)", stdout)
    assert m, stdout[-2000:]
    return int(m.group(1))


def test_a_restart_lost_to_an_interrupted_run_happens_on_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "systemctl"
    fake.write_text(FAKE_SYSTEMCTL.format(python=sys.executable, state=str(state)))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    assert ansible_env()["PATH"].split(os.pathsep)[1] == str(bindir)
    (state / "started").write_text(str(time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000))
    conf = tmp_path / "fake.conf"
    restarts = state / "restarts"

    def run(interrupt: bool, *extra: str) -> tuple[int, str]:
        book = tmp_path / "play.yml"
        book.write_text(yaml.safe_dump([converge_play(conf, interrupt)], sort_keys=False))
        ansible_playbook = str(Path(sys.executable).parent / "ansible-playbook")
        argv = [
            ansible_playbook,
            "-i",
            "localhost,",
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            *extra,
            str(book),
        ]
        proc = subprocess.run(argv, capture_output=True, text=True, env=ansible_env(), timeout=300)
        return proc.returncode, proc.stdout + proc.stderr

    # 1. The configuration changes, the run dies before its handlers.
    rc, out = run(interrupt=True)
    assert rc != 0 and conf.is_file() and not restarts.exists(), out[-2000:]
    # 2. --check says a restart is due, and restarts nothing.
    rc, out = run(False, "--check")
    assert rc == 0, out[-2000:]
    assert "Restart fake if it runs an older configuration" in out
    assert recap_changed(out) >= 1 and not restarts.exists()
    # 3. The next run restarts the service, though the file did not change.
    rc, out = run(interrupt=False)
    assert rc == 0, out[-2000:]
    assert restarts.read_text() == "restart\n"
    # 4. And the one after changes nothing.
    rc, out = run(interrupt=False)
    assert rc == 0 and recap_changed(out) == 0, out[-2000:]
    assert restarts.read_text() == "restart\n"


def _tasks(items: list | None) -> list[dict]:
    out: list[dict] = []
    for item in items or []:
        if not isinstance(item, dict):
            continue
        out.append(item)
        for key in ("block", "rescue", "always"):
            out += _tasks(item.get(key))
    return out


FILE_MODULES = ("template", "copy", "blockinfile", "lineinfile", "shell", "command")


def _written_path(task: dict) -> str | None:
    for name in FILE_MODULES:
        for key in (name, f"ansible.builtin.{name}"):
            args = task.get(key)
            if isinstance(args, dict):
                return args.get("dest") or args.get("path") or args.get("creates")
    args = task.get("args")
    return args.get("creates") if isinstance(args, dict) else None


def _notified(task: dict) -> list[str]:
    n = task.get("notify") or []
    return [n] if isinstance(n, str) else list(n)


def _restart_handlers(role: Path) -> set[str]:
    path = role / "handlers/main.yml"
    if not path.is_file():
        return set()
    names = set()
    for h in _tasks(yaml.safe_load(path.read_text())):
        for key in ("ansible.builtin.service", "ansible.builtin.systemd_service"):
            if (h.get(key) or {}).get("state") == "restarted":
                names.add(h["name"])
                if h.get("listen"):  # notified by its topic (sshd: restart or reload)
                    names.add(h["listen"])
    return names


def restart_pairs() -> tuple[set[tuple[str, str, str]], set[tuple[str, str, str]]]:
    """(role, file, handler) a role writes and restarts a service for, and the
    (role, file, handler) its stale_service checks cover."""
    written, checked = set(), set()
    for role in sorted(p for p in ROLES.iterdir() if p.is_dir()):
        handlers = _restart_handlers(role)
        tasks = [
            t
            for f in sorted((role / "tasks").glob("*.yml"))
            for t in _tasks(yaml.safe_load(f.read_text()))
        ]
        for t in tasks:
            if "stale_service" in t:
                checked |= {
                    (role.name, p, h) for h in _notified(t) for p in t["stale_service"]["paths"]
                }
            path = _written_path(t)
            written |= {(role.name, path, h) for h in _notified(t) if path and h in handlers}
    return written, checked


def test_every_restart_handler_survives_an_interrupted_run() -> None:
    """Each file a role writes and restarts a service for is also compared with
    that service's start time (stale_service notifying the same handler)."""
    written, checked = restart_pairs()
    assert {
        ("ssh_mesh", "/etc/ssh/sshd_config.d/00-hpcbench.conf", "Apply sshd configuration"),
        ("nfs_server", "/etc/ganesha/ganesha.conf", "Restart nfs-ganesha"),
        ("slurm", "{{ slurm_conf_dir }}/slurm.conf", "Restart slurmd"),
    } <= written, "the check reads the roles"
    uncovered = [
        (role, path, handler)
        for role, path, handler in written
        if not any(
            r == role and h == handler and fnmatch.fnmatchcase(path, pattern)
            for r, pattern, h in checked
        )
    ]
    assert sorted(uncovered) == []
