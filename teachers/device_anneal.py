"""The ``device_anneal`` plan teacher: annealing over device maps in a fixed b-level order.

A plan teacher for behaviour cloning of one instance's plan (phase I with
``deterministic_teacher``, :mod:`placegym.train.trainer`): the policy imitates SEL from the
critical-path teacher and PLC from this plan, so the plan's order should be the order the
learner will select in, and only its device map should carry the search's work.

Rule:
    - **Order**: the critical-path selection order (frontier node of largest
      :func:`~placegym.envs.analysis.levels.b_level`, smallest id among equals), fixed.
    - **Starts**: the device maps of the ``starts`` teachers (by default every single-pass
      placer: critical path, HEFT, NEST, METIS, round robin, single device), each in that
      order.
    - **Search**: ``restarts`` runs of :func:`~placegym.teachers.anneal.anneal` with its
      priority move switched off (``move``, ``swap``, ``neighbourhood`` and ``layer``
      moves only), each with ``budget // restarts`` simulator calls and seed
      ``1000 * seed + i``; the best placement of all runs is the plan.

Memory and groups: as :class:`~placegym.teachers.anneal.AnnealTeacher` (moves move
whole co-location groups; an OOM candidate never replaces a feasible current placement
or best), and a feasible run always beats an OOM one among the restarts.

``budget`` counts every simulated placement (starts included). Same graph, cluster,
budget, restarts and seed, same plan.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from placegym.envs.analysis.levels import b_level
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.teachers import SINGLE_PASS
from placegym.teachers.base import PlanTeacher

__all__ = ["DeviceAnnealTeacher", "critical_path_order"]

#: anneal's move weights without the priority move
#: (:data:`~placegym.teachers.anneal_moves.MOVES`)
DEVICE_MOVES = (0.4, 0.25, 0.15, 0.1, 0.0)


def critical_path_order(graph: Graph, cluster: Cluster) -> np.ndarray:
    """The topological order that always takes the ready node of largest b-level (smallest
    id among equals): the critical-path teacher's SEL rule, first of each tie set."""
    bl = b_level(graph, cluster)
    indeg = graph.in_degree.copy()
    frontier = set(np.flatnonzero(indeg == 0).tolist())
    order = []
    while frontier:
        v = min(frontier, key=lambda u: (-bl[u], u))
        frontier.remove(v)
        order.append(v)
        for s in graph.successors(v).tolist():
            indeg[s] -= 1
            if indeg[s] == 0:
                frontier.add(s)
    return np.array(order, dtype=np.int64)


class DeviceAnnealTeacher(PlanTeacher):
    """Annealing over device maps in the critical-path order (module docstring).

    Args:
        budget: simulator calls per plan, all restarts together (>= ``restarts`` times the
            number of starts).
        restarts: independent annealing runs, the best kept.
        seed: seed of the runs (run ``i`` uses ``1000 * seed + i``).
        starts: registered names of the teachers whose device maps seed every run.
    """

    name: ClassVar[str] = "device_anneal"

    def __init__(
        self,
        budget: int = 30000,
        restarts: int = 3,
        seed: int = 0,
        *,
        starts: tuple[str, ...] = SINGLE_PASS,
    ) -> None:
        super().__init__()
        from placegym.teachers import get_teacher  # the registry imports this module

        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"seed: must be an integer >= 0, got {seed!r}")
        if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < 1:
            raise ValueError(f"restarts: must be an integer >= 1, got {restarts!r}")
        if not starts or "device_anneal" in starts:
            raise ValueError(
                f"starts: need teacher names other than 'device_anneal', got {starts!r}"
            )
        if budget < restarts * len(starts):
            raise ValueError(
                f"budget: must be >= restarts x starts = {restarts * len(starts)}, got {budget}"
            )
        self.budget, self.restarts, self.seed = int(budget), restarts, int(seed)
        self._starts = [get_teacher(s) for s in starts]
        self.last_makespan: float | None = None

    def plan(self, graph: Graph, cluster: Cluster) -> Placement:
        """The best of ``restarts`` device-only annealing runs (``budget`` calls in all)."""
        from placegym.teachers.anneal import anneal

        order = critical_path_order(graph, cluster)
        starts = [
            Placement(device=t.place(graph, cluster).device, order=order) for t in self._starts
        ]
        best = None
        for i in range(self.restarts):
            res = anneal(
                graph,
                cluster,
                starts,
                budget=self.budget // self.restarts,
                seed=1000 * self.seed + i,
                move_weights=DEVICE_MOVES,
            )
            # a feasible run beats an OOM one; then the least makespan
            if best is None or (not res.feasible, res.makespan) < (
                not best.feasible,
                best.makespan,
            ):
                best = res
        assert best is not None
        self.last_makespan = float(best.makespan)
        return best.placement

    def __repr__(self) -> str:
        b, r, s = self.budget, self.restarts, self.seed
        return f"DeviceAnnealTeacher(budget={b}, restarts={r}, seed={s})"
