"""``placegym bench``: placers × workloads × clusters × seeds, as a table and files.

Infeasible rows (over a device's memory, a split co-location group, a placer that raised)
are marked in the table (``OOM``, ``split``, ``failed``) and listed after it with their
reasons (:mod:`placegym.train.harness.feasibility`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _csv(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _seeds(text: str) -> list[int]:
    try:
        return [int(x) for x in _csv(text)]
    except ValueError:
        raise ValueError(f"--seeds: expected comma-separated integers, got {text!r}") from None


def add_bench_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``bench`` on the CLI's subparsers."""
    from placegym.train.harness.bench import DEFAULT_TEACHERS

    p = sub.add_parser("bench", help="benchmark teachers over workloads and clusters")
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
        help="comma-separated checkpoints of trained agents (placegym train); each adds a "
        "greedy column and a best-of-K column; a MaskablePPO .zip (model.save) adds a "
        "greedy column",
    )
    p.add_argument(
        "--agent-k", type=int, default=16, help="samples of the agents' best-of-K (default 16)"
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
    p.add_argument(
        "--no-progress", action="store_true", help="no progress bar (shown only on a terminal)"
    )
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


def agent_placers(paths: list[str], k: int, search: int = 0) -> dict:
    """Placers of trained agents: ``<run>`` (greedy), ``<run>-best<k>`` and, with
    ``search`` > 0, ``<run>-search<search>`` per checkpoint; ``<stem>`` (greedy) per
    MaskablePPO ``.zip`` (``#2``, ``#3``, ... appended when two share a name)."""
    if k < 1:
        raise ValueError(f"--agent-k: must be >= 1, got {k}")
    if search < 0:
        raise ValueError(f"--search: must be >= 0 simulator calls, got {search}")
    out: dict = {}
    if not paths:
        return out  # no torch import: a teachers-only bench starts in a few seconds
    from placegym.agents.sb3.placer import Sb3Placer
    from placegym.train.evaluate import load_agent, load_search_agent

    for path in paths:
        if path.endswith(".zip"):  # a MaskablePPO model.save: its greedy placements
            agents: list = [Sb3Placer(path)]
        else:
            agents = [load_agent(path, mode=mode, k=k) for mode in ("greedy", "best_of_k")]
            if search:
                agents.append(load_search_agent(path, search))
        for agent in agents:
            name, i = agent.name, 1
            while name in out:
                i += 1
                name = f"{agent.name}#{i}"
            agent.name = name
            out[name] = agent
    return out


def cmd_bench(args: argparse.Namespace) -> int:
    """Run the benchmark, print its table and write its files."""
    from placegym.train.harness.bench import BenchConfig, markdown_table, run_benchmark

    if args.replay or args.suite:
        if args.ray is not None:
            raise ValueError("--ray: not supported with --suite or --replay")
        return cmd_suite_bench(args)
    cell_map = None
    if args.ray is not None:
        from placegym.train.harness.ray_bench import ray_map

        cell_map = ray_map(args.ray or None)

    cfg = BenchConfig(
        teachers=_csv(args.teachers),
        workloads=_csv(args.workloads),
        clusters=_csv(args.clusters),
        seeds=_seeds(args.seeds),
        with_optimal=args.optimal,
        noise=args.noise,
        out=Path(args.out),
        extra_placers=agent_placers(_csv(args.agents), args.agent_k, args.search),
    )
    records = run_benchmark(cfg, progress=show_progress(args), cell_map=cell_map)
    print(markdown_table(records))
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
    from placegym.train.harness.suite_bench import run_suite, suite_markdown

    suite = get_suite(args.suite)
    out = Path(args.out)
    records = run_suite(
        suite,
        args.split,
        _csv(args.teachers),
        extra_placers=agent_placers(_csv(args.agents), args.agent_k, args.search),
        seeds=_seeds(args.seeds),
        noise=args.noise,
        out=out,
        progress=show_progress(args),
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
