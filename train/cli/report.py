"""``placegym report``: train (or load) the agents of the report and print its tables.

::

    placegym report --out runs/report                       # every part
    placegym report --parts main --clusters p100x4          # the main table only
    placegym report --quick --out /tmp/report               # tiny budgets (a smoke run)
    placegym report --parts generalist --generalist-results docs/results/generalist.jsonl
    placegym report --parts generalist_rollout_memory --out runs/report  # trains 3 seeds
    placegym report --pages [--check]       # the generated blocks of README.md and docs/

Runs that finished under ``--out`` are loaded, killed ones resume
(:mod:`placegym.train.experiments.report`). The presets ship with the package, so the command
works from an installed placegym as well as from a source checkout. Saved rows
(``--results``, ``--generalist-results``) come with their baselines when a file
``NAME.baselines.json`` lies beside ``NAME.jsonl`` (as in ``docs/results``): those seed the
part's baseline cache under ``--out``, so nothing is recomputed for the instances it holds.

``--pages`` rewrites (``--check``: checks) the generated blocks of the documentation from
the stored results instead (:mod:`placegym.train.experiments.pages`; its options below).
"""

from __future__ import annotations

import argparse
import json
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
        "generalist (the rollout generalist zero-shot on 76 unseen instances, 3 seeds), "
        "generalist_rollout_memory and generalist_memory (the rollout and one-pass "
        "generalists trained with memory-tight and published workloads too, zero-shot on "
        "their test splits, 3 seeds)",
    )
    p.add_argument(
        "--clusters", help="comma-separated clusters of the main part (default: the report's)"
    )
    p.add_argument("--quick", action="store_true", help="tiny budgets (a smoke run)")
    p.add_argument(
        "--results",
        help="per_graph part: read its rows from this results.jsonl instead of training",
    )
    from placegym.train.experiments.studies import STUDIES

    for part in STUDIES:
        p.add_argument(
            f"--{part.replace('_', '-')}-results",
            help=f"{part} part: read its rows from this results.jsonl instead of training",
        )
    p.add_argument(
        "--pages",
        action="store_true",
        help="rewrite the generated blocks of README.md and docs/ from docs/results instead "
        "(python -m placegym.train.experiments.pages)",
    )
    from placegym.train.experiments.pages import add_arguments

    add_arguments(p.add_argument_group("--pages options"))
    p.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    """Run the report with one torch thread (small per-step forwards are fastest so), or
    the pages generator (``--pages``)."""
    if args.pages:
        from placegym.train.experiments.pages import run

        return run(args)
    import torch

    from placegym.envs import load_cluster
    from placegym.train.cli.outputs import check_folder
    from placegym.train.experiments.report import CLUSTERS, PARTS, Budget, report

    check_folder(args.out)  # a file in its way fails now, naming --out
    parts = _csv(args.parts) if args.parts else list(PARTS)
    clusters = _csv(args.clusters) if args.clusters else list(CLUSTERS)
    for name in clusters:
        load_cluster(name)  # a bad name fails before any training
    torch.set_num_threads(1)
    if "per_graph" in parts:
        from placegym.train.experiments.per_graph import per_graph_report

        parts.remove("per_graph")
        results = Path(args.results) if args.results else None
        seed_baselines(results, Path(args.out) / "per_graph")
        print(per_graph_report(Path(args.out), results=results) + "\n", flush=True)
    from placegym.train.experiments.generalist import STUDIES, generalist_report

    for part, study in STUDIES.items():
        if part not in parts:
            continue
        parts.remove(part)
        saved = getattr(args, f"{part}_results")
        results = Path(saved) if saved else None
        seed_baselines(results, Path(args.out) / part)
        print(generalist_report(Path(args.out), results=results, study=study) + "\n", flush=True)
    if not parts:
        return 0
    report(Path(args.out), parts, Budget.quick() if args.quick else None, clusters=clusters)
    return 0


def _csv(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def seed_baselines(results: Path | None, folder: Path) -> None:
    """Copy the baselines stored beside saved rows (``NAME.baselines.json`` next to
    ``NAME.jsonl``) into ``folder/baselines.json``, the part's cache, keeping any entry
    the cache already has; nothing when there are no saved rows or stored baselines."""
    if results is None:
        return
    stored = results.with_name(results.stem + ".baselines.json")
    if not stored.is_file():
        return
    cache = folder / "baselines.json"
    base = json.loads(cache.read_text()) if cache.is_file() else {}
    merged = {**json.loads(stored.read_text()), **base}
    if merged != base:
        folder.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(merged, indent=1))
