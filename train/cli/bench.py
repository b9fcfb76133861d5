"""``placegym bench``: placers × workloads × clusters × seeds, as a table and files.

Placers: teachers by name (``--teachers``), trained agents (``--agents``) and any user
placer (``--placer SPEC``: :mod:`placegym.train.harness.plugins`; a guide in
:mod:`placegym.benchmark`). Every table shows each placer's wall time and simulator calls
(:mod:`placegym.train.harness.calls`).

Infeasible rows (over a device's memory, a split co-location group, a placer that raised
or was stopped at its ``--budget``) are marked in the table (``OOM``, ``split``,
``failed``, ``budget``) and listed after it with their reasons
(:mod:`placegym.train.harness.feasibility`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

#: ``--placer``'s help, shared with ``placegym anytime``.
PLACER_HELP = (
    "a placer of your own, repeatable: MODULE:ATTRIBUTE (a class is instantiated, a "
    "function (graph, cluster, seed) or an object is used as is; MODULE may be a .py file "
    "of the current directory) or the name of an installed 'placegym.placers' entry point; "
    "keyword arguments of the class as a JSON object after '=', e.g. "
    "'mymod:MyPlacer={\"k\": 3}'. It must have place(graph, cluster, seed) or "
    "search(graph, cluster, sim, seed) (guide: python -m pydoc placegym.benchmark)"
)


def _csv(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _seeds(text: str) -> list[int]:
    try:
        return [int(x) for x in _csv(text)]
    except ValueError:
        raise ValueError(f"--seeds: expected comma-separated integers, got {text!r}") from None


#: ``placegym bench --help``: the columns and the cost rows of its tables.
BENCH_EPILOG = (
    "Columns: one per placer: each teacher by name; per checkpoint <run> (greedy), "
    "<run>-best<K> (--agent-k K > 1) and <run>-search<BUDGET> (--search); per .zip <stem>; "
    "per --placer its plug-in name, else its name attribute, else its class or function "
    "name ('#2', '#3', ... on a clash). A cell: mean makespan in ms (ratio to critical_path; "
    "gap to the optimum with --optimal). Cost: 'time taken' (wall seconds) and 'simulator "
    "calls' (placements the placer simulated, summed over its rows: the internal "
    "simulations of teachers and agents included, the harness's evaluation of the result "
    "not); with --suite both are columns, 'time' and 'calls', of the summary. Failures are "
    "never ranked: OOM (over a device's memory), split (a co-location group split), budget "
    "(stopped at --budget), failed (the placer raised)."
)


def add_bench_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``bench`` on the CLI's subparsers."""
    from placegym.train.harness.bench import DEFAULT_TEACHERS

    p = sub.add_parser(
        "bench",
        help="benchmark teachers over workloads and clusters",
        description="Run placers over workloads x clusters x seeds (or a suite's split with "
        "--suite), simulate every placement, print the table and write results.csv, "
        "results.json (replayable), table.md.",
        epilog=BENCH_EPILOG,
    )
    p.add_argument(
        "--teachers",
        default=",".join(DEFAULT_TEACHERS),
        help=f"comma-separated teacher names (default {','.join(DEFAULT_TEACHERS)})",
    )
    p.add_argument(
        "--workloads",
        default="chainmm,ffnn,llama_block,llama_layer",
        help="comma-separated generator names or graph JSON files",
    )
    p.add_argument(
        "--cluster",
        "--clusters",
        dest="clusters",
        default="p100x4",
        help="comma-separated preset names or cluster JSON files",
    )
    p.add_argument("--seeds", default="0", help="comma-separated seeds (default 0)")
    p.add_argument(
        "--optimal",
        action="store_true",
        help="also report the gap to the proven optimum on small graphs",
    )
    p.add_argument(
        "--agents",
        default="",
        help="comma-separated checkpoints of trained agents (placegym train) or shipped agents "
        "(pretrained:NAME, placegym.agents.pretrained); each adds the "
        "columns <run> (its greedy placement) and, with --agent-k K > 1, <run>-best<K> (the "
        "best of the greedy placement and K-1 sampled ones: never worse than <run>); a "
        "MaskablePPO .zip (model.save) adds a column <stem> (greedy); '#2', '#3', ... is "
        "appended to a name already taken",
    )
    p.add_argument(
        "--one-pass",
        action="store_true",
        help="the agents' greedy columns by the one-pass decode (no simulator call, no "
        "repair: an over-memory placement stays so); a shipped agent whose card says "
        "one_pass places so without it",
    )
    p.add_argument(
        "--agent-k",
        type=int,
        default=16,
        metavar="K",
        help="placements of the agents' best-of-K column <run>-best<K>: the greedy one and "
        "K-1 samples (default 16; 1: no such column)",
    )
    p.add_argument("--placer", action="append", default=[], metavar="SPEC", help=PLACER_HELP)
    p.add_argument(
        "--budget",
        type=int,
        default=None,
        metavar="CALLS",
        help="simulator calls each --placer may make per placement: a search placer's "
        "budget (required for one); a one-pass placer over it is stopped (marked 'budget')",
    )
    p.add_argument(
        "--search",
        type=int,
        default=0,
        metavar="BUDGET",
        help="also run each agent's policy search (heuristic starts, greedy, beam, samples, "
        "local improvement) with BUDGET simulator calls, as a column <run>-search<BUDGET>",
    )
    p.add_argument("--noise", type=float, default=0.0, help="simulate with this noise sigma")
    p.add_argument("--out", default="bench-out", help="output folder (default bench-out)")
    add_progress_args(p)
    p.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run the cells as Ray tasks: on a local Ray without ADDRESS, else on the "
        "cluster at ADDRESS (auto, HOST:PORT, ray://HOST:PORT); needs placegym[ray]",
    )
    add_suite_bench_args(p)
    p.set_defaults(func=cmd_bench)


def add_progress_args(p: argparse.ArgumentParser) -> None:
    """``--no-progress`` and ``--torch-threads`` (``bench`` and ``anytime``)."""
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress: neither the bar (on a terminal) nor the line every few seconds "
        "on stderr (when stderr is not a terminal, e.g. a log file)",
    )
    p.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        metavar="N",
        help="torch threads the placers (trained agents, SB3 models) place with (default 1: "
        "a policy's small forward passes run slower spread over every core; 0: torch's "
        "own setting, OMP_NUM_THREADS or one per core)",
    )


def torch_threads(args: argparse.Namespace) -> int | None:
    """``--torch-threads`` as the harness takes it (None for 0: torch's own setting)."""
    if args.torch_threads < 0:
        raise ValueError(f"--torch-threads: must be >= 0, got {args.torch_threads}")
    return args.torch_threads or None


def agent_placers(
    paths: list[str], k: int, search: int = 0, threads: int | None = 1, one_pass: bool = False
) -> dict[str, Any]:
    """Placers of trained agents: ``<run>`` (greedy), ``<run>-best<k>`` when ``k`` > 1
    (:class:`~placegym.train.harness.placers.BestOf` the greedy placement and ``k - 1``
    samples, so never worse than greedy) and, with ``search`` > 0,
    ``<run>-search<search>`` per checkpoint; ``<stem>`` (greedy) per MaskablePPO ``.zip``
    (``#2``, ``#3``, ... appended when two share a name). The agents place with
    ``threads`` torch threads (None: the process's setting); a ``.zip`` model runs with
    the harness's (``--torch-threads``). ``one_pass``: the greedy columns by the one-pass
    decode (a shipped agent whose card says so decodes in one pass either way)."""
    if k < 1:
        raise ValueError(f"--agent-k: must be >= 1, got {k}")
    if search < 0:
        raise ValueError(f"--search: must be >= 0 simulator calls, got {search}")
    out: dict[str, Any] = {}
    if not paths:
        return out  # no torch import: a teachers-only bench starts in a few seconds
    from placegym.agents.doppler.placer import AgentPlacer
    from placegym.agents.sb3.placer import Sb3Placer
    from placegym.train.evaluate import load_agent, load_search_agent
    from placegym.train.harness.placers import BestOf, unique_name

    for path in paths:
        if path.endswith(".zip"):  # a MaskablePPO model.save: its greedy placements
            agents: list[Any] = [Sb3Placer(path)]
        else:
            greedy = load_agent(
                path, mode="greedy", threads=threads, one_pass=True if one_pass else None
            )
            agents = [greedy]
            if k > 1:
                samples = AgentPlacer(
                    greedy.policy,
                    mode="best_of_k",
                    k=k - 1,
                    memory_mask=greedy.memory_mask,
                    threads=threads,
                )
                agents.append(BestOf([greedy, samples], name=f"{greedy.name}-best{k}"))
            if search:
                agents.append(load_search_agent(path, search, threads=threads))
        for agent in agents:
            agent.name = unique_name(agent.name, out)
            out[agent.name] = agent
    return out


def user_placers(specs: list[str], budget: int | None, taken: set[str]) -> dict[str, Any]:
    """The ``--placer`` placers by column name (:func:`~placegym.train.harness.plugins.
    load_placers`), each limited to ``budget`` simulator calls when one is given."""
    from placegym.train.harness.placers import with_budget

    if budget is not None and budget < 1:
        raise ValueError(f"--budget: must be >= 1 simulator calls, got {budget}")
    if not specs:
        if budget is not None:
            raise ValueError("--budget: applies to --placer placers, and none is given")
        return {}
    from placegym.train.harness.plugins import load_placers

    placers = load_placers(specs, taken)
    if budget is None:
        for name, p in placers.items():
            if callable(getattr(p, "search", None)) and not callable(getattr(p, "place", None)):
                raise ValueError(
                    f"--budget: {name} is a search placer: give it a budget of simulator calls"
                )
        return placers
    return {name: with_budget(p, budget) for name, p in placers.items()}


def extra_placers(args: argparse.Namespace) -> dict[str, Any]:
    """Agents' and ``--placer`` placers, names unique among themselves and the teachers."""
    agents = agent_placers(
        _csv(args.agents), args.agent_k, args.search, torch_threads(args), args.one_pass
    )
    taken = set(_csv(args.teachers)) | set(agents)
    return {**agents, **user_placers(args.placer, args.budget, taken)}


def cmd_bench(args: argparse.Namespace) -> int:
    """Run the benchmark, print its table and write its files."""
    from placegym.train.cli.outputs import check_folder
    from placegym.train.harness.bench import BenchConfig, bench_markdown, run_benchmark

    if args.replay or args.suite:
        if args.ray is not None:
            raise ValueError("--ray: not supported with --suite or --replay")
        return cmd_suite_bench(args)
    cell_map = None
    if args.ray is not None:
        from placegym.train.harness.ray_bench import ray_map

        cell_map = ray_map(args.ray or None)

    check_folder(args.out)  # refused now, naming --out, not after the run
    cfg = BenchConfig(
        teachers=_csv(args.teachers),
        workloads=_csv(args.workloads),
        clusters=_csv(args.clusters),
        seeds=_seeds(args.seeds),
        with_optimal=args.optimal,
        noise=args.noise,
        out=Path(args.out),
        extra_placers=extra_placers(args),
        torch_threads=torch_threads(args),
    )
    records = run_benchmark(cfg, progress=progress_mode(args), cell_map=cell_map)
    print(bench_markdown(records))
    for r in records:
        if not r.feasible:
            where = f"{r.workload} on {r.cluster}, {r.placer}, seed {r.seed}"
            print(f"infeasible: {where}: {r.infeasible}")
    print(f"\nwritten: {cfg.out}/results.csv, results.json, table.md, ratios.png")
    return 0


def add_suite_bench_args(p: argparse.ArgumentParser) -> None:
    """``--suite``, ``--split`` and ``--replay`` of ``placegym bench``."""
    p.add_argument(
        "--suite",
        help="run over a benchmark suite (see `placegym suites`) instead of --workloads and "
        "--cluster; the table adds each placer's gap to the lower bound and to the best known",
    )
    p.add_argument("--split", help="with --suite: only this split (train or test)")
    p.add_argument(
        "--replay",
        metavar="RESULTS_JSON",
        help="re-simulate every row of a results.json (feasibility included) and exit 1 "
        "naming any row that differs",
    )


def cmd_suite_bench(args: argparse.Namespace) -> int:
    """``placegym bench --suite NAME`` or ``placegym bench --replay results.json``."""
    if args.replay:
        from placegym.train.harness.replay import replay

        rows, bad = replay(args.replay, progress=show_progress(args))
        for m in bad:
            print(f"replay: {m}")
        failed = len({m.row for m in bad})
        print(f"replay: {rows} rows re-simulated, {failed} differ ({args.replay})")
        return 1 if bad else 0
    from placegym.envs.suites import get_suite
    from placegym.train.cli.outputs import check_folder
    from placegym.train.harness.suite_bench import run_suite, suite_markdown

    suite = get_suite(args.suite)
    out = check_folder(args.out)  # refused now, naming --out, not after the run
    records = run_suite(
        suite,
        args.split,
        _csv(args.teachers),
        extra_placers=extra_placers(args),
        seeds=_seeds(args.seeds),
        noise=args.noise,
        out=out,
        progress=progress_mode(args),
        meta={"budget": args.budget},
        torch_threads=torch_threads(args),
    )
    print(suite_markdown(records))
    for r in records:
        if not r.feasible:
            print(f"infeasible: {r.instance}, {r.placer}, seed {r.seed}: {r.infeasible}")
    print(f"\nwritten: {out}/results.json, results.csv, table.md")
    return 0


def show_progress(args: argparse.Namespace) -> bool:
    """A progress bar only on a terminal (a log file gets no carriage-return updates)."""
    return not args.no_progress and sys.stderr.isatty()


def progress_mode(args: argparse.Namespace) -> bool | str:
    """``"auto"`` (a bar on a terminal, else a line every few seconds on stderr:
    :func:`placegym.train.progress.progress_bar`), or False with ``--no-progress``."""
    return False if args.no_progress else "auto"
