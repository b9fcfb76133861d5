"""The lookahead's completions by a compiled base rule (:mod:`placegym.teachers._rule_kernel`):
the arguments of :func:`~placegym.teachers._rule_kernel.complete_candidates` gathered from
a state and its rule's room."""

from __future__ import annotations

import numpy as np

from placegym.envs.mdp.state import PlacementState
from placegym.teachers.critical_path import CriticalPathTeacher, rule_completions
from placegym.teachers.heft import HeftRuleTeacher

__all__ = ["COMPILED", "compiled_completions"]

#: Base rules with a compiled completion (:mod:`placegym.teachers._rule_kernel`).
COMPILED: dict[type, int] = {
    cls: cls.__dict__["compiled_rule"] for cls in (HeftRuleTeacher, CriticalPathTeacher)
}


def compiled_completions(
    state: PlacementState, legal: np.ndarray, kind: int, rule: CriticalPathTeacher
) -> tuple[np.ndarray, np.ndarray]:
    """``(devices, orders)`` ``(len(legal), n)``: ``state`` with its selected node on each
    of ``legal``, completed by the compiled ``rule``, its co-location groups kept and its
    room under memory pressure (:meth:`~placegym.teachers.critical_path.
    CriticalPathTeacher.room`) respected as the rule does through the state."""
    room = rule.room(state.graph, state.cluster)
    return rule_completions(state, legal, kind, rule.b_level(state.graph, state.cluster), room)
