"""``placegym anytime``: best makespan vs simulator calls of search placers on a suite.

::

    placegym anytime --suite comm-heavy-v0 --split test --budget 3000 --seeds 0,1,2
    placegym anytime --suite comm-heavy-v0 --placer mymod:MySearch --budget 3000
    placegym anytime --suite generalize-v0 --split test --warm runs/onepass/checkpoints/best.pt

Writes ``anytime.csv``, ``anytime_curve.csv`` and ``anytime.png``
(:mod:`placegym.train.harness.anytime`) and prints the curves at a few budgets, over the
instances on which every run ended feasible (how many of all is in the heading), with
each placer's wall time and simulator calls (``time``, ``calls``: summed over its runs)
and feasible runs (``feasible``: runs whose final placement is feasible / all).
``--placer SPEC`` adds a search placer of your own (:mod:`placegym.train.harness.plugins`);
``--warm CKPT`` adds anneal warm-started by an agent's greedy placement (``<run>-anneal``,
:func:`~placegym.train.harness.agent_search.agent_anneal_placer`). With ``anneal`` among
the placers, a second table counts, per placer, the runs that end no slower than anneal's
run of the same instance and seed, read at anneal's calls and at anneal's wall seconds
(:func:`~placegym.train.harness.anytime_report.versus`).
"""

from __future__ import annotations

import argparse
from typing import Any

from placegym.train.cli.bench import PLACER_HELP, add_progress_args


def cmd_anytime(args: argparse.Namespace) -> int:
    """Anytime curves of search placers over a suite split (CSV and PNG)."""
    import numpy as np

    from placegym.envs.suites import get_suite
    from placegym.train.cli.bench import _csv, _seeds, progress_mode, torch_threads
    from placegym.train.cli.outputs import check_folder
    from placegym.train.harness.agent_search import agent_anneal_placer, agent_search_placer
    from placegym.train.harness.anytime import (
        SEARCH_PLACERS,
        call_grid,
        feasible_runs,
        register_search_placer,
        run_anytime,
        solved_instances,
        write_anytime,
    )
    from placegym.train.harness.anytime_report import versus
    from placegym.train.harness.feasibility import over
    from placegym.train.harness.plugins import load_placers

    suite = get_suite(args.suite)
    out = check_folder(args.out)  # refused now, naming --out, not after the run
    placers = _csv(args.placers)
    added = []
    try:
        for path in _csv(args.agents):
            name, placer = agent_search_placer(path, threads=torch_threads(args))
            register_search_placer(name, placer)
            added.append(name)
        for path in _csv(args.warm):
            name, placer = agent_anneal_placer(path, threads=torch_threads(args))
            register_search_placer(name, placer)
            added.append(name)
        for name, placer in load_placers(args.placer, set(SEARCH_PLACERS)).items():
            register_search_placer(name, placer)
            added.append(name)
        runs, normalizer = run_anytime(
            suite,
            args.split,
            placers + added,
            budget=args.budget,
            seeds=_seeds(args.seeds),
            progress=progress_mode(args),
            torch_threads=torch_threads(args),
        )
    finally:  # this command's placers are registered for its run only
        for name in added:
            SEARCH_PLACERS.pop(name, None)
    solved, every = solved_instances(runs)
    n, k = len(every), len(solved)
    some = f"{k} of {n}" if k < n else f"{n}"
    title = f"{suite.name} {args.split or 'all'}: {some} instances, seeds {args.seeds}"
    cv = write_anytime(runs, out, budget=args.budget, normalizer=normalizer, title=title)
    print(f"best makespan / {normalizer}, geometric mean over {over(k, n)}, mean ± std over seeds")
    marks = [c for c in (10, 100, 1000, 10000) if c < args.budget] + [args.budget]
    grid = call_grid(args.budget)
    feasible = feasible_runs(runs)
    head = " | ".join(f"{c} calls" for c in marks)
    print(f"| placer | {head} | time | calls | feasible |")
    print("|---|" + "---|" * (len(marks) + 3))
    for name, (mean, std) in cv.items():
        cells = []
        for c in marks:
            i = int(np.searchsorted(grid, c, side="right")) - 1
            cells.append(f"{mean[i]:.3f} ± {std[i]:.3f}" if np.isfinite(mean[i]) else "n/a")
        mine = [r for r in runs if r.placer == name]
        cost = f"{sum(r.seconds for r in mine):.1f} s | {sum(r.calls for r in mine)}"
        print(f"| {name} | " + " | ".join(cells) + f" | {cost} | {feasible[name]} |")
    if "anneal" in placers and len(cv) > 1:
        print_versus(versus(runs, "anneal"))
    for r in runs:
        if not r.feasible:
            print(f"infeasible: {r.instance}, {r.placer}, seed {r.seed}: {r.infeasible}")
    print(f"\nwritten: {out}/anytime.csv, anytime_curve.csv, anytime.png")
    return 0


def print_versus(table: dict) -> None:
    """The runs no slower than anneal's at its calls and at its seconds, per placer."""
    print("\nruns no slower than anneal's run (same instance and seed), at its calls / seconds")
    print("| placer | at equal calls | at equal seconds |")
    print("|---|---|---|")
    for name, v in table.items():
        cells = [
            f"{won}/{v.pairs} ({won / v.pairs:.0%})" if v.pairs else "n/a"
            for won in (v.at_calls, v.at_seconds)
        ]
        print(f"| {name} | {cells[0]} | {cells[1]} |")


def add_anytime_parser(subparsers: Any) -> None:
    """Register ``anytime`` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "anytime",
        help="best makespan vs simulator calls of search placers on a suite",
        description="Run search placers with a budget of simulator calls over a suite's "
        "split and seeds; print their best makespan / best known at a few budgets and write "
        "anytime.csv, anytime_curve.csv, anytime.png.",
        epilog="Table: a row per placer; '<N> calls': geometric mean over the instances "
        "every run solved of best / best known after N calls, mean ± std over seeds; "
        "'time' and 'calls': wall seconds and simulator calls it actually made, summed over "
        "its runs (a heuristic start's internal simulations included); 'feasible': runs "
        "whose final placement is feasible (a run stopped at its budget is not). With "
        "anneal among the placers, a second table: per placer, the runs no slower than "
        "anneal's run of the same instance and seed, at anneal's calls and at its seconds.",
    )
    p.add_argument("--suite", required=True, help="a suite (see `placegym suites`)")
    p.add_argument("--split", help="only this split (train or test)")
    p.add_argument(
        "--placers",
        default="anneal,random_search",
        help="comma-separated search placers (default anneal,random_search)",
    )
    p.add_argument(
        "--agents",
        default="",
        help="comma-separated checkpoints (or pretrained:NAME, a shipped agent); each adds "
        "its policy search as <run>-search",
    )
    p.add_argument(
        "--warm",
        default="",
        help="comma-separated checkpoints (or pretrained:NAME); each adds anneal "
        "warm-started by the agent's greedy placement as <run>-anneal (decoded inside the "
        "run: its time and any calls count)",
    )
    p.add_argument(
        "--placer",
        action="append",
        default=[],
        metavar="SPEC",
        help=PLACER_HELP + "; here a search placer gets a budget of --budget calls per run, "
        "a one-pass placer is one point at the calls it made",
    )
    p.add_argument("--budget", type=int, default=3000, help="simulator calls per run (3000)")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    p.add_argument("--out", default="anytime-out", help="output folder (default anytime-out)")
    add_progress_args(p)
    p.set_defaults(func=cmd_anytime)
