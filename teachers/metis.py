"""Balanced min-cut partitioning with METIS (via pymetis)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pymetis

from placegym.envs.analysis import b_level, mean_durations
from placegym.envs.cluster import Cluster
from placegym.envs.graph import Graph
from placegym.envs.placement import Placement
from placegym.teachers._common import priority_order, repair_memory
from placegym.teachers.base import PlanTeacher

__all__ = ["MetisTeacher", "metis_parts"]

#: METIS weights are C integers: each weight family is scaled to sum to about this much.
_WEIGHT_TOTAL = 1e8
#: Largest device count for which the topology-aware part-to-device swap pass runs.
_SWAP_MAX_DEVICES = 64
#: Fewest nodes per part: METIS fails (and prints to stdout) when asked for parts of
#: fewer nodes, and such parts would only multiply transfers.
_MIN_NODES_PER_PART = 4


def _int_weights(w: np.ndarray) -> np.ndarray:
    """Positive integers proportional to ``w`` (>= 0), summing to about ``_WEIGHT_TOTAL``."""
    total = float(w.sum())
    if total <= 0 or not np.isfinite(total):
        return np.ones(len(w), dtype=np.int64)
    return np.maximum(1, np.rint(w / total * _WEIGHT_TOTAL)).astype(np.int64)


def metis_parts(
    graph: Graph, cluster: Cluster, nparts: int, seed: int = 0, share: np.ndarray | None = None
) -> np.ndarray:
    """``(n,)`` part of each node: METIS k-way partition of the undirected graph.

    Vertex weights are mean compute times, edge weights the producer's ``out_bytes`` (both
    scaled to integers); ``share`` (``(nparts,)``, optional) is each part's target fraction
    of the total vertex weight.
    """
    n = graph.num_nodes
    if nparts <= 1 or n <= 1:
        return np.zeros(n, dtype=np.int64)
    e = graph.edges
    src = np.concatenate([e[:, 0], e[:, 1]])
    dst = np.concatenate([e[:, 1], e[:, 0]])
    wts = np.concatenate([graph.out_bytes[e[:, 0]]] * 2)
    perm = np.lexsort((dst, src))
    xadj = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))])
    tpwgts = None if share is None else (np.asarray(share) / np.sum(share)).tolist()
    if hasattr(pymetis, "CSRAdjacency"):  # pymetis >= 2025.2
        graph_arg = {"adjacency": pymetis.CSRAdjacency(xadj.tolist(), dst[perm].tolist())}
    else:
        graph_arg = {"xadj": xadj.tolist(), "adjncy": dst[perm].tolist()}
    result = pymetis.part_graph(  # type: ignore[call-overload]  # either pymetis API
        nparts,
        **graph_arg,
        vweights=_int_weights(mean_durations(graph, cluster)).tolist(),
        eweights=_int_weights(wts[perm]).tolist() if len(e) else None,
        tpwgts=tpwgts,
        options=pymetis.Options(seed=seed),
    )
    return np.asarray(result.vertex_part, dtype=np.int64)


def _swap_pass(cut: np.ndarray, cost: np.ndarray, kind: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Pairwise-swap the devices of parts of the same device kind while that lowers
    ``sum cut[p, q] * cost[m[p], m[q]]`` (first improvement, at most 20 sweeps)."""
    m = m.copy()

    def total(x: np.ndarray) -> float:
        return float((cut * cost[np.ix_(x, x)]).sum())

    best = total(m)
    for _ in range(20):
        improved = False
        for p in range(len(m)):
            for q in range(p + 1, len(m)):
                if kind[m[p]] != kind[m[q]]:
                    continue
                m[[p, q]] = m[[q, p]]
                t = total(m)
                if t < best - 1e-12 * abs(best):
                    best, improved = t, True
                else:
                    m[[p, q]] = m[[q, p]]
        if not improved:
            break
    return m


class MetisTeacher(PlanTeacher):
    """METIS balanced min-cut partition, one part per device.

    Rule:
        - **Partition**: ``min(D, n // 4)`` parts (at least one; parts of fewer than four
          nodes only multiply transfers) of the undirected graph with METIS
          (``pymetis.part_graph``, fixed seed): vertex weight = mean compute time, edge
          weight = bytes of the producer's output, both scaled to integers. On clusters of
          unequal device speed each part's target weight is proportional to a device's
          FLOP/s. One part (``D == 1`` or one node) puts everything on the fastest device.
        - **Parts to devices**: parts are interchangeable, so heavier parts go to faster
          devices (parts by descending weight, devices by descending FLOP/s, lowest index
          first). Then, for ``D <= 64``, parts on devices of the same kind swap devices
          while that lowers ``sum over part pairs of cut bytes / pair bandwidth``, so
          parts that exchange many bytes sit close in the network hierarchy.
        - **Memory**: a node whose device breaks the memory rule of
          :class:`~placegym.envs.state.PlacementState` when its turn comes moves to the
          legal device with the least resident params.
        - **Priority order**: descending b-level, ties by topological position (a
          topological order, the critical-path teacher's selection order).

    Per-state answers follow the plan (:class:`~placegym.teachers.base.PlanTeacher`).

    Args:
        seed: METIS's random seed (the partition is deterministic given it).
    """

    name: ClassVar[str] = "metis"

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"seed: must be an integer >= 0, got {seed!r}")
        self.seed = int(seed)

    def plan(self, graph: Graph, cluster: Cluster) -> Placement:
        """The METIS partition with a critical-path order (see the class docstring)."""
        n, nd = graph.num_nodes, cluster.num_devices
        order = priority_order(graph, b_level(graph, cluster))
        # Fastest devices first; parts sized in proportion to their speed.
        parts = min(nd, max(1, n // _MIN_NODES_PER_PART))
        by_speed = np.lexsort((np.arange(nd), -cluster.flops))[:parts]
        speeds = cluster.flops[by_speed]
        share = None if np.all(speeds == speeds[0]) else speeds
        part = metis_parts(graph, cluster, len(by_speed), self.seed, share)
        k = len(by_speed)
        load = np.bincount(part, weights=mean_durations(graph, cluster), minlength=k)
        m = np.empty(k, dtype=np.int64)
        m[np.lexsort((np.arange(k), -load))] = by_speed
        if 1 < k <= _SWAP_MAX_DEVICES and graph.num_edges:
            m = self._place_parts(graph, cluster, part, m)
        device = repair_memory(graph, cluster, m[part], order)
        return Placement(device=device, order=order)

    @staticmethod
    def _place_parts(graph: Graph, cluster: Cluster, part: np.ndarray, m: np.ndarray):
        k = len(m)
        e = graph.edges
        cut = np.zeros((k, k))
        np.add.at(cut, (part[e[:, 0]], part[e[:, 1]]), graph.out_bytes[e[:, 0]])
        cost = 1.0 / cluster.pair_bandwidth
        np.fill_diagonal(cost, 0.0)
        kinds = cluster.device_traits
        _, kind = np.unique(kinds, axis=0, return_inverse=True)
        return _swap_pass(cut, cost, kind.reshape(-1), m)

    def __repr__(self) -> str:
        return f"MetisTeacher(seed={self.seed})"
