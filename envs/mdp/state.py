"""The SEL/PLC placement process of one graph on one cluster (DESIGN §4), without Gymnasium.

One episode assigns every node once; steps alternate SEL (pick a node of the *frontier*:
unassigned nodes all of whose producers are assigned; the pick order becomes the priority
order) and PLC (pick a device for the node just selected). :class:`PlacementState` holds
that process and the quantities that teachers and observations need:

- legality: :meth:`select_mask` (the frontier) and :meth:`place_mask`: for a node of a
  co-location group that already has a member placed, that member's device alone (the
  group shares one device); otherwise, by ``memory_mask``:

  - ``True`` (or ``"resident"``, the default): the devices whose resident params plus
    the node's own fit in memory (for the first node of a group: plus every member's,
    since the group follows it there); if none fits, every device is legal and the OOM
    shows in the simulated outcome;
  - ``"room"``: of those, the devices that leave room for the rest of the graph
    (:func:`~placegym.envs.analysis.room.room_mask`): the device still holds its resident bytes
    plus the largest working set (output and inputs) of a node it runs, and the resident
    bytes of the units not yet opened still pack into what every device has left. It
    avoids the dead ends where a later node fits nowhere; where no device has room, the
    ``True`` rule applies. On graphs whose memory cannot bind
    (:func:`~placegym.envs.analysis.memory.memory_may_bind`) these rules allow every device;
  - ``"live"``: of the ``True`` devices, those with room for the live bytes of the
    partial placement as well, the teachers' rule
    (:class:`~placegym.envs.analysis.room.Room` with ``live``: outputs awaiting
    consumers, so a training step's stash, the node's working set and the largest
    working set still to run on the device, plus the packing of the resident bytes to
    come); where no device has room, the ``True`` rule applies. It costs ``O(E + n)``
    per PLC step where memory may bind, ``O(D)`` where the bounds of a
    :class:`~placegym.envs.analysis.room.Headroom` kept as nodes are placed show every
    device with room (the same answer), nothing where memory cannot bind. On a training
    step that no placement fits without recompute
    (:func:`~placegym.envs.analysis.memory.stash_infeasibility`, a static proof), the
    placement recomputes the checkpoint set of the smallest spacing of
    ``CHECKPOINT_EVERY`` (:func:`~placegym.envs.analysis.memory.checkpoints`: every
    ``k``-th candidate forward node keeps its stash; the least recomputation) whose kept
    stash the same proof does not show over the total memory (where every spacing's is,
    the one of least bound), the room counts that set's stashes as freed, and the
    finished placement carries it (:func:`mask_recompute`,
    :attr:`PlacementState.recompute`);
  - ``"timed"``: of the devices ``"live"`` allows (those with live room, or where none
    has, those the resident bytes fit), the ones where the copies the node would receive
    also fit beside the runs already on the device that the list schedule finishes after
    the copies' estimated arrival (:class:`~placegym.envs.mdp.copies.CopyTimes`: a copy
    is allocated when its transfer starts and freed when its consumer finishes, so it
    shares the device with the runs in between); where none has, those ``"live"``
    allows. The same recompute set as ``"live"``; ``O(k · P)`` more per PLC step for
    ``k`` inputs and ``P`` placed nodes;
  - ``False``: every device.

  ``memory_reserve`` (``"room"``, ``"live"`` and ``"timed"``): ``(D,)`` bytes each device
  keeps free for live tensors: with ``"room"`` its working-set term is at least that,
  with ``"live"`` and ``"timed"`` its capacity is less that (a decode calibrated by the
  simulated excess, as the teachers' rooms are:
  :func:`~placegym.agents.doppler.decoder.reserved_greedy`);
- a *contention-free list-schedule estimate* of the partial assignment: placed nodes, in
  selection order, start at ``max(device free, inputs arrived)`` where an input from
  another device arrives ``latency + bytes / bandwidth`` after its producer's estimated
  finish. :meth:`earliest_start` gives that start for a node on every device. It guides
  teachers and features; the makespan itself always comes from the simulator;
- HEFT's *insertion-based* estimate of the same assignment (:meth:`insertion_start`): a
  node may also start in an idle gap of a device that its duration fits, as a
  work-conserving device would run it there.

The Gymnasium environment wraps this class; teachers answer questions about it (see
:mod:`placegym.teachers`).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from placegym.envs.analysis.levels import step_costs
from placegym.envs.analysis.memory import (
    CHECKPOINT_EVERY,
    checkpoints,
    memory_may_bind,
    stash_bound,
    stash_infeasibility,
)
from placegym.envs.analysis.room import Headroom, Room, Units, room_mask, units
from placegym.envs.core.cache import IdentityCache
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.mdp.copies import CopyTimes
from placegym.envs.mdp.timeline import Insertion, Timeline

Phase = Literal["select", "place"]
#: The values of ``memory_mask`` besides the booleans (True is ``"resident"``).
MEMORY_MASKS = ("resident", "room", "live", "timed")
#: The masks that keep room for live bytes (``"timed"`` is ``"live"`` and copies in time).
LIVE_MASKS = ("live", "timed")

__all__ = [
    "LIVE_MASKS",
    "MEMORY_MASKS",
    "PlacementState",
    "Timeline",
    "mask_recompute",
    "memory_mask_mode",
]

_NO_RECOMPUTE = np.zeros(0, dtype=np.int64)
_NO_RECOMPUTE.setflags(write=False)


def memory_mask_mode(value: bool | str) -> str:
    """``memory_mask`` as one of ``"off"``, ``"resident"``, ``"room"`` (module docstring).

    Raises:
        ValueError: any other value, naming it.
    """
    if isinstance(value, bool | np.bool_):
        return "resident" if value else "off"
    if isinstance(value, str) and value in MEMORY_MASKS:
        return value
    raise ValueError(
        f"memory_mask: expected True, False, 'resident', 'room', 'live' or 'timed', got {value!r}"
    )


def mask_recompute(graph: Graph, cluster: Cluster, memory_mask: bool | str) -> np.ndarray:
    """The recompute set (ascending forward node ids, read-only) of every placement made
    under ``memory_mask``: with ``"live"`` on a training step that provably fits no
    placement without recompute (where memory may bind and
    :func:`~placegym.envs.analysis.memory.stash_infeasibility` says why), the checkpoints
    of the smallest spacing of ``CHECKPOINT_EVERY`` whose kept stash that proof does not
    show over memory; else empty (module docstring)."""
    if memory_mask_mode(memory_mask) not in LIVE_MASKS:
        return _NO_RECOMPUTE
    return _live_recompute(graph, cluster)


def _live_checkpoints(graph: Graph, cluster: Cluster) -> np.ndarray:
    """:func:`mask_recompute` under ``"live"``."""
    if not memory_may_bind(graph, cluster) or stash_infeasibility(graph, cluster) is None:
        return _NO_RECOMPUTE
    sets = [checkpoints(graph, k) for k in CHECKPOINT_EVERY]
    out = next((r for r in sets if stash_infeasibility(graph, cluster, r) is None), None)
    if out is None:  # every spacing's kept stash is over memory: the first of least bound
        out = min(sets, key=lambda r: stash_bound(graph, cluster, r))
    out.setflags(write=False)
    return out


#: The live mask's recompute set per (graph, cluster) object: every state of an
#: environment's episodes, and every decoder, reads it.
_live_recompute = IdentityCache(_live_checkpoints, size=32)


def _reserve(value: np.ndarray | None, mode: str, d: int) -> np.ndarray | None:
    """``memory_reserve`` checked: None, or ``(D,)`` finite bytes >= 0 with ``"room"``,
    ``"live"`` or ``"timed"``."""
    if value is None:
        return None
    if mode not in ("room", *LIVE_MASKS):
        raise ValueError(
            f"memory_reserve: applies to memory_mask='room', 'live' or 'timed' only, got {mode!r}"
        )
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != (d,) or not np.isfinite(arr).all() or (arr < 0).any():
        raise ValueError(
            f"memory_reserve: expected {d} finite bytes >= 0 (one per device), got {value!r}"
        )
    return arr


class PlacementState:
    """Partial assignment of ``graph`` on ``cluster``.

    Attributes:
        device: ``(n,)`` device of each placed node, -1 otherwise.
        rank: ``(n,)`` selection rank of each selected node, -1 otherwise.
        order: nodes in selection order.
        selected: the node awaiting PLC, or -1 in the SEL phase.
        est_start, est_finish: ``(n,)`` list-schedule estimates of placed nodes (nan otherwise).
        device_free: ``(D,)`` estimated time each device finishes its placed work.
        load: ``(D,)`` total duration of the nodes placed on each device.
        param_used: ``(D,)`` resident parameter bytes placed on each device.
        costs: the :class:`~placegym.envs.analysis.levels.CostTable` (durations per device).
        memory_mask: whether a memory rule masks devices (``memory_mask`` is not False).
        mask_mode: ``"off"``, ``"resident"``, ``"room"`` or ``"live"`` (module
            docstring).
        recompute: the forward nodes the placement recomputes (:func:`mask_recompute`:
            empty but under ``"live"`` on a training step that needs it), read-only.
    """

    def __init__(
        self,
        graph: Graph,
        cluster: Cluster,
        *,
        memory_mask: bool | str = True,
        memory_reserve: np.ndarray | None = None,
    ) -> None:
        self.graph = graph
        self.cluster = cluster
        self.mask_mode = memory_mask_mode(memory_mask)
        self.memory_mask = self.mask_mode != "off"
        reserve = _reserve(memory_reserve, self.mask_mode, cluster.num_devices)
        self.costs = step_costs(graph, cluster)
        n, d = graph.num_nodes, cluster.num_devices
        self.device = np.full(n, -1, dtype=np.int64)
        self.rank = np.full(n, -1, dtype=np.int64)
        self.order: list[int] = []
        self.selected = -1
        self.est_start = np.full(n, np.nan)
        self.est_finish = np.full(n, np.nan)
        self.device_free = np.zeros(d)
        self.load = np.zeros(d)
        self.param_used = np.zeros(d)
        self._unplaced_producers = graph.in_degree.tolist()
        self._frontier = graph.in_degree == 0
        self._frontier_view: np.ndarray | None = None  # frontier_mask, made on first use
        self._num_placed = 0
        self._est_cache: tuple[int, int, np.ndarray] | None = None  # (node, #placed, row)
        self._insertion: Insertion | None = None  # built on the first insertion_start
        # co-location groups: each group's device once a member is placed (None: no groups)
        self._group_device: dict[int, int] | None = {} if graph.groups else None
        # memory_mask="room" where memory may bind: (units, each node's working set where
        # it takes time: working_set's row, made per node), per-unit device,
        # committed resident bytes and largest working set per device (None: not needed)
        self._room: tuple[Units, np.ndarray] | None = None
        if self.mask_mode == "room" and memory_may_bind(graph, cluster):
            u = units(graph)
            self._room = (u, graph.out_bytes + graph.in_bytes)
            self._unit_dev = np.full(u.count, -1, dtype=np.int64)
            self._committed = np.zeros(d)
            self._ws_max = np.zeros(d) if reserve is None else reserve.copy()
        #: Whether memory never narrows :meth:`place_mask`: no mask, or no placement can
        #: exceed a device's memory (the resident bytes of every node, summed in any
        #: order, fit the smallest memory); the mask is then every device, but for a
        #: node whose co-location group is placed.
        self.unbounded = not self.memory_mask or (
            not memory_may_bind(graph, cluster)
            and float(graph.param_bytes.sum()) * (1 + 1e-6) <= float(cluster.memory.min())
        )
        # memory_mask="live" where memory may bind: the teachers' live room (stateless),
        # with the recompute set the placement carries
        self._live: Room | None = None
        self._headroom: Headroom | None = None  # its bounds and held bytes, kept as placed
        self.recompute = mask_recompute(graph, cluster, memory_mask)
        self._copies: CopyTimes | None = None  # "timed": received copies in time
        if self.mask_mode in LIVE_MASKS and memory_may_bind(graph, cluster):
            keep = np.zeros(d) if reserve is None else reserve
            self._live = Room(graph, cluster, keep, live=True, recompute=self.recompute)
            self._headroom = Headroom(self._live)
            if self.mask_mode == "timed":
                self._copies = CopyTimes(graph, self.costs, cluster.memory - keep)

    @property
    def copy_times(self) -> CopyTimes | None:
        """``memory_mask="timed"``'s record of the live bytes at each placed run (None
        under the other masks, or where memory cannot bind)."""
        return self._copies

    # ------------------------------------------------------------------ phase and masks
    @property
    def phase(self) -> Phase:
        """``select`` or ``place``: the phase of the next action."""
        return "select" if self.selected < 0 else "place"

    @property
    def num_placed(self) -> int:
        """Number of nodes placed so far."""
        return self._num_placed

    @property
    def done(self) -> bool:
        """Whether every node is placed."""
        return self._num_placed == self.graph.num_nodes

    @property
    def frontier_mask(self) -> np.ndarray:
        """``(n,)`` bool, read-only: the frontier, whatever the phase (no copy: a view
        of the state's own mask, which the next transition changes; :meth:`select_mask`
        returns a copy that is all False in the PLC phase)."""
        view = self._frontier_view
        if view is None:  # made once per state: making one costs 20x reading it
            view = self._frontier_view = self._frontier.view()
            view.flags.writeable = False
        return view

    def select_mask(self) -> np.ndarray:
        """``(n,)`` bool: the frontier (legal SEL actions); all False in the PLC phase."""
        if self.selected >= 0:
            return np.zeros(self.graph.num_nodes, dtype=bool)
        return self._frontier.copy()

    def group_device(self, node: int) -> int:
        """The device ``node``'s co-location group is on (a member is placed), else -1."""
        if self._group_device is None:
            return -1
        g = int(self.graph.group[node])
        return -1 if g < 0 else self._group_device.get(g, -1)

    def resident_need(self, node: int) -> float:
        """Resident bytes that placing ``node`` commits a device to: its own, or, for the
        first placed node of a co-location group, the whole group's."""
        opened = self._group_device
        g = -1 if opened is None else int(self.graph.group[node])
        if opened is None or g < 0 or g in opened:
            return float(self.graph.param_bytes[node])
        return float(self.graph.param_bytes[self.graph.groups[g]].sum())

    def place_mask(self, node: int | None = None) -> np.ndarray:
        """``(D,)`` bool: legal devices for ``node`` (default: the selected node)."""
        v = self.selected if node is None else node
        d = self.cluster.num_devices
        if v < 0:
            return np.zeros(d, dtype=bool)
        forced = self.group_device(v)
        if forced >= 0:
            only = np.zeros(d, dtype=bool)
            only[forced] = True
            return only
        if not self.memory_mask:
            return np.ones(d, dtype=bool)
        need = self.resident_need(v)
        fits = self.param_used + need <= self.cluster.memory
        if not np.count_nonzero(fits):
            return np.ones(d, dtype=bool)
        if self._room is not None:
            room = self._room_mask(v, need, fits)
            if np.count_nonzero(room):
                return room
        if self._live is not None:
            assert self._headroom is not None
            if self._headroom.sure(fits, need):  # the same answer, by bounds
                live = fits
            else:
                live = self._live.mask(self.device, self.param_used, v, fits)
            legal = live if np.count_nonzero(live) else fits
            if self._copies is not None:
                on = self.param_used + need
                timed = self._copies.room(self.device, self.est_finish, on, v, legal)
                return timed if np.count_nonzero(timed) else legal
            return legal
        return fits

    def _room_mask(self, v: int, need: float, fits: np.ndarray) -> np.ndarray:
        """``memory_mask="room"``: the devices among ``fits`` with room for ``v``."""
        assert self._room is not None
        u, ws = self._room
        return room_mask(
            fits,
            need,
            np.where(self.costs.duration[v] > 0, ws[v], 0.0),  # working_set(...)[v]
            u.unopened(self._unit_dev >= 0, int(u.of[v])),
            self.cluster.memory,
            self._committed,
            self._ws_max,
        )

    def frontier(self) -> np.ndarray:
        """Node ids of the frontier, ascending."""
        return np.flatnonzero(self.select_mask())

    def is_legal(self, action: int) -> bool:
        """Whether ``action`` (a node in SEL, a device in PLC) is legal now."""
        if self.selected < 0:
            return 0 <= action < self.graph.num_nodes and bool(self._frontier[action])
        if not 0 <= action < self.cluster.num_devices:
            return False
        if self._group_device is not None:
            forced = self.group_device(self.selected)
            if forced >= 0:
                return action == forced
        if not self.memory_mask:
            return True
        if self._room is not None or self._live is not None:
            return bool(self.place_mask()[action])
        need = self.resident_need(self.selected)
        if self.param_used[action] + need <= self.cluster.memory[action]:
            return True
        return not bool((self.param_used + need <= self.cluster.memory).any())

    # ------------------------------------------------------------------ transitions
    def select(self, node: int, *, checked: bool = True) -> None:
        """SEL: ``node`` must be in the frontier. Raises ``ValueError`` otherwise;
        ``checked=False`` skips that check, for an int node the caller has already found
        legal (:meth:`is_legal`; the environment's step)."""
        if checked:
            if self.selected >= 0:
                raise ValueError(
                    f"select: phase is 'place' (node {self.selected} awaits a device)"
                )
            if not self.is_legal(node):
                raise ValueError(
                    f"select: node {node} is not in the frontier "
                    f"({int(self._frontier.sum())} legal nodes)"
                )
            node = int(node)
        self._frontier[node] = False
        self.rank[node] = len(self.order)
        self.order.append(node)
        self.selected = node

    def place(self, device: int, *, checked: bool = True) -> None:
        """PLC: put the selected node on ``device`` (must be legal). Raises ``ValueError``;
        ``checked=False`` skips the check, for an int device the caller has already found
        legal (:meth:`is_legal`)."""
        v = self.selected
        if checked:
            if v < 0:
                raise ValueError("place: phase is 'select' (no node awaits a device)")
            if not self.is_legal(device):
                raise ValueError(
                    f"place: device {device} is not legal for node {v} "
                    f"({int(self.place_mask().sum())} legal devices)"
                )
            device = int(device)
        start = float(self.earliest_start(v)[device])
        dur = float(self.costs.duration[v, device])
        finish = start + dur
        if self._headroom is not None:
            assert self._live is not None
            if self._copies is not None:
                run = self._headroom.held_on(self.device, device) + float(
                    self._live.working(self.device, v)[device]
                )
                self._copies.record(self.device, self.est_finish, v, device, run)
            self._headroom.place(v, device)
        self.device[v] = device
        self.est_start[v] = start
        self.est_finish[v] = finish
        self.device_free[device] = finish
        self.load[device] += dur
        self.param_used[device] += self.graph.param_bytes[v]
        if self._group_device is not None and self.graph.group[v] >= 0:
            self._group_device.setdefault(int(self.graph.group[v]), device)
        if self._room is not None:
            u, ws = self._room
            unit = u.of[v]
            if self._unit_dev[unit] < 0:  # opened: its whole unit's bytes are committed
                self._unit_dev[unit] = device
                self._committed[device] += u.nbytes[unit]
            held = ws[v] if self.costs.duration[v, device] > 0 else 0.0  # working_set
            self._ws_max[device] = max(self._ws_max[device], held)
        self.selected = -1
        self._num_placed += 1
        left = self._unplaced_producers
        for c in self.costs.successors[v]:
            left[c] -= 1
            if left[c] == 0:
                self._frontier[c] = True

    # ------------------------------------------------------------------ estimates
    def input_arrival(self, node: int | None = None, *, insertion: bool = False) -> np.ndarray:
        """``(D,)`` estimated time all of ``node``'s (placed) inputs are on each device
        (default: the selected node), from the list-schedule finishes of its producers
        or, with ``insertion``, from their insertion-based ones (:meth:`insertion_start`)."""
        v = self.selected if node is None else node
        finish = self._insertion_schedule().finish if insertion else None
        return self._no_earlier_than(np.zeros(self.cluster.num_devices), v, finish)

    def insertion_busy_until(self) -> np.ndarray:
        """``(D,)`` the last finish on each device of the insertion-based schedule of the
        placed nodes (:meth:`insertion_start`; 0 on an idle device)."""
        lines = self._insertion_schedule().lines
        return np.array([line.finish[-1] if line.finish else 0.0 for line in lines])

    def _no_earlier_than(
        self, floor: np.ndarray, v: int, finish: np.ndarray | None = None
    ) -> np.ndarray:
        """``(D,)`` max of ``floor`` and the arrival on each device of every placed input
        of ``v``, produced at ``finish`` (default: the list-schedule estimate
        ``est_finish``); a new array; max is exact, so the order does not matter."""
        preds = self.costs.predecessors[v]
        device, out_bytes = self.device, self.graph.out_bytes
        finish = self.est_finish if finish is None else finish
        latency, inv_bandwidth = self.costs.latency, self.costs.inv_bandwidth
        if len(preds) > 8:  # many inputs: one vectorised pass
            placed = [u for u in preds if device[u] >= 0]
            if not placed:
                return floor.copy()
            dev = device[placed]
            arrival = (
                finish[placed][:, None]
                + latency[dev]
                + out_bytes[placed][:, None] * inv_bandwidth[dev]
            )
            return np.maximum(floor, arrival.max(axis=0))
        row = floor.copy()
        for u in preds:
            a = device[u]
            if a >= 0:
                np.maximum(row, finish[u] + latency[a] + out_bytes[u] * inv_bandwidth[a], out=row)
        return row

    def earliest_start(self, node: int | None = None) -> np.ndarray:
        """``(D,)`` estimated start of ``node`` (default: selected) on each device."""
        v = self.selected if node is None else node
        cache = self._est_cache
        if cache is not None and cache[0] == v and cache[1] == self._num_placed:
            return cache[2]
        row = self._no_earlier_than(self.device_free, v)
        row.setflags(write=False)
        self._est_cache = (v, self._num_placed, row)
        return row

    def insertion_start(self, node: int | None = None) -> np.ndarray:
        """``(D,)`` HEFT's insertion-based estimated start of ``node`` (default: the
        selected one) on each device.

        The schedule behind it places the placed nodes one by one in selection order,
        each at the earliest start on its device, no earlier than its inputs' arrival
        (as in :meth:`earliest_start`, from its producers' insertion-based finishes), of
        an idle gap its duration fits; the node's start on a device is the same rule
        applied to it there. Unlike :meth:`earliest_start`, a node can start before work
        placed earlier on the device. Brought up to date on each call, in time linear
        in the nodes placed since the previous one."""
        v = self.selected if node is None else node
        ins = self._insertion_schedule()
        ready = self._no_earlier_than(np.zeros(self.cluster.num_devices), v, ins.finish)
        fits = zip(ins.lines, ready.tolist(), self.costs.duration[v].tolist())
        return np.array([line.earliest_fit(r, t) for line, r, t in fits])

    def _insertion_schedule(self) -> Insertion:
        """The insertion-based schedule with every placed node in it."""
        ins = self._insertion
        if ins is None:
            ins = self._insertion = Insertion(self.graph.num_nodes, self.cluster.num_devices)
        zero = np.zeros(self.cluster.num_devices)
        for v in self.order[ins.seen : self._num_placed]:  # placed nodes lead the order
            d = int(self.device[v])
            ready = float(self._no_earlier_than(zero, v, ins.finish)[d])
            dur = float(self.costs.duration[v, d])
            start = ins.lines[d].earliest_fit(ready, dur)
            ins.lines[d].insert(start, start + dur)
            ins.finish[v] = start + dur
        ins.seen = self._num_placed
        return ins

    def earliest_finish(self, node: int | None = None) -> np.ndarray:
        """``(D,)`` estimated finish of ``node`` (default: the selected one) on each device."""
        v = self.selected if node is None else node
        return self.earliest_start(v) + self.costs.duration[v]

    def inputs_present(self, node: int | None = None) -> np.ndarray:
        """``(D,)`` fraction of ``node``'s input bytes produced on each device."""
        v = self.selected if node is None else node
        preds = self.costs.predecessors[v]
        total = self.costs.in_total[v]
        if not preds or total <= 0:
            return np.zeros(self.cluster.num_devices)
        share = np.zeros(self.cluster.num_devices)  # summed in producer order, as bincount
        device, out_bytes = self.device, self.graph.out_bytes
        for u in preds:
            d = device[u]
            if d >= 0:
                share[d] += out_bytes[u]
        share /= total
        return share

    # ------------------------------------------------------------------ results
    def to_placement(self) -> Placement:
        """The finished placement (device, selection order and :attr:`recompute`).
        Raises if not done."""
        if not self.done:
            raise ValueError(
                f"to_placement: {self.num_placed} of {self.graph.num_nodes} nodes placed"
            )
        order = np.array(self.order, dtype=np.int64)
        return Placement(device=self.device.copy(), order=order, recompute=self.recompute)

    def copy(self) -> PlacementState:
        """An independent copy of the state."""
        new = object.__new__(PlacementState)
        new.__dict__.update(
            {
                k: (
                    v.copy()
                    if isinstance(v, np.ndarray | list | dict | Insertion | CopyTimes | Headroom)
                    else v
                )
                for k, v in self.__dict__.items()
            }
        )
        new._frontier_view = None  # a view of the copy's own frontier, made on use
        return new

    def __getstate__(self) -> dict[str, Any]:
        # a pickled view unpickles as a copy: the unpickled state makes its own
        return {**self.__dict__, "_frontier_view": None}

    def __repr__(self) -> str:
        return (
            f"PlacementState(graph={self.graph.name!r}, cluster={self.cluster.name!r}, "
            f"placed={self.num_placed}/{self.graph.num_nodes}, phase={self.phase!r})"
        )
