"""The generalist report's table and target checks (train/harness/generalist.py)."""

import json

import pytest

from placegym.train.cli import main
from placegym.train.experiments.generalist import generalist_table, instances

GEN = instances("generalize-v0", "test")
A, B = GEN[0], GEN[1]
C = instances("comm-heavy-v0", "test")[0]


def _base(
    cp: float, heft: float, anneal: float, lookahead: float = 0.9, nest: float = 2.0
) -> dict:
    curve = {"100": [anneal] * 3, "1000": [anneal] * 3, "3000": [anneal] * 3}
    return {
        "critical_path": cp,
        "heft": heft,
        "nest": nest,
        "metis": 2.0,
        "round_robin": 2.0,
        "single_device": 3.0,
        "fortified": min(lookahead, nest),
        "anneal": [anneal] * 3,
        "random_search": [1.0] * 3,
        "anneal_curve": curve,
        "random_search_curve": curve,
        "lookahead": lookahead,
        "lower_bound": 0.5,
        "best_known": 0.8,
    }


def _row(name: str, seed: int, greedy: float, search: float) -> dict:
    return {
        "instance": name,
        "seed": seed,
        "greedy": greedy,
        "search": search,
        "greedy_calls": 1024,
        "curve": {"100": greedy, "1000": search, "3000": search},
        "train_seconds": 1.0,
    }


def test_table_counts_wins_per_seed_and_checks_the_targets():
    base = {A: _base(1.0, 0.9, 0.85, nest=0.87), B: _base(1.0, 1.0, 0.9), C: _base(1.0, 0.95, 0.9)}
    rows = [_row(A, s, g, 0.84) for s, g in enumerate((0.88, 0.90, 0.92))]  # wins: s0 only
    rows += [_row(B, s, 0.85, 0.95) for s in range(3)]  # wins; search above anneal
    rows += [_row(C, s, 0.90, 0.90) for s in range(3)]
    text = generalist_table(rows, base)
    assert "### generalize-v0 test (2 instances, training seeds 0, 1, 2)" in text
    assert f"| {A.split('/', 1)[1]} | 0.900 ± 0.016 | 1 of 3 | 0.840 ± 0.000 | 0.850 |" in text
    # lookahead, fortified, best list, best single pass, best known, bound, calls
    assert "| 0.900 | 0.870 | 0.900 | 0.870 | 0.800 | 0.500 | 1,024 |" in text
    # nest (0.87) beats A's greedy on every seed; B's greedy is the best single pass
    assert "greedy at most the best single-pass placer (min of critical_path, heft, nest" in text
    assert "round_robin, single_device) on 1.0 ± 0.0 of 2;" in text
    # per seed: 2, 1, 1 of 2 instances beat both
    assert "faster than both critical_path and heft on 1.3 ± 0.5 of 2 (67%" in text
    assert "target 80%: not met); per seed 2, 1, 1" in text
    gms = [(g / 0.9 * 0.85) ** 0.5 for g in (0.88, 0.90, 0.92)]
    mean, std = sum(gms) / 3, (sum((x - sum(gms) / 3) ** 2 for x in gms) / 3) ** 0.5
    assert (
        f"greedy / best list, geometric mean: {mean:.3f} ± {std:.3f} (target 0.85: not met)"
        in text
    )
    assert "<= anneal on 1.0 ± 0.0 of 2 instances" in text
    assert "### comm-heavy-v0 test (1 instances" in text
    # a seed without rows for every instance is left out of the summary
    partial = generalist_table(rows[:-1], base).split("### comm-heavy-v0")[1]
    assert "per seed 1, 1" in partial


@pytest.mark.parametrize("flag", ["--generalist-results"])
def test_report_cli_reads_saved_rows_and_cached_baselines(tmp_path, capsys, flag):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(_row(A, s, 0.85, 0.8)) + "\n" for s in range(2)))
    folder = tmp_path / "out" / "generalist"
    folder.mkdir(parents=True)
    (folder / "baselines.json").write_text(json.dumps({A: _base(1.0, 0.9, 0.82)}))
    args = ["report", "--parts", "generalist", flag, str(rows), "--out", str(tmp_path / "out")]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "0.850 ± 0.000 | 2 of 2 | 0.800 ± 0.000 | 0.820 |" in out
    assert "greedy / best list, geometric mean: 0.944 ± 0.000 (target 0.85: not met)" in out
    assert (folder / "table.md").read_text().startswith("## The generalist, zero-shot")


@pytest.mark.slow
def test_run_study_seed_trains_once_then_searches_every_test_instance(tmp_path):
    """A tiny training run, then greedy and search rows for each of the 28 test instances;
    a second call loads the finished run instead of training again."""
    from placegym.train.experiments.generalist import run_study_seed

    tiny = [
        "data.graphs=[generalize-v0/random_dag-64-s0@p100x4]",
        "phase1.updates=2",
        "phase1.episodes_per_graph=1",
        "eval.every=0",
    ]
    splits = (("generalize-v0", "test"),)
    rows = run_study_seed(0, tmp_path, splits, budget=2600, overrides=tiny)
    assert [r["instance"] for r in rows] == GEN
    for r in rows:
        assert r["seed"] == 0 and 0 < r["search"] <= r["greedy"]
        assert r["greedy_calls"] >= 252 and set(r["curve"]) == {"100", "1000"}
    results = tmp_path / "generalist_rollout-s0" / "results.json"
    stamp = results.stat().st_mtime_ns
    again = run_study_seed(0, tmp_path, splits, budget=2600, overrides=tiny)
    assert results.stat().st_mtime_ns == stamp and again == rows


def test_infeasible_columns_are_marked_lose_and_leave_the_geometric_means():
    oom = "out of memory on device 1 (d1): peak 9 bytes, 1 over its 8"
    a = _base(1.0, 0.9, 0.85)
    a["heft"], a["infeasible"] = 0.5, {"heft": oom}  # fastest but OOM: the best list is cp alone
    b = _base(1.0, 1.0, 0.9)
    rows = [_row(A, s, 0.95, 0.84) for s in range(3)]
    rows += [_row(B, s, 0.85, 0.95) for s in range(3)]
    rows[3] |= {"greedy": None, "feasible": False, "infeasible": {"greedy": oom}}
    text = generalist_table(rows, {A: a, B: b, C: _base(1.0, 0.95, 0.9)}).split("### comm")[0]
    assert f"| {A.split('/', 1)[1]} | 0.950 ± 0.000 | 3 of 3 |" in text  # beats critical_path
    assert f"| {B.split('/', 1)[1]} | OOM | 2 of 3 |" in text  # the OOM seed is no win
    assert "| 1.000 | 0.900 |" in text  # A: best list 1.000 (heft out), best single 0.900
    assert "| feasible | 1/2 | | 2/2 |" in text
    assert "- geometric means over 1 of 2 instances every placer solved" in text
    assert "greedy / best list, geometric mean: 0.950 ± 0.000" in text  # A only


def test_memory_study_reports_at_its_budget_and_leaves_out_what_cannot_fit():
    from placegym.train.experiments.generalist import ROLLOUT_MEMORY

    pub = instances("published-v0", "test")
    unfit = [n for n in pub if "bert_l-3" in n or "bert_l-6" in n]
    fit = pub[0]
    curve = {"100": 0.9, "1000": 0.85, "10000": 0.8}
    rows = [_row(n, s, 0.9, 0.8) | {"curve": curve} for n in (fit, *unfit) for s in range(3)]
    base = {}
    for n in (fit, *unfit):
        b = _base(1.0, 0.95, 0.85)
        b["anneal_curve"] = b["random_search_curve"] = {k: [0.85] * 3 for k in curve}
        base[n] = b
    text = generalist_table(rows, base, ROLLOUT_MEMORY)
    assert "### published-v0 test (1 instances, training seeds 0, 1, 2)" in text
    assert "Left out, no placement fits: latency-operator-bert_l-3_inference (" in text
    assert "| agent+search@10000 | anneal@10000 | random@10000 |" in text
    assert "| simulator calls | 100 | 1000 | 10000 |" in text
    assert "agent+search@10000 / anneal@10000, geometric mean: 0.941 ± 0.000" in text
    assert "| feasible | 3/1 |" not in text and "| feasible | 1/1 |" in text
