"""Simple baselines: random, round robin and the best single device.

Their rules ignore memory beyond the state's rule (resident bytes that fit, a group on
its first member's device), so their placements may be over memory where a feasible one
exists; each keeps every co-location group whole and says when its placement is
infeasible: :attr:`last_infeasibility` after :meth:`place`, and
:meth:`~placegym.teachers.base.Teacher.infeasibility` for any graph.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from placegym.envs.analysis.levels import b_level
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.mdp.state import PlacementState
from placegym.envs.sim.simulator import simulate_batch
from placegym.teachers._common import IdentityCache, Resident, priority_order, repair_memory
from placegym.teachers._memory import infeasibility
from placegym.teachers.base import PlanTeacher, StepTeacher, Teacher

__all__ = ["RandomTeacher", "RoundRobinTeacher", "SingleDeviceTeacher"]


def _check_state(state: PlacementState, phase: str) -> None:
    if state.phase != phase:
        raise ValueError(f"state: expected phase {phase!r}, got {state.phase!r}")


class _Verdict:
    """Records why each placement :meth:`place` returns is infeasible (None: feasible) in
    :attr:`last_infeasibility`."""

    #: Why the latest placement returned by :meth:`place` is infeasible (a split group, or
    #: its simulated peak over a device's memory), None when it is feasible.
    last_infeasibility: str | None = None

    _verdicts: IdentityCache[str | None] | None = None

    def _verdict(self, graph: Graph, cluster: Cluster, placement: Placement) -> Placement:
        if self._verdicts is None:  # per placement object: a cached plan is judged once
            self._verdicts = IdentityCache(infeasibility, size=8)
        self.last_infeasibility = self._verdicts(graph, cluster, placement)
        return placement


def _topological_position(graph: Graph, cluster: Cluster) -> np.ndarray:
    """``(n,)`` position of each node in ``graph.topological_order``."""
    pos = np.empty(graph.num_nodes, dtype=np.int64)
    pos[graph.topological_order] = np.arange(graph.num_nodes)
    return pos


class RandomTeacher(_Verdict, Teacher):
    """Uniformly random placement: the support of the uniform policy.

    Rule:
        - :meth:`place`: a random topological order (each step picks a frontier node
          uniformly) and, for each node in that order, a device drawn uniformly from the
          legal ones (memory rule of :class:`~placegym.envs.mdp.state.PlacementState`). Every
          call draws from a fresh ``numpy.random.default_rng(seed)``: the same seed gives
          the same placement.
        - Per-state answers: *every* legal action (the whole frontier, every legal device),
          i.e. the support of the uniform policy; imitating them teaches nothing but
          legality, which is what a random baseline should carry.
        - **Memory and groups**: the legal devices are the state's, so a co-location
          group stays on its first member's device; the placement may be over memory
          (the rule draws among devices where resident bytes fit, tensors ignored): then
          :attr:`last_infeasibility` says why.

    Args:
        seed: seed of the generator used by :meth:`place`.
    """

    name: ClassVar[str] = "random"

    def __init__(self, seed: int = 0) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"seed: must be an integer >= 0, got {seed!r}")
        self.seed = int(seed)

    def place(self, graph: Graph, cluster: Cluster) -> Placement:
        """A random placement (see the class docstring)."""
        rng = np.random.default_rng(self.seed)
        n = graph.num_nodes
        ptr, idx = graph.consumer_csr
        missing = graph.in_degree.copy()
        frontier = np.flatnonzero(missing == 0).tolist()
        order = np.empty(n, dtype=np.int64)
        device = np.empty(n, dtype=np.int64)
        walk = Resident(graph, cluster)
        for i in range(n):
            v = frontier.pop(int(rng.integers(len(frontier))))
            order[i] = v
            legal = np.flatnonzero(walk.legal(v))
            device[v] = legal[int(rng.integers(len(legal)))]
            walk.place(v, int(device[v]))
            for c in idx[ptr[v] : ptr[v + 1]].tolist():
                missing[c] -= 1
                if missing[c] == 0:
                    frontier.append(c)
        return self._verdict(graph, cluster, Placement(device=device, order=order))

    def select_actions(self, state: PlacementState) -> np.ndarray:
        """Every frontier node (any is as good as another)."""
        _check_state(state, "select")
        return state.frontier()

    def place_actions(self, state: PlacementState) -> np.ndarray:
        """Every legal device."""
        _check_state(state, "place")
        return np.flatnonzero(state.place_mask())

    def __repr__(self) -> str:
        return f"RandomTeacher(seed={self.seed})"


class RoundRobinTeacher(_Verdict, StepTeacher):
    """Round robin over devices in topological order.

    Rule:
        - **SEL**: the frontier node that comes first in ``graph.topological_order``
          (Kahn's order, smallest ready id first), so a rollout selects nodes in exactly
          that order.
        - **PLC**: the first legal device (memory rule) at or after the device that follows
          the previously placed node's device, cyclically (device 0 for the first node).
          Without memory pressure node ``i`` of the order goes to device ``i mod D``;
          devices the mask forbids are skipped and the cycle continues after the one used.
        - **Memory and groups**: the mask is the state's, so a node of a co-location
          group with a member placed goes to that member's device (the cycle continues
          after it). Nothing else looks at memory: the placement may be over memory,
          and then :attr:`last_infeasibility` says why.
    """

    name: ClassVar[str] = "round_robin"

    def __init__(self) -> None:
        self._position = IdentityCache(_topological_position)

    def place(self, graph: Graph, cluster: Cluster) -> Placement:
        """Roll the rule out (class docstring); :attr:`last_infeasibility` says whether
        the placement is infeasible."""
        return self._verdict(graph, cluster, super().place(graph, cluster))

    def select_actions(self, state: PlacementState) -> np.ndarray:
        """The frontier node first in topological order."""
        _check_state(state, "select")
        frontier = state.frontier()
        pos = self._position(state.graph, state.cluster)
        return frontier[[int(np.argmin(pos[frontier]))]]

    def place_actions(self, state: PlacementState) -> np.ndarray:
        """The next device in turn among the legal ones."""
        _check_state(state, "place")
        nd = state.cluster.num_devices
        prev = state.device[state.order[-2]] if len(state.order) > 1 else -1
        cycle = (int(prev) + 1 + np.arange(nd)) % nd
        legal = state.place_mask()
        return cycle[[int(np.argmax(legal[cycle]))]]


class SingleDeviceTeacher(_Verdict, PlanTeacher):
    """Everything on the one device that runs the graph fastest.

    Rule:
        - **Device**: every node on the device whose simulated makespan is lowest,
          preferring devices whose peak memory fits (no OOM), lowest index on ties. One
          simulation per distinct device type (flops, memory bandwidth, launch overhead,
          memory), so large homogeneous clusters cost one simulation.
        - **Memory and groups**: nodes whose params no longer fit on that device when
          their turn comes (memory rule of :class:`~placegym.envs.mdp.state.PlacementState`,
          a group's whole bytes for its first member) spill to the legal device with the
          least resident params, a co-location group whole with its first member;
          without memory pressure every node stays on the one device. Live tensors are
          not counted: the placement may be over memory, and then
          :attr:`last_infeasibility` says why.
        - **Priority order**: descending b-level, ties by topological position (a
          topological order). On one device a work-conserving run never idles, so the
          makespan is the sum of durations whatever the order; the order only changes
          peak memory, and b-level order matches the critical-path teacher's.

    Per-state answers follow the plan (:class:`~placegym.teachers.base.PlanTeacher`).
    """

    name: ClassVar[str] = "single_device"

    def plan(self, graph: Graph, cluster: Cluster) -> Placement:
        """Everything on the best single device (see the class docstring)."""
        order = priority_order(graph, b_level(graph, cluster))
        n = graph.num_nodes
        kinds = cluster.device_traits
        _, first = np.unique(kinds, axis=0, return_index=True)
        cand = np.sort(first)
        res = simulate_batch(
            graph,
            cluster,
            np.repeat(cand[:, None], n, axis=1),
            np.tile(order, (len(cand), 1)),
        )
        best = int(cand[np.lexsort((cand, res.makespan, res.oom))[0]])
        device = repair_memory(graph, cluster, np.full(n, best, dtype=np.int64), order)
        return Placement(device=device, order=order)

    def place(self, graph: Graph, cluster: Cluster) -> Placement:
        """The plan (class docstring); :attr:`last_infeasibility` says whether it is
        infeasible."""
        return self._verdict(graph, cluster, super().place(graph, cluster))
