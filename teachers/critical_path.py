"""The critical-path teacher (DOPPLER's phase-I teacher, with exact tie sets)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from placegym.envs.analysis.levels import b_level
from placegym.envs.analysis.memory import Room
from placegym.envs.analysis.room import units
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.mdp.state import PlacementState
from placegym.teachers import _rule_kernel
from placegym.teachers._common import IdentityCache
from placegym.teachers._memory import make_feasible, room_ties, rule_room, with_room
from placegym.teachers.base import StepTeacher, ties

__all__ = ["CriticalPathTeacher", "rule_completions"]


class CriticalPathTeacher(StepTeacher):
    """Critical-path list scheduling, answered state by state.

    Rule:
        - **SEL**: the frontier nodes of maximum b-level
          (:func:`~placegym.envs.analysis.levels.b_level`: the longest mean compute +
          communication path from the node to a sink, its own compute included).
        - **PLC**: the legal devices (:meth:`PlacementState.place_mask`) on which the
          selected node can start earliest (:meth:`PlacementState.earliest_start`, the
          contention-free list-schedule estimate of the partial assignment).

    Both answers are full tie sets (:func:`~placegym.teachers.base.ties`, relative
    tolerance ``TIE_RTOL``), ascending; :meth:`place` rolls the rule out taking the smallest
    id of each set. Earliest *start* (not finish) is DOPPLER's rule; on the homogeneous
    presets the two coincide. B-levels are computed once per (graph, cluster) object pair
    and cached, so a per-state answer costs one frontier scan and one ``(D,)`` estimate.

    Memory and groups:
        The legal devices are the state's (:meth:`PlacementState.place_mask`): a node
        of a co-location group with a member placed goes to that member's device, so a
        rollout never splits a group; resident bytes must fit (a group's whole bytes when
        its first member is placed). Under memory pressure, when the rollout of that
        rule is over memory (one simulation per (graph, cluster), cached), PLC chooses
        among the legal devices with *room* (:meth:`room`,
        :class:`~placegym.envs.analysis.room.Room` with ``live``): those after which
        the device still holds the live bytes of the partial schedule (outputs awaiting
        consumers, so a training step's stash, the node's working set and the largest
        working set still to run there) and every unplaced group and node still packs
        into the memory left, less a reserve raised on the simulator
        (:func:`~placegym.teachers._memory.reserve_room`; on a training step that
        provably needs recomputation, with a checkpointed recompute set that the
        placement then carries). Where no legal device has room, every legal device
        competes. Without memory pressure, or when the plain rollout fits, the answers
        are the plain rule's, bit for bit. :meth:`place` is the rollout, repaired
        (:func:`~placegym.teachers._memory.make_feasible`) where it is still over memory;
        the per-state answers stay the rule's.
    """

    name: ClassVar[str] = "critical_path"

    def __init__(self) -> None:
        self._b_level = IdentityCache(b_level)
        self._rooms = IdentityCache(self._reserve_room)

    def place(self, graph: Graph, cluster: Cluster) -> Placement:
        """The rollout of the rule (first of each tie set), recomputing its room's
        recompute set where it has one, repaired where still over memory (class
        docstring)."""
        room, fits = self._rooms(graph, cluster)
        placement = with_room(self._roll(graph, cluster, room), room)
        return placement if fits else make_feasible(graph, cluster, placement)

    def b_level(self, graph: Graph, cluster: Cluster) -> np.ndarray:
        """``(n,)`` the b-levels SEL ranks by (cached per (graph, cluster) pair)."""
        return self._b_level(graph, cluster)

    def room(self, graph: Graph, cluster: Cluster) -> Room | None:
        """The :class:`~placegym.envs.analysis.room.Room` PLC chooses in on ``graph`` and
        ``cluster``; None where the state's legal devices are the rule's (class
        docstring). Its reserves are raised once per (graph, cluster) pair."""
        return self._rooms(graph, cluster)[0]

    def _reserve_room(self, graph: Graph, cluster: Cluster) -> tuple[Room | None, bool]:
        return rule_room(graph, cluster, lambda room: self._roll(graph, cluster, room))

    #: ``kind`` of this class's rule in :mod:`~placegym.teachers._rule_kernel`, read from
    #: the class itself only (a subclass that does not set it rolls out in Python).
    compiled_rule: ClassVar[int | None] = _rule_kernel.CRITICAL_PATH

    def roll(self, graph: Graph, cluster: Cluster, room: Room | None) -> Placement:
        """The rule's single pass with PLC choosing among the legal devices with room in
        ``room`` (all legal devices with None): no simulator call and no repair; the
        caller gives it the room's recompute set
        (:func:`~placegym.teachers._memory.with_room`)."""
        return self._roll(graph, cluster, room)

    def _roll(self, graph: Graph, cluster: Cluster, room: Room | None) -> Placement:
        """The rollout of the rule with PLC in ``room`` (first of each tie set): after
        the first step, by the compiled rule (:func:`rule_completions`, the same
        placement) when this class has one."""
        state = PlacementState(graph, cluster)
        kind = type(self).__dict__.get("compiled_rule")
        if kind is not None and not state.done:
            state.select(int(self.select_actions(state)[0]))
            first = np.array([self._place_in(state, room)[0]], dtype=np.int64)
            devices, orders = rule_completions(
                state, first, kind, self.b_level(graph, cluster), room
            )
            return Placement(device=devices[0], order=orders[0])
        while not state.done:
            state.select(int(self.select_actions(state)[0]))
            state.place(int(self._place_in(state, room)[0]))
        return state.to_placement()

    def select_actions(self, state: PlacementState) -> np.ndarray:
        """The frontier nodes of maximum b-level."""
        frontier = state.frontier()
        if len(frontier) == 0:
            raise ValueError(f"state: no frontier node to select (phase {state.phase!r})")
        return ties(self.b_level(state.graph, state.cluster), frontier, best="max")

    def device_scores(self, state: PlacementState) -> np.ndarray:
        """``(D,)`` what PLC minimises: the selected node's earliest start per device."""
        return state.earliest_start()

    def _place_in(self, state: PlacementState, room: Room | None) -> np.ndarray:
        legal = np.flatnonzero(state.place_mask())
        score = self.device_scores(state)
        v = state.selected
        if room is None or not state.memory_mask or state.group_device(v) >= 0:
            return ties(score, legal, best="min")
        return room_ties(room, state.device, state.param_used, v, legal, score)

    def place_actions(self, state: PlacementState) -> np.ndarray:
        """The legal devices (with room, under memory pressure) where the selected node
        can start earliest."""
        if state.selected < 0:
            raise ValueError("state: phase is 'select', no node awaits a device")
        return self._place_in(state, self.room(state.graph, state.cluster))


def rule_completions(
    state: PlacementState, legal: np.ndarray, kind: int, levels: np.ndarray, room: Room | None
) -> tuple[np.ndarray, np.ndarray]:
    """``(devices, orders)`` ``(len(legal), n)``: ``state`` with its selected node on each
    of ``legal``, completed by the compiled rule ``kind``
    (:func:`~placegym.teachers._rule_kernel.complete_candidates`) with SEL by ``levels``
    (the b-levels), its co-location groups kept and PLC in ``room`` (None: the state's
    legal devices), as the rule does through the state."""
    graph, cluster = state.graph, state.cluster
    costs = state.costs
    k = state.num_placed
    placed = np.asarray(state.order[:k], dtype=np.int64)
    prefix = np.stack([placed, state.device[placed]], axis=1)
    pptr, pidx = graph.producer_csr
    sptr, sidx = graph.consumer_csr
    u = room.units if room is not None else units(graph)
    return _rule_kernel.complete_candidates(
        kind,
        prefix,
        state.selected,
        np.ascontiguousarray(legal, dtype=np.int64),
        levels,
        costs.duration,
        pptr,
        pidx,
        sptr,
        sidx,
        graph.out_bytes,
        graph.param_bytes,
        cluster.memory,
        state.memory_mask,
        costs.latency,
        costs.inv_bandwidth,
        u.of,
        u.nbytes,
        u.by_size,
        room is not None,
        cluster.memory if room is None else np.ascontiguousarray(room.capacity),
        room is not None and room.live,
        graph.in_bytes,
        graph.out_bytes if room is None else room.future,
        np.ones(len(pidx), dtype=bool) if room is None else room.keeps,
        np.ones(len(pidx), dtype=bool) if room is None else room.counts,
    )
