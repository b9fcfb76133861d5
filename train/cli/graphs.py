"""``placegym graphs``: list workload generators, export a workload, import published files.

::

    placegym graphs list
    placegym graphs export llama_layer --param layers=2 --param seq=1024 --out g.json
    placegym graphs import-doppler chainmm.txt --out g.json
    placegym graphs import-doppler --sample --out g.json   # the sample file shipped
    placegym graphs import-dnn-partitioning resnet50_training.json --out DIR \
        --expert resnet50_inference_expert.json
    placegym graphs import-dnn-partitioning bert24_inference.json --out DIR --cpus file
    placegym graphs import-pipedream profiles/resnet18/graph.txt --out g.json --training

Errors (unknown workload or parameter, bad value, bad file) are one line with exit
code 2, through :func:`placegym.train.cli.main`. ``--out`` creates its folder, parents
included (:mod:`placegym.train.cli.outputs`).
"""

from __future__ import annotations

import argparse
from typing import Any

from placegym.train.cli.outputs import out_folder, writing


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
    with writing(args.out):
        graph.save(args.out)
    print(f"{args.out}: {graph.name}, {_summary(graph)}")
    return 0


def cmd_import_doppler(args: argparse.Namespace) -> int:
    """Convert a DOPPLER graph text file (or, with ``--sample``, the one shipped with the
    package) to graph JSON."""
    from placegym.envs.importers import from_doppler
    from placegym.envs.importers.doppler import SAMPLE

    if (args.file is None) == (not args.sample):
        raise ValueError(
            "import-doppler: give a DOPPLER graph FILE or --sample (the shipped one), "
            f"not {'both' if args.sample else 'neither'}"
        )
    graph = from_doppler(SAMPLE if args.sample else args.file)
    with writing(args.out):
        graph.save(args.out)
    print(f"{args.out}: {graph.name}, {_summary(graph)} (simulate on doppler-unit-4 or -8)")
    return 0


def cmd_import_dnn_partitioning(args: argparse.Namespace) -> int:
    """Convert a dnn-partitioning workload (and an expert split) to graph, cluster and
    placement JSON in ``--out``; every file is checked before any is written."""
    import numpy as np

    from placegym.envs import simulate
    from placegym.envs.importers.dnn_partitioning import (
        CPU_KIND,
        expert_placement,
        from_dnn_partitioning,
    )

    cpus = int(args.cpus) if args.cpus.isdigit() else args.cpus  # else "file" or refused
    kw = {"cpus": cpus, "cpu_memory": args.cpu_memory}
    graph, cluster = from_dnn_partitioning(args.file, name=args.name, **kw)
    placement = None if args.expert is None else expert_placement(args.file, args.expert, **kw)
    out = out_folder(args.out)
    stem = args.name or graph.name
    path = out / f"{stem}.graph.json"
    with writing(path):
        graph.save(path)
    times = dict(graph.kind_time) or {"": graph.time}  # per device kind, else one
    measured = " / ".join(
        f"{np.nansum(t) * 1e3:.6g} ms{f' on {k}' if k else ''}" for k, t in times.items()
    )
    print(
        f"{path}: {graph.name}, {graph.num_nodes} nodes, {graph.num_edges} edges, "
        f"{len(graph.groups)} co-location groups, {measured} "
        f"measured, {graph.param_bytes.sum() / 1e9:.4g} GB resident"
    )
    path = out / f"{stem}.cluster.json"
    with writing(path):
        cluster.save(path)
    n_cpu = sum(d.kind == CPU_KIND for d in cluster.devices)
    print(
        f"{path}: {cluster.num_devices - n_cpu} accelerators of {cluster.memory[0] / 1e9:.4g} GB"
        + (f" and {n_cpu} CPUs of {cluster.memory[-1] / 1e9:.4g} GB" if n_cpu else "")
        + f", link {cluster.levels[-1].bandwidth / 1e9:.4g} GB/s"
    )
    if placement is not None:
        path = out / f"{stem}.expert.placement.json"
        with writing(path):
            placement.save(path)
        s = simulate(graph, cluster, placement)
        print(
            f"{path}: {len(np.unique(placement.device))} accelerators used, makespan "
            f"{s.makespan * 1e3:.6g} ms, {'out of memory' if s.oom else 'fits in memory'}"
        )
    return 0


def cmd_import_pipedream(args: argparse.Namespace) -> int:
    """Convert a PipeDream profile (``graph.txt``) to graph JSON, with ``--training`` the
    graph of one training step (:func:`~placegym.envs.workloads.to_training_step`)."""
    import numpy as np

    from placegym.envs.importers import from_pipedream

    graph = from_pipedream(args.file, name=args.name, input_time=args.input_time)
    backward = sum(s["backward_time"] for s in graph.spec)
    if args.training:
        from placegym.envs.workloads import to_training_step

        optimizer = int(args.optimizer) if args.optimizer.isdigit() else args.optimizer
        graph = to_training_step(
            graph, backward_factor=args.backward_factor, optimizer=optimizer, name=args.name
        )
    with writing(args.out):
        graph.save(args.out)
    print(
        f"{args.out}: {graph.name}, {graph.num_nodes} nodes, {graph.num_edges} edges, "
        f"{np.nansum(graph.time) * 1e3:.6g} ms measured"
        f"{'' if args.training else f' (+ {backward * 1e3:.6g} ms backward)'}, "
        f"{graph.param_bytes.sum() / 1e9:.4g} GB resident"
    )
    return 0


#: The example of ``graphs export --help`` (a test runs it).
EXPORT_EXAMPLE = (
    "placegym graphs export ffnn --param batch_blocks=4 --param dims=1024,2048,1024 "
    "--out ffnn.json"
)


def _doppler_epilog() -> str:
    from placegym.envs.importers.doppler import SAMPLE

    return (
        "example (the sample file shipped with placegym, a 36-node block matrix chain):\n"
        "  placegym graphs import-doppler --sample --out g.json\n"
        f"the sample file, to copy or read:\n  {SAMPLE}"
    )


def add_graphs_parser(subparsers: Any) -> None:
    """Register ``graphs {list, export, import-doppler, import-dnn-partitioning,
    import-pipedream}`` on the CLI's subparsers."""
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
    q.add_argument("--out", required=True, help="graph JSON file to write (its folder is created)")
    q.set_defaults(func=cmd_export)

    q = sub.add_parser(
        "import-doppler",
        help="convert a DOPPLER graph text file",
        description="Convert a graph file in DOPPLER's published text format (see\n"
        "placegym.envs.importers.doppler) to graph JSON.",
        epilog=_doppler_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,  # the path on one line
    )
    q.add_argument("file", metavar="FILE", nargs="?", help="DOPPLER graph file")
    q.add_argument(
        "--sample",
        action="store_true",
        help="convert the sample file shipped with placegym instead of FILE",
    )
    q.add_argument("--out", required=True, help="graph JSON file to write (its folder is created)")
    q.set_defaults(func=cmd_import_doppler)

    q = sub.add_parser(
        "import-dnn-partitioning",
        help="convert a dnn-partitioning workload (Tarnawski et al.) and an expert split",
        description="Write NAME.graph.json, NAME.cluster.json and, with --expert, "
        "NAME.expert.placement.json into DIR (conversion rules: "
        "placegym.envs.importers.dnn_partitioning).",
    )
    q.add_argument("file", metavar="FILE", help="workload JSON file")
    q.add_argument(
        "--out", required=True, metavar="DIR", help="folder to write into (created if need be)"
    )
    q.add_argument("--expert", metavar="EXPERT.json", help="a human-expert split of the workload")
    q.add_argument(
        "--cpus",
        default="0",
        metavar="N",
        help="add N CPU devices (each node then has a time per device kind: fpgaLatency on "
        "the accelerators, cpuLatency on the CPUs), or 'file' for the file's maxCPUs "
        "(default 0: accelerators only)",
    )
    q.add_argument(
        "--cpu-memory",
        type=float,
        metavar="BYTES",
        help="with --cpus: memory of each CPU device (default: the graph's resident plus "
        "output bytes, so CPUs never run out, as the format has no CPU memory limit)",
    )
    q.add_argument(
        "--name",
        help="graph and cluster name, and the files' stem (default: from the file's path, "
        "e.g. throughput-layer-resnet50_training)",
    )
    q.set_defaults(func=cmd_import_dnn_partitioning)

    q = sub.add_parser(
        "import-pipedream",
        help="convert a PipeDream profile (graph.txt), optionally to a training step",
        description="Write the graph of a PipeDream profile: measured forward times, the "
        "backward times kept in each node's spec (conversion rules: "
        "placegym.envs.importers.pipedream); with --training the graph of one training "
        "step (placegym.envs.workloads.training).",
    )
    q.add_argument("file", metavar="FILE", help="PipeDream graph.txt")
    q.add_argument("--out", required=True, help="graph JSON file to write (its folder is created)")
    q.add_argument("--name", help="graph name (default: the profile's folder, e.g. resnet18)")
    q.add_argument(
        "--input-time",
        action="store_true",
        help="keep an input node's data-loading time as its time (default: 0)",
    )
    q.add_argument(
        "--training",
        action="store_true",
        help="write the training-step graph: backward nodes, gradient edges, optimizer state",
    )
    q.add_argument(
        "--backward-factor",
        type=float,
        default=2.0,
        metavar="X",
        help="with --training: backward / forward cost of a node without a profiled "
        "backward time (default 2)",
    )
    q.add_argument(
        "--optimizer",
        default="adam",
        metavar="NAME",
        help="with --training: sgd, momentum, adam or adamw, or the number of state copies "
        "per parameter (default adam: parameters x 4 resident)",
    )
    q.set_defaults(func=cmd_import_pipedream)
