"""``placegym graphs``: list workload generators, export a workload, import published files.

::

    placegym graphs list
    placegym graphs export llama_layer --param layers=2 --param seq=1024 --out g.json
    placegym graphs import-doppler chainmm.txt --out g.json
    placegym graphs import-dnn-partitioning resnet50_training.json --out DIR \
        --expert resnet50_inference_expert.json

Errors (unknown workload or parameter, bad value, bad file) are one line with exit
code 2, through :func:`placegym.train.cli.main`.
"""

from __future__ import annotations

import argparse
from typing import Any


def _summary(graph: Any) -> str:
    return (
        f"{graph.num_nodes} nodes, {graph.num_edges} edges, "
        f"{graph.flops.sum() / 1e9:.4g} GFLOP, {graph.param_bytes.sum() / 1e9:.4g} GB params"
    )


def cmd_list(args: argparse.Namespace) -> int:
    """Print every workload with its default node and edge counts and its parameters."""
    from placegym.envs.workloads import WORKLOADS, format_defaults, list_workloads, make_graph

    print(f"{'name':<14}{'nodes':>7}{'edges':>7}  description")
    for name, desc in list_workloads():
        g = make_graph(name)
        print(f"{name:<14}{g.num_nodes:>7}{g.num_edges:>7}  {desc}")
        print(f"{'':<30}--param defaults: {format_defaults(WORKLOADS[name])}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Build a workload from ``--param k=v`` settings and save it as graph JSON."""
    from placegym.envs.workloads import make_graph, parse_assignments

    graph = make_graph(args.name, **parse_assignments(args.param))
    graph.save(args.out)
    print(f"{args.out}: {graph.name}, {_summary(graph)}")
    return 0


def cmd_import_doppler(args: argparse.Namespace) -> int:
    """Convert a DOPPLER graph text file to graph JSON."""
    from placegym.envs.importers import from_doppler

    graph = from_doppler(args.file)
    graph.save(args.out)
    print(f"{args.out}: {graph.name}, {_summary(graph)} (simulate on doppler-unit-4 or -8)")
    return 0


def cmd_import_dnn_partitioning(args: argparse.Namespace) -> int:
    """Convert a dnn-partitioning workload (and an expert split) to graph, cluster and
    placement JSON in ``--out``; every file is checked before any is written."""
    from pathlib import Path

    import numpy as np

    from placegym.envs import simulate
    from placegym.envs.importers.dnn_partitioning import (
        expert_placement,
        from_dnn_partitioning,
    )

    graph, cluster = from_dnn_partitioning(args.file, name=args.name)
    placement = None if args.expert is None else expert_placement(args.file, args.expert)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = args.name or graph.name
    path = out / f"{stem}.graph.json"
    graph.save(path)
    print(
        f"{path}: {graph.name}, {graph.num_nodes} nodes, {graph.num_edges} edges, "
        f"{len(graph.groups)} co-location groups, {np.nansum(graph.time) * 1e3:.6g} ms "
        f"measured, {graph.param_bytes.sum() / 1e9:.4g} GB resident"
    )
    path = out / f"{stem}.cluster.json"
    cluster.save(path)
    print(
        f"{path}: {cluster.num_devices} accelerators of {cluster.memory[0] / 1e9:.4g} GB, "
        f"link {cluster.levels[0].bandwidth / 1e9:.4g} GB/s"
    )
    if placement is not None:
        path = out / f"{stem}.expert.placement.json"
        placement.save(path)
        s = simulate(graph, cluster, placement)
        print(
            f"{path}: {len(np.unique(placement.device))} accelerators used, makespan "
            f"{s.makespan * 1e3:.6g} ms, {'out of memory' if s.oom else 'fits in memory'}"
        )
    return 0


#: The example of ``graphs export --help`` (a test runs it).
EXPORT_EXAMPLE = (
    "placegym graphs export ffnn --param batch_blocks=4 --param dims=1024,2048,1024 "
    "--out ffnn.json"
)


def add_graphs_parser(subparsers: Any) -> None:
    """Register ``graphs {list, export, import-doppler, import-dnn-partitioning}`` on the
    CLI's subparsers."""
    p = subparsers.add_parser("graphs", help="workload generators and graph importers")
    sub = p.add_subparsers(dest="graphs_command", required=True, metavar="ACTION")

    q = sub.add_parser("list", help="list the workload generators")
    q.set_defaults(func=cmd_list)

    q = sub.add_parser(
        "export",
        help="build a workload and write its graph JSON",
        epilog=f"example:\n  {EXPORT_EXAMPLE}",
        formatter_class=argparse.RawDescriptionHelpFormatter,  # the example on one line
    )
    q.add_argument("name", metavar="NAME", help="a workload (see `placegym graphs list`)")
    q.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="K=V",
        help="a parameter of that workload's generator, repeatable (`placegym graphs list` "
        "shows each generator's parameters and defaults)",
    )
    q.add_argument("--out", required=True, help="graph JSON file to write")
    q.set_defaults(func=cmd_export)

    q = sub.add_parser("import-doppler", help="convert a DOPPLER graph text file")
    q.add_argument("file", metavar="FILE", help="DOPPLER graph file")
    q.add_argument("--out", required=True, help="graph JSON file to write")
    q.set_defaults(func=cmd_import_doppler)

    q = sub.add_parser(
        "import-dnn-partitioning",
        help="convert a dnn-partitioning workload (Tarnawski et al.) and an expert split",
        description="Write NAME.graph.json, NAME.cluster.json and, with --expert, "
        "NAME.expert.placement.json into DIR (conversion rules: "
        "placegym.envs.importers.dnn_partitioning).",
    )
    q.add_argument("file", metavar="FILE", help="workload JSON file")
    q.add_argument("--out", required=True, metavar="DIR", help="folder to write into")
    q.add_argument("--expert", metavar="EXPERT.json", help="a human-expert split of the workload")
    q.add_argument(
        "--name",
        help="graph and cluster name, and the files' stem (default: from the file's path, "
        "e.g. throughput-layer-resnet50_training)",
    )
    q.set_defaults(func=cmd_import_dnn_partitioning)
