"""The teacher interface.

A teacher places a whole graph (:meth:`Teacher.place`) and answers, for any
:class:`~placegym.envs.mdp.state.PlacementState`, which actions it considers best in the
current phase, *ties included* (imitation learning uses the whole tie set):

- :meth:`Teacher.select_actions` -> node ids, a non-empty subset of the frontier;
- :meth:`Teacher.place_actions` -> device ids, a non-empty subset of the legal devices.

Two ways to be a teacher:

- :class:`StepTeacher`: defined by per-state rules; ``place`` rolls the rules out from
  the empty state, taking the smallest id of each tie set.
- :class:`PlanTeacher`: plans a whole placement; per-state answers follow the plan
  (SEL: the frontier node of lowest planned rank; PLC: the planned device when legal,
  otherwise the legal devices where the node can start earliest).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np

from placegym.envs.core.cache import IdentityCache
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.mdp.state import PlacementState
from placegym.teachers._common import TIE_RTOL, ties
from placegym.teachers._memory import infeasibility

__all__ = ["TIE_RTOL", "PlanTeacher", "StepTeacher", "Teacher", "complete", "roll_out", "ties"]


class Teacher(ABC):
    """Base class of every teacher. Subclasses set :attr:`name`."""

    name: ClassVar[str] = "teacher"

    @abstractmethod
    def place(self, graph: Graph, cluster: Cluster) -> Placement:
        """A complete placement (device and priority order) of ``graph`` on ``cluster``."""

    @abstractmethod
    def select_actions(self, state: PlacementState) -> np.ndarray:
        """Best SEL actions in ``state`` (ascending node ids, non-empty)."""

    @abstractmethod
    def place_actions(self, state: PlacementState) -> np.ndarray:
        """Best PLC actions for ``state.selected`` (ascending device ids, non-empty)."""

    def infeasibility(self, graph: Graph, cluster: Cluster) -> str | None:
        """Why this teacher's placement of ``graph`` on ``cluster`` is infeasible (it
        splits a co-location group, or its simulated peak exceeds a device's memory),
        None when it is feasible (:func:`placegym.teachers._memory.infeasibility`)."""
        return infeasibility(graph, cluster, self.place(graph, cluster))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def roll_out(teacher: Teacher, graph: Graph, cluster: Cluster) -> Placement:
    """The placement of ``teacher``'s per-state answers from the empty state, taking the
    first action of each tie set (what an imitator of its tie sets can reproduce)."""
    return complete(PlacementState(graph, cluster), teacher).to_placement()


def complete(state: PlacementState, teacher: Teacher) -> PlacementState:
    """``state`` (changed in place) finished by ``teacher``'s per-state answers, first
    action of each tie set; a state in the PLC phase starts with its pending placement."""
    while not state.done:
        if state.selected < 0:
            state.select(int(teacher.select_actions(state)[0]))
        state.place(int(teacher.place_actions(state)[0]))
    return state


class StepTeacher(Teacher):
    """A teacher given by per-state rules; :meth:`place` rolls them out."""

    def place(self, graph: Graph, cluster: Cluster) -> Placement:
        """Roll the per-state rules out from the empty state, first of each tie set."""
        return roll_out(self, graph, cluster)


class PlanTeacher(Teacher):
    """A teacher that plans a whole placement; states are answered from the plan.

    Subclasses implement :meth:`plan`. Plans are cached per (graph, cluster) object pair
    (a few of them), so per-state answers cost a lookup.
    """

    cache_size: ClassVar[int] = 8

    def __init__(self) -> None:
        self._plans = IdentityCache(self._checked_plan, size=self.cache_size)

    @abstractmethod
    def plan(self, graph: Graph, cluster: Cluster) -> Placement:
        """Compute a placement (not cached)."""

    def _checked_plan(self, graph: Graph, cluster: Cluster) -> Placement:
        placement = self.plan(graph, cluster)
        placement.check(graph, cluster)
        return placement

    def place(self, graph: Graph, cluster: Cluster) -> Placement:
        """The plan (computed once per (graph, cluster) pair)."""
        return self._plans(graph, cluster)

    def select_actions(self, state: PlacementState) -> np.ndarray:
        """The frontier node of lowest planned rank."""
        plan = self.place(state.graph, state.cluster)
        frontier = state.frontier()
        return np.array([frontier[np.argmin(plan.rank[frontier])]])

    def place_actions(self, state: PlacementState) -> np.ndarray:
        """The planned device when legal, else the legal devices of earliest start."""
        plan = self.place(state.graph, state.cluster)
        legal = state.place_mask()
        d = int(plan.device[state.selected])
        if legal[d]:
            return np.array([d])
        return ties(state.earliest_start(), np.flatnonzero(legal), best="min")


class FirstOfTies(Teacher):
    """A deterministic view of a teacher: one action per state, the first of its tie set.

    SEL: the first of the teacher's (ascending) tie set. PLC: among the tied devices, the
    earliest start of the selected node, then the smallest index. Behaviour cloning with
    it labels every state with one action, so that the learner's greedy decoding (which
    breaks exact ties by a fixed rule) can follow the teacher's episode exactly.

    Args:
        inner: the teacher whose tie sets are cut to one action; :meth:`place` is its.
    """

    name: ClassVar[str] = "first_of_ties"

    def __init__(self, inner: Teacher) -> None:
        self.inner = inner

    def place(self, graph: Graph, cluster: Cluster) -> Placement:
        """The wrapped teacher's placement."""
        return self.inner.place(graph, cluster)

    def select_actions(self, state: PlacementState) -> np.ndarray:
        """The first node of the teacher's SEL tie set."""
        return self.inner.select_actions(state)[:1]

    def place_actions(self, state: PlacementState) -> np.ndarray:
        """The teacher's tied device of earliest start, smallest index among equals."""
        tied = self.inner.place_actions(state)
        if len(tied) == 1:
            return tied
        est = state.earliest_start()
        return tied[np.lexsort((tied, est[tied]))][:1]

    def __getattr__(self, name: str):
        # plan teachers' extras (plan_makespan, offer, has_plan) pass through
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"FirstOfTies({self.inner!r})"
