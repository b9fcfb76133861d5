"""The lookahead's completions by a compiled base rule (:mod:`placegym.teachers._rule_kernel`):
the arguments of :func:`~placegym.teachers._rule_kernel.complete_candidates` gathered from
a state and its rule's room."""

from __future__ import annotations

import numpy as np

from placegym.envs.analysis.room import units
from placegym.envs.mdp.state import PlacementState
from placegym.teachers import _rule_kernel
from placegym.teachers.critical_path import CriticalPathTeacher
from placegym.teachers.heft import HeftRuleTeacher

__all__ = ["COMPILED", "compiled_completions"]

#: Base rules with a compiled completion (:mod:`placegym.teachers._rule_kernel`).
COMPILED: dict[type, int] = {
    HeftRuleTeacher: _rule_kernel.HEFT_RULE,
    CriticalPathTeacher: _rule_kernel.CRITICAL_PATH,
}


def compiled_completions(
    state: PlacementState, legal: np.ndarray, kind: int, rule: CriticalPathTeacher
) -> tuple[np.ndarray, np.ndarray]:
    """``(devices, orders)`` ``(len(legal), n)``: ``state`` with its selected node on each
    of ``legal``, completed by the compiled ``rule``, its co-location groups kept and its
    room under memory pressure (:meth:`~placegym.teachers.critical_path.
    CriticalPathTeacher.room`) respected as the rule does through the state."""
    graph, cluster = state.graph, state.cluster
    costs = state.costs
    k = state.num_placed
    placed = np.asarray(state.order[:k], dtype=np.int64)
    prefix = np.stack([placed, state.device[placed]], axis=1)
    pptr, pidx = graph.producer_csr
    sptr, sidx = graph.consumer_csr
    room = rule.room(graph, cluster)
    u = room.units if room is not None else units(graph)
    return _rule_kernel.complete_candidates(
        kind,
        prefix,
        state.selected,
        np.ascontiguousarray(legal, dtype=np.int64),
        rule.b_level(graph, cluster),
        costs.duration,
        pptr,
        pidx,
        sptr,
        sidx,
        graph.out_bytes,
        graph.param_bytes,
        cluster.memory,
        state.memory_mask,
        costs.latency,
        costs.inv_bandwidth,
        u.of,
        u.nbytes,
        u.by_size,
        room is not None,
        cluster.memory if room is None else np.ascontiguousarray(room.capacity),
        room is not None and room.live,
        graph.in_bytes,
        graph.out_bytes if room is None else room.future,
        np.ones(len(pidx), dtype=bool) if room is None else room.keeps,
        np.ones(len(pidx), dtype=bool) if room is None else room.counts,
    )
