"""Helpers shared by the heuristic teachers: identity caches, priority orders, memory rule."""

from __future__ import annotations

import numpy as np

from placegym.envs.cache import IdentityCache
from placegym.envs.cluster import Cluster
from placegym.envs.graph import Graph

__all__ = ["IdentityCache", "fits", "priority_order", "repair_memory"]


def priority_order(graph: Graph, score: np.ndarray) -> np.ndarray:
    """Nodes by descending ``score``, ties broken by position in the topological order.

    For a score that never increases along an edge (b-level, upward rank) the result is a
    topological order.
    """
    pos = np.empty(graph.num_nodes, dtype=np.int64)
    pos[graph.topological_order] = np.arange(graph.num_nodes)
    return np.lexsort((pos, -np.asarray(score, dtype=np.float64))).astype(np.int64)


def fits(param_used: np.ndarray, param_bytes: float, memory: np.ndarray) -> np.ndarray:
    """``(D,)`` legal devices under PlacementState's memory rule.

    A device is legal when its resident params plus ``param_bytes`` fit in its memory; if
    none fits, every device is legal (the OOM then shows in the simulated outcome).
    """
    ok = param_used + param_bytes <= memory
    return ok if ok.any() else np.ones_like(ok)


def repair_memory(
    graph: Graph, cluster: Cluster, device: np.ndarray, order: np.ndarray
) -> np.ndarray:
    """Move nodes whose planned device breaks the memory rule, walking in ``order``.

    A node whose device is illegal when its turn comes goes to the legal device with the
    least resident params (lowest index on ties), as a rollout of the plan through
    :class:`~placegym.envs.state.PlacementState` would have to.
    """
    device = np.array(device, dtype=np.int64)
    used = np.zeros(cluster.num_devices)
    pb = graph.param_bytes
    if not (pb > 0).any():
        return device
    for v in order.tolist():
        legal = fits(used, pb[v], cluster.memory)
        if not legal[device[v]]:
            cand = np.flatnonzero(legal)
            device[v] = int(cand[np.argmin(used[cand])])
        used[device[v]] += pb[v]
    return device
