"""Rewards of the placement MDP (DESIGN §4).

- ``relative``: 0 until the end, then ``(T_ref - T) / T_ref``.
- ``makespan``: 0 until the end, then ``-T / T_ref``.

An episode whose placement exceeds a device's memory (the simulator's peak, DESIGN §3)
is infeasible: its ``T`` is scored as at least the serial upper bound
(:func:`scored_makespan`), so it never earns more than any feasible placement.
- ``nest``: the relative terminal reward plus potential-based shaping
  ``γΦ(s') - Φ(s)`` (Ng et al. 1999) with ``Φ(s) = -nest_cost(s) / T_ref`` and
  ``Φ(initial) = Φ(terminal) = 0``. :class:`NestPotential` maintains the NEST cost of the
  partial assignment incrementally (O(degree) per placement) and equals
  :func:`placegym.teachers.nest.nest_cost` on every partial assignment (tested).

``T_ref`` is the makespan (noiseless) of the placement of the environment's *reference
placer*, any object with ``place(graph, cluster) -> Placement``. The environment takes it
as an argument; its default, :data:`DEFAULT_REFERENCE`, is the critical-path teacher
(DESIGN §4), named by import path and built on first use, so that this layer imports no
teacher module (teachers are built on the environment layer, not the other way round).
"""

from __future__ import annotations

import importlib
from typing import Protocol

from placegym.envs.analysis.bounds import serial_upper_bound
from placegym.envs.analysis.memory import overflow_penalty
from placegym.envs.core.cache import IdentityCache
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.mdp.state import PlacementState
from placegym.envs.sim.simulator import Dispatch, Schedule, simulate

REWARDS = ("relative", "makespan", "nest")

#: The reference placer when none is given: ``"module:Class"`` of a placer built with no
#: arguments (DESIGN §4: the critical-path teacher).
DEFAULT_REFERENCE = "placegym.teachers.critical_path:CriticalPathTeacher"

__all__ = [
    "DEFAULT_REFERENCE",
    "REWARDS",
    "NestPotential",
    "ReferencePlacer",
    "SharedReference",
    "oom_makespan",
    "reference_makespan",
    "reference_placer",
    "scored_makespan",
    "terminal_reward",
]


class ReferencePlacer(Protocol):
    """What the rewards need of a reference: a whole placement of any graph."""

    def place(self, graph: Graph, cluster: Cluster) -> Placement:
        """A placement of ``graph`` on ``cluster``."""
        ...


def reference_placer(spec: ReferencePlacer | str) -> ReferencePlacer:
    """``spec`` itself, or for an import path ``"module:Class"`` a new instance of it.

    Raises:
        ValueError: ``spec`` has no ``place`` method, or the path cannot be loaded.
    """
    if not isinstance(spec, str):
        if not callable(getattr(spec, "place", None)):
            raise ValueError(
                f"reference: expected a placer with place(graph, cluster) or an import "
                f"path 'module:Class', got {spec!r}"
            )
        return spec
    module, _, name = spec.partition(":")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as e:
        raise ValueError(f"reference: cannot load {spec!r} ('module:Class'): {e}") from None
    return cls()


class SharedReference:
    """A reference placer that keeps its placement of each (graph, cluster) object pair,
    for many environments to share: a pool of environments of one graph then places it
    once instead of once per environment (the same ``T_ref``: a reference placer is
    deterministic, as ``T_ref`` is computed once per graph anyway).

    Args:
        spec: the placer, or its import path (as ``PlacementEnv``'s ``reference``).
    """

    def __init__(self, spec: ReferencePlacer | str = DEFAULT_REFERENCE) -> None:
        self.placer = reference_placer(spec)
        self._placements: IdentityCache[Placement] = IdentityCache(self.placer.place, size=None)

    def place(self, graph: Graph, cluster: Cluster) -> Placement:
        """The placer's placement of ``graph`` on ``cluster`` (computed on first use)."""
        return self._placements(graph, cluster)

    def __repr__(self) -> str:
        return f"SharedReference({self.placer!r})"


def reference_makespan(
    graph: Graph, cluster: Cluster, placer: ReferencePlacer, dispatch: Dispatch = "priority"
) -> float:
    """``T_ref``: the simulated makespan of ``placer``'s placement (1 when it is 0)."""
    placement = placer.place(graph, cluster)
    t = simulate(graph, cluster, placement, dispatch=dispatch).makespan
    return t if t > 0 else 1.0


def _oom_makespan(graph: Graph, cluster: Cluster) -> float:
    return serial_upper_bound(graph, cluster)


#: The makespan an infeasible (out-of-memory) episode is scored with: the serial upper
#: bound (:func:`~placegym.envs.analysis.bounds.serial_upper_bound`), which no feasible placement
#: exceeds; computed on the first infeasible episode of a (graph, cluster) pair.
oom_makespan = IdentityCache(_oom_makespan, size=16)


def scored_makespan(schedule: Schedule, makespan: float) -> float:
    """The makespan the terminal reward reads: ``makespan`` (the simulated or measured
    one) for a feasible placement; for one over memory the larger of it and
    :data:`oom_makespan`, so that an infeasible episode never scores better than a
    feasible one."""
    if not schedule.oom:
        return makespan
    return max(makespan, oom_makespan(schedule.graph, schedule.cluster))


def terminal_reward(kind: str, makespan: float, reference: float) -> float:
    """The reward of the last step: ``relative`` or ``makespan`` (see the module docstring)."""
    if kind == "makespan":
        return -makespan / reference
    return (reference - makespan) / reference


class NestPotential:
    """Incremental ``Φ(s) = -nest_cost(s) / T_ref`` along one episode.

    ``nest_cost`` = the largest per-device compute load + the transfer time
    (``latency + bytes / bandwidth`` at the pair's level) of every edge whose two ends are
    placed on different devices + the memory-overflow penalty
    (:func:`~placegym.envs.analysis.memory.overflow_penalty`); the NEST teacher's
    ``nest_cost`` prices a whole assignment the same way.
    """

    def __init__(self, state: PlacementState, reference: float) -> None:
        self.state = state
        self.reference = reference
        self.cut = 0.0
        self.phi = 0.0

    def cost(self) -> float:
        """``nest_cost`` of the current partial assignment."""
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
