"""Simulated annealing over placements and priorities, scored by the simulator itself.

The moves are those of :mod:`placegym.teachers.anneal_moves`, which the agents' policy
search shares.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import numpy as np

from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.sim.simulator import simulate, simulate_batch
from placegym.teachers._memory import make_feasible
from placegym.teachers.anneal_moves import (
    MOVES,
    MoveProblem,
    critical_chain,
    effective_weights,
    hold_groups,
    move_problem,
    propose_move,
)
from placegym.teachers.base import PlanTeacher, Teacher

__all__ = ["STARTS", "AnnealResult", "AnnealTeacher", "anneal", "score_starts"]

#: The teachers whose placements an annealing run starts from by default (the single-pass
#: placers, single_device aside); the agents' search starts from them too.
STARTS = ("critical_path", "heft", "nest", "metis", "round_robin")


class AnnealResult(NamedTuple):
    """Outcome of :func:`anneal`.

    Attributes:
        placement: the best placement found (never worse than the start).
        makespan: its simulated makespan.
        start_makespan: the makespan of the starting placement.
        simulations: placements simulated, the starting ones included.
        accepted: moves accepted by the Metropolis rule.
        feasible: whether ``placement`` fits in memory (its simulated peak within every
            device's; always True where no placement can exceed memory).
    """

    placement: Placement
    makespan: float
    start_makespan: float
    simulations: int
    accepted: int
    feasible: bool = True


def _evaluate(
    p: MoveProblem, devices: np.ndarray, orders: np.ndarray, recompute: np.ndarray | None = None
):
    """``(makespan, score, oom)``, each ``(B,)``: score = makespan + penalty if OOM; every
    row recomputes ``recompute`` (none by default)."""
    res = simulate_batch(
        p.graph, p.cluster, devices, orders, memory=p.check_memory, recompute=recompute
    )
    if p.penalty <= 0:  # scoring the starts: the penalty scales with their makespans
        p.penalty = 10.0 * max(float(res.makespan.max()), 1e-30)
    oom = np.asarray(res.oom, dtype=bool)
    return res.makespan, res.makespan + p.penalty * oom, oom


def score_starts(
    graph: Graph, cluster: Cluster, starts: list[Placement], memory: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """``(makespan, oom)`` of each start, each simulated with its own recompute set (one
    batch when none recomputes); ``memory``: whether peaks are checked at all."""
    devs = np.stack([s.device for s in starts]).astype(np.int64)
    ords = np.stack([s.order for s in starts]).astype(np.int64)
    if not any(s.recompute.size for s in starts):
        res = simulate_batch(graph, cluster, devs, ords, memory=memory)
        return np.asarray(res.makespan, dtype=np.float64), np.asarray(res.oom, dtype=bool)
    rows = [
        simulate_batch(
            graph,
            cluster,
            devs[i : i + 1],
            ords[i : i + 1],
            memory=memory,
            recompute=s.recompute,
        )
        for i, s in enumerate(starts)
    ]
    makespan = np.array([float(r.makespan[0]) for r in rows])
    return makespan, np.array([bool(r.oom[0]) for r in rows])


def _evaluate_starts(p: MoveProblem, starts: list[Placement]):
    """:func:`_evaluate` of the starts (:func:`score_starts`)."""
    makespan, oom = score_starts(p.graph, p.cluster, starts, p.check_memory)
    if p.penalty <= 0:  # scoring the starts: the penalty scales with their makespans
        p.penalty = 10.0 * max(float(makespan.max()), 1e-30)
    return makespan, makespan + p.penalty * oom, oom


class _Search:
    """State of one annealing run: the current and best placements and the budget."""

    def __init__(self, p: MoveProblem, starts: list[Placement], budget: int, seed: int) -> None:
        self.p, self.budget = p, budget
        self.rng = np.random.default_rng(seed)
        ms0, scores0, oom0 = _evaluate_starts(p, starts)
        i0 = int(np.lexsort((scores0, oom0))[0])  # the best start, a feasible one first
        self.used, self.accepted = len(starts), 0
        dev, order = starts[i0].device, starts[i0].order
        score, makespan = float(scores0[i0]), float(ms0[i0])
        #: the recompute set every candidate carries: the start's (empty: none)
        self.recompute: np.ndarray = np.asarray(starts[i0].recompute, dtype=np.int64)
        self.feasible = not oom0[i0]
        if not self.feasible and self.used < budget:  # no start fits: try its repair
            start = starts[i0]
            fixed = make_feasible(p.graph, p.cluster, start)
            if fixed is not start:
                rc = np.asarray(fixed.recompute, dtype=np.int64)
                ms1, scores1, oom1 = _evaluate(p, fixed.device[None], fixed.order[None], rc)
                self.used += 1
                if not oom1[0]:
                    dev, order, self.feasible = fixed.device, fixed.order, True
                    score, makespan = float(scores1[0]), float(ms1[0])
                    self.recompute = rc
        self.start_makespan = makespan
        self.dev, self.order, self.score = dev.astype(np.int64), order.astype(np.int64), score
        self.best = (self.dev.copy(), self.order.copy(), self.score, makespan, self.feasible)
        self.chain: np.ndarray | None = None

    def _focus(self, guide: float, k: int) -> list[int]:
        """``k`` nodes to move: from the current critical chain with probability ``guide``
        (one simulation to find the chain after each accepted move), else uniform."""
        n = len(self.dev)
        if guide > 0 and self.chain is None and self.used < self.budget - 1:
            placement = Placement(device=self.dev, order=self.order, recompute=self.recompute)
            found = critical_chain(simulate(self.p.graph, self.p.cluster, placement))
            self.chain = found[found < n]  # recompute nodes are their forward node's
            self.used += 1
        chain = self.chain if self.chain is not None and len(self.chain) else None
        pick = self.rng.random(k) < guide
        nodes = self.rng.integers(n, size=k)
        if chain is not None:
            from_chain = chain[self.rng.integers(len(chain), size=k)]
            nodes = np.where(pick, from_chain, nodes)
        return nodes.tolist()

    def step(self, k: int, temp: float, weights: np.ndarray, guide: float) -> None:
        """Simulate ``k`` moves from the current placement; Metropolis on the best one."""
        n = len(self.dev)
        nodes = self._focus(guide, k)
        k = min(k, self.budget - self.used)
        if k <= 0:
            return
        rank = np.empty(n, dtype=np.int64)
        rank[self.order] = np.arange(n)
        devs, ords = np.tile(self.dev, (k, 1)), np.tile(self.order, (k, 1))
        kinds = self.rng.choice(len(MOVES), size=k, p=weights)
        for r in range(k):
            propose_move(self.rng, self.p, int(kinds[r]), nodes[r], devs[r], ords[r], rank)
            if self.p.groups:
                hold_groups(self.p, devs[r], self.dev)
        makespans, scores, oom = _evaluate(self.p, devs, ords, self.recompute)
        self.used += k
        if self.feasible:  # a feasible current placement is never traded for an OOM one
            scores = np.where(oom, np.inf, scores)
        j = int(np.argmin(scores))
        delta = (float(scores[j]) - self.score) / max(self.score, 1e-30)
        if delta < 0 or self.rng.random() < np.exp(-delta / temp):
            self.dev, self.order, self.score = devs[j].copy(), ords[j].copy(), float(scores[j])
            self.accepted += 1
            self.chain = None
            feasible = not oom[j]
            self.feasible = feasible
            best_feasible = self.best[4]
            if feasible > best_feasible or (
                feasible == best_feasible and self.score < self.best[2]
            ):
                best = (self.dev.copy(), self.order.copy(), self.score, float(makespans[j]))
                self.best = (*best, feasible)


def anneal(
    graph: Graph,
    cluster: Cluster,
    start: Placement | list[Placement],
    *,
    budget: int = 3000,
    seed: int = 0,
    batch: int = 16,
    t_start: float = 0.02,
    t_end: float = 1e-4,
    guide: float = 0.5,
    move_weights: tuple[float, ...] = (0.4, 0.25, 0.15, 0.1, 0.1),
    observe: Callable[[int, float], None] | None = None,
) -> AnnealResult:
    """Simulated annealing from the best of ``start`` (see :class:`AnnealTeacher`).

    ``observe(simulations, best_makespan)``, when given, is called once the starts are
    scored and after every step: the search's anytime curve (best so far vs placements
    simulated).
    """
    starts = [start] if isinstance(start, Placement) else list(start)
    if not starts:
        raise ValueError("start: need at least one placement, got none")
    if budget < len(starts):
        raise ValueError(f"budget: must be >= the {len(starts)} starting placements, got {budget}")
    if batch < 1:
        raise ValueError(f"batch: must be >= 1, got {batch}")
    if not 0 < t_end <= t_start:
        raise ValueError(f"t_end: must satisfy 0 < t_end <= t_start={t_start}, got {t_end}")
    if not 0 <= guide <= 1:
        raise ValueError(f"guide: must be in [0, 1], got {guide}")
    w = effective_weights(move_weights, graph.num_nodes, cluster.num_devices)
    search = _Search(move_problem(graph, cluster), starts, budget, seed)
    first, span = search.used, max(budget - search.used, 1)
    if observe is not None:
        observe(search.used, search.best[3])
    while search.used < budget and w.sum() > 0:
        temp = t_start * (t_end / t_start) ** ((search.used - first) / span)
        search.step(batch, temp, w / w.sum(), guide)
        if observe is not None:
            observe(search.used, search.best[3])
    dev, order, _, best, feasible = search.best
    placement = Placement(device=dev, order=order, recompute=search.recompute)
    return AnnealResult(
        placement, best, search.start_makespan, search.used, search.accepted, bool(feasible)
    )


class AnnealTeacher(PlanTeacher):
    """Simulated annealing over devices and priorities, every candidate simulated.

    Rule:
        - **Start**: the best (simulated) of the ``starts`` teachers' placements; by
          default critical path, HEFT, NEST, METIS and round robin (a superset of "the
          better of critical path and HEFT": the others cost milliseconds and are often
          far better starts, e.g. NEST on chainmm and METIS on the two-node ``h100-2x8``).
        - **Moves** (drawn with ``move_weights``), each around a node taken from the
          current placement's critical chain with probability ``guide`` (the chain of
          input arrivals and device waits ending at the last finish, recomputed with one
          simulation after each accepted step), otherwise uniformly:
          ``move`` the node to another device; ``swap`` its device with another node's
          (half the time a graph neighbour); ``neighbourhood``: the node with its producers
          and consumers onto one device (its own or a random one); ``layer``: exchange two
          devices within the node's layer (its neighbourhood when it has no layer);
          ``priority``: swap its priority with the next or previous node of its device
          (adjacent priorities that actually compete for a device).
        - **Search**: each step simulates ``batch`` moves of the current placement in one
          :func:`~placegym.envs.sim.simulator.simulate_batch` call and takes the best one; it
          is accepted if better, else with probability ``exp(-Δ/T)``, Δ the relative
          makespan increase, T falling geometrically from ``t_start`` to ``t_end`` as the
          budget is spent. An OOM placement scores its makespan plus 10× the start's
          (memory is only simulated when some placement could overflow a device).
        - **Memory and groups**: a move of a node in a co-location group moves its whole
          group (to the node's new device), so no candidate splits a group (the starts
          keep groups whole). Feasible means the simulated peak fits every device: the
          start is the best feasible start when one is (else, when its repair
          :func:`~placegym.teachers._memory.make_feasible` fits, that repair, one
          simulation more); while the current placement is feasible an OOM candidate is
          never accepted, and a feasible best is only replaced by a faster feasible one.
          A start that recomputes is scored with its recompute set, and the search then
          carries the best start's (or its repair's) set in every candidate, so a
          training step that only fits with recomputation is annealed with it.
        - **Result**: the best placement seen by score, so never worse than the best
          start: no larger makespan, and never OOM when some start (or its repair) fits;
          an OOM start is traded for any placement that fits.
          :attr:`AnnealResult.feasible` says whether it fits. ``budget`` counts every
          simulated placement (starts and chain look-ups included). All draws come from
          ``numpy.random.default_rng(seed)``: same inputs and seed, same result.

    Per-state answers follow the plan (:class:`~placegym.teachers.base.PlanTeacher`).
    :attr:`last_result` holds the :class:`AnnealResult` of the last plan computed.

    Args:
        budget: placements simulated per plan (at least one per start).
        seed: seed of the search's generator.
        starts: registered names of the teachers whose placements seed the search.
        batch: candidate moves simulated per step.
        t_start, t_end: initial and final temperature (relative makespan change).
        guide: probability that a move is centred on a critical-chain node.
        move_weights: relative frequency of each move in
            :data:`~placegym.teachers.anneal_moves.MOVES`.
    """

    name: ClassVar[str] = "anneal"

    def __init__(
        self,
        budget: int = 3000,
        seed: int = 0,
        *,
        starts: tuple[str, ...] = STARTS,
        batch: int = 16,
        t_start: float = 0.02,
        t_end: float = 1e-4,
        guide: float = 0.5,
        move_weights: tuple[float, ...] = (0.4, 0.25, 0.15, 0.1, 0.1),
    ) -> None:
        super().__init__()
        from placegym.teachers import get_teacher  # the registry imports this module

        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"seed: must be an integer >= 0, got {seed!r}")
        if not starts or "anneal" in starts:
            raise ValueError(f"starts: need teacher names other than 'anneal', got {starts!r}")
        if budget < len(starts):
            raise ValueError(f"budget: must be >= {len(starts)} (one per start), got {budget}")
        self.budget, self.seed = int(budget), int(seed)
        self._starts: list[Teacher] = [get_teacher(s) for s in starts]
        self.options: dict[str, Any] = {
            "batch": batch,
            "t_start": t_start,
            "t_end": t_end,
            "guide": guide,
            "move_weights": tuple(move_weights),
        }
        self.last_result: AnnealResult | None = None

    def plan(self, graph: Graph, cluster: Cluster) -> Placement:
        """Anneal from the start placers' placements (``budget`` simulations)."""
        starts = [t.place(graph, cluster) for t in self._starts]
        result = anneal(graph, cluster, starts, budget=self.budget, seed=self.seed, **self.options)
        self.last_result = result
        return result.placement

    def __repr__(self) -> str:
        return f"AnnealTeacher(budget={self.budget}, seed={self.seed})"
