"""The one-pass agent's evaluation (placegym.train.experiments.onepass): rows measured
without a simulator call in the greedy pass, searches within their budget, the tables
read from the stored files alone."""

import json

import pytest
from tiny_suite import tiny  # noqa: F401 (fixture)

from placegym.train.experiments import onepass as op

AGENT = "pretrained:generalist-memory-v2"  # a one-pass policy


def test_rows_baselines_and_tables(tiny, tmp_path, capsys):  # noqa: F811
    paths = (tmp_path / "rows.jsonl", tmp_path / "base.json")
    rows = op.run_seed(AGENT, 0, *paths, splits=[("tiny-v0", "test")], budget=60)
    assert [r["instance"] for r in rows] == ["tiny-v0/dag-ccr4@doppler-unit-4"]
    row = rows[0]
    assert row["greedy_calls"] == 0 and row["greedy"] > 0 and not row["greedy_oom"]
    for key in op.SEARCHES:
        trace = row[f"{key}_trace"]
        calls = [c for c, _, _ in trace]
        seconds = [t for _, t, _ in trace]
        assert calls == sorted(calls) and calls[-1] <= 60 and seconds == sorted(seconds)
        assert trace[-1][2] == pytest.approx(row[key])  # the final placement, as reported
    assert row["warm"] <= min(row["greedy"], 1.0) * (1 + 1e-9)  # both are among its starts
    assert op.run_seed(AGENT, 0, *paths, splits=[("tiny-v0", "test")], budget=60) == []
    base = json.loads(paths[1].read_text())
    b = base["tiny-v0/dag-ccr4@doppler-unit-4"]
    assert b["critical_path"] == 1.0 and b["fits"] and b["fortified_lookahead"] > 0
    assert op.main(["table", "--rows", str(paths[0]), "--baselines", str(paths[1])]) == 0
    printed = capsys.readouterr().out
    assert "| tiny-v0 (1) |" in printed and "greedy faster than both" in printed
    assert printed.strip() == op.onepass_table(rows, base)
    assert b["heft_lookahead"] > 0 and "heft_lookahead faster than both" in printed
    stored = dict(b)
    del b["heft_lookahead"]  # baselines stored before heft_lookahead was measured
    paths[1].write_text(json.dumps(base))
    assert op.extra_baselines(paths[1])["tiny-v0/dag-ccr4@doppler-unit-4"] == stored


def test_summary_figures_on_hand_made_rows():
    def row(seed, greedy, oom=False):
        trace = [[5, 0.1, 1.0], [100, 0.5, 0.9]]  # anneal: 1.0 at 0.1 s, 0.9 at 0.5 s
        return {
            "instance": "s/a",
            "seed": seed,
            "nodes": 500,
            "greedy": None if oom else greedy,
            "greedy_oom": oom,
            "greedy_seconds": 0.2,
            "budget": 100,
            "anneal": 0.9,
            "anneal_seconds": 0.6,
            "anneal_trace": trace,
            "random_search": 1.0,
            "random_search_trace": [[5, 0.1, 1.0]],
            "warm": 0.85,
            "warm_trace": [[6, 0.3, 0.95], [100, 0.7, 0.85]],  # at anneal's 0.6 s: 0.95
        }

    base = {
        "s/a": {
            "critical_path": 1.0,
            "heft": 0.95,
            "nest": 1.2,
            "metis": None,
            "round_robin": 1.5,
            "single_device": 2.0,
            "fortified_lookahead": 0.9,
            "heft_lookahead": 0.94,
            "fits": True,
        }
    }
    fig = op.split_summary([row(0, 0.9), row(1, 0.97), row(2, None, oom=True)], base)
    assert fig["beats_both"] == [1.0, 0.0, 0.0]
    assert fig["vs_best_single"][:2] == pytest.approx([0.9 / 0.95, 0.97 / 0.95])
    assert fig["vs_anneal_at_seconds"][0] == pytest.approx(0.9)  # anneal had 1.0 at 0.2 s
    assert fig["warm_le_anneal_calls"] == [1.0] * 3
    assert fig["warm_le_anneal_seconds"] == [0.0] * 3
    assert fig["over_memory"] == [0.0, 0.0, 1.0]
    assert fig["vs_heft_lookahead"][:2] == pytest.approx([0.9 / 0.94, 0.97 / 0.94])
    assert fig["heft_lookahead_beats_both"] == [1.0] * 3  # 0.94 < 0.95
    # the per-instance choice among heft_lookahead, nest and metis (metis infeasible)
    assert fig["choice_vs_best_single"] == [pytest.approx(0.94 / 0.95)] * 3
    assert fig["choice_beats_both"] == [1.0] * 3
    base["s/a"]["nest"] = 0.8  # nest fastest: the choice, and below the best single-pass
    nest_wins = op.split_summary([row(0, 0.9)], base)
    assert nest_wins["choice_vs_best_single"] == [pytest.approx(1.0)]
    assert fig["seconds_per_1k"] == [pytest.approx(0.4)] * 3
    assert fig["slowest_decode"] == [pytest.approx(0.2)] * 3


def test_an_agent_is_evaluated_under_another_mask_when_asked(monkeypatch):
    """run --memory-mask: the shipped generalist (trained under room) decodes under the
    mask the fine-tuned policies were trained under, in its greedy pass and its warm
    start alike (both read the agent's mask)."""
    from placegym.train.evaluate import load_agent

    assert load_agent(AGENT).memory_mask == "room"
    assert load_agent(AGENT, memory_mask="live").memory_mask == "live"
    seen = []

    def spy(checkpoint, seed, *args, **kw):
        seen.append(kw.get("memory_mask"))
        return []

    monkeypatch.setattr(op, "run_seed", spy)
    assert op.main(["run", AGENT, "--seed", "0", "--memory-mask", "live"]) == 0
    assert op.main(["run", AGENT, "--seed", "0"]) == 0
    assert seen == ["live", None]
    with pytest.raises(SystemExit):
        op.main(["run", AGENT, "--seed", "0", "--memory-mask", "roomy"])
