"""The generalist: one checkpoint trained on ``generalize-v0``'s train split, zero-shot.

The ``generalist`` part of ``placegym report`` (``make agent-report``). Per training seed
(0, 1, 2; ``restarts=1``), :func:`run_seed` trains the shipped preset
:data:`PRESET` (``configs/generalist_rollout.yaml``) and, on every instance of
:data:`SPLITS` (``generalize-v0``'s test split and, further from the training data,
``comm-heavy-v0``'s: unseen sizes, CCRs and clusters), runs
:func:`~placegym.agents.doppler.search.policy_search` with :data:`BUDGET` simulator calls from the
final weights, searching with the training seed. The search's first stage is the greedy
pass, so one call gives both figures: the greedy makespan (zero-shot, deterministic) and
the best after the whole budget; the calls the greedy pass spent (its lookahead prices,
``n * D``) are in the row. One JSON row per (instance, seed), ratios to critical_path.

:func:`baselines` computes, per instance, what :func:`placegym.train.experiments.per_graph.
baselines` does (the single-pass placers, ``anneal`` and ``random_search`` at the same
budget for seeds 0, 1, 2, the lower bound and the best known) plus the ``lookahead``
teacher, plain and fortified with the single-pass placers' placements (the teacher the
agent imitates). :func:`generalist_table` prints, per split, every instance
with the mean ± std over seeds and the targets
(:data:`~placegym.train.experiments.targets.TARGETS`): greedy faster than both
critical_path and heft (the *best list*) on >= 80% of the instances and <= 0.85 of the best list in
geometric mean; beside them the greedy pass against the best single-pass placer (every
one of critical_path, heft, nest, metis, round_robin, single_device) and agent + search
against anneal at equal budget.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from placegym.envs import simulate
from placegym.envs.suites import get_suite
from placegym.train.experiments.per_graph import (
    SINGLE_PASS,
    _anytime_lines,
    _known,
    _ms,
    cached_baselines,
    collect_rows,
    train_or_load,
)
from placegym.train.experiments.per_graph import baselines as per_graph_baselines
from placegym.train.experiments.targets import TARGETS, verdict
from placegym.train.stats import geomean

__all__ = [
    "BUDGET",
    "PRESET",
    "SPLITS",
    "baselines",
    "generalist_report",
    "generalist_table",
    "run_seed",
]

#: The shipped preset trained (``configs/generalist_rollout.yaml``).
PRESET = "generalist_rollout"
#: ``(suite, split)`` evaluated zero-shot, in order.
SPLITS = (("generalize-v0", "test"), ("comm-heavy-v0", "test"))
#: Simulator calls of every search placer (agent + search, anneal, random search).
BUDGET = 3000
_MARKS = (100, 1000, BUDGET)


def instances(suite: str, split: str) -> list[str]:
    """``SUITE/INSTANCE`` names of a split, in the suite's order."""
    return [f"{suite}/{spec.id}" for _, spec in get_suite(suite).specs(split)]


def run_seed(
    seed: int,
    out: Path,
    splits: Sequence[tuple[str, str]] = SPLITS,
    budget: int = BUDGET,
    overrides: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Train :data:`PRESET` with ``seed`` under ``out`` (or load the finished run), then
    search every instance of ``splits`` with its final weights; the rows (module
    docstring)."""
    from placegym.agents.doppler.search import SearchConfig, policy_search
    from placegym.teachers import get_teacher

    _, results, policy = train_or_load(PRESET, out / f"{PRESET}-s{seed}", seed, overrides)
    rows = []
    for suite, split in splits:
        for inst in get_suite(suite).instances(split):
            g, c = inst.graph, inst.cluster
            cp = simulate(g, c, get_teacher("critical_path").place(g, c)).makespan
            res = policy_search(policy, g, c, SearchConfig(budget=budget), seed=seed)
            marks = [m for m in _MARKS if m <= budget]
            rows.append(
                {
                    "instance": f"{suite}/{inst.id}",
                    "seed": seed,
                    "greedy": res.greedy / cp,
                    "search": res.makespan / cp,
                    "greedy_calls": int(res.stages["greedy"]),
                    "curve": {str(m): float(res.curve[min(m, res.calls) - 1] / cp) for m in marks},
                    "train_seconds": float(results["progress"]["seconds"]),
                }
            )
    return rows


def baselines(name: str, budget: int = BUDGET, seeds: Sequence[int] = (0, 1, 2)) -> dict:
    """:func:`placegym.train.experiments.per_graph.baselines` of instance ``name`` plus the
    ``lookahead`` teacher's ratio to critical_path, plain and fortified with the
    single-pass placers (``fortified``)."""
    from placegym.teachers import get_teacher

    row = per_graph_baselines(name, budget, seeds)
    suite, _, instance = name.partition("/")
    inst = get_suite(suite).instance(instance)
    g, c = inst.graph, inst.cluster
    cp = simulate(g, c, get_teacher("critical_path").place(g, c)).makespan
    row["lookahead"] = simulate(g, c, get_teacher("lookahead").place(g, c)).makespan / cp
    fortified = get_teacher("fortified_lookahead").place(g, c)
    row["fortified"] = simulate(g, c, fortified).makespan / cp
    return row


def _count(xs: Sequence[int]) -> str:
    return f"{np.mean(xs):.1f} ± {np.std(xs):.1f}"


def _beats_both(ratio: float, b: dict[str, Any]) -> bool:
    return ratio < min(b["critical_path"], b["heft"]) * (1 - 1e-9)


def _best_single(b: dict[str, Any]) -> float:
    return min(b[h] for h in SINGLE_PASS)


def generalist_table(rows: Sequence[dict[str, Any]], base: dict[str, dict]) -> str:
    """Per split of :data:`SPLITS` with rows: the per-instance table, the anytime lines
    (geometric mean over instances of the mean over seeds of the best found after 100,
    1,000 and 3,000 calls, ratio to critical_path; agent + search beside anneal and random
    search) and the target checks (module docstring)."""
    seeds = sorted({r["seed"] for r in rows})
    out: list[str] = []
    for suite, split in SPLITS:
        names = [n for n in instances(suite, split) if any(r["instance"] == n for r in rows)]
        if not names:
            continue
        by = {(r["instance"], r["seed"]): r for r in rows}
        out += [
            f"### {suite} {split} ({len(names)} instances, training seeds "
            f"{', '.join(map(str, seeds))})",
            "",
            "| instance | agent greedy | beats both (seeds) | agent+search@3000 | "
            "anneal@3000 | random@3000 | lookahead | fortified lookahead | best list | "
            "best single pass | best known | lower bound | greedy calls |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for n in names:
            b = base[n]
            mine = [by[(n, s)] for s in seeds if (n, s) in by]
            greedy = [r["greedy"] for r in mine]
            out.append(
                f"| {n.split('/', 1)[1]} | {_ms(greedy)} | "
                f"{sum(_beats_both(x, b) for x in greedy)} of {len(mine)} | "
                f"{_ms([r['search'] for r in mine])} | {np.mean(b['anneal']):.3f} | "
                f"{np.mean(b['random_search']):.3f} | {b['lookahead']:.3f} | "
                f"{_fortified(b)} | {min(b['critical_path'], b['heft']):.3f} | "
                f"{_best_single(b):.3f} | {_known(b)} | "
                f"{b['lower_bound']:.3f} | {mine[0]['greedy_calls']:,} |"
            )
        split_rows = [r for r in rows if r["instance"] in names]
        out += ["", *_anytime_lines(split_rows, base, names), ""]
        out += _summary(names, seeds, by, base)
        out.append("")
    return "\n".join(out).rstrip()


def _fortified(b: dict[str, Any]) -> str:
    return "n/a" if b.get("fortified") is None else f"{b['fortified']:.3f}"


def _summary(names, seeds, by, base) -> list[str]:
    """Per seed, then mean ± std over seeds: beats-both count and geometric means."""
    best_list = {n: min(base[n]["critical_path"], base[n]["heft"]) for n in names}
    anneal = {n: float(np.mean(base[n]["anneal"])) for n in names}
    wins, vs_list, vs_cp, search_vs_anneal, search_le, search_list = [], [], [], [], [], []
    single_le, vs_single = [], []
    for s in seeds:
        got = [n for n in names if (n, s) in by]
        if len(got) < len(names):
            continue
        greedy = {n: by[(n, s)]["greedy"] for n in names}
        search = {n: by[(n, s)]["search"] for n in names}
        wins.append(sum(_beats_both(greedy[n], base[n]) for n in names))
        vs_list.append(geomean([greedy[n] / best_list[n] for n in names]))
        vs_cp.append(geomean([greedy[n] for n in names]))
        single_le.append(sum(greedy[n] <= _best_single(base[n]) * (1 + 1e-9) for n in names))
        vs_single.append(geomean([greedy[n] / _best_single(base[n]) for n in names]))
        search_vs_anneal.append(geomean([search[n] / anneal[n] for n in names]))
        search_le.append(sum(search[n] <= anneal[n] * (1 + 1e-9) for n in names))
        search_list.append(geomean([search[n] / best_list[n] for n in names]))
    if not wins:
        return ["(no training seed has rows for every instance)"]
    k = len(names)
    look = geomean([base[n]["lookahead"] / best_list[n] for n in names])
    look_wins = sum(_beats_both(base[n]["lookahead"], base[n]) for n in names)
    anneal_list = geomean([anneal[n] / best_list[n] for n in names])
    share = float(np.mean(wins)) / k
    beat, best = TARGETS["generalist.beats_both_share"], TARGETS["generalist.greedy_vs_best_list"]
    teachers = (
        f"- lookahead teacher: faster than both on {look_wins} of {k}, {look:.3f} of the best list"
    )
    if all(base[n].get("fortified") is not None for n in names):
        fort = geomean([base[n]["fortified"] / best_list[n] for n in names])
        fort_wins = sum(_beats_both(base[n]["fortified"], base[n]) for n in names)
        teachers += f"; fortified: faster than both on {fort_wins} of {k}, {fort:.3f}"
    return [
        f"- zero-shot greedy faster than both critical_path and heft on "
        f"{_count(wins)} of {k} ({share:.0%}; target {beat.bound:.0%}: "
        f"{verdict('generalist.beats_both_share', share)}); per seed "
        f"{', '.join(map(str, wins))}",
        f"- greedy / best list, geometric mean: {_ms(vs_list)} (target {best.bound:.2f}: "
        f"{verdict('generalist.greedy_vs_best_list', float(np.mean(vs_list)))}); "
        f"/ critical_path {_ms(vs_cp)}",
        f"- greedy at most the best single-pass placer (min of {', '.join(SINGLE_PASS)}) on "
        f"{_count(single_le)} of {k}; / that placer, geometric mean: {_ms(vs_single)}",
        f"{teachers}; anneal@3000 {anneal_list:.3f} of the best list",
        f"- agent+search@3000 / anneal@3000, geometric mean: {_ms(search_vs_anneal)}; "
        f"<= anneal on {_count(search_le)} of {k} instances; {_ms(search_list)} of the best "
        f"list",
    ]


def generalist_report(
    out: Path, *, seeds: Sequence[int] = (0, 1, 2), results: Path | None = None
) -> str:
    """The generalist tables: rows read from ``results`` (nothing trained), else from
    ``out/generalist/results.jsonl``, training each missing seed first; baselines cached
    in ``out/generalist/baselines.json``. Also written to ``out/generalist/table.md``."""
    folder = out / "generalist"

    def missing(rows: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
        done = {r["seed"] for r in rows}
        for seed in seeds:
            if seed not in done:
                yield run_seed(seed, folder / "runs")

    rows = collect_rows(folder, results, missing)
    base = cached_baselines(folder, [r["instance"] for r in rows], baselines)
    text = "## The generalist, zero-shot (ratios to critical_path, lower is better)\n\n"
    text += generalist_table(rows, base)
    (folder / "table.md").write_text(text + "\n")
    return text
