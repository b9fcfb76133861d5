"""Room for the rest of the graph: the units a device takes whole and the packing check.

A partial placement can be a dead end: every node placed so far fits, yet the resident
bytes still to come no longer fit anywhere. This module holds what the environment's
``memory_mask="room"`` (:class:`~placegym.envs.mdp.state.PlacementState`) and the teachers'
:class:`~placegym.envs.analysis.room.Room` use to avoid that:

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
- :class:`Room`: the teachers' rule, which with ``live`` also keeps room for the live
  bytes of the rule's own partial schedule (outputs awaiting consumers, working sets).
- :class:`Headroom`: a live room's partial placement kept as it grows, which answers
  most of its masks by bounds and its held bytes on one device without a pass over
  the edges (the environment's ``"live"`` and ``"timed"`` masks).

:mod:`placegym.envs.analysis.memory` re-exports every name here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from placegym.envs.analysis._memory_kernel import live_free, packs_into
from placegym.envs.core.cache import IdentityCache
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph

__all__ = ["Headroom", "Room", "Units", "packs", "room_mask", "units", "working_set"]


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
    (>= 0): a counting bound, else worst-fit decreasing, else first-fit decreasing (the
    compiled :func:`~placegym.envs.analysis._memory_kernel.packs_into`, which the rule
    kernels call too)."""
    items = np.ascontiguousarray(items, dtype=np.float64)
    free = np.ascontiguousarray(free, dtype=np.float64)
    return bool(packs_into(items, len(items), free, np.empty_like(free)))


class Room:
    """Which devices leave room for the rest of the graph: the teachers' rule
    (:func:`room_mask` is the environment's).

    A device has room for node ``v`` in a partial placement when, with ``v``'s resident
    bytes there (its whole group's when it opens the group), the resident bytes of every
    unit with no node placed yet still pack (:func:`packs`) into the devices' capacity
    left: memory less ``reserve`` (for live tensors), less the resident bytes placed,
    less those still to come of groups already open.

    With ``live`` the capacity left is also less the *live bytes of the partial
    schedule*, the list schedule's estimate of what each device holds while ``v`` runs
    (DESIGN §3's peak is never below resident bytes plus the tensors live at one
    instant, and every resident byte is held for the whole run):

    - held: the output of every placed node with a consumer not yet placed (outputs
      awaiting consumers, so a training step's stash from its forward node to its
      backward one), on its device; a node of ``recompute`` does not hold its output for
      its stash edge ``v -> v'`` (:mod:`~placegym.envs.core.recompute`: its forward runs
      again when the backward pass needs it);
    - ``v``'s working set on the device it is checked for: its output and, per input
      edge from another device, the received copy;
    - the largest *future* working set of a node not yet placed of a unit open on the
      device (when ``v`` opens its unit, of the unit's other nodes too): the node's
      output plus its inputs from outside its unit (:attr:`future`), which it will hold
      there while it runs; on a training step, the backward node's, whose forward node
      kept its stash there.

    Copies received for consumers already placed are not counted (they are freed when
    those consumers finish, which the list schedule puts before ``v``).

    Args:
        graph: the graph.
        cluster: the devices and their memory.
        reserve: ``(D,)`` bytes kept free on each device for live tensors.
        live: also keep room for the live bytes of the partial schedule (above).
        recompute: forward nodes the rule's placement recomputes (only with ``live``).
    """

    def __init__(
        self,
        graph: Graph,
        cluster: Cluster,
        reserve: np.ndarray,
        *,
        live: bool = False,
        recompute: np.ndarray | None = None,
    ) -> None:
        self.graph, self.cluster = graph, cluster
        self.units = units(graph)
        self.reserve = np.asarray(reserve, dtype=np.float64)
        self.capacity = cluster.memory - self.reserve
        self.live = bool(live)
        self.recompute = np.unique(
            np.zeros(0, dtype=np.int64) if recompute is None else np.asarray(recompute)
        ).astype(np.int64)
        # the input edges in the producer CSR's order (the compiled twin's)
        n = graph.num_nodes
        ptr, src = graph.producer_csr
        dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
        self._src, self._dst, self._ptr = src, dst, np.asarray(ptr, dtype=np.int64)
        stash = np.isin(src, self.recompute) & (dst == src + n // 2)
        #: ``(E,)`` whether each input edge keeps its producer's output live until the
        #: consumer runs (all but the stash edges of recomputed nodes).
        self.keeps = ~stash
        #: ``(E,)`` whether each input edge's bytes are held by its consumer's run
        #: beyond what its unit holds (all but the kept edges inside one unit).
        self.counts = ~(self.keeps & (self.units.of[src] == self.units.of[dst]))
        #: ``(n,)`` each node's working set when it runs, before any input is on its
        #: device: its output plus the bytes of its counted input edges.
        self.future = graph.out_bytes + np.bincount(
            dst[self.counts], weights=graph.out_bytes[src[self.counts]], minlength=n
        )

    def held(self, device: np.ndarray) -> np.ndarray:
        """``(D,)`` the outputs of placed nodes awaiting a consumer not yet placed, per
        device (the held part of the live bytes: class docstring)."""
        src, dst, nd = self._src, self._dst, len(self.capacity)
        waiting = (device[src] >= 0) & (device[dst] < 0) & self.keeps
        u = np.unique(src[waiting])
        return np.bincount(device[u], weights=self.graph.out_bytes[u], minlength=nd)

    def working(self, device: np.ndarray, v: int) -> np.ndarray:
        """``(D,)`` ``v``'s working set on each device (its producers placed): its
        output plus each input edge's bytes from another device."""
        g, nd = self.graph, len(self.capacity)
        ptr, idx = g.producer_csr
        src = idx[ptr[v] : ptr[v + 1]]
        local = np.bincount(device[src], weights=g.out_bytes[src], minlength=nd)
        return g.out_bytes[v] + g.in_bytes[v] - local

    def _opening(self, device: np.ndarray, others: np.ndarray) -> np.ndarray:
        """``(D,)`` the largest working set of ``others`` (the rest of a unit being
        opened) on each device, less their inputs placed there already."""
        g, nd = self.graph, len(self.capacity)
        ptr = g.producer_csr[0]
        most = np.zeros(nd)
        for w in others.tolist():
            lo, hi = int(ptr[w]), int(ptr[w + 1])
            src = self._src[lo:hi]
            on = self.counts[lo:hi] & (device[src] >= 0)
            local = np.bincount(device[src[on]], weights=g.out_bytes[src[on]], minlength=nd)
            np.maximum(most, self.future[w] - local, out=most)
        return most

    def _state(
        self, device: np.ndarray, param_used: np.ndarray, v: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(free, take, items)`` of :meth:`checker`: each device's capacity left, what
        ``v`` takes on each device (its resident bytes, and with ``live`` its working
        set), and the unopened units' bytes (descending, > 0). ``free`` is compiled
        (:func:`~placegym.envs.analysis._memory_kernel.live_free`): capacity less placed and
        pending resident bytes, with ``live`` less :meth:`held` and the largest working
        set to come (class docstring); ``items`` as :meth:`Units.unopened`."""
        u, pb = self.units, self.graph.param_bytes
        unit_dev, items = np.empty(u.count, dtype=np.int64), np.empty(u.count)
        free = np.empty(len(self.capacity))
        count = live_free(
            v, device, u.of, u.nbytes, pb, self.capacity, param_used, self.graph.out_bytes,
            self.future, self._src, self._ptr, self.keeps, self.counts, self.live,
            u.by_size, unit_dev, free, items,
        )  # fmt: skip
        mine = int(u.of[v])
        need = float(u.nbytes[mine]) if unit_dev[mine] < 0 else float(pb[v])
        extra = np.zeros(len(free))
        if self.live:
            extra = self.working(device, v)
            if unit_dev[mine] < 0:  # v opens its unit: its other nodes will run there
                others = u.members[mine][u.members[mine] != v]
                if others.size:
                    extra = np.maximum(extra, self._opening(device, others))
        return free, need + extra, items[:count]

    def checker(self, device: np.ndarray, param_used: np.ndarray, v: int) -> Callable[[int], bool]:
        """``fits(d)``: whether device ``d`` has room for ``v`` in the partial placement
        ``device`` (-1 unplaced) with ``param_used`` resident bytes per device."""
        free, take, items = self._state(device, param_used, v)

        def fits(d: int) -> bool:
            f = free.copy()
            f[d] -= take[d]
            if take[d] > 0 and f[d] < 0:
                return False
            return packs(items, np.maximum(f, 0.0))  # a device past its capacity takes none

        return fits

    def mask(
        self, device: np.ndarray, param_used: np.ndarray, v: int, candidates: np.ndarray
    ) -> np.ndarray:
        """``(D,)`` bool: the devices among ``candidates`` (``(D,)`` bool) with room for
        ``v``: :meth:`checker`'s answer for each, decided for most at once by the counting
        bound of :func:`packs`."""
        free, take, items = self._state(device, param_used, v)
        own = free - take
        ok = candidates & ((take <= 0) | (own >= 0))
        if not len(items):
            return ok
        return _packs_each(ok, items, np.maximum(free, 0.0), np.maximum(own, 0.0))


class Headroom:
    """What a partial placement under a live :class:`Room` has placed, kept as it grows,
    so that most of the room's questions are answered without its ``O(E + n)`` pass.

    - :meth:`sure`: whether every candidate device surely has room for the next node, by
      bounds that only over-count what :meth:`Room.mask` subtracts. A device's capacity
      left is at least its capacity less the resident bytes of the units opened on it,
      less the outputs of every node placed on it (the held outputs are some of them),
      less the largest :attr:`Room.future` (the working set still to come); what the
      node takes is at most its resident need plus the largest of every node's output
      and inputs and of :attr:`Room.future` (its working set, or its unit's). Where
      every candidate keeps ``need`` beside those bounds, and the resident bytes of
      every unit not yet opened pass the counting bound of :func:`packs` against them
      (the first test :meth:`Room.mask` makes), the mask is every candidate: :meth:`sure`
      says so and the caller skips the pass. Each comparison keeps a margin of 1e-9 of
      the bytes compared, far above the rounding of the sums, so ``sure`` is never True
      where :meth:`Room.mask` would refuse a candidate. ``O(D)`` a call.
    - :meth:`held_on`: :meth:`Room.held` on one device, the same float sum in the same
      order (ascending node), from a count per node of its kept edges to unplaced
      consumers. ``O(n)`` vectorised, against ``O(E log E)``.

    Args:
        room: a live room (``live=True``).
    """

    def __init__(self, room: Room) -> None:
        g, u = room.graph, room.units
        n, nd = g.num_nodes, len(room.capacity)
        self.room = room
        self.opened = np.zeros(u.count, dtype=bool)
        #: ``(D,)`` resident bytes of the units opened on each device.
        self.committed = np.zeros(nd)
        #: ``(D,)`` outputs of the nodes placed on each device.
        self.outputs = np.zeros(nd)
        #: Resident bytes of the units not yet opened.
        self.unopened = float(u.nbytes.sum())
        self._first = float(u.nbytes.max()) if u.count else 0.0
        self._future = float(room.future.max()) if n else 0.0
        self._take = max(self._future, float((g.out_bytes + g.in_bytes).max()) if n else 0.0)
        #: ``(n,)`` each node's kept edges to consumers not yet placed.
        self.pending = np.bincount(room._src[room.keeps], minlength=n).astype(np.int64)

    def copy(self) -> Headroom:
        """An independent copy (the room shared: it is read-only)."""
        new = object.__new__(Headroom)
        new.__dict__.update(self.__dict__)
        for k in ("opened", "committed", "outputs", "pending"):
            setattr(new, k, getattr(self, k).copy())
        return new

    def place(self, v: int, device: int) -> None:
        """``v`` is placed on ``device`` (:meth:`held_on` first, if it is wanted)."""
        room = self.room
        unit = int(room.units.of[v])
        if not self.opened[unit]:
            self.opened[unit] = True
            self.committed[device] += room.units.nbytes[unit]
            self.unopened -= float(room.units.nbytes[unit])
        self.outputs[device] += room.graph.out_bytes[v]
        lo, hi = room._ptr[v], room._ptr[v + 1]
        src = room._src[lo:hi][room.keeps[lo:hi]]
        np.subtract.at(self.pending, src, 1)

    def held_on(self, device: np.ndarray, b: int) -> float:
        """``Room.held(device)[b]``, bit for bit, for the partial placement ``device``
        that :meth:`place` has seen."""
        on = np.flatnonzero((device == b) & (self.pending > 0))
        return float(np.cumsum(self.room.graph.out_bytes[on])[-1]) if len(on) else 0.0

    def sure(self, candidates: np.ndarray, need: float) -> bool:
        """Whether :meth:`Room.mask` of the next node, of resident ``need``, is surely
        ``candidates`` (class docstring)."""
        capacity = self.room.capacity
        free = capacity - self.committed - self.outputs - self._future
        own = free - need - self._take
        if np.any(candidates & (own < 1e-9 * capacity)):
            return False
        if self.unopened <= 0:
            return True
        spare = np.maximum(free - self._first, 0.0)
        least = float(spare.sum() - spare.max())  # the counting bound, whatever the device
        return self.unopened * (1 + 1e-9) + 1e-9 * float(capacity.sum()) <= least


def _packs_each(
    ok: np.ndarray, items: np.ndarray, left: np.ndarray, mine: np.ndarray
) -> np.ndarray:
    """``ok`` narrowed to the devices ``d`` for which ``items`` (descending, > 0) pack
    (:func:`packs`) into ``left`` with ``left[d]`` replaced by ``mine[d]`` (both >= 0):
    the counting bound (packs' first two tests) for every device at once, then the
    packing itself for the devices it leaves undecided."""
    total, first = float(items.sum()), float(items[0])
    spare_all = np.maximum(left - first, 0.0)
    room = left.sum() - left + mine
    spare = spare_all.sum() - spare_all + np.maximum(mine - first, 0.0)
    ok = ok & (total <= room)
    out = ok & (total <= spare)
    for d in np.flatnonzero(ok & ~out).tolist():
        f = left.copy()
        f[d] = mine[d]
        out[d] = packs(items, f)
    return out


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
    return _packs_each(ok, items, np.maximum(free, 0.0), np.maximum(own, 0.0))
