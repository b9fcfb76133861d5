"""The ``placegym`` command line.

Subcommands: ``simulate``, ``show``, ``validate``, ``clusters`` (here), ``graphs``,
``bench``, ``suites``, ``anytime``, ``calibrate``, ``train``, ``report`` and ``demo`` (a
module each in :mod:`placegym.train.cli`); ``placegym --version``. Bad input (a
``ValueError`` or an ``OSError`` from any subcommand) gives a one-line error naming the
problem and exit code 2, never a traceback: :func:`main` is the one place that turns it
into that line. ``simulate`` exits 1 on a placement over a device's memory (unless
``--allow-infeasible``), ``validate`` refuses one (exit code 2); both name the devices over
memory and by how much, and ``validate`` adds a second line saying whether a placement
is known to fit that graph and cluster or none can (:func:`fit_note`). Ctrl-C gives one
line too (``placegym train``'s names the checkpoint the same command resumes from) and
exit code 130.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from placegym.train.cli.anytime import add_anytime_parser
from placegym.train.cli.bench import add_bench_parser
from placegym.train.cli.calibrate import add_calibrate_parser
from placegym.train.cli.demo import add_demo_parser
from placegym.train.cli.graphs import add_graphs_parser
from placegym.train.cli.leaderboard import add_leaderboard_parser
from placegym.train.cli.report import add_report_parser
from placegym.train.cli.suites import add_suites_parser
from placegym.train.cli.train import add_train_parser

EXIT_BAD_INPUT = 2
EXIT_INFEASIBLE = 1  # simulate: a valid placement that exceeds a device's memory
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a Ctrl-C


class CliError(Exception):
    """An error reported as one line with exit code 2 (with ``note``, a second line)."""

    def __init__(self, message: str, note: str | None = None) -> None:
        super().__init__(message)
        self.note = note


def _add_problem_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--graph", required=True, help="graph JSON file")
    p.add_argument("--cluster", required=True, help="cluster preset name or JSON file")
    p.add_argument("--placement", required=True, help="placement JSON file")
    p.add_argument(
        "--noise",
        type=float,
        default=0.0,
        help="sigma of the mean-preserving log-normal noise on compute (default 0)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the noise draws (default 0)")
    p.add_argument(
        "--dispatch",
        choices=["priority", "fifo"],
        default="priority",
        help="ready-node choice of an idle device (default priority)",
    )


def _schedule(args: argparse.Namespace):
    from placegym.envs import load_cluster, load_graph, load_placement, simulate

    graph = load_graph(args.graph)
    cluster = load_cluster(args.cluster)
    placement = load_placement(args.placement)
    check_fit(placement, args.placement, graph, cluster)
    return simulate(
        graph,
        cluster,
        placement,
        noise=args.noise,
        rng=args.seed if args.noise > 0 else None,
        dispatch=args.dispatch,
    )


def check_fit(placement, path: str, graph, cluster=None) -> None:
    """Check that ``placement`` (read from ``path``) fits ``graph`` and ``cluster``;
    the error names the file."""
    try:
        placement.check(graph, cluster)
    except ValueError as e:
        raise CliError(f"{path}: {e}") from None


def _fmt_bytes(x: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(x) < 1000 or unit == "TB":
            return f"{x:.4g} {unit}" if unit != "B" else f"{x:.0f} B"
        x /= 1000
    raise AssertionError  # unreachable


def over_memory(schedule) -> str:
    """One line naming every device over its memory and by how much (empty when every
    device fits)."""
    devices = schedule.cluster.devices
    parts = [
        f"device {d} ({devices[d].name}) by {_fmt_bytes(float(schedule.memory_excess[d]))} "
        f"(peak {_fmt_bytes(float(schedule.peak_memory[d]))} of "
        f"{_fmt_bytes(float(schedule.cluster.memory[d]))})"
        for d in range(schedule.cluster.num_devices)
        if schedule.memory_excess[d] > 0
    ]
    return "out of memory on " + ", ".join(parts) if parts else ""


def print_summary(summary: dict, out=None) -> None:
    """Print a schedule summary (:meth:`Schedule.summary`) as a small table."""
    out = out or sys.stdout
    print(
        f"makespan: {summary['makespan']:.6g} s   oom: {'yes' if summary['oom'] else 'no'}   "
        f"transfers: {summary['num_transfers']} "
        f"({_fmt_bytes(summary['bytes_transferred'])})",
        file=out,
    )
    if summary["infeasible"]:
        print(f"infeasible: {summary['infeasible']}", file=out)
    print(f"{'device':<12}{'nodes':>7}{'util':>8}{'peak memory':>14}{'capacity':>12}", file=out)
    for d in summary["devices"]:
        flag = f"  OOM (+{_fmt_bytes(d['excess'])})" if d["excess"] > 0 else ""
        print(
            f"{d['name']:<12}{d['nodes']:>7}{d['utilization']:>8.1%}"
            f"{_fmt_bytes(d['peak_memory']):>14}{_fmt_bytes(d['memory']):>12}{flag}",
            file=out,
        )


def cmd_simulate(args: argparse.Namespace) -> int:
    """Simulate a placement; print its summary (or one JSON object). An infeasible one
    (over a device's memory) exits 1 with one line on stderr naming the devices over
    memory, unless ``--allow-infeasible``."""
    s = _schedule(args)
    if args.json:
        print(json.dumps(s.summary()))
    else:
        print_summary(s.summary())
    if s.oom and not args.allow_infeasible:
        print(
            f"placegym simulate: infeasible: {over_memory(s)} (--allow-infeasible: exit 0)",
            file=sys.stderr,
        )
        return EXIT_INFEASIBLE
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """Simulate a placement and draw its Gantt chart (its folder created); the text says
    OOM, naming the devices, where the placement exceeds a device's memory."""
    from placegym.envs.sim.gantt import format_time, save_gantt
    from placegym.train.cli.outputs import writing

    s = _schedule(args)
    with writing(args.out):
        save_gantt(s, args.out, color_by=args.color_by)
    oom = f"; OOM: {over_memory(s)}" if s.oom else ""
    print(f"makespan {format_time(s.makespan)}{oom}; Gantt chart written to {args.out}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    """Load every file by its format tag; placements are checked against the graph (and
    cluster) of ``--graph`` / ``--cluster``, else of the only graph (cluster) among FILES,
    and with both simulated: one over a device's memory is refused."""
    from placegym.envs import (
        CLUSTER_FORMAT,
        GRAPH_FORMAT,
        GRAPH_FORMAT_V2,
        PLACEMENT_FORMAT,
        load_cluster,
        load_graph,
        load_placement,
    )
    from placegym.envs.core.validate import read_json

    loaders: dict[str, Callable[[str], Any]] = {GRAPH_FORMAT: load_graph}
    loaders.update({GRAPH_FORMAT_V2: load_graph, CLUSTER_FORMAT: load_cluster})
    loaders[PLACEMENT_FORMAT] = load_placement
    loaded = []
    for path in args.files:
        tag = read_json(path, "placegym").get("format")
        if not isinstance(tag, str) or tag not in loaders:
            raise CliError(
                f"{path}: format: unknown format tag, expected one of "
                f"{', '.join(map(repr, loaders))}, got {tag!r}"
            )
        kind = GRAPH_FORMAT if tag == GRAPH_FORMAT_V2 else tag  # both graph versions
        loaded.append((path, kind, loaders[tag](path)))
    placements = any(tag == PLACEMENT_FORMAT for _, tag, _ in loaded)
    graph = _reference(args.graph, load_graph, loaded, GRAPH_FORMAT, "graph", placements)
    cluster = _reference(args.cluster, load_cluster, loaded, CLUSTER_FORMAT, "cluster", placements)
    for path, tag, obj in loaded:
        if tag != PLACEMENT_FORMAT:
            print(f"{path}: ok ({tag}, {_describe(obj)})")
            continue
        note = ""
        if graph is not None:
            check_fit(obj, path, graph[1], cluster and cluster[1])
            if cluster is not None:
                _check_memory(obj, path, graph[1], cluster)
            note = f"; fits {graph[0]}" + (f" on {cluster[0]}" if cluster else "")
        elif cluster is not None:  # no graph: the device indices only
            _check_devices(obj, path, cluster[1])
            note = f"; fits {cluster[0]}"
        missing = [what for what, ref in (("graph", graph), ("cluster", cluster)) if ref is None]
        if missing:
            note += f"; not checked against a {' or a '.join(missing)}: add " + " and ".join(
                f"--{what}" for what in missing
            )
        print(f"{path}: ok ({tag}, {_describe(obj, checked=cluster is not None)}{note})")
    return 0


def _check_memory(placement, path: str, graph, cluster: tuple[str, Any]) -> None:
    """Simulate ``placement`` (read from ``path``) of ``graph`` on ``cluster`` (name,
    object): one line naming the devices over memory and by how much when it does not fit."""
    from placegym.envs import simulate

    schedule = simulate(graph, cluster[1], placement)
    if schedule.oom:
        raise CliError(
            f"{path}: does not fit {cluster[0]}: {over_memory(schedule)}",
            note=fit_note(graph, cluster[1]),
        )


def fit_note(graph, cluster) -> str:
    """Whether some placement of ``graph`` fits ``cluster``'s memory: certified to
    (:func:`~placegym.envs.analysis.memory.fit_certificate`, simulated), proven not to
    (:func:`~placegym.envs.analysis.memory.memory_infeasibility`; without recompute,
    :func:`~placegym.envs.analysis.memory.stash_infeasibility`), or unknown."""
    from placegym.envs.analysis import memory as M

    why = M.memory_infeasibility(graph, cluster)
    if why is not None:
        return f"no placement fits this graph and cluster (certified): {why}"
    stash = M.stash_infeasibility(graph, cluster)
    found = M.fit_certificate(graph, cluster)
    if found is not None:
        note = f"a placement that fits exists (certified by simulation): e.g. {found[0]}"
        return note + ("; none without recompute does" if stash is not None else "")
    if stash is not None:
        return f"no placement is known to fit, and {stash}"
    return "no placement is known to fit this graph and cluster, nor proven not to"


def _check_devices(placement, path: str, cluster) -> None:
    """Check that ``placement``'s device indices are ``cluster``'s (the error names the
    file, the first entry out of range and its value)."""
    bad = [i for i, d in enumerate(placement.device.tolist()) if d >= cluster.num_devices]
    if bad:
        raise CliError(
            f"{path}: device[{bad[0]}]: device index out of range for cluster "
            f"{cluster.name!r} with {cluster.num_devices} devices, got {placement.device[bad[0]]}"
        )


def _reference(option, load, loaded: list, tag: str, what: str, needed: bool):
    """``(name, object)`` that placements are checked against: the ``--graph``
    (``--cluster``) option, else the only graph (cluster) among the files, else None."""
    if option:
        return option, load(option)
    found = [(path, obj) for path, t, obj in loaded if t == tag]
    if len(found) > 1 and needed:
        raise CliError(
            f"--{what}: {len(found)} {what} files given ({', '.join(p for p, _ in found)}); "
            f"say with --{what} which one the placements must fit"
        )
    return found[0] if found else None


def _describe(obj, checked: bool = False) -> str:
    """What a loaded file holds, in a few words; a placement's device indices as a range
    unless they were ``checked`` against a cluster (a count of distinct indices says
    nothing of the devices a placement needs)."""
    from placegym.envs import Cluster, Graph

    if isinstance(obj, Graph):
        return f"{obj.num_nodes} nodes, {obj.num_edges} edges"
    if isinstance(obj, Cluster):
        return f"{obj.num_devices} devices, {len(obj.levels)} levels"
    used = sorted(set(obj.device.tolist()))
    if checked:
        return f"{obj.num_nodes} nodes on {len(used)} devices"
    if not used:
        return f"{obj.num_nodes} nodes"
    span = f"device {used[0]}" if len(used) == 1 else f"devices {used[0]}..{used[-1]}"
    return f"{obj.num_nodes} nodes, uses {span} ({len(used)} distinct)"


def cmd_clusters(args: argparse.Namespace) -> int:
    """List the cluster presets, or print one as cluster JSON."""
    from placegym.envs import get_preset, list_presets

    if args.name:
        from placegym.envs import load_cluster

        print(json.dumps(load_cluster(args.name).to_dict(), indent=1))
        return 0
    print(f"{'name':<22}{'devices':>8}  {'level bandwidths (GB/s)':<26}description")
    for name, desc in list_presets():
        c = get_preset(name)
        bws = "/".join(f"{lv.bandwidth / 1e9:g}" for lv in c.levels)
        print(f"{name:<22}{c.num_devices:>8}  {bws:<26}{desc}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``placegym`` argument parser with every subcommand."""
    from placegym import __version__

    parser = argparse.ArgumentParser(
        prog="placegym",
        description="Device placement of dataflow graphs on work-conserving multi-GPU systems.",
    )
    parser.add_argument("--version", action="version", version=f"placegym {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "simulate",
        help="simulate a placement and print its makespan",
        description="Simulate a placement and print its makespan, per-device utilisation "
        "and peak memory. Exit code 1 (one line on stderr naming the devices over memory) "
        "when it exceeds a device's memory, unless --allow-infeasible.",
    )
    _add_problem_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--allow-infeasible",
        action="store_true",
        help="exit 0 for a placement over a device's memory too (its summary still says OOM)",
    )
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("show", help="draw the Gantt chart of a placement")
    _add_problem_args(p)
    p.add_argument(
        "--out", default="gantt.png", help="image file, its folder created (default gantt.png)"
    )
    p.add_argument(
        "--color-by",
        choices=["auto", "layer", "op", "device"],
        default="auto",
        help="colour compute bars by layer or op kind (auto: layer if known)",
    )
    p.set_defaults(func=cmd_show)

    p = sub.add_parser(
        "validate",
        help="check graph, cluster or placement JSON files",
        description="Load each FILE by its format tag and report what it holds. Placements "
        "are checked against the graph (and cluster) of --graph (--cluster), or else of the "
        "only graph (cluster) among the FILEs; with both, simulated, and one over a "
        "device's memory is refused (exit code 2, naming the devices and by how much).",
    )
    p.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="a placegym graph, cluster or placement JSON file (told apart by its format tag)",
    )
    p.add_argument("--graph", help="graph JSON file that the placements must fit")
    p.add_argument("--cluster", help="cluster (preset or JSON) that the placements must fit")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("clusters", help="list cluster presets, or print one as JSON")
    p.add_argument("name", nargs="?", help="a preset to print as cluster JSON")
    p.set_defaults(func=cmd_clusters)

    add_graphs_parser(sub)
    add_bench_parser(sub)
    add_suites_parser(sub)
    add_leaderboard_parser(sub)
    add_anytime_parser(sub)
    add_calibrate_parser(sub)
    add_train_parser(sub)
    add_report_parser(sub)
    add_demo_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; bad input gives one line on stderr and exit code 2 (plus a
    ``note:`` line where the error carries one: ``validate`` over memory), Ctrl-C one
    line and exit code 130."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (CliError, ValueError, OSError) as e:
        msg = " ".join(str(e).split())
        print(f"placegym {args.command}: error: {msg}", file=sys.stderr)
        note = getattr(e, "note", None)
        if note:
            print(f"placegym {args.command}: note: {' '.join(note.split())}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as e:
        print(f"placegym {args.command}: {str(e) or 'interrupted'}", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
