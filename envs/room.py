"""Room for the rest of the graph: the units a device takes whole and the packing check.

A partial placement can be a dead end: every node placed so far fits, yet the resident
bytes still to come no longer fit anywhere. This module holds what the environment's
``memory_mask="room"`` (:class:`~placegym.envs.state.PlacementState`) and the teachers'
:class:`~placegym.teachers._memory.Room` use to avoid that:

- :func:`units`: the graph with its co-location groups contracted: each group is one
  *unit*, each node outside a group its own; a unit's resident bytes go to one device
  together.
- :func:`packs`: whether items pack into bins (a counting bound, else worst-fit
  decreasing, else first-fit decreasing). A sufficient check, not an exact one: bin
  packing is NP-hard, so ``False`` can mean that these heuristics found no packing.
- :func:`working_set`: the bytes a node needs on its device while it runs, beyond the
  resident ones: its output and one copy of each input (DESIGN §3: the output lives from
  the node's start, each input, or its received copy, at least until the node finishes).
  A device's simulated peak is at least its resident bytes plus the largest working set
  of a node it runs, so this part of the check forbids no feasible placement.
- :func:`room_mask`: the devices with room for a node (the rule is stated there).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from placegym.envs.cache import IdentityCache
from placegym.envs.graph import Graph

__all__ = ["Units", "packs", "room_mask", "units", "working_set"]


@dataclass(frozen=True, eq=False)
class Units:
    """A graph's co-location groups contracted: the units a device takes whole.

    Attributes:
        of: ``(n,)`` unit of each node.
        first: ``(U,)`` first (lowest-id) node of each unit; units are numbered by it.
        nbytes: ``(U,)`` resident bytes of each unit (its nodes' ``param_bytes``).
        members: each unit's nodes, ascending.
        by_size: ``(U,)`` units by descending bytes, ties by unit (the packing order).
    """

    of: np.ndarray
    first: np.ndarray
    nbytes: np.ndarray
    members: tuple[np.ndarray, ...]
    by_size: np.ndarray

    @property
    def count(self) -> int:
        """Number of units."""
        return int(self.first.shape[0])

    def unopened(self, opened: np.ndarray, mine: int) -> np.ndarray:
        """The resident bytes still to place, in packing order (descending, > 0): of
        the units not ``opened`` (``(U,)`` bool: a node of it is placed) but ``mine``."""
        order = self.by_size
        items = self.nbytes[order[~opened[order] & (order != mine)]]
        return items[items > 0]


def _units(graph: Graph) -> Units:
    n = graph.num_nodes
    head = np.where(graph.group_first >= 0, graph.group_first, np.arange(n))
    first, of = np.unique(head, return_inverse=True)
    of = of.reshape(-1).astype(np.int64)
    nbytes = np.bincount(of, weights=graph.param_bytes, minlength=len(first))
    sort = np.argsort(of, kind="stable")
    members = tuple(np.split(sort, np.cumsum(np.bincount(of, minlength=len(first)))[:-1]))
    by_size = np.lexsort((np.arange(len(first)), -nbytes)).astype(np.int64)
    return Units(of, first.astype(np.int64), nbytes, members, by_size)


#: :class:`Units` of a graph (the last 32 graphs are kept).
units = IdentityCache(_units, size=32)


def packs(items: np.ndarray, free: np.ndarray) -> bool:
    """Whether ``items`` (bytes > 0, descending) pack into devices of ``free`` bytes
    (>= 0): a counting bound, else worst-fit decreasing, else first-fit decreasing."""
    if not len(items):
        return True
    total = float(items.sum())
    if total > float(free.sum()):
        return False
    # any-fit fails on an item x only when every device has less than x <= items[0]
    # left, i.e. after more than sum(max(free - items[0], 0)) bytes were placed
    if total <= float(np.maximum(free - items[0], 0.0).sum()):
        return True
    heap = [-f for f in free.tolist()]
    heapq.heapify(heap)
    xs = items.tolist()
    for x in xs:
        top = -heap[0]
        if x > top:
            break
        heapq.heapreplace(heap, -(top - x))
    else:
        return True
    left = free.tolist()
    for x in xs:
        for d, f in enumerate(left):
            if f >= x:
                left[d] = f - x
                break
        else:
            return False
    return True


def working_set(graph: Graph, duration: np.ndarray) -> np.ndarray:
    """``(n, D)``: the bytes node ``v`` holds live on device ``d`` while it runs there
    beyond the resident ones, ``out_bytes[v]`` plus its inputs' ``out_bytes`` (module
    docstring); 0 where its ``duration`` on ``d`` is 0 (an instant allocates its output
    after its inputs are freed, so it claims nothing)."""
    ws = (graph.out_bytes + graph.in_bytes)[:, None]
    return np.where(duration > 0, ws, 0.0)


def room_mask(
    fits: np.ndarray,
    need: float,
    ws: np.ndarray,
    items: np.ndarray,
    memory: np.ndarray,
    committed: np.ndarray,
    ws_max: np.ndarray,
) -> np.ndarray:
    """``(D,)`` bool: the devices among ``fits`` with room for a node.

    Device ``d`` has room when, with the node there, (1) ``d`` still holds its resident
    bytes and the largest working set of the nodes it runs: ``committed[d] + need +
    max(ws_max[d], ws[d]) <= memory[d]``; and (2) the resident bytes of every unit not
    yet opened (``items``, descending, > 0) still pack (:func:`packs`) into what each
    device has left, ``memory - committed - ws_max`` (with (1)'s terms on ``d``).

    Args:
        fits: ``(D,)`` bool, the devices to check (those the node's bytes fit).
        need: the node's resident bytes (its whole unit's when it opens a group).
        ws: ``(D,)`` the node's :func:`working_set` on each device.
        items: the unopened units' resident bytes, descending, > 0.
        memory: ``(D,)`` device memory.
        committed: ``(D,)`` resident bytes placed plus those still to come of the groups
            already open on each device.
        ws_max: ``(D,)`` largest working set of a node placed on each device.
    """
    free = memory - committed - ws_max
    own = memory - committed - need - np.maximum(ws_max, ws)
    ok = fits & (own >= 0)
    if not len(items):
        return ok
    left = np.maximum(free, 0.0)
    total, first = float(items.sum()), float(items[0])
    # counting bound for every device at once (packs' first two tests), then the rest
    spare_all = np.maximum(left - first, 0.0)
    room = left.sum() - left + np.maximum(own, 0.0)
    spare = spare_all.sum() - spare_all + np.maximum(own - first, 0.0)
    ok &= total <= room
    out = ok & (total <= spare)
    for d in np.flatnonzero(ok & ~out).tolist():
        f = left.copy()
        f[d] = own[d]
        out[d] = packs(items, f)
    return out
