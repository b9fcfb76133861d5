"""One-step lookahead over a list rule: the rollout algorithm (pilot method) as a teacher.

A single-pass rule (critical_path, heft_rule) decides each device from an estimate of the
partial schedule; it never sees what the decision costs the rest of the graph on the
work-conserving simulator. :class:`LookaheadTeacher` asks, for every legal device of the
selected node, what the *whole* placement would take if the node went there and the base
rule placed everything after it, and answers with the devices of least simulated
makespan. This is Bertsekas' rollout algorithm (the pilot method of list scheduling) with
the base rule as its heuristic: per PLC state one exact simulation per legal device.

Because the completions follow the base rule deterministically (first of each tie set, as
:func:`~placegym.teachers.base.complete`) and SEL follows the base rule's first node too,
the completion through the base rule's own device at a state *is* the completion chosen at
the previous state; the best completion's makespan therefore never rises along
:meth:`LookaheadTeacher.place`, and the lookahead's placement is never slower than the
base rule's (the cost-improvement property; ``tests/test_teachers.py`` checks it).

Cost: :meth:`~LookaheadTeacher.place` makes one simulator call per legal device per node
(``n * D`` calls, :attr:`LookaheadTeacher.calls` counts them) and as many base-rule
completions; answers are cached per state, so imitating it with teacher roll-in pays
each state once. With ``heft_rule`` or ``critical_path`` as the base the completions run
compiled (:mod:`placegym.teachers._rule_kernel`, the same placements), 60-110 times
faster than through :class:`~placegym.envs.state.PlacementState` (``make bench``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from placegym.envs.cache import IdentityCache
from placegym.envs.cluster import Cluster
from placegym.envs.graph import Graph
from placegym.envs.placement import Placement
from placegym.envs.simulator import simulate_batch
from placegym.envs.state import PlacementState
from placegym.teachers import _rule_kernel
from placegym.teachers.base import StepTeacher, complete, ties
from placegym.teachers.critical_path import CriticalPathTeacher
from placegym.teachers.heft import HeftRuleTeacher

__all__ = ["LookaheadTeacher"]

#: Base rules with a compiled completion (:mod:`placegym.teachers._rule_kernel`).
_COMPILED: dict[type, int] = {
    HeftRuleTeacher: _rule_kernel.HEFT_RULE,
    CriticalPathTeacher: _rule_kernel.CRITICAL_PATH,
}


def _compiled_completions(
    state: PlacementState, legal: np.ndarray, kind: int, rule: CriticalPathTeacher
) -> tuple[np.ndarray, np.ndarray]:
    """``(devices, orders)`` ``(len(legal), n)``: ``state`` with its selected node on each
    of ``legal``, completed by the compiled ``rule``."""
    graph, cluster = state.graph, state.cluster
    costs = state.costs
    k = state.num_placed
    placed = np.asarray(state.order[:k], dtype=np.int64)
    prefix = np.stack([placed, state.device[placed]], axis=1)
    pptr, pidx = graph.producer_csr
    sptr, sidx = graph.consumer_csr
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
    )


def _least(scores: np.ndarray) -> np.ndarray:
    """The devices of least finite score (exact tie set, ascending)."""
    return ties(scores, np.flatnonzero(np.isfinite(scores)), best="min")


class LookaheadTeacher(StepTeacher):
    """Per selected node, the devices whose base-rule completion simulates fastest.

    Rule:
        - **SEL**: the first node of the base rule's tie set: the node its completions
          select next (following another node of the tie set would void the
          cost-improvement property).
        - **PLC**: for each legal device ``d``: a copy of the state with the node on
          ``d``, completed by the base rule (first of each tie set); the legal devices of
          least simulated makespan (:func:`~placegym.envs.simulator.simulate_batch`,
          noiseless, priority dispatch) form the tie set.

    :meth:`place` rolls the rule out taking the first device of least makespan (exact
    ties only, whatever ``rtol``); its makespan is at most the base rule's (module
    docstring).

    Args:
        base: a registered step teacher to look ahead with (default ``heft_rule``).
        rtol: the PLC tie set holds every legal device within this relative margin of the
            least makespan (0: exact ties, :data:`~placegym.teachers.base.TIE_RTOL`). A
            margin leaves the base rule's own device among the labels wherever deviating
            gains less than it, so an imitator learns the deviations that matter.
        cache_size: PLC answers kept per (graph, cluster) pair (the state's decisions so
            far are the key; the least recently used go first); 0 keeps none.
        compiled: complete with the compiled copy of the base rule
            (:mod:`placegym.teachers._rule_kernel`, the same placements number for number)
            when the base is ``heft_rule`` or ``critical_path``; ``False`` (or another
            base) completes through :class:`~placegym.envs.state.PlacementState`.

    Raises:
        ValueError: ``base`` is not a registered :class:`~placegym.teachers.base.StepTeacher`
            or is ``lookahead`` itself.
    """

    name: ClassVar[str] = "lookahead"

    def __init__(
        self,
        base: str = "heft_rule",
        rtol: float = 0.0,
        cache_size: int = 200_000,
        compiled: bool = True,
    ) -> None:
        from placegym.teachers import get_teacher

        if base == self.name:
            raise ValueError(f"base: expected a rule other than {self.name!r}, got {base!r}")
        rule = get_teacher(base)
        if not isinstance(rule, StepTeacher):
            raise ValueError(
                f"base: expected a step teacher (a per-state rule), got {base!r} "
                f"({type(rule).__name__})"
            )
        if not rtol >= 0:
            raise ValueError(f"rtol: expected a margin >= 0, got {rtol!r}")
        self.base = base
        self.rtol = float(rtol)
        self.rule = rule
        # exact types only: a subclass may answer differently from the compiled rule
        self._kind = _COMPILED.get(type(rule)) if compiled else None
        self.cache_size = cache_size
        self.calls = 0
        """Simulator calls made so far (one per completed candidate placement)."""
        self.observer: Callable[[np.ndarray, np.ndarray, np.ndarray], None] | None = None
        """Called with ``(devices, orders, makespans)`` (``(k, n)``, ``(k, n)``,
        ``(k,)``) after every batch of completions simulated: the complete placements
        behind the prices (noiseless, priority dispatch, memory not checked), e.g. for a
        search that counts them in its budget and keeps the best."""
        self._answers: IdentityCache[OrderedDict[tuple[int, bytes, bytes], np.ndarray]]
        self._answers = IdentityCache(lambda graph, cluster: OrderedDict(), size=64)

    def select_actions(self, state: PlacementState) -> np.ndarray:
        """The first node of the base rule's SEL tie set (the completions' next node)."""
        return self.rule.select_actions(state)[:1]

    def completion_makespans(self, state: PlacementState) -> tuple[np.ndarray, np.ndarray]:
        """``(legal, makespan)``: the legal devices of ``state.selected`` and the simulated
        makespan of the base rule's completion after placing it on each."""
        if state.selected < 0:
            raise ValueError("state: phase is 'select', no node awaits a device")
        legal = np.flatnonzero(state.place_mask())
        if self._kind is not None:
            assert isinstance(self.rule, CriticalPathTeacher)  # heft_rule's base class
            devices, orders = _compiled_completions(state, legal, self._kind, self.rule)
        else:
            n = state.graph.num_nodes
            devices = np.empty((len(legal), n), dtype=np.int64)
            orders = np.empty((len(legal), n), dtype=np.int64)
            for i, d in enumerate(legal.tolist()):
                s = state.copy()
                s.place(d)
                done = complete(s, self.rule)
                devices[i] = done.device
                orders[i] = done.order
        self.calls += len(legal)
        result = simulate_batch(
            state.graph, state.cluster, devices, orders, memory=False, threads=1
        )
        makespan = np.asarray(result.makespan, dtype=np.float64)
        if self.observer is not None:
            self.observer(devices, orders, makespan)
        return legal, makespan

    def place_actions(self, state: PlacementState) -> np.ndarray:
        """The legal devices of least simulated completion makespan (within ``rtol``)."""
        scores = self._scores(state)
        if self.rtol == 0:
            return _least(scores)
        legal = np.flatnonzero(np.isfinite(scores))
        return legal[scores[legal] <= scores[legal].min() * (1.0 + self.rtol)]

    def place_costs(self, state: PlacementState) -> np.ndarray:
        """``(D,)`` simulated makespan of the base rule's completion after each device (inf
        where illegal): the cost-to-go a cost-sensitive imitator weighs its misses by."""
        return self._scores(state).copy()

    def place(self, graph: Graph, cluster: Cluster) -> Placement:
        """Roll the rule out from the empty state, first device of least makespan."""
        state = PlacementState(graph, cluster)
        while not state.done:
            state.select(int(self.select_actions(state)[0]))
            state.place(int(_least(self._scores(state))[0]))
        return state.to_placement()

    def _scores(self, state: PlacementState) -> np.ndarray:
        """``(D,)`` completion makespan per device, inf where illegal (cached per state)."""
        answers = self._answers(state.graph, state.cluster) if self.cache_size > 0 else None
        key = None
        if answers is not None:
            placed = np.asarray(state.order[: state.num_placed], dtype=np.int64)
            key = (state.selected, placed.tobytes(), state.device[placed].tobytes())
            hit = answers.get(key)
            if hit is not None:
                answers.move_to_end(key)
                return hit
        legal, makespan = self.completion_makespans(state)
        scores = np.full(state.cluster.num_devices, np.inf)
        scores[legal] = makespan
        if answers is not None and key is not None:
            answers[key] = scores
            while len(answers) > self.cache_size:
                answers.popitem(last=False)
        return scores

    def __repr__(self) -> str:
        return f"LookaheadTeacher(base={self.base!r}, rtol={self.rtol!r})"
