"""The critical-path teacher (DOPPLER's phase-I teacher, with exact tie sets)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from placegym.envs.analysis import b_level
from placegym.envs.cluster import Cluster
from placegym.envs.graph import Graph
from placegym.envs.state import PlacementState
from placegym.teachers._common import IdentityCache
from placegym.teachers.base import StepTeacher, ties

__all__ = ["CriticalPathTeacher"]


class CriticalPathTeacher(StepTeacher):
    """Critical-path list scheduling, answered state by state.

    Rule:
        - **SEL**: the frontier nodes of maximum b-level
          (:func:`~placegym.envs.analysis.b_level`: the longest mean compute +
          communication path from the node to a sink, its own compute included).
        - **PLC**: the legal devices (:meth:`PlacementState.place_mask`) on which the
          selected node can start earliest (:meth:`PlacementState.earliest_start`, the
          contention-free list-schedule estimate of the partial assignment).

    Both answers are full tie sets (:func:`~placegym.teachers.base.ties`, relative
    tolerance ``TIE_RTOL``), ascending; :meth:`place` rolls the rule out taking the smallest
    id of each set. Earliest *start* (not finish) is DOPPLER's rule; on the homogeneous
    presets the two coincide. B-levels are computed once per (graph, cluster) object pair
    and cached, so a per-state answer costs one frontier scan and one ``(D,)`` estimate.
    """

    name: ClassVar[str] = "critical_path"

    def __init__(self) -> None:
        self._b_level = IdentityCache(b_level)

    def b_level(self, graph: Graph, cluster: Cluster) -> np.ndarray:
        """``(n,)`` the b-levels SEL ranks by (cached per (graph, cluster) pair)."""
        return self._b_level(graph, cluster)

    def select_actions(self, state: PlacementState) -> np.ndarray:
        """The frontier nodes of maximum b-level."""
        frontier = state.frontier()
        if len(frontier) == 0:
            raise ValueError(f"state: no frontier node to select (phase {state.phase!r})")
        return ties(self.b_level(state.graph, state.cluster), frontier, best="max")

    def place_actions(self, state: PlacementState) -> np.ndarray:
        """The legal devices where the selected node can start earliest."""
        if state.selected < 0:
            raise ValueError("state: phase is 'select', no node awaits a device")
        legal = np.flatnonzero(state.place_mask())
        return ties(state.earliest_start(), legal, best="min")
