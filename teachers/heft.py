"""HEFT: Heterogeneous Earliest Finish Time (Topcuoglu, Hariri and Wu, 2002)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from placegym.envs.analysis.levels import CostTable, b_level, durations_on
from placegym.envs.analysis.memory import Room
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.mdp.state import PlacementState, Timeline
from placegym.teachers import _rule_kernel
from placegym.teachers._common import IdentityCache, Resident, priority_order
from placegym.teachers._memory import make_feasible, reserve_room, with_room
from placegym.teachers._successor_kernel import successor_kernel
from placegym.teachers.base import PlanTeacher, ties
from placegym.teachers.critical_path import CriticalPathTeacher

__all__ = [
    "HeftLookaheadTeacher",
    "HeftRuleTeacher",
    "HeftTeacher",
    "heft_schedule",
    "successor_finish",
    "successor_tail",
    "transposed_links",
]


def _arrival(graph: Graph, cluster: Cluster, v: int, dev: np.ndarray, aft: np.ndarray):
    """``(D,)`` time all of ``v``'s inputs are on each device in the partial schedule."""
    ready = np.zeros(cluster.num_devices)
    for u in graph.predecessors(v).tolist():
        a = dev[u]
        arr = aft[u] + cluster.pair_latency[a] + graph.out_bytes[u] / cluster.pair_bandwidth[a]
        arr[a] = aft[u]
        np.maximum(ready, arr, out=ready)
    return ready


def heft_schedule(
    graph: Graph, cluster: Cluster, room: Room | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """HEFT's static schedule: ``(device, start, finish)`` per node, each ``(n,)``.

    Nodes are taken by descending upward rank (= :func:`~placegym.envs.analysis.levels.b_level`,
    which uses HEFT's mean costs), ties in topological position; each goes to the legal
    device (the rule of :class:`~placegym.envs.mdp.state.PlacementState`: resident bytes fit,
    a co-location group on its first member's device) with the earliest finish,
    inserting into an idle gap when one fits (lowest device index on ties). With a
    ``room``, among the legal devices with room for the rest of the graph
    (:class:`~placegym.envs.analysis.room.Room`) when there is one.
    """
    n, nd = graph.num_nodes, cluster.num_devices
    dur = durations_on(graph, cluster)
    walk = Resident(graph, cluster)
    dev = walk.device  # -1 until placed
    ast, aft = np.zeros(n), np.zeros(n)
    lines = [Timeline() for _ in range(nd)]
    for v in priority_order(graph, b_level(graph, cluster)).tolist():
        ready = _arrival(graph, cluster, v, dev, aft)
        legal = walk.legal(v)
        bound = ready + dur[v]  # a device's EFT is never below its bound
        fits = None
        if room is not None and walk.forced(v) < 0:
            fits = room.checker(dev, walk.used, v)
        best = (np.inf, nd, 0.0)
        for check in (fits, None) if fits is not None else (None,):
            for d in np.lexsort((np.arange(nd), bound)).tolist():
                # in (bound, index) order no later device beats the best: its finish is
                # at least its bound, and on an equal finish its index is larger
                if bound[d] > best[0] or (bound[d] == best[0] and d > best[1]):
                    break
                if not legal[d] or (check is not None and not check(d)):
                    continue
                s = lines[d].earliest_fit(float(ready[d]), float(dur[v, d]))
                best = min(best, (s + float(dur[v, d]), d, s))
            if best[1] < nd:  # found one (with room, when checked)
                break
        eft, d, s = best
        ast[v], aft[v] = s, eft
        walk.place(v, d)
        lines[d].insert(s, eft)
    return dev.copy(), ast, aft


class HeftTeacher(PlanTeacher):
    """HEFT with insertion, as a plan.

    Rule:
        - **Ranking**: upward rank = :func:`~placegym.envs.analysis.levels.b_level` (mean compute
          time over devices, mean ``latency + bytes / bandwidth`` over ordered device
          pairs); nodes are scheduled by descending rank, ties by topological position.
        - **Device**: among the legal devices (resident params must fit, otherwise every
          device, as in :class:`~placegym.envs.mdp.state.PlacementState`), the one with the
          earliest finish time. A node's inputs arrive at ``finish(u)`` on the producer's
          device and ``finish(u) + latency + bytes / bandwidth`` (the pair's level)
          elsewhere; it starts in the earliest idle gap of the device that fits its
          duration after that (insertion-based). Links are contention-free in the plan.
        - **Priority order**: by planned start time, ties by rank order. The simulator
          dispatches the lowest-rank *ready* node on an idle device, so ordering by planned
          start reproduces the plan's per-device sequence, including nodes HEFT inserted
          into earlier gaps; ordering by upward rank would let a high-rank node that only
          becomes ready late hold no slot but take precedence over earlier planned work.
          Planned starts never decrease along an edge, so the order is topological.
        - **Memory and groups**: the legal devices are the state's (above), so a group
          lands whole on its first member's device. Under memory pressure, when the
          plan's simulated peak exceeds a device's memory, HEFT is rerun choosing among
          the legal devices with *room* (:class:`~placegym.envs.analysis.room.Room`:
          every unplaced group and node still packs into the memory left, less a
          tensor reserve raised on the simulator, :func:`~placegym.teachers._memory.
          reserve_room`), and a plan still over memory is repaired
          (:func:`~placegym.teachers._memory.make_feasible`: whole groups moved off the
          devices over memory, else the resident bytes spread worst-fit decreasing). The
          plan is feasible whenever one of those reaches a feasible placement; without
          memory pressure, or when HEFT's plan fits, it is HEFT's.

    Per-state answers follow the plan (:class:`~placegym.teachers.base.PlanTeacher`).
    """

    name: ClassVar[str] = "heft"

    def plan(self, graph: Graph, cluster: Cluster) -> Placement:
        """HEFT's list schedule (see the class docstring)."""
        made: dict[int, tuple[Room | None, Placement]] = {}

        def schedule(room: Room | None) -> Placement:
            if id(room) not in made:  # the room is kept with it: its id stays its own
                made[id(room)] = (room, self._schedule(graph, cluster, room))
            return made[id(room)][1]

        room = reserve_room(graph, cluster, schedule)
        return make_feasible(graph, cluster, with_room(schedule(room), room))

    def roll(self, graph: Graph, cluster: Cluster, room: Room | None) -> Placement:
        """HEFT's list schedule choosing among the legal devices with room in ``room``
        (all legal devices with None): no simulator call and no repair; the caller gives
        it the room's recompute set (:func:`~placegym.teachers._memory.with_room`)."""
        return self._schedule(graph, cluster, room)

    @staticmethod
    def _schedule(graph: Graph, cluster: Cluster, room: Room | None) -> Placement:
        dev, start, _ = heft_schedule(graph, cluster, room)
        rank_pos = np.empty(graph.num_nodes, dtype=np.int64)
        rank_pos[priority_order(graph, b_level(graph, cluster))] = np.arange(graph.num_nodes)
        order = np.lexsort((rank_pos, start)).astype(np.int64)
        return Placement(device=dev, order=order)


class HeftRuleTeacher(CriticalPathTeacher):
    """HEFT's rule answered state by state, so that a learner can follow it from any state.

    Rule:
        - **SEL**: the frontier nodes of maximum b-level (HEFT's upward rank), as
          :class:`~placegym.teachers.critical_path.CriticalPathTeacher`.
        - **PLC**: the legal devices of earliest insertion-based finish:
          :meth:`PlacementState.insertion_start
          <placegym.envs.mdp.state.PlacementState.insertion_start>` plus the node's duration
          there (HEFT's earliest finish time with insertion, on the schedule of the
          state's own placed nodes).

    Tie sets as the critical-path teacher's; :meth:`place` rolls the rule out taking the
    smallest id of each set. On a graph without b-level ties this is HEFT's device map
    (:func:`heft_schedule`) in HEFT's rank order, which the simulator then runs in that
    order instead of HEFT's planned-start order (:class:`HeftTeacher`); from other
    states it answers with HEFT's rule where :class:`HeftTeacher` answers with its plan.
    Memory and groups as :class:`~placegym.teachers.critical_path.CriticalPathTeacher`
    (the state's legal devices; under memory pressure, when the plain rollout is over
    memory, those with room).
    """

    name: ClassVar[str] = "heft_rule"
    compiled_rule: ClassVar[int | None] = _rule_kernel.HEFT_RULE

    def device_scores(self, state: PlacementState) -> np.ndarray:
        """``(D,)`` what PLC minimises: the selected node's insertion-based finish."""
        return state.insertion_start() + state.costs.duration[state.selected]

    def place_actions(self, state: PlacementState) -> np.ndarray:
        """The legal devices (with room, under memory pressure) where the selected node
        finishes earliest with insertion."""
        return super().place_actions(state)


#: Devices a successor is tried on per candidate device in :func:`successor_finish`
#: (all of them on clusters of at most this many devices).
LOOKAHEAD_WIDTH = 16


def successor_finish(state: PlacementState, tail: np.ndarray, width: int = LOOKAHEAD_WIDTH):
    """``(D,)`` per device ``r``: the estimated finish of the selected node's slowest
    successor path if the node goes on ``r`` (the one-step lookahead of HEFT's
    lookahead variant, Bittencourt, Sakellariou and Madeira, 2010).

    With the node on ``r`` at its insertion-based finish ``f(r)``
    (:meth:`~placegym.envs.mdp.state.PlacementState.insertion_start`), each successor
    ``c`` is given its earliest finish over the devices ``r'``:
    ``max(f(r) + latency(r, r') + bytes / bandwidth(r, r'), inputs(c, r'), busy(r'))
    + duration(c, r')``, where ``inputs`` is the arrival of ``c``'s other placed inputs
    (insertion-based finishes) and ``busy`` the device's last insertion-based finish
    (``c`` itself is not inserted into a gap). The device's value is the largest,
    over the successors, of that finish plus ``tail[c]`` (the rest of ``c``'s path to
    a sink, e.g. its b-level less its own mean compute); a sink's is ``f(r)``. On a
    cluster of more than ``width`` devices ``r'`` ranges over ``r`` itself and the
    ``width`` devices of earliest ``max(inputs, busy) + duration`` of ``c`` only, so
    a step costs ``O(successors * D * width)`` (compiled:
    :mod:`~placegym.teachers._successor_kernel`; past ``width`` devices, a successor's
    candidates are its ``width`` devices of least ``ready + duration``, ties by index).
    """
    v = state.selected
    costs = state.costs
    finish = state.insertion_start() + costs.duration[v]
    succ = costs.successors[v]
    if len(succ) == 0:
        return finish
    busy = state.insertion_busy_until()
    ready = np.array([np.maximum(state.input_arrival(c, insertion=True), busy) for c in succ])
    out = np.empty(len(finish))
    successor_kernel(
        finish,
        np.asarray(succ, dtype=np.int64),
        ready,
        costs.duration,
        *transposed_links(costs),
        float(state.graph.out_bytes[v]),
        tail,
        int(width),
        out,
    )
    return out


def _links_t(costs: CostTable) -> tuple[np.ndarray, np.ndarray]:
    return np.ascontiguousarray(costs.latency.T), np.ascontiguousarray(costs.inv_bandwidth.T)


#: The transposed link tables of a cost table (what the compiled step reads row by row).
transposed_links = IdentityCache(_links_t)


def _successor_tail(graph: Graph, cluster: Cluster) -> np.ndarray:
    return b_level(graph, cluster) - durations_on(graph, cluster).mean(axis=1)


#: ``(n,)`` per node, the rest of its path to a sink after its own compute: its
#: b-level less its mean compute (cached per (graph, cluster) pair); the ``tail`` of
#: :func:`successor_finish` in :class:`HeftLookaheadTeacher`.
successor_tail = IdentityCache(_successor_tail)


class HeftLookaheadTeacher(HeftRuleTeacher):
    """HEFT's lookahead variant, answered state by state (Bittencourt, Sakellariou and
    Madeira, 2010): a single pass that places each node where its successors can
    finish earliest.

    Rule:
        - **SEL**: the frontier nodes of maximum b-level, as
          :class:`~placegym.teachers.critical_path.CriticalPathTeacher`.
        - **PLC**: the legal devices of least :func:`successor_finish`, with ``tail``
          each node's b-level less its mean compute: for each device, the latest of the
          selected node's successors' estimated finish plus the rest of their path to a
          sink, the successor on its best device given the node there. A sink is placed
          by its insertion-based finish, as :class:`HeftRuleTeacher`.

    Memory, groups and tie sets as :class:`HeftRuleTeacher`. No simulator call while
    placing (only where memory may bind, to raise the room's reserve, as the other
    rules). A step costs ``O(successors * D * min(D, LOOKAHEAD_WIDTH))``.
    """

    name: ClassVar[str] = "heft_lookahead"
    compiled_rule: ClassVar[int | None] = None

    def device_scores(self, state: PlacementState) -> np.ndarray:
        """``(D,)`` what PLC minimises: :func:`successor_finish` of the selected node."""
        return successor_finish(state, successor_tail(state.graph, state.cluster))

    def _place_in(self, state: PlacementState, room: Room | None) -> np.ndarray:
        best = super()._place_in(state, room)
        if len(best) < 2:
            return best
        own = state.insertion_start() + state.costs.duration[state.selected]
        return ties(own, best, best="min")

    def place_actions(self, state: PlacementState) -> np.ndarray:
        """The legal devices (with room, under memory pressure) of least
        :func:`successor_finish`, and among those the ones where the selected node
        itself finishes earliest (insertion-based)."""
        return super().place_actions(state)
