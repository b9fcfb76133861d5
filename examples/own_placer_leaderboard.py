"""Benchmark your own placer on a suite split, then enter it in a leaderboard.

The placer below is a *least-finish-time* list scheduler in a few lines: nodes in
descending b-level, each on the device where it would finish first, counting compute
time on that device and the transfers of its inputs from other devices, and skipping a
device without room for the node's resident bytes (a co-location group goes where its
first member went). It speaks placegym's ``Placer`` protocol,
``place(graph, cluster, seed) -> Placement``, so ``placegym.benchmark.evaluate`` runs it
on every instance of a split beside teachers, exactly as ``placegym bench --suite ...
--placer examples.own_placer_leaderboard:LeastFinish`` would, and returns the rows the
command writes: a table, a ``results.json`` that ``placegym bench --replay`` re-checks,
and, with pandas installed, a DataFrame.

``placegym.benchmark.submit_entry`` then verifies the run (every instance of the split
and every declared seed present; every row re-simulates to its recorded makespan and
feasibility) and writes the entry; ``leaderboard_table`` ranks the split's entries: most feasible
first, then the geometric-mean ratio to the best known. The same from the shell::

    placegym leaderboard --dir OUT/board submit OUT/results.json --name least-finish
    placegym leaderboard --dir OUT/board show published-v0 --split test

Run (``--fast``: the 8 instances of ``published-v0``'s test split, one seed; the default
is ``memory-tight-v0``'s 12 test instances with seeds 0, 1, 2)::

    python examples/own_placer_leaderboard.py
    python examples/own_placer_leaderboard.py --fast --out /tmp/own-placer
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from placegym.benchmark import evaluate, leaderboard_table, submit_entry
from placegym.envs import Cluster, Graph, Placement
from placegym.envs.analysis.levels import b_level, durations_on


class LeastFinish:
    """Descending b-level; each node on the device of earliest estimated finish among
    those with room for its resident bytes (its group's device once the group is
    placed)."""

    name = "least_finish"

    def place(self, graph: Graph, cluster: Cluster, seed: int) -> Placement:
        """A placement of ``graph`` on ``cluster`` (``seed`` is not used)."""
        order = np.lexsort((np.arange(graph.num_nodes), -b_level(graph, cluster)))
        dur = durations_on(graph, cluster)  # (n, D) seconds
        free = np.zeros(cluster.num_devices)  # when each device is next idle
        room = cluster.memory.astype(float).copy()
        finish = np.zeros(graph.num_nodes)
        device = np.full(graph.num_nodes, -1)
        group_device: dict[int, int] = {}
        for v in graph.topological_order.tolist():  # producers first; priority: order
            preds = graph.predecessors(v)
            ready = np.zeros(cluster.num_devices)
            for u in preds.tolist():
                arrive = np.array(
                    [
                        finish[u] + cluster.transfer_time(device[u], d, graph.out_bytes[u])
                        for d in range(cluster.num_devices)
                    ]
                )
                ready = np.maximum(ready, arrive)
            end = np.maximum(ready, free) + dur[v]
            group = int(graph.group[v])
            if group >= 0 and group in group_device:
                d = group_device[group]
            else:
                fits = room >= graph.param_bytes[v]
                best = np.where(fits, end, np.inf)
                d = int(np.argmin(best)) if fits.any() else int(np.argmax(room))
            device[v], finish[v], free[d] = d, end[d], end[d]
            room[d] -= graph.param_bytes[v]
            if group >= 0:
                group_device.setdefault(group, d)
        return Placement(device=device, order=order)


def main() -> None:
    """Benchmark :class:`LeastFinish`, save the results, enter and show the leaderboard."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--fast", action="store_true", help="published-v0 test, one seed")
    p.add_argument("--out", default="runs/examples/own_placer", help="output folder")
    args = p.parse_args()
    suite, seeds = ("published-v0", [0]) if args.fast else ("memory-tight-v0", [0, 1, 2])
    res = evaluate(
        LeastFinish(), suite=suite, split="test", seeds=seeds, teachers=["critical_path", "heft"]
    )
    print(res.table())
    out = Path(args.out)
    results = res.save(out / "results.json")
    entry = submit_entry(results, name="least-finish", folder=out / "board", overwrite=True)
    print(f"\nentered: {entry.path} ({entry.feasible}/{entry.rows} feasible)\n")
    print(leaderboard_table(suite, "test", out / "board"))


if __name__ == "__main__":
    main()
