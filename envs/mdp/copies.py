"""Received copies in time: what ``memory_mask="timed"`` adds to the ``"live"`` mask.

The ``"live"`` mask (:class:`~placegym.envs.analysis.room.Room` with ``live``) counts the
copies a node receives from other devices as part of its working set, at its own run.
The simulator allocates such a copy on the consumer's device when its transfer starts,
as soon as the producer has finished (DESIGN §3), and frees it when the consumer
finishes: where the consumer runs long after its producer, the copy shares the device
with the runs in between, which were checked without it. :class:`CopyTimes` keeps, per
placed node, the live bytes counted at its run, and adds a copy to the runs that the
contention-free list schedule of :class:`~placegym.envs.mdp.state.PlacementState` puts
after the copy's estimated arrival; ``"timed"`` then also requires that those runs still
fit. The list schedule is an estimate: a copy that the simulated schedule overlaps with a
run the estimate puts before it is not seen.
"""

from __future__ import annotations

import numpy as np

from placegym.envs.analysis.levels import CostTable
from placegym.envs.core.graph import Graph

__all__ = ["CopyTimes"]


class CopyTimes:
    """The live bytes counted at each placed node's run on its device.

    ``demand[w]``, set when ``w`` is placed on ``b``: the ``"live"`` mask's bytes at its
    run, the outputs held on ``b`` (awaiting unplaced consumers) plus ``w``'s working set
    there (its output and its received copies); raised, whenever a node ``v`` is placed
    on ``b`` later, by each of ``v``'s copies on ``b`` whose estimated arrival (its
    producer's list-schedule finish, plus latency and bytes over bandwidth between the
    two devices) is before ``w``'s list-schedule finish.

    Device ``b`` has room for ``v`` (:meth:`room`) when every node ``w`` on it keeps
    ``demand[w]`` plus those of ``v``'s copies within ``b``'s memory less its reserve,
    its resident bytes placed and ``v``'s own resident need. It keeps, per device, the
    largest demand of its nodes: a device where that plus all of ``v``'s copy bytes fits
    has room without looking at its nodes (the same answer), so a check costs ``O(k + D)``
    where memory is ample and ``O(k · P)`` at most, for ``k`` inputs of ``v`` and ``P``
    nodes placed on the devices that need the closer look.

    Args:
        graph: the graph.
        costs: its step costs on the cluster (latency and inverse bandwidth per pair).
        capacity: ``(D,)`` each device's memory less its reserve.
    """

    def __init__(self, graph: Graph, costs: CostTable, capacity: np.ndarray) -> None:
        self.graph = graph
        self.demand = np.zeros(graph.num_nodes)
        ptr, idx = graph.producer_csr
        self._ptr, self._idx = np.asarray(ptr, dtype=np.int64), np.asarray(idx, dtype=np.int64)
        self._latency, self._inv_bw = costs.latency, costs.inv_bandwidth
        self.capacity = np.asarray(capacity, dtype=np.float64)
        self._top = np.full(len(self.capacity), -np.inf)  # largest demand per device

    def copy(self) -> CopyTimes:
        """An independent copy (the demands copied, the rest shared: it is read-only)."""
        new = object.__new__(CopyTimes)
        new.__dict__.update(self.__dict__)
        new.demand = self.demand.copy()
        new._top = self._top.copy()
        return new

    def _extra(self, device: np.ndarray, finish: np.ndarray, v: int, placed: np.ndarray):
        """``(P,)`` for each of the ``placed`` nodes ``w``: the bytes of ``v``'s copies on
        ``w``'s device that arrive before ``w``'s list-schedule finish, were ``v`` placed
        there."""
        src = self._idx[self._ptr[v] : self._ptr[v + 1]]
        src = src[device[src] >= 0]
        if not len(src) or not len(placed):
            return np.zeros(len(placed))
        out = self.graph.out_bytes[src]
        a, b = device[src][:, None], device[placed][None, :]  # (k, 1), (1, P)
        arrival = finish[src][:, None] + self._latency[a, b] + out[:, None] * self._inv_bw[a, b]
        early = (a != b) & (arrival < finish[placed][None, :])
        return (early * out[:, None]).sum(axis=0)

    def room(
        self,
        device: np.ndarray,
        finish: np.ndarray,
        resident: np.ndarray,
        v: int,
        candidates: np.ndarray,
    ) -> np.ndarray:
        """``(D,)`` bool: the ``candidates`` with room for ``v``'s copies beside the runs
        already on them (class docstring); ``device`` and ``finish``: the partial
        placement and its list-schedule finishes; ``resident``: ``(D,)`` the resident
        bytes each device would hold with ``v`` there."""
        limit = self.capacity - resident
        src = self._idx[self._ptr[v] : self._ptr[v + 1]]
        copies = float(self.graph.out_bytes[src[device[src] >= 0]].sum())
        # every copy counted at every run: an upper bound of the exact worst (slack for
        # the order of the sums), so a device it clears has room
        unsure = candidates & (self._top + copies * (1.0 + 1e-9) > limit)
        if not unsure.any():
            return candidates
        placed = np.flatnonzero(device >= 0)
        placed = placed[unsure[device[placed]]]
        worst = np.full(len(self.capacity), -np.inf)
        np.maximum.at(
            worst, device[placed], self.demand[placed] + self._extra(device, finish, v, placed)
        )
        return candidates & (~unsure | (worst <= limit))

    def record(
        self, device: np.ndarray, finish: np.ndarray, v: int, b: int, live_bytes: float
    ) -> None:
        """``v`` is placed on ``b`` (``device`` and ``finish`` not yet showing it), with
        ``live_bytes`` counted at its run: its copies join the runs on ``b`` that they
        overlap."""
        placed = np.flatnonzero(device == b)
        self.demand[placed] += self._extra(device, finish, v, placed)
        self.demand[v] = live_bytes
        top = max(live_bytes, float(self.demand[placed].max())) if len(placed) else live_bytes
        self._top[b] = max(self._top[b], top)
