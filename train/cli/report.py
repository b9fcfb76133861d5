"""``placegym report``: train (or load) the agents of the report and print its tables.

::

    placegym report --out runs/report                       # every part, ~70 min on 2 cores
    placegym report --parts main --clusters p100x4          # the main table only
    placegym report --quick --out /tmp/report               # tiny budgets (a smoke run)
    placegym report --parts generalist --generalist-results docs/results/generalist.jsonl

Runs that finished under ``--out`` are loaded, killed ones resume
(:mod:`placegym.train.experiments.report`). The presets ship with the package, so the command
works from an installed placegym as well as from a source checkout.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_report_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``report`` on the CLI's subparsers."""
    p = sub.add_parser(
        "report",
        help="train (or load) the report's agents and print the agent tables",
        description=(
            "Agents vs teachers, optimality gap, ablation, reward and transfer tables, in "
            "markdown (also written to OUT/report.md). Finished runs under OUT are loaded."
        ),
    )
    p.add_argument("--out", default="runs/report", help="run folder (default runs/report)")
    p.add_argument(
        "--parts",
        help="comma-separated parts: main, optimality, ablation, reward, transfer (default: "
        "all of these), per_graph (plan-imitation agents on 12 instances, 3 seeds), "
        "generalist (the rollout generalist zero-shot on 76 unseen instances, 3 seeds)",
    )
    p.add_argument(
        "--clusters", help="comma-separated clusters of the main part (default: the report's)"
    )
    p.add_argument("--quick", action="store_true", help="tiny budgets (a smoke run)")
    p.add_argument(
        "--results",
        help="per_graph part: read its rows from this results.jsonl instead of training",
    )
    p.add_argument(
        "--generalist-results",
        help="generalist part: read its rows from this results.jsonl instead of training",
    )
    p.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    """Run the report with one torch thread (small per-step forwards are fastest so)."""
    import torch

    from placegym.envs import load_cluster
    from placegym.train.experiments.report import CLUSTERS, PARTS, Budget, report

    parts = _csv(args.parts) if args.parts else list(PARTS)
    clusters = _csv(args.clusters) if args.clusters else list(CLUSTERS)
    for name in clusters:
        load_cluster(name)  # a bad name fails before any training
    torch.set_num_threads(1)
    if "per_graph" in parts:
        from placegym.train.experiments.per_graph import per_graph_report

        parts.remove("per_graph")
        results = Path(args.results) if args.results else None
        print(per_graph_report(Path(args.out), results=results) + "\n", flush=True)
    if "generalist" in parts:
        from placegym.train.experiments.generalist import generalist_report

        parts.remove("generalist")
        results = Path(args.generalist_results) if args.generalist_results else None
        print(generalist_report(Path(args.out), results=results) + "\n", flush=True)
    if not parts:
        return 0
    report(Path(args.out), parts, Budget.quick() if args.quick else None, clusters=clusters)
    return 0


def _csv(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]
