"""The per-graph report's table and target checks (train/harness/per_graph.py)."""

import json

import pytest

from placegym.train.cli import main
from placegym.train.experiments.per_graph import INSTANCES, per_graph_table

A, B = INSTANCES[0], INSTANCES[5]


def _base(best: float, anneal: float, bound: float) -> dict:
    row = {h: 1.0 for h in ("critical_path", "heft", "metis", "round_robin", "single_device")}
    row["nest"] = best
    curve = {"1": [float("nan")] * 3, "10": [best] * 3, "100": [best] * 3}
    curve |= {"1000": [anneal] * 3, "3000": [anneal] * 3}
    return {
        **row,
        "anneal": [anneal] * 3,
        "random_search": [best] * 3,
        "anneal_curve": curve,
        "random_search_curve": curve,
        "lower_bound": bound,
        "best_known": None,
    }


def _row(name: str, seed: int, greedy: float, search: float) -> dict:
    curve = {"1": greedy, "10": greedy, "100": greedy, "1000": search, "3000": search}
    return {
        "instance": name,
        "seed": seed,
        "greedy": greedy,
        "search": search,
        "plan": search,
        "curve": curve,
        "plan_calls": 30000,
        "episodes": 100,
        "train_seconds": 1.0,
    }


def test_table_means_over_seeds_and_target_checks():
    base = {A: _base(0.8, 0.7, 0.5), B: _base(0.6, 0.6, 0.6)}  # B's best reaches the bound
    rows = [_row(A, s, g, 0.66) for s, g in enumerate((0.70, 0.72, 0.74))]
    rows += [_row(B, s, 0.61, 0.61) for s in range(3)]
    text = per_graph_table(rows, base)
    assert "| chainmm-6x2@p100x4 | 0.800 (nest) | 0.700 | 0.800 | 0.720 ± 0.016 |" in text
    # B: greedy 0.61 > 0.6 but the best single pass is at the lower bound; search > anneal
    assert "greedy <= best single pass on every instance: met" in text
    assert "agent+search@3000 <= anneal@3000 on every instance: not met on " in text
    assert "| anneal | n/a | 0.693 |" in text  # no report before the starts are simulated


def test_report_cli_reads_saved_rows_and_cached_baselines(tmp_path, capsys):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(_row(A, s, 0.7, 0.69)) + "\n" for s in range(2)))
    folder = tmp_path / "out" / "per_graph"
    folder.mkdir(parents=True)
    (folder / "baselines.json").write_text(json.dumps({A: _base(0.8, 0.7, 0.5)}))
    args = [
        "report",
        "--parts",
        "per_graph",
        "--results",
        str(rows),
        "--out",
        str(tmp_path / "out"),
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "0.700 ± 0.000 | 0.690 ± 0.000" in out and "| 2 |" in out
    assert (folder / "table.md").read_text().startswith("## Per-graph agents")


def test_collect_rows_appends_each_batch_and_resumes(tmp_path):
    from placegym.train.experiments.per_graph import collect_rows

    def missing(rows):
        done = {r["k"] for r in rows}
        for k in (1, 2, 3):
            if k not in done:
                yield [{"k": k}]
                if k == 2:
                    raise KeyboardInterrupt  # killed after the second batch

    with pytest.raises(KeyboardInterrupt):
        collect_rows(tmp_path, None, missing)
    assert [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()] == [
        {"k": 1},
        {"k": 2},
    ]
    assert collect_rows(tmp_path, None, missing) == [{"k": 1}, {"k": 2}, {"k": 3}]
    saved = tmp_path / "saved.jsonl"
    saved.write_text('{"k": 9}\n')
    assert collect_rows(tmp_path / "x", saved, missing) == [{"k": 9}]


def test_infeasible_columns_are_marked_and_never_ranked():
    oom = "out of memory on device 0 (d0): peak 9 bytes, 1 over its 8"
    a = _base(0.8, 0.7, 0.5)
    a["heft"], a["infeasible"], a["feasible"] = 0.5, {"heft": oom}, False  # the fastest, but OOM
    b = _base(0.6, 0.6, 0.4)
    rows = [_row(A, s, 0.7, 0.66) for s in range(3)]
    rows += [_row(B, s, 0.61, 0.6) for s in range(3)]
    rows[4] |= {
        "greedy": None,
        "feasible": False,
        "infeasible": {"greedy": "splits co-location group 1"},
    }
    text = per_graph_table(rows, {A: a, B: b})
    # heft is left out of the best single pass; B's greedy is marked, not averaged
    assert "| chainmm-6x2@p100x4 | 0.800 (nest) | 0.700 | 0.800 | 0.700 ± 0.000 |" in text
    assert "| split | 0.600 ± 0.000 |" in text
    assert "| feasible | 2/2 | 2/2 | 2/2 | 1/2 | 2/2 | 2/2 | | | |" in text
    # geometric means over A only, with the count; the failure fails the per-instance target
    assert (
        "Geometric means over 1 of 2 instances every placer solved: best single pass 0.800" in text
    )
    assert "not met on ffnn-3x2x4-ccr4@p100x4 (greedy split)" in text
