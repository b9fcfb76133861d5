"""Static analysis of a graph on a cluster: mean costs, b-level, t-level.

Costs follow HEFT's convention: a node's compute cost is the mean over devices of its
rule-1 duration (DESIGN §3.1 with profiled costs where given, no noise;
:mod:`placegym.envs.core.costs`), an edge's communication cost is the mean over
ordered device pairs ``a != b`` of ``latency + out_bytes / bandwidth`` (0 with one device).

- ``b_level[v]`` = cost of the longest compute + communication path from ``v`` to a sink,
  ``v``'s own compute included (HEFT's upward rank).
- ``t_level[v]`` = cost of the longest such path from a source to ``v``, ``v`` excluded.
- ``t_level + b_level`` is maximal (= the critical path length) on critical nodes.

:func:`overflow_penalty` prices resident parameters beyond a device's memory (the memory
term of NEST's cost and of the ``nest`` reward's potential).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placegym.envs.core.cache import IdentityCache
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.costs import cost_table, node_durations
from placegym.envs.core.graph import Graph

__all__ = [
    "CostTable",
    "b_level",
    "critical_path_length",
    "durations_on",
    "mean_comm",
    "mean_durations",
    "share_costs",
    "step_costs",
    "t_level",
]


def durations_on(graph: Graph, cluster: Cluster, nodes: np.ndarray | int | None = None):
    """Rule-1 durations (no noise, profiled costs where the cluster has them):
    ``(n, D)`` for all nodes (computed once per graph and cluster object, read-only), or
    ``(D,)`` for one node."""
    if nodes is None:
        return _all_durations(graph, cluster)
    idx = np.asarray(nodes)
    return node_durations(graph, cluster, idx[..., None], np.arange(cluster.num_devices))


def _durations(graph: Graph, cluster: Cluster) -> np.ndarray:
    """The ``(n, D)`` durations, computed once per distinct device (speeds, launch
    overhead, cost class: a 1,024-device cluster of one GPU type is one column) and
    spread to every device: the same values, in one ``(n, D)`` pass."""
    idx = np.arange(graph.num_nodes)
    key = np.stack(
        [
            cluster.flops,
            cluster.mem_bandwidth,
            cluster.launch_overhead,
            cost_table(graph, cluster)[1].astype(np.float64),
        ],
        axis=1,
    )
    _, first, which = np.unique(key, axis=0, return_index=True, return_inverse=True)
    columns = node_durations(graph, cluster, idx[:, None], first)
    out = np.take(columns, which.ravel(), axis=1)
    out.setflags(write=False)
    return out


#: The ``(n, D)`` durations per (graph, cluster) object: every rule, bound and level of
#: a placement reads them (an ``n * D`` array: a few are kept).
_all_durations = IdentityCache(_durations, size=4)


def share_costs(graph: Graph, cluster: Cluster, like: Cluster) -> None:
    """Take ``like``'s durations and b-levels of ``graph`` (computed once) as
    ``cluster``'s: for a ``cluster`` that differs from ``like`` only where neither reads
    (e.g. its devices' memory), so that they are not computed again."""
    _all_durations.put(graph, cluster, value=durations_on(graph, like))
    _b_levels.put(graph, cluster, value=_b_levels(graph, like))


def mean_durations(graph: Graph, cluster: Cluster) -> np.ndarray:
    """``(n,)`` mean over devices of each node's duration."""
    return durations_on(graph, cluster).mean(axis=1)


def mean_comm(graph: Graph, cluster: Cluster) -> np.ndarray:
    """``(n,)`` mean time to send each node's output between two distinct devices."""
    d = cluster.num_devices
    if d == 1:
        return np.zeros(graph.num_nodes)
    off = ~np.eye(d, dtype=bool)
    lat = cluster.pair_latency[off].mean()
    inv_bw = (1.0 / cluster.pair_bandwidth[off]).mean()
    return lat + graph.out_bytes * inv_bw


def b_level(graph: Graph, cluster: Cluster) -> np.ndarray:
    """``(n,)`` longest mean-cost path from each node to a sink, its own compute included
    (computed once per graph and cluster object; each call returns its own copy)."""
    return _b_levels(graph, cluster).copy()


def _b_level(graph: Graph, cluster: Cluster) -> np.ndarray:
    w = mean_durations(graph, cluster).tolist()
    comm = mean_comm(graph, cluster).tolist()
    ptr, idx = graph.consumer_csr
    ptr, idx = ptr.tolist(), idx.tolist()
    bl = [0.0] * graph.num_nodes
    for v in reversed(graph.topological_order.tolist()):
        best = 0.0
        for c in idx[ptr[v] : ptr[v + 1]]:
            if bl[c] > best:
                best = bl[c]
        bl[v] = w[v] + (comm[v] + best if ptr[v + 1] > ptr[v] else 0.0)
    out = np.array(bl)
    out.setflags(write=False)
    return out


#: The b-levels per (graph, cluster) object (every list rule ranks by them).
_b_levels = IdentityCache(_b_level, size=4)


def t_level(graph: Graph, cluster: Cluster) -> np.ndarray:
    """``(n,)`` longest mean-cost path from a source to each node, its own compute excluded."""
    w = mean_durations(graph, cluster).tolist()
    comm = mean_comm(graph, cluster).tolist()
    ptr, idx = graph.producer_csr
    ptr, idx = ptr.tolist(), idx.tolist()
    tl = [0.0] * graph.num_nodes
    for v in graph.topological_order.tolist():
        best = 0.0
        for u in idx[ptr[v] : ptr[v + 1]]:
            x = tl[u] + w[u] + comm[u]
            if x > best:
                best = x
        tl[v] = best
    return np.array(tl)


def critical_path_length(graph: Graph, cluster: Cluster) -> float:
    """Length of the longest mean-cost path (0 for an empty graph)."""
    if graph.num_nodes == 0:
        return 0.0
    return float(b_level(graph, cluster).max())


@dataclass(frozen=True, eq=False)
class CostTable:
    """Per (graph, cluster) data for step-by-step placement, built once.

    Attributes:
        duration: ``(n, D)`` rule-1 duration of each node on each device.
        inv_bandwidth: ``(D, D)`` seconds per byte of each channel (0 on the diagonal).
        latency: ``(D, D)`` channel latency (0 on the diagonal).
        successors, predecessors: per node, Python lists of ids (fast to iterate).
        in_total: ``(n,)`` total bytes of each node's inputs (numpy's sum of its
            producers' ``out_bytes``, in producer order).
    """

    duration: np.ndarray
    inv_bandwidth: np.ndarray
    latency: np.ndarray
    successors: list[list[int]]
    predecessors: list[list[int]]
    in_total: np.ndarray


def _build_cost_table(graph: Graph, cluster: Cluster) -> CostTable:
    off = ~np.eye(cluster.num_devices, dtype=bool)
    cptr, cidx = graph.consumer_csr
    pptr, pidx = graph.producer_csr
    cl, pl = cidx.tolist(), pidx.tolist()
    out = graph.out_bytes
    in_total = np.array([out[pidx[pptr[v] : pptr[v + 1]]].sum() for v in range(graph.num_nodes)])
    in_total.setflags(write=False)
    return CostTable(
        duration=durations_on(graph, cluster),
        inv_bandwidth=np.where(off, 1.0 / cluster.pair_bandwidth, 0.0),
        latency=np.where(off, cluster.pair_latency, 0.0),
        successors=[cl[cptr[v] : cptr[v + 1]] for v in range(graph.num_nodes)],
        predecessors=[pl[pptr[v] : pptr[v + 1]] for v in range(graph.num_nodes)],
        in_total=in_total,
    )


#: The :class:`CostTable` of a (graph, cluster) pair (what step-by-step placement reads);
#: the last 16 pairs are cached.
step_costs = IdentityCache(_build_cost_table, size=16)
