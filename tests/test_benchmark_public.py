"""``placegym.benchmark`` is the benchmark's one public face: every name of its ``__all__``
resolves to the object defined once in the package (in the harness or the leaderboard),
and the harness defines no public name twice with different meanings."""

import ast
import importlib
import inspect
from pathlib import Path

import pytest

import placegym.benchmark

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("envs", "teachers", "agents", "train", "placegym")


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts if parts[0] == "placegym" else ("placegym", *parts))


def _definitions() -> dict[str, list[str]]:
    """Per top-level name: the modules that define it (``def``, ``class`` or an
    assignment; an import is no definition)."""
    out: dict[str, list[str]] = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    names = [node.name]
                elif isinstance(node, ast.Assign):
                    names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    names = [node.target.id]
                else:
                    continue
                for name in names:
                    out.setdefault(name, []).append(_module(path))
    return out


DEFINITIONS = _definitions()
#: The modules whose definitions ``placegym.benchmark`` re-exports.
SOURCES = ("placegym.train.harness.", "placegym.train.leaderboard")


def test_the_benchmark_module_defines_nothing_and_exports_a_sorted_all():
    assert not {
        n for n, mods in DEFINITIONS.items() if "placegym.benchmark" in mods and n != "__all__"
    }
    names = placegym.benchmark.__all__
    assert len(set(names)) == len(names)
    for name in ("evaluate", "Placer", "SearchPlacer", "Simulator", "BudgetExceeded"):
        assert name in names
    for name in ("replay", "run_anytime", "run_suite", "submit_entry", "leaderboard_table"):
        assert name in names


@pytest.mark.parametrize("name", placegym.benchmark.__all__)
def test_each_exported_name_is_defined_in_exactly_one_module_and_is_that_object(name):
    obj = getattr(placegym.benchmark, name)
    (home,) = DEFINITIONS[name]  # defined once in the whole package
    assert home.startswith(SOURCES), home
    assert getattr(importlib.import_module(home), name) is obj
    if inspect.isclass(obj) or inspect.isfunction(obj):  # not a constant nor a type alias
        assert obj.__module__ == home


def test_the_harness_and_leaderboard_define_no_public_name_twice():
    mine = {
        n: [m for m in mods if m.startswith(SOURCES) or m == "placegym.train.evaluate"]
        for n, mods in DEFINITIONS.items()
        if not n.startswith("_")
    }
    assert {n: mods for n, mods in mine.items() if len(mods) > 1} == {}


def test_the_once_duplicated_names_have_one_definition_or_a_name_of_their_own():
    assert DEFINITIONS["REFERENCE"] == ["placegym.train.harness.bench"]
    assert DEFINITIONS["RTOL"] == ["placegym.train.harness.replay"]
    # the bench's and the references' size limits of the optimum are the optimal teacher's
    for name in ("MAX_NODES", "MAX_DEVICES"):
        assert "placegym.teachers.optimal" in DEFINITIONS[name]
        assert not [m for m in DEFINITIONS[name] if m.startswith(SOURCES)]
    assert "OPTIMAL_MAX_NODES" not in DEFINITIONS and "OPTIMAL_MAX_DEVICES" not in DEFINITIONS
    assert DEFINITIONS["run_placer"] == ["placegym.train.harness.placers"]
    assert DEFINITIONS["PlacerRun"] == ["placegym.train.harness.placers"]
    assert "placegym.train.harness.anytime" not in DEFINITIONS["SearchPlacer"]
    assert DEFINITIONS["AgentPlacer"] == ["placegym.agents.doppler.placer"]
    assert "placegym.train.harness.bench" not in DEFINITIONS["markdown_table"]
    from placegym.train import evaluate, leaderboard
    from placegym.train.harness import bench

    assert evaluate.REFERENCE is bench.REFERENCE is leaderboard.REFERENCE


def test_training_keeps_the_moved_agent_placer_importable():
    from placegym.agents.doppler import placer
    from placegym.train import evaluate

    for name in ("AgentPlacer", "EnvPool", "MODES", "episode_placement", "trained_mask"):
        assert getattr(evaluate, name) is getattr(placer, name), name
        assert name in evaluate.__all__
