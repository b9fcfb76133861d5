"""``placegym suites``: list the benchmark suites, export one, recompute its references.

::

    placegym suites                                   # every suite with its sizes
    placegym suites show comm-heavy-v0 --split test   # its instances, bound, best known
    placegym suites export comm-heavy-v0 --out DIR    # graph + cluster JSON per instance
    placegym suites reference comm-heavy-v0           # recompute bounds and best known

Errors are one line with exit code 2, through :func:`placegym.train.cli.main.main`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

MANIFEST_FORMAT = "placegym.suite/v1"


def _node_range(suite: Any) -> str:
    """Node counts from the reference file (no building); '?' without one."""
    from placegym.envs.suites.reference import load_references

    refs = load_references(suite.name)
    nodes = [refs[spec.id].nodes for _, spec in suite.specs() if spec.id in refs]
    return f"{min(nodes)}-{max(nodes)}" if nodes else "?"


def _clusters(suite: Any) -> str:
    """The suite's cluster presets; instances on their own accelerators (a published
    workload's) are counted, not listed."""
    from placegym.envs.importers.dnn_partitioning import PUBLISHED

    names = list(dict.fromkeys(spec.cluster for _, spec in suite.specs()))
    own = [c for c in names if c.startswith(PUBLISHED)]
    shown = [c for c in names if not c.startswith(PUBLISHED)]
    if own:
        shown.append(f"{len(own)} of their own")
    return ", ".join(shown)


def cmd_list(args: argparse.Namespace) -> int:
    """Print every suite: instances per split, node range, clusters, description."""
    from placegym.envs.suites import list_suites

    suites = list_suites()
    clusters = {s.name: _clusters(s) for s in suites}
    w = max(len(c) for c in clusters.values()) + 2
    print(f"{'suite':<16}{'train':>6}{'test':>6}  {'nodes':<11}{'clusters':<{w}}description")
    for s in suites:
        counts = [len(s.splits.get(k, ())) for k in ("train", "test")]
        print(
            f"{s.name:<16}{counts[0]:>6}{counts[1]:>6}  {_node_range(s):<11}"
            f"{clusters[s.name]:<{w}}{s.description}"
        )
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """One line per instance: split, nodes, edges, bound, best known and its source."""
    from placegym.envs.suites import get_suite
    from placegym.envs.suites.reference import load_references

    suite = get_suite(args.name)
    specs = suite.specs(args.split)
    refs = load_references(suite.name)
    w = max([42, *(len(spec.id) + 2 for _, spec in specs)])  # ids never run into the split
    print(
        f"{'instance':<{w}}{'split':<7}{'nodes':>7}{'edges':>7}{'bound (ms)':>12}"
        f"{'best (ms)':>12}  best found by"
    )
    for split, spec in specs:
        ref = refs.get(spec.id)
        if ref is None:
            print(f"{spec.id:<{w}}{split:<7}  (no reference: placegym suites reference)")
            continue
        print(
            f"{spec.id:<{w}}{split:<7}{ref.nodes:>7}{ref.edges:>7}"
            f"{ref.lower_bound * 1e3:>12.5g}{ref.best_makespan * 1e3:>12.5g}  {ref.best_source}"
        )
    return 0


def export_suite(name: str, out: Path, split: str | None = None) -> dict[str, Any]:
    """Write every instance of ``name`` (one split, or all) under ``out``.

    Layout: ``out/manifest.json`` (``placegym.suite/v1``: the suite, and per instance its
    id, split, spec, digest, sizes, lower bound, best known and file paths) and, per
    instance, ``out/<split>/<id>/graph.json``, ``cluster.json`` and, where the suite's
    reference entry is fresh, ``best_placement.json``. Returns the manifest.

    Raises:
        ValueError: a fresh reference whose best-known placement is infeasible (naming
            the instance).
    """
    from placegym.envs.suites import get_suite
    from placegym.envs.suites.reference import load_references
    from placegym.train.harness.suite_reference import check_reference

    suite = get_suite(name)
    refs = load_references(suite.name)
    entries = []
    for inst in suite.instances(split):
        folder = out / inst.split / inst.id
        folder.mkdir(parents=True, exist_ok=True)
        inst.graph.save(folder / "graph.json")
        inst.cluster.save(folder / "cluster.json")
        rel = f"{inst.split}/{inst.id}"
        entry = {
            "id": inst.id,
            "split": inst.split,
            "spec": inst.spec.to_dict(),
            "digest": inst.digest,
            "nodes": inst.graph.num_nodes,
            "edges": inst.graph.num_edges,
            "graph": f"{rel}/graph.json",
            "cluster": f"{rel}/cluster.json",
        }
        ref = refs.get(inst.id)
        if ref is not None and ref.digest == inst.digest:
            check_reference(inst, ref)  # a best known is feasible, or an error naming it
            ref.best_placement.save(folder / "best_placement.json")
            entry.update(
                lower_bound=ref.lower_bound,
                best_known=ref.best_makespan,
                best_source=ref.best_source,
                best_placement=f"{rel}/best_placement.json",
            )
        entries.append(entry)
    manifest = {
        "format": MANIFEST_FORMAT,
        "suite": suite.name,
        "version": suite.version,
        "description": suite.description,
        "split": split,
        "instances": entries,
    }
    out.mkdir(parents=True, exist_ok=True)  # also where no instance was written
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def cmd_export(args: argparse.Namespace) -> int:
    """Export a suite's instances (see :func:`export_suite`)."""
    from placegym.train.cli.outputs import check_folder

    manifest = export_suite(args.name, check_folder(args.out), args.split)
    print(f"{args.out}: {len(manifest['instances'])} instances of {args.name} (manifest.json)")
    return 0


def cmd_reference(args: argparse.Namespace) -> int:
    """Recompute the lower bounds and best-known placements and rewrite the file."""
    from placegym.envs.suites import get_suite
    from placegym.envs.suites.reference import reference_path
    from placegym.train.cli.bench import _seeds
    from placegym.train.harness.suite_reference import compute_references

    suite = get_suite(args.name)
    folder = Path(args.folder) if args.folder else None
    compute_references(
        suite,
        budget=args.budget,
        seeds=_seeds(args.seeds) if args.seeds else None,
        split=args.split,
        folder=folder,
        progress=print,
    )
    print(f"written: {reference_path(suite.name, folder)}")
    return 0


def add_suites_parser(subparsers: Any) -> None:
    """Register ``suites [list | show | export | reference]`` on the CLI's subparsers."""
    p = subparsers.add_parser("suites", help="benchmark suites: list, show, export, reference")
    p.set_defaults(func=cmd_list)
    sub = p.add_subparsers(dest="suites_command", metavar="ACTION")
    q = sub.add_parser("list", help="list the suites with their sizes (the default)")
    q.set_defaults(func=cmd_list)

    q = sub.add_parser("show", help="list a suite's instances with bound and best known")
    q.add_argument("name", metavar="NAME")
    q.add_argument("--split", help="only this split (train or test)")
    q.set_defaults(func=cmd_show)

    q = sub.add_parser("export", help="write every instance as graph and cluster JSON")
    q.add_argument("name", metavar="NAME")
    q.add_argument("--out", required=True, help="output folder")
    q.add_argument("--split", help="only this split (train or test)")
    q.set_defaults(func=cmd_export)

    q = sub.add_parser("reference", help="recompute lower bounds and best-known placements")
    q.add_argument("name", metavar="NAME")
    q.add_argument("--budget", type=int, help="simulations per anneal run (default: the suite's)")
    q.add_argument("--seeds", help="comma-separated anneal seeds (default: the suite's)")
    q.add_argument("--split", help="only this split")
    q.add_argument("--folder", help="reference folder (default: the package data folder)")
    q.set_defaults(func=cmd_reference)
