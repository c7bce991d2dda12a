"""The harness's modules import on their own and form no import cycle.

A cycle hidden behind an import inside a function works until someone moves
that import; so the module graph (top-level and function-level imports of
hpcbench modules alike) must be acyclic, and every module must import in a
fresh interpreter.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import hpcbench

pytestmark = pytest.mark.integration

PACKAGE = Path(hpcbench.__file__).resolve().parent


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The hpcbench modules a module imports, wherever in it the import stands."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    edges = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            # `from pkg import mod` imports pkg.mod when that is a module, else pkg.
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        else:
            continue
        edges.update(t for t in targets if t in known and t != name)
    return edges


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_module_graph_has_no_cycle():
    known = modules()
    graph = {name: imported(name, path, known) for name, path in known.items()}
    # A package's own __init__ importing its submodules is not a cycle of theirs.
    for name in graph:
        graph[name] = {t for t in graph[name] if not name.startswith(t + ".")}
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_the_cycle_finder_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a"}}) is None


def test_no_module_imports_hpcbench_inside_a_function():
    known = modules()
    late = []
    for name, path in known.items():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Import | ast.ImportFrom) and any(
                        t.startswith("hpcbench") for t in _names(inner)
                    ):
                        late.append(f"{name}:{inner.lineno}")
    assert late == []


def _names(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    return [node.module or ""] if not node.level else ["hpcbench"]


@pytest.mark.parametrize("name", sorted(modules()))
def test_each_module_imports_in_a_fresh_interpreter(name):
    # Importing __main__ runs the CLI: its import shows in `--help` instead.
    argv = ["-m", "hpcbench", "--help"] if name == "hpcbench.__main__" else ["-c", f"import {name}"]
    proc = subprocess.run(
        [sys.executable, *argv],
        cwd=PACKAGE.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
