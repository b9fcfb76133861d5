"""The import graph: layers envs < teachers < agents < train, bands inside envs, no cycles.

Every ``import`` of a ``placegym`` module in the package's source counts, those inside
functions too (a lazy import is still a dependency). The layer and band rules read the
imports that run (``if TYPE_CHECKING:`` blocks left out); the cycle test reads every
import, those for type checkers too: a module that names its importer's types is still
tied to it. ``from package import name`` is an edge to the submodule ``package.name``
when there is one, else to the package.
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


def _runtime_nodes(node: ast.AST, typing: bool = False):
    """Every node under ``node`` outside ``if TYPE_CHECKING:`` blocks (all of them with
    ``typing``)."""
    for child in ast.iter_child_nodes(node):
        if not typing and isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            yield from (n for e in child.orelse for n in (e, *_runtime_nodes(e)))
            continue
        yield child
        yield from _runtime_nodes(child, typing)


def _imports(module: str, path: Path, typing: bool = False) -> set[str]:
    found = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in _runtime_nodes(ast.parse(path.read_text()), typing):
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
#: Every import, those under ``TYPE_CHECKING`` too.
FULL_GRAPH = nx.DiGraph([(m, t) for m, p in MODULES.items() for t in _imports(m, p, typing=True)])


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


def test_no_import_cycle_between_modules_type_checking_imports_included():
    assert FULL_GRAPH.number_of_edges() > GRAPH.number_of_edges()
    cycles = sorted(sorted(c) for c in nx.simple_cycles(FULL_GRAPH))
    assert cycles == []


# ---------------------------------------------------------------------- bands of envs
#: The bands of ``placegym.envs``, lowest first: a band imports only itself and the bands
#: before it. The package's own ``__init__`` and the old-path modules at its top sit
#: above them all.
BANDS = ("core", "sim", "analysis", "workloads", "importers", "suites", "real", "mdp")
MAX_FLAT = 12  # modules left at the top of envs/, its __init__ included


def _band(module: str) -> int:
    parts = module.split(".")
    if len(parts) >= 3 and parts[2] in BANDS:
        return BANDS.index(parts[2])
    return len(BANDS)  # the top of envs/


def test_every_envs_module_sits_in_a_band_but_a_few_at_the_top():
    flat = sorted(p.name for p in (ROOT / "envs").glob("*.py"))
    assert len(flat) <= MAX_FLAT, flat
    assert {p.name for p in (ROOT / "envs").iterdir() if p.is_dir()} >= set(BANDS)


def test_an_envs_band_imports_only_itself_and_the_bands_below():
    envs = [m for m in MODULES if m.startswith("placegym.envs.")]
    assert {_band(m) for m in envs} == set(range(len(BANDS) + 1))
    bad = sorted(
        (m, t)
        for m, t in GRAPH.edges
        if m.startswith("placegym.envs") and t.startswith("placegym.envs") and _band(t) > _band(m)
    )
    assert bad == []


def test_importing_the_simulator_loads_no_workload_generator_nor_importer():
    code = (
        "import sys, placegym.envs.simulator, placegym.envs.sim.simulator; "
        "print(sorted(m for m in sys.modules if m.startswith(('placegym.envs.workloads', "
        "'placegym.envs.importers', 'placegym.envs.suites', 'placegym.envs.real'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_old_import_paths_are_the_moved_modules():
    import importlib

    for old, new in (
        ("simulator", "sim.simulator"),
        ("graph", "core.graph"),
        ("cluster", "core.cluster"),
        ("placement", "core.placement"),
        ("analysis", "analysis"),
    ):
        a = importlib.import_module(f"placegym.envs.{old}")
        assert a is importlib.import_module(f"placegym.envs.{new}"), old
    from placegym.envs.importers import from_doppler  # noqa: F401
    from placegym.envs.simulator import simulate
    from placegym.envs.suites import get_suite  # noqa: F401
    from placegym.envs.workloads import make_graph

    assert simulate is importlib.import_module("placegym.envs").simulate
    assert make_graph("ffnn").num_nodes == 128


def test_importing_the_environments_loads_no_teacher():
    code = (
        "import sys, placegym.envs; "
        "print(sorted(m for m in sys.modules if m.startswith(('placegym.teachers', "
        "'placegym.agents', 'placegym.train'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------- the agent wings
WINGS = ("placegym.agents.doppler", "placegym.agents.sb3")
SHARED_AGENTS = "placegym.agents.nn"  # the graph encoder and layers both wings build on


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


@pytest.mark.parametrize("wing", WINGS)
def test_an_agent_wing_imports_no_other_agents_module_than_itself_and_the_shared_layers(wing):
    bad = sorted(
        (m, t)
        for m, t in GRAPH.edges
        if _in(m, wing)
        and _in(t, "placegym.agents")
        and not _in(t, wing)
        and not _in(t, SHARED_AGENTS)
    )
    assert bad == []


def test_the_wings_exist_and_the_shared_layers_import_neither():
    for wing in WINGS:
        assert any(_in(m, wing) for m in MODULES), wing
    bad = sorted(
        (m, t) for m, t in GRAPH.edges if _in(m, SHARED_AGENTS) and any(_in(t, w) for w in WINGS)
    )
    assert bad == []


def test_the_benchmark_harness_never_imports_the_experiments():
    bad = sorted(
        (m, t)
        for m, t in GRAPH.edges
        if _in(m, "placegym.train.harness") and _in(t, "placegym.train.experiments")
    )
    assert bad == []


# ---------------------------------------------------------------------- private names
STATE = ROOT / "envs" / "mdp" / "state.py"


def _private_names(path: Path, cls: str) -> set[str]:
    """The ``_names`` class ``cls`` defines: its methods and the attributes it assigns
    on ``self`` (dunder names are not private)."""
    tree = ast.parse(path.read_text())
    (node,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
    names = set()
    for n in ast.walk(node):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(n.name)
        elif (
            isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name)
            and n.value.id == "self"
            and isinstance(n.ctx, ast.Store)
        ):
            names.add(n.attr)
    return {x for x in names if x.startswith("_") and not x.endswith("__")}


def _reach_ins(names: set[str], skip: Path) -> list[str]:
    """``file:line name`` of every ``<expr>._name`` outside ``skip`` whose ``<expr>`` is
    not ``self`` or ``cls``, for ``_name`` in ``names``."""
    found = []
    paths = [p for folder in (*LAYERS, "tests") for p in (ROOT / folder).rglob("*.py")]
    for path in paths:
        if path == skip:
            continue
        for n in ast.walk(ast.parse(path.read_text())):
            mine = isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
            if (
                isinstance(n, ast.Attribute)
                and n.attr in names
                and not (mine and n.value.id in ("self", "cls"))
            ):
                found.append(f"{path.relative_to(ROOT)}:{n.lineno} {n.attr}")
    return sorted(found)


def test_no_module_outside_the_state_touches_placement_state_private_names():
    names = _private_names(STATE, "PlacementState")
    assert {"_frontier", "_num_placed"} <= names
    assert _reach_ins(names, STATE) == []


def test_no_module_outside_the_environment_touches_its_private_names():
    env = ROOT / "envs" / "mdp" / "env.py"
    names = _private_names(env, "PlacementEnv")
    assert {"_steps", "_prepared"} <= names
    assert _reach_ins(names, env) == []


# ---------------------------------------------------------------------- module size
MAX_LINES = 600
#: The compiled simulator kernel: numba caches per file, so it stays one (its docstring).
LONG_ALLOWED = {"placegym.envs.sim._kernel"}


def test_no_module_is_over_600_lines_but_the_compiled_kernel():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert set(long) <= LONG_ALLOWED, long
