"""The fastest of several heuristics per graph, as a teacher one can imitate.

No single-pass heuristic dominates: on ``generalize-v0``'s training split HEFT is faster
than critical_path on half of the instances (by up to 28%) and slower on the others (by
up to 8%), and NEST is faster than both on three of them (by up to 38%).
:class:`BestListTeacher` answers every state with the rule of whichever candidate
heuristic places *the state's graph on its cluster* fastest (simulated makespan of the
candidates' own placements, computed once per (graph, cluster) object pair), so that a
learner imitating it sees critical_path's choices where they pay and another
heuristic's where those do. The candidates are compared on the same placements that
:func:`~placegym.agents.doppler.hints.hint_quality` rates, so a policy reading hint qualities
(``PolicyConfig.hint_quality`` with the same heuristics as hints) sees which one its
labels follow.

Each candidate answers states in the form a learner can follow:

- a :class:`~placegym.teachers.base.StepTeacher` (``critical_path``) as it is;
- a :class:`~placegym.teachers.base.PlanTeacher` (``heft``, ``nest``, ``metis``) through
  :class:`~placegym.teachers.canonical_plan.CanonicalPlanTeacher`: its device map up to
  the cluster's symmetries, SEL answered by the ``select`` teacher's tie sets
  (critical_path's largest b-level: a plan's device map carries most of its value and a
  b-level order is what the policy's rule features express; HEFT's devices in b-level
  order lose under 2% of HEFT's makespan on most suite instances).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from placegym.envs.core.cache import IdentityCache
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.mdp.state import PlacementState
from placegym.envs.sim.simulator import simulate_makespan
from placegym.teachers._memory import priced
from placegym.teachers.base import PlanTeacher, Teacher

__all__ = ["BestListTeacher"]


class BestListTeacher(Teacher):
    """Per (graph, cluster), the states' answers of the fastest candidate heuristic.

    Memory and groups: each candidate keeps its own treatment of them (its class
    docstring); a candidate whose placement is over memory loses to every feasible one
    (:func:`~placegym.teachers._memory.priced`), so the teacher followed is feasible
    whenever some candidate's placement is.

    Args:
        candidates: registered single-pass teachers to choose from (at least one; ties
            go to the first).
        select: the teacher answering SEL for plan candidates (see the module docstring).

    Raises:
        ValueError: no candidate, ``best_list`` itself among them, or a name that is not a
            registered teacher.
    """

    name: ClassVar[str] = "best_list"

    def __init__(
        self, candidates: Sequence[str] = ("critical_path", "heft"), select: str = "critical_path"
    ) -> None:
        from placegym.teachers import get_teacher
        from placegym.teachers.canonical_plan import CanonicalPlanTeacher

        if not candidates or self.name in candidates:
            raise ValueError(
                f"candidates: expected teacher names other than {self.name!r}, "
                f"got {list(candidates)}"
            )
        chooser = get_teacher(select)
        self.names = tuple(candidates)
        self.candidates: list[Teacher] = []
        for name in self.names:
            t = get_teacher(name)
            self.candidates.append(
                CanonicalPlanTeacher(t, chooser) if isinstance(t, PlanTeacher) else t
            )
        self._best = IdentityCache(self._choose, size=None)

    def _choose(self, graph: Graph, cluster: Cluster) -> tuple[int, Placement, float]:
        """(index, placement, price) of the fastest candidate, a feasible one first (a
        placement over memory is priced above every feasible makespan); the first on
        ties."""
        best: tuple[int, Placement, float] | None = None
        for i, t in enumerate(self.candidates):
            placement = t.place(graph, cluster)
            makespan = priced(
                graph, cluster, placement, simulate_makespan(graph, cluster, placement)
            )
            if best is None or makespan < best[2]:
                best = (i, placement, makespan)
        assert best is not None
        return best

    def choice(self, graph: Graph, cluster: Cluster) -> str:
        """The name of the candidate followed on ``graph`` and ``cluster``."""
        return self.names[self._best(graph, cluster)[0]]

    def place(self, graph: Graph, cluster: Cluster) -> Placement:
        """The fastest candidate's placement."""
        return self._best(graph, cluster)[1]

    def _teacher(self, state: PlacementState) -> Teacher:
        return self.candidates[self._best(state.graph, state.cluster)[0]]

    def select_actions(self, state: PlacementState) -> np.ndarray:
        """The chosen candidate's SEL tie set."""
        return self._teacher(state).select_actions(state)

    def place_actions(self, state: PlacementState) -> np.ndarray:
        """The chosen candidate's PLC tie set."""
        return self._teacher(state).place_actions(state)

    def __repr__(self) -> str:
        return f"BestListTeacher({list(self.names)!r})"
