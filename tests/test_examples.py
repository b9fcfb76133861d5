"""The scripts of ``examples/``: each runs in its fast mode (``--fast``) as a user would
run it, in a fresh process with a scratch working directory, and prints figures that
are checked against independent computations; and they use only placegym's public API.
"""

import ast
import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

from placegym.envs import load_cluster, simulate
from placegym.envs.analysis.bounds import lower_bound
from placegym.envs.suites import get_suite
from placegym.envs.suites.reference import load_references
from placegym.envs.workloads import make_graph
from placegym.teachers import get_teacher

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SCRIPTS = (
    "cleanrl_ppo.py",
    "own_placer_leaderboard.py",
    "pettingzoo_loop.py",
    "sb3_maskable_ppo_gnn.py",
    "wandb_custom_run.py",
)
#: The modules an example may import from (none of their parts private).
PUBLIC = (
    "placegym.envs",
    "placegym.teachers",
    "placegym.agents",
    "placegym.benchmark",
    "placegym.train.tracking",
    "placegym.train.leaderboard",
)
NUMBER = r"([0-9]+(?:\.[0-9]+)?)"


def run_example(script: str, cwd: Path, *args: str, wandb_mode: str = "disabled") -> str:
    """Run ``examples/<script> --fast *args`` in ``cwd``; its stdout (fails on exit != 0).

    W&B's own config, cache and data folders go under ``cwd`` too, so nothing is
    written to the home folder, and nothing contacts W&B (offline or disabled)."""
    env = {
        **os.environ,
        "WANDB_MODE": wandb_mode,
        "WANDB_CONFIG_DIR": str(cwd / ".wandb-home" / "config"),
        "WANDB_CACHE_DIR": str(cwd / ".wandb-home" / "cache"),
        "WANDB_DATA_DIR": str(cwd / ".wandb-home" / "data"),
        "MPLBACKEND": "Agg",
    }
    env.pop("WANDB_DIR", None)
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / script), "--fast", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"{script} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return proc.stdout


def printed_ms(out: str, label: str) -> list[float]:
    """Every value (ms) of the lines ``<label>: <value> ms ...``."""
    return [float(v) for v in re.findall(rf"^{label}: {NUMBER} ms", out, flags=re.M)]


def critical_path_ms(graph, cluster) -> float:
    placement = get_teacher("critical_path").place(graph, cluster)
    return 1e3 * simulate(graph, cluster, placement).makespan


def test_examples_folder_lists_exactly_the_tested_scripts():
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(SCRIPTS)
    readme = (EXAMPLES / "README.md").read_text()
    for script in SCRIPTS:
        assert f"python examples/{script}" in readme, script
        assert f"python examples/{script} --fast" in readme, script


def test_cleanrl_ppo_trains_and_compares_with_the_teacher(tmp_path):
    out = run_example("cleanrl_ppo.py", tmp_path)
    assert "update 2/2 global_step=768" in out
    # episodes ended during the fast run and their makespans were logged
    logged = [float(v) for v in re.findall(rf"charts/episodic_makespan_ms={NUMBER}", out)]
    assert logged and all(v > 0 for v in logged)

    env = gym.make("placegym/ChainMM-v0")
    env.reset(seed=1)
    graph, cluster = env.unwrapped.graph, env.unwrapped.cluster
    (final,) = printed_ms(out, "final makespan")
    (teacher,) = printed_ms(out, "teacher makespan")
    assert teacher == pytest.approx(critical_path_ms(graph, cluster), abs=1e-6)
    assert final >= 1e3 * lower_bound(graph, cluster).value
    # logged to 4 significant digits
    assert all(v >= 1e3 * lower_bound(graph, cluster).value * (1 - 1e-3) for v in logged)
    assert f"ratio to critical_path: {final / teacher:.3f}" in out


def test_sb3_maskable_ppo_keeps_its_best_greedy_policy(tmp_path):
    out = run_example("sb3_maskable_ppo_gnn.py", tmp_path)
    assert "AnchoredMaskablePPO with GnnMaskablePolicy (GraphFeaturesExtractor)" in out
    kept = re.search(
        rf"^kept the (\w+(?: \d+)?) policy \(greedy makespan {NUMBER} ms\)", out, re.M
    )
    assert kept is not None, out
    (final,) = printed_ms(out, "final makespan")
    # the final evaluation replays the kept weights: the same deterministic episode
    assert final == pytest.approx(float(kept.group(2)), abs=1e-3)
    # untrained, cloned, after each chunk (and the kept one itself)
    candidates = [float(v) for v in re.findall(rf"greedy makespan {NUMBER} ms", out)]
    assert len(candidates) == 4
    assert float(kept.group(2)) == pytest.approx(min(candidates), abs=1e-3)

    graph, cluster = make_graph("chainmm"), load_cluster("p100x4")
    teachers = dict(
        (name, float(v))
        for v, name in re.findall(rf"^teacher makespan: {NUMBER} ms \((\w+);", out, re.M)
    )
    assert set(teachers) == {"critical_path", "heft"}
    assert teachers["critical_path"] == pytest.approx(critical_path_ms(graph, cluster), abs=1e-6)
    assert final >= 1e3 * lower_bound(graph, cluster).value


def test_pettingzoo_loop_heuristic_agents_replay_the_critical_path_rule(tmp_path):
    out = run_example("pettingzoo_loop.py", tmp_path)
    graph, cluster = make_graph("ffnn"), load_cluster("p100x4")
    teacher = critical_path_ms(graph, cluster)
    finals = dict(
        (team, float(v))
        for v, team in re.findall(rf"^final makespan: {NUMBER} ms \((\w+) agents\)", out, re.M)
    )
    assert set(finals) == {"random", "heuristic"}
    # largest b-level, then earliest start, read off the observations: the teacher's rule
    assert finals["heuristic"] == pytest.approx(teacher, abs=1e-6)
    assert printed_ms(out, "teacher makespan") == [pytest.approx(teacher, abs=1e-6)]
    assert finals["random"] >= 1e3 * lower_bound(graph, cluster).value
    # the reward is shared: both agents' returns are the episode's
    returns = re.findall(r"returns selector ([-+0-9.]+), placer ([-+0-9.]+)", out)
    assert len(returns) == 3  # two random episodes, one heuristic
    assert all(s == p for s, p in returns)


def test_wandb_custom_run_logs_offline_into_its_output_folder(tmp_path):
    out = run_example("wandb_custom_run.py", tmp_path, wandb_mode="offline")
    folder = tmp_path / "runs" / "examples" / "wandb_custom_run"  # the default --out
    assert sorted(p.name for p in tmp_path.iterdir()) == [".wandb-home", "runs"]
    assert "W&B mode offline (auto)" in out
    runs = list((folder / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(runs) == 1 and runs[0].stat().st_size > 0

    with open(folder / "results.csv") as f:
        rows = list(csv.DictReader(f))
    suite = get_suite("workloads-v0")
    instances = [suite.build(split, spec) for split, spec in suite.specs("test")[:2]]
    refs = load_references("workloads-v0")
    assert [(r["instance"], r["teacher"]) for r in rows] == [
        (inst.id, t) for inst in instances for t in ("critical_path", "heft")
    ]
    by_id = {inst.id: inst for inst in instances}
    for row in rows:
        inst = by_id[row["instance"]]
        placement = get_teacher(row["teacher"]).place(inst.graph, inst.cluster)
        expected = 1e3 * simulate(inst.graph, inst.cluster, placement).makespan
        assert float(row["makespan_ms"]) == pytest.approx(expected, rel=1e-12)
        best = refs[inst.id].best_makespan
        assert float(row["ratio_to_best_known"]) == pytest.approx(expected / (1e3 * best))
        assert float(row["ratio_to_best_known"]) >= 1 - 1e-9  # the best known is the best
        assert row["feasible"] == "True"
    summary = (folder / "summary.md").read_text()
    assert "| critical_path |" in summary and "| heft |" in summary


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_all(module: str) -> set[str]:
    """``__all__`` of a placegym module, read from its source (no import)."""
    parts = module.split(".")[1:]
    if parts and parts[0] not in ("envs", "teachers", "agents", "train"):
        parts = ["placegym", *parts]  # placegym.benchmark: the placegym/ folder
    base = ROOT.joinpath(*parts)
    path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return set(ast.literal_eval(node.value))
    raise AssertionError(f"{module} has no __all__")


@pytest.mark.parametrize("script", SCRIPTS)
def test_examples_use_only_the_public_api(script):
    tree = ast.parse((EXAMPLES / script).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                assert not any(_private(p) for p in alias.name.split(".")), alias.name
                if alias.name.startswith("placegym"):
                    assert alias.name.startswith(PUBLIC), alias.name
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            assert node.level == 0, f"{script}: relative import"
            assert not any(_private(p) for p in module.split(".")), module
            names = [a.name for a in node.names]
            assert not any(_private(n) for n in names), (module, names)
            if module.startswith("placegym"):
                assert module.startswith(PUBLIC), module
                exported = _module_all(module)
                assert set(names) <= exported, (module, set(names) - exported)
        elif isinstance(node, ast.Attribute):
            assert not _private(node.attr), f"{script}: private attribute .{node.attr}"


def test_own_placer_is_benchmarked_and_entered_in_a_leaderboard(tmp_path):
    from placegym.benchmark import verify_entry

    out = run_example("own_placer_leaderboard.py", tmp_path, "--out", "own")
    m = re.search(r"^entered: (\S+) \((\d+)/(\d+) feasible\)", out, flags=re.M)
    assert m and int(m.group(3)) == len(get_suite("published-v0").specs("test"))
    entry = verify_entry(tmp_path / m.group(1))  # the stored entry re-verifies from scratch
    assert entry.placer == "least_finish" and entry.feasible == int(m.group(2))
    assert "| 1 | least-finish | least_finish |" in out
    assert (tmp_path / "own" / "results.json").is_file()
