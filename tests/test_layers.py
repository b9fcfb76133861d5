"""The import graph: layers envs < teachers < agents < train, and no cycles.

Every ``import`` of a ``placegym`` module in the package's source counts, those inside
functions too (a lazy import is still a dependency); only ``if TYPE_CHECKING:`` blocks
are left out (they never run). ``from package import name`` is an edge to the submodule
``package.name`` when there is one, else to the package.
"""

import ast
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("envs", "teachers", "agents", "train")  # each may import only itself and below


def _modules() -> dict[str, Path]:
    out = {}
    for folder in LAYERS:
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(("placegym", folder, *parts))] = path
    return out


MODULES = _modules()


def _target(name: str) -> str | None:
    """The module ``name`` names, or its longest prefix that is one."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _runtime_nodes(node: ast.AST):
    """Every node under ``node`` outside ``if TYPE_CHECKING:`` blocks."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            yield from (n for e in child.orelse for n in (e, *_runtime_nodes(e)))
            continue
        yield child
        yield from _runtime_nodes(child)


def _imports(module: str, path: Path) -> set[str]:
    found = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in _runtime_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                up = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{up}.{base}" if base else up
            names = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names
            ]
        else:
            continue
        found |= {t for n in names if n.startswith("placegym.") and (t := _target(n))}
    return found - {module}


GRAPH = nx.DiGraph([(m, t) for m, p in MODULES.items() for t in _imports(m, p)])


def _layer(module: str) -> int:
    return LAYERS.index(module.split(".")[1])


def test_the_graph_covers_the_package():
    assert len(MODULES) > 80 and GRAPH.number_of_edges() > 150
    assert ("placegym.train.trainer", "placegym.train.config") in GRAPH.edges


def test_envs_never_imports_teachers_agents_or_train():
    bad = sorted((m, t) for m, t in GRAPH.edges if m.startswith("placegym.envs") and _layer(t) > 0)
    assert bad == []


@pytest.mark.parametrize("layer", LAYERS)
def test_every_layer_imports_only_itself_and_the_layers_below(layer):
    i = LAYERS.index(layer)
    bad = sorted((m, t) for m, t in GRAPH.edges if _layer(m) == i and _layer(t) > i)
    assert bad == []


def test_no_import_cycle_between_modules():
    cycles = list(nx.simple_cycles(GRAPH))
    assert cycles == []


def test_importing_the_environments_loads_no_teacher():
    code = (
        "import sys, placegym.envs; "
        "print(sorted(m for m in sys.modules if m.startswith(('placegym.teachers', "
        "'placegym.agents', 'placegym.train'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
