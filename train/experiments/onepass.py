"""The one-pass agent's evaluation: its greedy placement, one pass and no simulator call,
and anneal warm-started by it, per training seed, on unseen test splits, beside the
heuristics, the fortified lookahead, anneal and random search at equal calls and at
equal seconds.

::

    python -m placegym.train.experiments.onepass run CHECKPOINT --seed 0
    python -m placegym.train.experiments.onepass table

(``run --memory-mask live`` decodes under that mask instead of the policy's training
mask: a shipped agent beside policies trained under another.)

``run`` appends a row per instance of :data:`SPLITS` to ``--rows`` (default
``docs/results/onepass.jsonl``; an instance already there for that seed is skipped: a
killed run resumes) and computes the missing deterministic baselines into
``--baselines`` (default ``docs/results/onepass.baselines.json``); ``table`` prints the
tables from those two files alone (the ``onepass`` block of the results page:
:mod:`placegym.train.experiments.pages`).

**A row** (one instance, one training seed ``s``), measured in one process, one after
the other, on one torch thread:

- ``greedy``: the policy's greedy placement by the one-pass decode
  (:func:`~placegym.agents.doppler.onepass.one_pass_greedy`, under the memory mask the
  policy was trained under), its makespan / critical_path's (None where it is over
  memory: then ``greedy_oom``), its wall seconds (``greedy_seconds``: inputs, hints and
  decode) and the simulator calls it made (``greedy_calls``, counted by
  :mod:`placegym.train.harness.calls`: 0 by construction, checked);
- ``anneal``, ``random_search`` (:mod:`placegym.train.harness.anytime`, seed ``s``) and
  ``warm`` (anneal warm-started by the greedy placement:
  :func:`~placegym.train.harness.agent_search.warm_anneal`), each with :data:`BUDGET`
  calls: its trace, ``[calls, seconds, ratio]`` at every improvement (ratio None while
  infeasible), its final ratio and wall seconds.

**Baselines** (deterministic, once per instance): the ratios of the single-pass placers
(:data:`~placegym.teachers.SINGLE_PASS`), of ``heft_lookahead`` (:data:`EXTRA`: HEFT's
lookahead variant, also single-pass, kept outside the best single-pass placer so that
that figure means what it meant before) and of ``fortified_lookahead`` (the teacher),
with its seconds, and ``fits``: whether any placer here found a placement within
memory (where none did, no placement is known to fit, and the greedy placement's memory
is not held against it).

**Tables**: per split, mean ± std over seeds of: the share of instances where greedy is
faster than both critical_path and heft, greedy / best single-pass placer (geometric
mean), greedy / fortified lookahead, greedy / heft_lookahead and how often
heft_lookahead itself is faster than both, anneal and random search read at the greedy pass's
seconds (equal seconds; at its zero calls they have not started; an instance where the
search has no feasible placement yet by then, its heuristic starts still running, is
left out of that mean and counted in the next row), the share of runs where
warm is no slower than anneal's run of the same seed at anneal's calls and at its
seconds (:func:`~placegym.train.harness.anytime_report.versus`), the greedy placements over
memory where some placement fits, and the decode's seconds per 1,000 nodes (its
seconds over the split's instances per 1,000 of their nodes; a small graph's fixed costs,
the hints and the encoder, dominate its own rate) and the slowest instance's seconds;
for an agent with a proposal selector (``run --selector``), the greedy placement is the
selector's choice (:func:`~placegym.agents.doppler.selector.one_pass_select`: its
seconds included, its polish too where the selector polishes) and a row gives how often
it is a proposal's placement (a hint's or a rule rollout's), not the policy's own, and,
for a selector that polishes, another how often the polish changed it (``polished``).
Ratios are to critical_path; an infeasible greedy placement counts as a loss
in the shares, and each geometric mean is over the instances where both of its sides are
feasible (the greedy placements over memory have their own row).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from placegym.envs.mdp.state import MEMORY_MASKS
from placegym.envs.suites import get_suite
from placegym.teachers import SINGLE_PASS
from placegym.train.experiments.per_graph import (
    at_most,
    beats_both,
    best_feasible,
    best_single,
    cached_baselines,
    ratio_of,
    read_rows,
    teacher_outcome,
    unit,
)
from placegym.train.experiments.targets import TARGETS, verdict
from placegym.train.stats import geomean

__all__ = ["BUDGET", "SPLITS", "baselines", "onepass_table", "run_seed"]

#: ``(suite, split)`` evaluated, in order: none of their instances is ever trained on.
SPLITS = (
    ("generalize-v0", "test"),
    ("comm-heavy-v0", "test"),
    ("memory-tight-v0", "test"),
    ("training-v0", "test"),
    ("pipedream-v0", "test"),
)
#: Simulator calls of every search (anneal, random search, warm-started anneal).
BUDGET = 3000
#: Where :func:`run_seed` appends its rows and stores the baselines by default.
ROWS = Path("docs/results/onepass.jsonl")
BASELINES = Path("docs/results/onepass.baselines.json")
#: The searches of a row, by column.
SEARCHES = ("anneal", "random_search", "warm")
#: Heuristics in the baselines beside the single-pass placers, outside the best
#: single-pass placer's minimum (which stays over :data:`~placegym.teachers.SINGLE_PASS`):
#: ``heft_lookahead``, the rule a policy with ``PolicyConfig.successors`` imitates.
EXTRA = ("heft_lookahead",)
#: The cheap placers whose fastest per instance (by simulation) the tables report as a
#: bound: a policy that chooses one of them per instance and follows it on every node
#: (as it learns to from the ``best_list`` teacher with these candidates) cannot do
#: better than this.
CHOICE = ("heft_lookahead", "nest", "metis")


def choice_of(b: dict[str, Any]) -> float | None:
    """The least ratio in ``b`` of the feasible :data:`CHOICE` placers (None: none)."""
    h = best_feasible(b, CHOICE)
    return None if h is None else b[h]


def baselines(name: str) -> dict[str, Any]:
    """The deterministic baselines of instance ``name`` (``SUITE/INSTANCE``; module
    docstring): ratios to critical_path (None: over memory or failed), the fortified
    lookahead's seconds and ``fits``."""
    suite, _, instance = name.partition("/")
    inst = get_suite(suite).instance(instance)
    g, c = inst.graph, inst.cluster
    outs = {h: teacher_outcome(h, g, c) for h in (*SINGLE_PASS, *EXTRA)}
    t0 = time.perf_counter()
    outs["fortified_lookahead"] = teacher_outcome("fortified_lookahead", g, c)
    seconds = time.perf_counter() - t0
    cp = outs["critical_path"]
    row: dict[str, Any] = {h: ratio_of(o, cp) for h, o in outs.items()}
    row["fortified_lookahead_seconds"] = seconds
    row["fits"] = any(o.feasible for o in outs.values())
    row["nodes"], row["devices"] = g.num_nodes, c.num_devices
    return row


def extra_baselines(path: Path) -> dict[str, dict]:
    """Add the :data:`EXTRA` heuristics' ratios to every instance of the baselines file
    ``path`` that lacks them (baselines stored before they were measured; written after
    each instance); returns the baselines."""
    base = json.loads(path.read_text())
    for name, row in base.items():
        missing = [h for h in EXTRA if h not in row]
        if not missing:
            continue
        suite, _, instance = name.partition("/")
        inst = get_suite(suite).instance(instance)
        g, c = inst.graph, inst.cluster
        cp = teacher_outcome("critical_path", g, c)
        for h in missing:
            row[h] = ratio_of(teacher_outcome(h, g, c), cp)
            row["fits"] = row["fits"] or row[h] is not None
        path.write_text(json.dumps(base, indent=1))
    return base


def _trace_row(trace: Any, ref: float | None) -> list[list[float | None]]:
    """``[calls, seconds, ratio]`` of each point of ``trace`` (ratio None where the best
    or critical_path is infeasible)."""
    return [
        [c, t, None if ref is None or not ok else b / ref]
        for c, b, ok, t in zip(trace.calls, trace.best, trace.feasible, trace.seconds)
    ]


def run_seed(
    checkpoint: str,
    seed: int,
    path: Path = ROWS,
    baselines_path: Path = BASELINES,
    splits: Sequence[tuple[str, str]] = SPLITS,
    budget: int = BUDGET,
    memory_mask: str | None = None,
    selector: str | None = None,
) -> list[dict[str, Any]]:
    """Rows of ``checkpoint`` (a training run's checkpoint or ``pretrained:NAME``) with
    searches of ``budget`` calls seeded ``seed``, on every instance of ``splits`` not yet
    in ``path`` for that seed (appended as each is done), and the baselines of every
    instance there into ``baselines_path``; returns the new rows. ``memory_mask``: decode
    under this mask instead of the policy's training mask; ``selector``: a saved
    :class:`~placegym.agents.doppler.selector.ProposalSelector` the greedy placement goes
    through (a shipped agent's card's by default), the proposal it took in ``chosen``."""
    from placegym.train.evaluate import load_agent
    from placegym.train.harness.agent_search import warm_anneal
    from placegym.train.harness.anytime import SEARCH_PLACERS, Trace
    from placegym.train.harness.calls import counting, patched, uncounted
    from placegym.train.harness.feasibility import simulate_outcome

    path.parent.mkdir(parents=True, exist_ok=True)
    done = {(r["instance"], r["seed"]) for r in read_rows(path)} if path.is_file() else set()
    agent = load_agent(
        checkpoint, threads=1, one_pass=True, memory_mask=memory_mask, selector=selector
    )
    searches = {**SEARCH_PLACERS, "warm": warm_anneal(agent, threads=1)}
    new = []
    with patched():
        for suite, split in splits:
            for inst in get_suite(suite).instances(split):
                name = f"{suite}/{inst.id}"
                if (name, seed) in done:
                    continue
                g, c = inst.graph, inst.cluster
                with uncounted():
                    cp = teacher_outcome("critical_path", g, c)
                ref = unit(cp)
                t0 = time.perf_counter()
                with counting() as calls:  # the agent places on its one torch thread
                    placement = agent.place(g, c)
                seconds = time.perf_counter() - t0
                if calls.calls:
                    raise RuntimeError(f"{name}: the one-pass decode made {calls.calls} calls")
                with uncounted():
                    greedy = simulate_outcome(g, c, placement)
                row: dict[str, Any] = {
                    "instance": name,
                    "seed": seed,
                    "checkpoint": str(checkpoint),
                    "nodes": g.num_nodes,
                    "devices": c.num_devices,
                    "greedy": ratio_of(greedy, cp),
                    "greedy_oom": bool(greedy.oom),
                    "greedy_infeasible": greedy.infeasible,
                    "greedy_seconds": seconds,
                    "greedy_calls": calls.calls,
                    "budget": budget,
                }
                if agent.selector is not None:
                    row["chosen"] = agent.last_choice
                    row["polished"] = agent.last_polished
                for key in SEARCHES:
                    trace = Trace(budget)
                    t0 = time.perf_counter()
                    with counting(budget):
                        found = searches[key](g, c, budget, seed, trace)
                    row[f"{key}_seconds"] = time.perf_counter() - t0
                    with uncounted():
                        final = simulate_outcome(g, c, found)
                    row[key] = ratio_of(final, cp)
                    row[f"{key}_trace"] = _trace_row(trace, ref)
                new.append(row)
                with path.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
    cached_baselines(baselines_path, [r["instance"] for r in read_rows(path)], baselines)
    extra_baselines(baselines_path)
    return new


def at_seconds(trace: list[list[Any]], seconds: float) -> float | None:
    """The best ratio a stored trace reached within ``seconds`` (None: none feasible)."""
    return _at(trace, 1, seconds)


def at_calls(trace: list[list[Any]], calls: int) -> float | None:
    """The best ratio a stored trace reached within ``calls`` calls."""
    return _at(trace, 0, calls)


def _at(trace: list[list[Any]], column: int, limit: float) -> float | None:
    """The last ratio of a stored trace whose ``column`` (0 calls, 1 seconds) is within
    ``limit`` (None before the first)."""
    best = None
    for point in trace:
        if point[column] > limit:
            break
        best = point[2]
    return best


def _ms(xs: Sequence[float]) -> str:
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    return f"{np.mean(xs):.3f} ± {np.std(xs):.3f}" if xs else "n/a"


def _share(xs: Sequence[float]) -> str:
    xs = [x for x in xs if math.isfinite(x)]
    return f"{np.mean(xs):.0%} ± {np.std(xs):.0%}" if xs else "n/a"


def _geo(pairs: list[tuple[float | None, float | None]]) -> float:
    ok = [a / b for a, b in pairs if a is not None and b is not None]
    return geomean(ok) if ok else math.nan


def split_summary(rows: list[dict[str, Any]], base: dict[str, dict]) -> dict[str, list[float]]:
    """Per figure of the summary table, its value per seed (module docstring)."""
    figures: dict[str, list[float]] = {}
    for seed in sorted({r["seed"] for r in rows}):
        mine = [r for r in rows if r["seed"] == seed]
        b = [base[r["instance"]] for r in mine]
        vals = {
            "beats_both": np.mean([beats_both(r["greedy"], x) for r, x in zip(mine, b)]),
            "vs_best_single": _geo([(r["greedy"], best_single(x)) for r, x in zip(mine, b)]),
            "vs_fortified": _geo(
                [(r["greedy"], x["fortified_lookahead"]) for r, x in zip(mine, b)]
            ),
            "fortified_vs_best_single": _geo(
                [(x["fortified_lookahead"], best_single(x)) for x in b]
            ),
            "vs_heft_lookahead": _geo(
                [(r["greedy"], x.get("heft_lookahead")) for r, x in zip(mine, b)]
            ),
            "heft_lookahead_beats_both": np.mean(
                [beats_both(x.get("heft_lookahead"), x) for x in b]
                if all("heft_lookahead" in x for x in b)
                else [math.nan]
            ),
            "choice_vs_best_single": _geo([(choice_of(x), best_single(x)) for x in b]),
            "choice_beats_both": np.mean(
                [beats_both(choice_of(x), x) for x in b]
                if all("heft_lookahead" in x for x in b)
                else [math.nan]
            ),
            "vs_anneal_at_seconds": _geo(
                [(r["greedy"], at_seconds(r["anneal_trace"], r["greedy_seconds"])) for r in mine]
            ),
            "vs_random_at_seconds": _geo(
                [
                    (r["greedy"], at_seconds(r["random_search_trace"], r["greedy_seconds"]))
                    for r in mine
                ]
            ),
            "anneal_not_ready": float(
                sum(at_seconds(r["anneal_trace"], r["greedy_seconds"]) is None for r in mine)
            ),
            "vs_anneal_at_budget": _geo([(r["greedy"], r["anneal"]) for r in mine]),
            "warm_vs_anneal": _geo([(r["warm"], r["anneal"]) for r in mine]),
            "warm_le_anneal_calls": np.mean(
                [at_most(at_calls(r["warm_trace"], r["budget"]), r["anneal"]) for r in mine]
            ),
            "warm_le_anneal_seconds": np.mean(
                [
                    at_most(at_seconds(r["warm_trace"], r["anneal_seconds"]), r["anneal"])
                    for r in mine
                ]
            ),
            "over_memory": float(sum(r["greedy_oom"] and x["fits"] for r, x in zip(mine, b))),
            "seconds_per_1k": 1000
            * sum(r["greedy_seconds"] for r in mine)
            / sum(r["nodes"] for r in mine),
            "slowest_decode": max(r["greedy_seconds"] for r in mine),
            "taken": np.mean([r["chosen"] is not None for r in mine])
            if all("chosen" in r for r in mine)
            else math.nan,
            "polished": np.mean([r["polished"] for r in mine])
            if all("polished" in r for r in mine)
            else math.nan,
        }
        for k, v in vals.items():
            figures.setdefault(k, []).append(float(v))
    return figures


#: The summary's figures: label, format ("ratio", "share", "count", "seconds").
FIGURES = (
    ("beats_both", "greedy faster than both critical_path and heft (share)", "share"),
    ("vs_best_single", "greedy / best single-pass placer (geo. mean)", "ratio"),
    ("vs_fortified", "greedy / fortified lookahead (geo. mean)", "ratio"),
    ("fortified_vs_best_single", "fortified lookahead / best single-pass (geo. mean)", "ratio"),
    ("vs_heft_lookahead", "greedy / heft_lookahead (geo. mean)", "ratio"),
    (
        "heft_lookahead_beats_both",
        "heft_lookahead faster than both critical_path and heft (share)",
        "share",
    ),
    (
        "choice_vs_best_single",
        "per instance the fastest of heft_lookahead, nest, metis / best single-pass",
        "ratio",
    ),
    (
        "choice_beats_both",
        "per instance the fastest of heft_lookahead, nest, metis faster than both (share)",
        "share",
    ),
    ("vs_anneal_at_seconds", "greedy / anneal at the greedy pass's seconds", "ratio"),
    ("vs_random_at_seconds", "greedy / random search at the greedy pass's seconds", "ratio"),
    ("anneal_not_ready", "anneal without a placement at the greedy pass's seconds", "count"),
    ("vs_anneal_at_budget", f"greedy / anneal at {BUDGET:,} calls", "ratio"),
    ("warm_vs_anneal", f"warm-started anneal / anneal, both {BUDGET:,} calls", "ratio"),
    ("warm_le_anneal_calls", "warm-started anneal ≤ anneal at equal calls (share)", "share"),
    ("warm_le_anneal_seconds", "warm-started anneal ≤ anneal at equal seconds (share)", "share"),
    ("over_memory", "greedy over memory where a placement fits (instances)", "count"),
    ("seconds_per_1k", "decode seconds per 1,000 nodes (all the split's instances)", "seconds"),
    ("slowest_decode", "slowest decode of an instance", "seconds"),
    ("taken", "greedy is a proposal the selector took, not the policy's own (share)", "share"),
    ("polished", "greedy is the kept placement changed by the polish (share)", "share"),
)
#: Figures shown only where the rows have them (``taken``: rows of an agent with a
#: proposal selector, whose ``chosen`` names the proposal it took; ``polished``: rows
#: that say whether the selector's polish changed the kept placement).
OPTIONAL = frozenset({"taken", "polished"})

#: The targets checked (:data:`~placegym.train.experiments.targets.TARGETS`), by figure.
CHECKED = {
    "beats_both": "onepass.beats_both_share",
    "vs_best_single": "onepass.greedy_vs_best_single",
    "warm_le_anneal_seconds": "onepass.warm_at_equal_seconds_share",
    "over_memory": "onepass.over_memory",
    "seconds_per_1k": "onepass.seconds_per_1k_nodes",
}


def _cell(kind: str, xs: list[float]) -> str:
    if kind == "share":
        return _share(xs)
    if kind == "count":
        return f"{max(xs):.0f} (worst seed)"
    if kind == "seconds":
        return f"{max(xs):.2f} s (worst seed)"
    return _ms(xs)


def _value(kind: str, x: float) -> str:
    return {"share": f"{x:.0%}", "count": f"{x:.0f}", "seconds": f"{x:.2f} s"}.get(
        kind, f"{x:.3f}"
    )


def onepass_table(
    rows: list[dict[str, Any]], base: dict[str, dict], over: str = "training seeds"
) -> str:
    """The summary table, a column per split (module docstring), then the targets;
    ``over``: what the rows' seeds are (the searches' seeds of a policy not trained here)."""
    splits = list(dict.fromkeys(r["instance"].split("/")[0] for r in rows))
    per = {
        s: split_summary([r for r in rows if r["instance"].startswith(s + "/")], base)
        for s in splits
    }
    seeds = sorted({r["seed"] for r in rows})
    counts = {
        s: len({r["instance"] for r in rows if r["instance"].startswith(s + "/")}) for s in splits
    }
    head = " | ".join(f"{s} ({counts[s]})" for s in splits)
    lines = [
        f"Mean ± std over {over} {', '.join(map(str, seeds))}; ratios to "
        "critical_path's makespan, lower is better.",
        "",
        f"| figure | {head} |",
        "|---|" + "---|" * len(splits),
    ]
    for key, label, kind in FIGURES:
        if key in OPTIONAL and not any(math.isfinite(x) for s in splits for x in per[s][key]):
            continue
        cells = " | ".join(_cell(kind, per[s][key]) for s in splits)
        lines.append(f"| {label} | {cells} |")
    lines += ["", "| target | " + " | ".join(splits) + " |", "|---|" + "---|" * len(splits)]
    for key, name in CHECKED.items():
        kind = next(k for f, _, k in FIGURES if f == key)
        target = TARGETS[name]
        verdicts = []
        for s in splits:
            xs = per[s][key]
            worst = max(xs) if target.sense == "<=" else min(xs)
            verdicts.append(f"{_value(kind, worst)} {verdict(name, worst)}")
        head = f"{target.figure} {target.sense} {target.bound:g} (worst seed)"
        lines.append(f"| {head} | " + " | ".join(verdicts) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``run`` or ``table`` (module docstring)."""
    p = argparse.ArgumentParser(prog="python -m placegym.train.experiments.onepass")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="evaluate a checkpoint with one seed (appends rows)")
    r.add_argument("checkpoint")
    r.add_argument("--seed", type=int, required=True)
    r.add_argument(
        "--memory-mask",
        choices=MEMORY_MASKS,
        help="decode under this mask (default: the policy's training mask)",
    )
    r.add_argument(
        "--selector", help="a saved proposal selector the greedy placement goes through"
    )
    t = sub.add_parser("table", help="print the tables from the stored rows and baselines")
    for q in (r, t):
        q.add_argument("--rows", type=Path, default=ROWS, help=f"rows file (default {ROWS})")
        q.add_argument(
            "--baselines", type=Path, default=BASELINES, help=f"baselines (default {BASELINES})"
        )
    args = p.parse_args(argv)
    if args.cmd == "run":
        rows = run_seed(
            args.checkpoint,
            args.seed,
            args.rows,
            args.baselines,
            memory_mask=args.memory_mask,
            selector=args.selector,
        )
        print(f"{len(rows)} new rows in {args.rows}")
        return 0
    base = json.loads(args.baselines.read_text())
    print(onepass_table(read_rows(args.rows), base))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
