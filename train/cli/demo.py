"""``placegym demo``: the five-minute tour behind ``make demo``.

Loads the ``p100x4`` preset and a block-partitioned FFNN, simulates three simple
placements, writes their files and the Gantt chart of the best one, and prints the
commands that reproduce each step.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from placegym.envs import Placement, load_cluster, simulate
from placegym.envs.workloads import ffnn


def run_demo(out: Path, stream=None) -> dict[str, float]:
    """Run the tour, writing into ``out``; returns the makespan of each placement."""
    stream = stream or sys.stdout
    out.mkdir(parents=True, exist_ok=True)
    graph = ffnn()
    cluster = load_cluster("p100x4")
    n, d = graph.num_nodes, cluster.num_devices
    print(
        f"graph   {graph.name}: {n} nodes, {graph.num_edges} edges, "
        f"{graph.flops.sum() / 1e9:.1f} GFLOP",
        file=stream,
    )
    print(
        f"cluster {cluster.name}: {d} devices, levels "
        f"{', '.join(lv.name for lv in cluster.levels)}",
        file=stream,
    )
    topo = graph.topological_order
    candidates = {
        "single_device": np.zeros(n, dtype=np.int64),
        "round_robin": np.empty(n, dtype=np.int64),
        "layer_pipeline": np.maximum(graph.layer, 0) % d,
    }
    candidates["round_robin"][topo] = np.arange(n) % d
    graph.save(out / "graph.json")
    results = {}
    for name, dev in candidates.items():
        placement = Placement(device=dev, order=topo.copy())
        placement.save(out / f"{name}.json")
        s = simulate(graph, cluster, placement)
        results[name] = s.makespan
        print(
            f"  {name:<16} makespan {s.makespan * 1e3:8.3f} ms   transfers "
            f"{len(s.transfers):4d}   peak memory {s.peak_memory.max() / 1e6:8.1f} MB",
            file=stream,
        )
    from placegym.envs.sim.gantt import save_gantt

    best = min(results, key=results.__getitem__)
    s = simulate(graph, cluster, Placement(device=candidates[best], order=topo.copy()))
    save_gantt(s, out / "gantt.png")
    print(f"best: {best}; Gantt chart in {out / 'gantt.png'}", file=stream)
    print(
        "reproduce with:\n"
        f"  placegym simulate --graph {out}/graph.json --cluster p100x4 "
        f"--placement {out}/{best}.json\n"
        f"  placegym show --graph {out}/graph.json --cluster p100x4 "
        f"--placement {out}/{best}.json --out {out}/gantt.png",
        file=stream,
    )
    return results


def add_demo_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``demo`` on the CLI's subparsers."""
    p = sub.add_parser("demo", help="the five-minute tour, end to end")
    p.add_argument("--out", default="demo-out", help="output folder (default demo-out)")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the tour into ``--out`` (created with its parents)."""
    from placegym.train.cli.outputs import out_folder

    run_demo(out_folder(args.out))
    return 0
