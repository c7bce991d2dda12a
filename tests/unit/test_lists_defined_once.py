"""The workload's lists are defined once, in bench/, and read everywhere else: no second
literal of the parallelisms, the backends or the probed collectives in the code."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Folders of code other than the tests (their cases name values on purpose).
CODE = ("bench", "hpcbench", "evaluation", "tools")

LISTS = {
    "PARALLEL": ({"ddp", "fsdp2", "hsdp"}, "bench/workload_options.py"),
    "BACKENDS": ({"horovod", "ddp"}, "bench/workload_options.py"),
    "COLLECTIVES": ({"all_reduce", "all_gather", "reduce_scatter"}, "bench/units.py"),
}


def literals(names: set[str], trees: Iterable[tuple[Path, ast.AST]], root: Path) -> list[str]:
    """file:line of every tuple, list or set literal whose items are exactly `names`, in
    any order."""
    found = []
    for path, tree in trees:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Tuple | ast.List | ast.Set):
                continue
            items = [e.value for e in node.elts if isinstance(e, ast.Constant)]
            if len(items) == len(node.elts) == len(names) and set(items) == names:
                found.append(f"{path.relative_to(root).as_posix()}:{node.lineno}")
    return found


def parsed(paths: Iterable[Path]) -> list[tuple[Path, ast.AST]]:
    return [(p, ast.parse(p.read_text(), str(p))) for p in paths]


@functools.cache
def code() -> list[tuple[Path, ast.AST]]:
    return parsed(p for top in CODE for p in sorted((REPO / top).rglob("*.py")))


@pytest.mark.parametrize("name", sorted(LISTS))
def test_each_of_the_workloads_lists_is_written_out_once_where_it_is_defined(name):
    names, home = LISTS[name]
    found = literals(names, code(), REPO)
    assert len(found) == 1 and found[0].startswith(f"{home}:"), found


def test_a_second_literal_is_found_however_it_is_spelled(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(
        'A = ["ddp", "horovod"]\n'
        'B = {"horovod", "ddp"}\n'
        'C = ("horovod", "ddp", "mpi")\n'  # another list: not this one
        'D = ("horovod", "ddp")\n'
    )
    assert literals({"horovod", "ddp"}, parsed([planted]), tmp_path) == [
        "planted.py:1",
        "planted.py:2",
        "planted.py:4",
    ]
