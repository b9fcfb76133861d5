"""The generalists: one checkpoint per training seed, zero-shot on unseen test splits.

Each :class:`Study` is a report part: :data:`GENERALIST` (below: the rollout generalist
of ``generalize-v0``'s train split), :data:`ROLLOUT_MEMORY` and :data:`ONEPASS_MEMORY`
(the rollout and one-pass generalists trained with ``memory-tight-v0``'s and
``published-v0``'s train splits too, on those suites' test splits, 10,000 calls: memory
binds, groups must stay whole; an instance that no placement fits is named and left
out). What follows describes :data:`GENERALIST`; the memory studies differ only in
preset, splits, budget and the mask the policy decodes under (:attr:`Study.memory_mask`).

The ``generalist`` part of ``placegym report`` (``make agent-report``). Per training seed
(0, 1, 2; ``restarts=1``), :func:`run_study_seed` trains the shipped preset
:data:`PRESET` (``configs/generalist_rollout.yaml``) and, on every instance of
:data:`ZERO_SHOT_SPLITS` (``generalize-v0``'s test split and, further from the training data,
``comm-heavy-v0``'s: unseen sizes, CCRs and clusters), runs
:func:`~placegym.agents.doppler.search.policy_search` with :data:`BUDGET` simulator calls from the
final weights, searching with the training seed. The search's first stage is the greedy
pass, so one call gives both figures: the greedy makespan (zero-shot, deterministic) and
the best after the whole budget; the calls the greedy pass spent (its lookahead prices,
``n * D``) are in the row. Where memory binds and the greedy pass is over memory, the
greedy column is the pass with reserves raised to fit as the single-pass teachers' are (at
most six more passes under the ``"room"`` mask with tensor reserves raised by the
simulated excess: :func:`~placegym.agents.doppler.decoder.reserved_greedy`); elsewhere it is the
search's greedy pass. One JSON row per (instance, seed), ratios to critical_path.

:func:`generalist_baselines` computes, per instance, what
:func:`placegym.train.experiments.per_graph.baselines` does (the single-pass placers,
``anneal`` and ``random_search`` at the same budget for seeds 0, 1, 2, the lower bound and
the best known) plus the ``lookahead`` teacher, plain and fortified with the single-pass
placers' placements (the teacher the agent imitates). :func:`generalist_table` prints, per
split, every instance with the mean ± std over seeds and the targets
(:data:`~placegym.train.experiments.targets.TARGETS`): greedy faster than both
critical_path and heft (the *best list*) on >= 80% of the instances and <= 0.85 of the best list in
geometric mean; beside them the greedy pass against the best single-pass placer (every
one of critical_path, heft, nest, metis, round_robin, single_device) and agent + search
against anneal at equal budget.

Feasibility as in :mod:`placegym.train.experiments.per_graph`: rows and baselines carry
``feasible`` and ``infeasible`` (``{column: reason}``); an infeasible column is shown as
``OOM``, ``split`` or ``failed``, never enters a best (*best list*, *best single pass*:
the least feasible placer), counts as a loss for the agent ("beats both", "at most"), and
the geometric means are over the instances every compared column solved (the count shown
when it is not all of them); the last row of each table counts feasible instances.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from placegym.envs.core.placement import Placement
from placegym.envs.suites import get_suite
from placegym.teachers import SINGLE_PASS
from placegym.train.experiments.per_graph import (
    _anytime_lines,
    _bound,
    _known,
    _ms,
    agent_why,
    at_most,
    beats_both,
    best_list,
    best_single,
    cached_baselines,
    collect_rows,
    feasibility,
    geomeans_over,
    greedy_placement,
    ratio_of,
    teacher_outcome,
    train_or_load,
    unit,
    why,
)
from placegym.train.experiments.per_graph import baselines as per_graph_baselines
from placegym.train.experiments.studies import (
    BUDGET,
    GENERALIST,
    ONEPASS_MEMORY,
    PRESET,
    ROLLOUT_MEMORY,
    STUDIES,
    ZERO_SHOT_SPLITS,
    Study,
)
from placegym.train.experiments.targets import TARGETS, verdict
from placegym.train.harness.feasibility import MARKS, mark, simulate_outcome
from placegym.train.stats import geomean

__all__ = [
    "BUDGET",
    "ONEPASS_MEMORY",
    "PRESET",
    "ROLLOUT_MEMORY",
    "STUDIES",
    "ZERO_SHOT_SPLITS",
    "Study",
    "generalist_baselines",
    "generalist_report",
    "generalist_table",
    "run_study_seed",
]


def instances(suite: str, split: str) -> list[str]:
    """``SUITE/INSTANCE`` names of a split, in the suite's order."""
    return [f"{suite}/{spec.id}" for _, spec in get_suite(suite).specs(split)]


def run_study_seed(
    seed: int,
    out: Path,
    splits: Sequence[tuple[str, str]] | None = None,
    budget: int | None = None,
    overrides: Sequence[str] = (),
    study: Study = GENERALIST,
) -> list[dict[str, Any]]:
    """Train ``study``'s preset with ``seed`` under ``out`` (or load the finished run),
    then search every instance of ``splits`` (default the study's) with its final
    weights and ``budget`` calls (default the study's); the rows (module docstring)."""
    from placegym.agents.doppler.search import SearchConfig, policy_search

    splits = study.splits if splits is None else splits
    budget = study.budget if budget is None else budget
    preset = study.preset
    _, results, policy = train_or_load(preset, out / f"{preset}-s{seed}", seed, overrides)
    rows = []
    for suite, split in splits:
        for inst in get_suite(suite).instances(split):
            g, c = inst.graph, inst.cluster
            cp = teacher_outcome("critical_path", g, c)
            cfg = SearchConfig(budget=budget, memory_mask=study.memory_mask)
            res = policy_search(policy, g, c, cfg, seed=seed)
            marks = [m for m in study.marks if m <= budget]
            passes: list[Placement] = []
            fitted = greedy_placement(policy, g, c, study.memory_mask, passes)
            greedy = simulate_outcome(g, c, fitted)
            search = simulate_outcome(g, c, res.placement)
            outs = {"greedy": greedy, "search": search}
            failed = {k: o.infeasible for k, o in outs.items() if o.infeasible is not None}
            if not cp.feasible:
                failed["critical_path"] = cp.infeasible or "infeasible"
            ref = unit(cp)
            row = {
                "instance": f"{suite}/{inst.id}",
                "seed": seed,
                "greedy": ratio_of(greedy, cp),
                "search": ratio_of(search, cp),
                # the search's greedy pass, plus the calibration's passes beyond it
                "greedy_calls": int(res.stages["greedy"]) + len(passes) - 1,
                "curve": {
                    str(m): float(res.curve[min(m, res.calls) - 1] / ref) if ref else None
                    for m in marks
                },
                "train_seconds": float(results["progress"]["seconds"]),
            }
            rows.append(feasibility(row, failed))
    return rows


def generalist_baselines(
    name: str, budget: int = BUDGET, seeds: Sequence[int] = (0, 1, 2)
) -> dict:
    """:func:`placegym.train.experiments.per_graph.baselines` of instance ``name`` (search
    placers at ``budget`` calls) plus the ``lookahead`` teacher's ratio to critical_path,
    plain and fortified with the single-pass placers (``fortified``)."""
    row = per_graph_baselines(name, budget, seeds)
    suite, _, instance = name.partition("/")
    inst = get_suite(suite).instance(instance)
    g, c = inst.graph, inst.cluster
    cp = teacher_outcome("critical_path", g, c)
    failed = dict(row.pop("infeasible", {}))
    for key, teacher in (("lookahead", "lookahead"), ("fortified", "fortified_lookahead")):
        out = teacher_outcome(teacher, g, c)
        row[key] = ratio_of(out, cp)
        if out.infeasible is not None:
            failed[key] = out.infeasible
    return feasibility(row, failed)


def _count(xs: Sequence[int]) -> str:
    return f"{np.mean(xs):.1f} ± {np.std(xs):.1f}"


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _solved(n: str, mine: list[dict[str, Any]], b: dict[str, Any]) -> bool:
    """Every compared column feasible on instance ``n``: agent greedy and search (every
    seed), anneal, lookahead, fortified lookahead (where computed), a best list and a
    best single pass."""
    agent = all(agent_why(mine, k) is None for k in ("greedy", "search"))
    base = all(why(b, k) is None for k in ("anneal", "lookahead"))
    fortified = b.get("fortified") is None and "fortified" not in (b.get("infeasible") or {})
    base = base and (fortified or why(b, "fortified") is None)
    return agent and base and best_list(b) is not None and best_single(b) is not None


def generalist_table(
    rows: Sequence[dict[str, Any]], base: dict[str, dict], study: Study = GENERALIST
) -> str:
    """Per split of ``study`` with rows: the per-instance table, the anytime lines
    (geometric mean over instances of the mean over seeds of the best found after 100,
    1,000 and the budget's calls, ratio to critical_path; agent + search beside anneal and
    random search) and the target checks (module docstring). Instances that no placement
    fits (:func:`~placegym.envs.analysis.memory.memory_infeasibility`) are named and left out of
    the table and its counts."""
    from placegym.envs.analysis.memory import memory_infeasibility

    seeds = sorted({r["seed"] for r in rows})
    at = f"@{study.budget}"
    out: list[str] = []
    for suite, split in study.splits:
        names = [n for n in instances(suite, split) if any(r["instance"] == n for r in rows)]
        if not names:
            continue
        unfit = {}
        for inst in get_suite(suite).instances(split):
            name = f"{suite}/{inst.id}"
            if name in names:
                why_not = memory_infeasibility(inst.graph, inst.cluster)
                if why_not is not None:
                    unfit[name] = why_not
        names = [n for n in names if n not in unfit]
        by = {(r["instance"], r["seed"]): r for r in rows}
        out += [
            f"### {suite} {split} ({len(names)} instances, training seeds "
            f"{', '.join(map(str, seeds))})",
            "",
        ]
        if unfit:
            out += [
                "Left out, no placement fits: "
                + "; ".join(f"{n.split('/', 1)[1]} ({w})" for n, w in unfit.items()),
                "",
            ]
        out += [
            f"| instance | agent greedy | beats both (seeds) | agent+search{at} | "
            f"anneal{at} | random{at} | lookahead | fortified lookahead | best list | "
            "best single pass | best known | lower bound | greedy calls |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        counts = dict.fromkeys(_COUNTED, 0)
        solved = []
        for n in names:
            b = base[n]
            mine = [by[(n, s)] for s in seeds if (n, s) in by]
            cells = _instance_cells(b, mine)
            counts = {k: v + (cells[k] not in MARKS) for k, v in counts.items()}
            if _solved(n, mine, b):
                solved.append(n)
            out.append(
                f"| {n.split('/', 1)[1]} | {cells['greedy']} | "
                f"{sum(beats_both(r['greedy'], b) for r in mine)} of {len(mine)} | "
                f"{cells['search']} | {cells['anneal']} | {cells['random_search']} | "
                f"{cells['lookahead']} | {cells['fortified']} | {_num(best_list(b))} | "
                f"{_num(best_single(b))} | {_known(b)} | "
                f"{_bound(b)} | {mine[0]['greedy_calls']:,} |"
            )
        k = len(names)
        out.append(
            f"| feasible | {counts['greedy']}/{k} | | {counts['search']}/{k} | "
            f"{counts['anneal']}/{k} | {counts['random_search']}/{k} | "
            f"{counts['lookahead']}/{k} | {counts['fortified']}/{k} | | | | | |"
        )
        split_rows = [r for r in rows if r["instance"] in names]
        out += ["", *_anytime_lines(split_rows, base, solved), ""]
        out += _summary(names, seeds, by, base, solved, at)
        out.append("")
    return "\n".join(out).rstrip()


#: Columns whose feasible instances the tables count.
_COUNTED = ("greedy", "search", "anneal", "random_search", "lookahead", "fortified")


def _instance_cells(b: dict[str, Any], mine: list[dict[str, Any]]) -> dict[str, str]:
    """The agent and baseline cells of one instance (marks where infeasible)."""
    out = {}
    for k in ("greedy", "search"):
        bad = agent_why(mine, k)
        out[k] = mark(bad) if bad else _ms([r[k] for r in mine])
    for k in ("anneal", "random_search", "lookahead"):
        bad = why(b, k)
        out[k] = mark(bad) if bad else f"{np.mean(b[k]):.3f}"
    out["fortified"] = _fortified(b)
    return out


def _fortified(b: dict[str, Any]) -> str:
    bad = (b.get("infeasible") or {}).get("fortified")
    if bad is not None:
        return mark(bad)
    return "n/a" if b.get("fortified") is None else f"{b['fortified']:.3f}"


def _summary(names, seeds, by, base, solved, at="@3000") -> list[str]:
    """Per seed, then mean ± std over seeds: beats-both and at-most counts over every
    instance (an infeasible agent column loses), geometric means over ``solved`` (the
    instances every compared column solved)."""
    lists = {n: _solved_value(best_list(base[n])) for n in solved}
    anneal = {n: float(np.mean(base[n]["anneal"])) for n in solved}
    wins, vs_list, vs_cp, search_vs_anneal, search_le, search_list = [], [], [], [], [], []
    single_le, vs_single = [], []
    for s in seeds:
        got = [n for n in names if (n, s) in by]
        if len(got) < len(names):
            continue
        greedy = {n: by[(n, s)]["greedy"] for n in names}
        search = {n: by[(n, s)]["search"] for n in names}
        wins.append(sum(beats_both(greedy[n], base[n]) for n in names))
        vs_list.append(geomean([greedy[n] / lists[n] for n in solved]))
        vs_cp.append(geomean([greedy[n] for n in solved]))
        single_le.append(sum(at_most(greedy[n], best_single(base[n])) for n in names))
        vs_single.append(
            geomean([greedy[n] / _solved_value(best_single(base[n])) for n in solved])
        )
        search_vs_anneal.append(geomean([search[n] / anneal[n] for n in solved]))
        search_le.append(sum(at_most(search[n], _anneal(base[n])) for n in names))
        search_list.append(geomean([search[n] / lists[n] for n in solved]))
    if not wins:
        return ["(no training seed has rows for every instance)"]
    k = len(names)
    gm = geomeans_over(len(solved), k)
    look = geomean([base[n]["lookahead"] / lists[n] for n in solved])
    look_wins = sum(beats_both(_ok(base[n], "lookahead"), base[n]) for n in names)
    anneal_list = geomean([anneal[n] / lists[n] for n in solved])
    share = float(np.mean(wins)) / k
    beat, best = TARGETS["generalist.beats_both_share"], TARGETS["generalist.greedy_vs_best_list"]
    teachers = (
        f"- lookahead teacher: faster than both on {look_wins} of {k}, {look:.3f} of the best list"
    )
    if all(base[n].get("fortified") is not None for n in solved) and solved:
        fort = geomean([base[n]["fortified"] / lists[n] for n in solved])
        fort_wins = sum(beats_both(_ok(base[n], "fortified"), base[n]) for n in names)
        teachers += f"; fortified: faster than both on {fort_wins} of {k}, {fort:.3f}"
    lines = [
        f"- zero-shot greedy faster than both critical_path and heft on "
        f"{_count(wins)} of {k} ({share:.0%}; target {beat.bound:.0%}: "
        f"{verdict('generalist.beats_both_share', share)}); per seed "
        f"{', '.join(map(str, wins))}",
        f"- greedy / best list, geometric mean: {_ms(vs_list)} (target {best.bound:.2f}: "
        f"{verdict('generalist.greedy_vs_best_list', float(np.mean(vs_list)))}); "
        f"/ critical_path {_ms(vs_cp)}",
        f"- greedy at most the best single-pass placer (min of {', '.join(SINGLE_PASS)}) on "
        f"{_count(single_le)} of {k}; / that placer, geometric mean: {_ms(vs_single)}",
        f"{teachers}; anneal{at} {anneal_list:.3f} of the best list",
        f"- agent+search{at} / anneal{at}, geometric mean: {_ms(search_vs_anneal)}; "
        f"<= anneal on {_count(search_le)} of {k} instances; {_ms(search_list)} of the best "
        f"list",
    ]
    if len(solved) < k:
        lines.append(f"- geometric means over {gm}")
    return lines


def _solved_value(x: float | None) -> float:
    """A value that is known on a solved instance."""
    assert x is not None, "solved instances have every compared value"
    return x


def _ok(b: dict[str, Any], key: str) -> float | None:
    """``b[key]``, None where that column is infeasible."""
    return None if why(b, key) is not None else b[key]


def _anneal(b: dict[str, Any]) -> float | None:
    return None if why(b, "anneal") is not None else float(np.mean(b["anneal"]))


def generalist_report(
    out: Path,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    results: Path | None = None,
    study: Study = GENERALIST,
) -> str:
    """``study``'s tables: rows read from ``results`` (nothing trained), else from
    ``out/PART/results.jsonl``, training each missing seed first (its run in
    ``out/PART/runs/PRESET-sSEED``; a finished one is loaded); baselines cached in
    ``out/PART/baselines.json``. Also written to ``out/PART/table.md``."""
    folder = out / study.part

    def missing(rows: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
        done = {r["seed"] for r in rows}
        for seed in seeds:
            if seed not in done:
                yield run_study_seed(seed, folder / "runs", study=study)

    rows = collect_rows(folder, results, missing)
    base = cached_baselines(
        folder / "baselines.json",
        [r["instance"] for r in rows],
        lambda n: generalist_baselines(n, study.budget),
    )
    text = f"## {study.title} (ratios to critical_path, lower is better)\n\n"
    text += generalist_table(rows, base, study)
    (folder / "table.md").write_text(text + "\n")
    return text
