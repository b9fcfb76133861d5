"""Helpers shared by the heuristic teachers: identity caches, priority orders, the state's
memory and co-location rule outside a state."""

from __future__ import annotations

import numpy as np

from placegym.envs.core.cache import IdentityCache
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph

# TIE_RTOL, the relative tolerance under which two scores count as tied, is defined in the
# compiled rule kernel: numba freezes it into its cached kernels and recompiles them only
# when that file changes.
from placegym.teachers._rule_kernel import TIE_RTOL

__all__ = [
    "TIE_RTOL",
    "IdentityCache",
    "Resident",
    "fits",
    "priority_order",
    "repair_memory",
    "ties",
]


def ties(scores: np.ndarray, candidates: np.ndarray, *, best: str = "max") -> np.ndarray:
    """The candidates whose score is within :data:`TIE_RTOL` of the best one (ascending)."""
    s = scores[candidates]
    target = s.max() if best == "max" else s.min()
    tol = TIE_RTOL * max(abs(float(target)), 1e-300)
    keep = np.abs(s - target) <= tol
    return np.sort(candidates[keep])


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


class Resident:
    """:meth:`PlacementState.place_mask <placegym.envs.mdp.state.PlacementState.place_mask>`
    outside a state: resident bytes per device and each co-location group's device, for
    plans built node by node.

    :meth:`legal` is the state's rule: a node whose group has a member placed may only go
    to that member's device; otherwise the devices whose resident bytes plus the node's
    (the whole group's, for the first member of a group) fit, every device when none
    does. Without groups it is :func:`fits` of the node's own bytes.
    """

    def __init__(self, graph: Graph, cluster: Cluster) -> None:
        self.graph, self.cluster = graph, cluster
        self.used = np.zeros(cluster.num_devices)
        self.device = np.full(graph.num_nodes, -1, dtype=np.int64)
        self._groups = graph.groups
        self._group_device: dict[int, int] = {}

    def need(self, v: int) -> float:
        """Resident bytes placing ``v`` commits a device to (its group's if it opens one)."""
        g = int(self.graph.group[v]) if self._groups else -1
        if g < 0 or g in self._group_device:
            return float(self.graph.param_bytes[v])
        return float(self.graph.param_bytes[self._groups[g]].sum())

    def forced(self, v: int) -> int:
        """The device of ``v``'s group when a member is placed, else -1."""
        if not self._groups:
            return -1
        return self._group_device.get(int(self.graph.group[v]), -1)

    def legal(self, v: int) -> np.ndarray:
        """``(D,)`` bool: the devices the state's rule allows ``v`` now (class docstring)."""
        d = self.forced(v)
        if d >= 0:
            only = np.zeros(self.cluster.num_devices, dtype=bool)
            only[d] = True
            return only
        return fits(self.used, self.need(v), self.cluster.memory)

    def place(self, v: int, d: int) -> None:
        """Put ``v`` on device ``d``."""
        self.device[v] = d
        self.used[d] += self.graph.param_bytes[v]
        g = int(self.graph.group[v]) if self._groups else -1
        if g >= 0:
            self._group_device.setdefault(g, d)


def repair_memory(
    graph: Graph, cluster: Cluster, device: np.ndarray, order: np.ndarray
) -> np.ndarray:
    """Move nodes whose planned device breaks the state's rule (:class:`Resident`),
    walking in ``order``.

    A node whose device is illegal when its turn comes goes to the legal device with the
    least resident params (lowest index on ties), as a rollout of the plan through
    :class:`~placegym.envs.mdp.state.PlacementState` would have to; a node of a group with a
    member placed goes to that member's device, so groups stay whole.
    """
    device = np.array(device, dtype=np.int64)
    if not (graph.param_bytes > 0).any() and not graph.groups:
        return device
    walk = Resident(graph, cluster)
    for v in order.tolist():
        legal = walk.legal(v)
        if not legal[device[v]]:
            cand = np.flatnonzero(legal)
            device[v] = int(cand[np.argmin(walk.used[cand])])
        walk.place(v, int(device[v]))
    return device
