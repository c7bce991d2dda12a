"""The package's layers (hpcbench.LAYERS): every hpcbench import, at module level or
inside a function, goes to the importer's own layer or one below it; the top level holds
the command line and no more than eight modules; each subpackage says its layer."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import hpcbench

ROOT = Path(hpcbench.__file__).resolve().parent
MODULES = sorted(p for p in ROOT.rglob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every hpcbench import in the file, relative ones resolved."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                own = module_name(path)
                package = own if path.name == "__init__.py" else own.rpartition(".")[0]
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([base] if base else [])])
            names = [f"{base}.{a.name}" for a in node.names]
            # `from hpcbench import x` names a module (or the package's own constants).
            found += [(node.lineno, n if n.count(".") == 1 else base) for n in names]
    return [(line, m) for line, m in found if m == "hpcbench" or m.startswith("hpcbench.")]


def test_every_import_goes_to_its_own_layer_or_below() -> None:
    upward = []
    for path in MODULES:
        own = hpcbench.layer_of(module_name(path))
        for line, target in imported(path):
            if target.split(".")[1:2] in ([], ["__version__"], ["LAYERS"]):
                continue  # the package's version and its layer list
            if hpcbench.layer_of(target) > own:
                upward.append(f"{path.relative_to(ROOT.parent)}:{line} imports {target}")
    assert not upward, "\n".join(upward)


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    """The rule above can fail: a core module that imports the campaign is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from hpcbench.campaign import cells\n\ndef f():\n    from hpcbench.measure import sweep\n"
    )
    targets = [m for _, m in imported(bad)]
    assert targets == ["hpcbench.campaign", "hpcbench.measure"]
    assert all(hpcbench.layer_of(t) > hpcbench.layer_of("hpcbench.core.files") for t in targets)


def test_the_top_level_holds_the_command_line_and_at_most_eight_modules() -> None:
    top = sorted(p.name for p in ROOT.glob("*.py"))
    assert len(top) <= 8, top
    subpackages = sorted(p.parent.name for p in ROOT.glob("*/__init__.py"))
    assert sorted([*subpackages]) == sorted(x for x in hpcbench.LAYERS if x != "cli"), subpackages


@pytest.mark.parametrize("sub", [x for x in hpcbench.LAYERS if x != "cli"])
def test_each_subpackage_states_its_layer(sub: str) -> None:
    doc = importlib.import_module(f"hpcbench.{sub}").__doc__ or ""
    assert doc.startswith(f"Layer {sub} ("), doc[:80]
    index = hpcbench.LAYERS.index(sub)
    below = hpcbench.LAYERS[index - 1] if index else None
    assert (f"above {below}" in doc[:60]) if below else "(the bottom)" in doc[:60], doc[:80]
