"""Rewards of the placement MDP (DESIGN §4).

- ``relative``: 0 until the end, then ``(T_ref - T) / T_ref``.
- ``makespan``: 0 until the end, then ``-T / T_ref``.
- ``nest``: the relative terminal reward plus potential-based shaping
  ``γΦ(s') - Φ(s)`` (Ng et al. 1999) with ``Φ(s) = -nest_cost(s) / T_ref`` and
  ``Φ(initial) = Φ(terminal) = 0``. :class:`NestPotential` maintains the NEST cost of the
  partial assignment incrementally (O(degree) per placement) and equals
  :func:`placegym.teachers.nest.nest_cost` on every partial assignment (tested).

``T_ref`` is the makespan of the ``critical_path`` teacher's placement (noiseless).
"""

from __future__ import annotations

from placegym.envs.cluster import Cluster
from placegym.envs.graph import Graph
from placegym.envs.simulator import simulate
from placegym.envs.state import PlacementState

REWARDS = ("relative", "makespan", "nest")

__all__ = ["REWARDS", "NestPotential", "reference_makespan", "terminal_reward"]


def reference_makespan(graph: Graph, cluster: Cluster, dispatch: str = "priority") -> float:
    """``T_ref``: the simulated makespan of the critical_path teacher's placement."""
    from placegym.teachers import get_teacher

    placement = get_teacher("critical_path").place(graph, cluster)
    t = simulate(graph, cluster, placement, dispatch=dispatch).makespan
    return t if t > 0 else 1.0


def terminal_reward(kind: str, makespan: float, reference: float) -> float:
    if kind == "makespan":
        return -makespan / reference
    return (reference - makespan) / reference


class NestPotential:
    """Incremental ``Φ(s) = -nest_cost(s) / T_ref`` along one episode.

    ``nest_cost`` = the largest per-device compute load + the transfer time
    (``latency + bytes / bandwidth`` at the pair's level) of every edge whose two ends are
    placed on different devices + the memory-overflow penalty (see
    :func:`placegym.teachers.nest.nest_cost`).
    """

    def __init__(self, state: PlacementState, reference: float) -> None:
        self.state = state
        self.reference = reference
        self.cut = 0.0
        self.phi = 0.0

    def cost(self) -> float:
        from placegym.teachers.nest import overflow_penalty

        s = self.state
        return float(s.load.max()) + self.cut + overflow_penalty(s.param_used, s.cluster)

    def on_place(self, v: int, d: int, gamma: float, done: bool) -> float:
        """Shaping term of the transition that placed ``v`` on ``d``."""
        s = self.state
        out = s.graph.out_bytes
        lat, inv_bw = s.costs.latency, s.costs.inv_bandwidth
        for u in s.costs.predecessors[v]:
            a = s.device[u]
            if a >= 0 and a != d:
                self.cut += lat[a, d] + out[u] * inv_bw[a, d]
        for c in s.costs.successors[v]:
            b = s.device[c]
            if b >= 0 and b != d:
                self.cut += lat[d, b] + out[v] * inv_bw[d, b]
        old = self.phi
        self.phi = 0.0 if done else -self.cost() / self.reference
        return gamma * self.phi - old

    def idle_step(self, gamma: float) -> float:
        """Shaping term of a SEL transition (the assignment, hence Φ, is unchanged)."""
        return (gamma - 1.0) * self.phi
