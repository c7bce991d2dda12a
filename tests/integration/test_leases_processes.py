"""hpcbench.testbeds.leases: the contract with the module scripts, run with cancel
commands here that succeed, fail, hang or are missing (the lease files as read:
tests/unit/test_leases.py)."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

from hpcbench.testbeds import leases

pytestmark = pytest.mark.integration


def write(state: Path, name: str, cancel: object, what: str = "GPULab job 7f3a") -> Path:
    folder = leases.lease_dir(state)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"what": what, "created": "2026-11-23T07:00:00Z", "cancel": cancel}))
    return path


def test_successful_cancel_removes_the_lease(tmp_path: Path) -> None:
    marker = tmp_path / "cancelled"
    path = write(tmp_path, "job0", ["touch", str(marker)])
    assert leases.cancel_leftovers(tmp_path) == []
    assert marker.is_file() and not path.exists()


def test_cancel_gets_the_password_from_the_environment_not_argv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HPCBENCH_PEM_PASSWORD", "pw")
    seen = tmp_path / "seen"
    write(tmp_path, "job0", ["sh", "-c", f'printf %s "$HPCBENCH_PEM_PASSWORD" > {seen}'])
    assert leases.cancel_leftovers(tmp_path) == []
    assert seen.read_text() == "pw"


def test_failed_cancel_keeps_the_lease_and_says_how_to_cancel(tmp_path: Path) -> None:
    cancel = ["sh", "-c", "echo 'job 7f3a: permission denied' >&2; exit 4"]
    path = write(tmp_path, "job0", cancel)
    [(lease, why)] = leases.cancel_leftovers(tmp_path)
    assert path.is_file()
    assert why == "exit 4: job 7f3a: permission denied"
    line = lease.by_hand()
    assert "GPULab job 7f3a" in line and shlex.join(cancel) in line and "\n" not in line


def test_missing_cancel_program(tmp_path: Path) -> None:
    path = write(tmp_path, "slice", ["/nonexistent/jfed.sh", "delete.yaml"], "Virtual Wall slice s")
    [(lease, why)] = leases.cancel_leftovers(tmp_path)
    assert path.is_file() and "cannot run /nonexistent/jfed.sh" in why
    assert "/nonexistent/jfed.sh delete.yaml" in lease.by_hand()


def test_hanging_cancel_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCBENCH_CANCEL_TIMEOUT_S", "1")
    pid_file = tmp_path / "pid"
    path = write(tmp_path, "job0", ["sh", "-c", f"echo $$ > {pid_file}; exec sleep 600"])
    [(_, why)] = leases.cancel_leftovers(tmp_path)
    assert "HPCBENCH_CANCEL_TIMEOUT_S" in why and path.is_file()
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


def test_each_lease_is_tried_even_after_a_failure(tmp_path: Path) -> None:
    marker = tmp_path / "second"
    write(tmp_path, "a", ["false"], "first job")
    write(tmp_path, "b", ["touch", str(marker)], "second job")
    still = leases.cancel_leftovers(tmp_path)
    assert [lease.what for lease, _ in still] == ["first job"] and marker.is_file()
