"""HEFT: Heterogeneous Earliest Finish Time (Topcuoglu, Hariri and Wu, 2002)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from placegym.envs.analysis.levels import b_level, durations_on
from placegym.envs.analysis.memory import Room
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.mdp.state import PlacementState, Timeline
from placegym.teachers import _rule_kernel
from placegym.teachers._common import Resident, priority_order
from placegym.teachers._memory import make_feasible, reserve_room, with_room
from placegym.teachers.base import PlanTeacher
from placegym.teachers.critical_path import CriticalPathTeacher

__all__ = ["HeftRuleTeacher", "HeftTeacher", "heft_schedule"]


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
