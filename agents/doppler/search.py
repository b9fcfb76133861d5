"""Inference-time search with the dual policy, under a budget of simulator calls.

:func:`policy_search` places one graph on one cluster in stages, each optional:

1. **starts**: the placements of the heuristic teachers that anneal starts from
   (``critical_path``, ``heft``, ``nest``, ``metis``, ``round_robin``; ``starts``), so that
   the search is never worse than their best, as anneal at the same budget (as many as
   the budget leaves beside the greedy pass);
2. **greedy**: the policy's deterministic greedy placement (the one
   :func:`~placegym.agents.doppler.episodes.play_episodes` gives with ``greedy=True``);
3. **beam**: beam search over the SEL/PLC decisions, ranked by cumulative
   log-probability; actions whose logits tie exactly (structurally identical nodes, empty
   devices) are expanded once, by the greedy tie rule, so the beam holds distinct states;
4. **samples**: episodes sampled from the policy at ``temperature`` (multi-start);
5. **improve**: annealing from the best placement found. Each step draws ``batch``
   candidates around the incumbent and simulates them in one
   :func:`~placegym.envs.sim.simulator.simulate_batch` call; the best is accepted by the
   Metropolis rule on its relative makespan change, with a temperature falling
   geometrically from ``t_start`` to ``t_end`` as the budget is spent. A share
   ``policy_moves`` of the candidates is *policy-guided*: the incumbent's decisions are
   replayed up to a node, and the PLC decisions of a window of the following nodes (1 to
   ``window`` of them, in the incumbent's priority order) are sampled from the policy
   given that prefix, the other nodes keeping their devices. The rest are the moves of
   the anneal teacher (:mod:`placegym.teachers.anneal_moves`: move, swap, neighbourhood, layer
   exchange, adjacent priority swap), around a node of the incumbent's critical chain
   with probability ``guide`` (finding the chain costs one call after each accepted step,
   as in anneal). Priority swaps that would make the order non-topological are dropped.

Budget: every placement simulated counts one call. Decoding a policy calls the
simulator only when it reads lookahead prices (``PolicyConfig.prices``): each PLC state
it decodes prices its legal devices by simulated ``heft_rule`` completions
(:func:`~placegym.agents.doppler.features.price_features`), one call per device, and those
completions are complete placements: they count in the budget and in the curve, and the
best of them is a candidate like any other (when no placement of the graph can exceed a
device's memory; otherwise they are counted only, since the prices do not check memory).
Such a policy's greedy pass costs up to ``n * D`` calls, so the budget must be at least
``n * D + 1``; beam search, sampling and policy-guided windows would price every state
they visit, so with such a policy the search is its greedy pass then annealing moves only
(``beam``, ``samples`` and ``policy_moves`` are not used). Duplicate candidates, and
candidates equal to the incumbent, are not simulated. Memory: an over-memory
placement scores its makespan plus the serial upper bound, so the best is feasible
whenever a feasible placement was seen (the memory-aware ``starts`` are, where their
rules reach one); if none was, the best is repaired by
:func:`~placegym.teachers.make_feasible` (stage ``repair``, its calls beyond the budget).
Every candidate carries the recompute set of the decoder's mask
(:func:`~placegym.envs.mdp.state.mask_recompute`: under ``"live"`` on a training step
that provably needs one; the starts too, in place of their own).
:attr:`SearchResult.curve` ``[i]`` is the best makespan after ``i + 1`` calls (an anytime
curve). All draws come from
``numpy.random.default_rng(seed)``: same checkpoint, graph, cluster, config and seed, same
result.

The decoding (greedy pass, beam, samples and policy windows) is
:class:`~placegym.agents.doppler.decoder.Decoder`'s; this module holds the budget
(:class:`_Calls`), the local search (:class:`_Improver`) and the stages around them.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from placegym.agents.doppler.decoder import Decoder
from placegym.agents.doppler.policy import DopplerPolicy
from placegym.envs.analysis.memory import memory_may_bind
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.mdp.reward import oom_makespan
from placegym.envs.mdp.state import memory_mask_mode
from placegym.envs.sim.simulator import Schedule, simulate, simulate_batch
from placegym.teachers.anneal import STARTS
from placegym.teachers.anneal_moves import (
    MOVES,
    critical_chain,
    effective_weights,
    hold_groups,
    move_problem,
    propose_move,
)

__all__ = ["PolicySearch", "SearchConfig", "SearchResult", "check_budget", "policy_search"]


@dataclass(frozen=True)
class SearchConfig:
    """Budget and stages of :func:`policy_search` (see the module docstring).

    Attributes:
        budget: simulator calls in all (>= 1; the greedy placement always takes one).
        starts: registered teachers whose placements are simulated first (stage
            ``starts``, one call each), so that the search begins from the best of them
            and the policy's placements; by default anneal's (:data:`placegym.teachers.anneal.
            STARTS`), so that both searches start from the same heuristic placements;
            ``()``: the policy's own placements only.
        beam: beam width (0: no beam search).
        samples: sampled episodes (0: none).
        temperature: softmax temperature of the sampled episodes and windows (> 0).
        batch: candidates per local-search step (>= 1).
        policy_moves: share of local-search candidates drawn as policy windows (the
            others are annealing moves).
        window: longest window of re-sampled PLC decisions (>= 1).
        guide: probability that a move is centred on the incumbent's critical chain.
        move_weights: relative frequency of each annealing move
            (:data:`placegym.teachers.anneal_moves.MOVES`).
        t_start, t_end: acceptance temperatures of the local search (relative makespan
            change), ``0 < t_end <= t_start``.
        memory_mask: the environment's device mask the policy decodes under (``True``,
            ``"resident"``, ``"room"``; :class:`~placegym.envs.mdp.state.PlacementState`).
    """

    budget: int = 3000
    starts: tuple[str, ...] = STARTS
    beam: int = 8
    samples: int = 64
    temperature: float = 1.0
    batch: int = 16
    policy_moves: float = 0.25
    window: int = 8
    guide: float = 0.5
    move_weights: tuple[float, ...] = (0.4, 0.25, 0.15, 0.1, 0.1)
    t_start: float = 0.02
    t_end: float = 1e-4
    memory_mask: bool | str = True

    def __post_init__(self) -> None:
        memory_mask_mode(self.memory_mask)  # raises on a bad value, naming the field
        checks = (
            ("budget", self.budget >= 1, "must be >= 1"),
            ("beam", self.beam >= 0, "must be >= 0"),
            ("samples", self.samples >= 0, "must be >= 0"),
            ("temperature", self.temperature > 0, "must be > 0"),
            ("batch", self.batch >= 1, "must be >= 1"),
            ("window", self.window >= 1, "must be >= 1"),
            ("policy_moves", 0 <= self.policy_moves <= 1, "must be in [0, 1]"),
            ("guide", 0 <= self.guide <= 1, "must be in [0, 1]"),
            ("t_end", 0 < self.t_end <= self.t_start, "must satisfy 0 < t_end <= t_start"),
        )
        for name, ok, rule in checks:
            if not ok:
                raise ValueError(f"{name}: {rule}, got {getattr(self, name)!r}")


@dataclass
class SearchResult:
    """Outcome of :func:`policy_search`.

    Attributes:
        placement: the best placement found; makespan its simulated makespan.
        curve: ``(calls,)`` best makespan after each simulator call.
        stages: simulator calls spent per stage (``starts``, ``greedy``, ``beam``,
            ``samples``, ``improve``, ``repair``); ``greedy`` includes a priced policy's
            pricing calls. ``repair`` (0 unless every placement seen was over memory) is
            :func:`~placegym.teachers.make_feasible` of the best one, beyond the budget.
        greedy: the greedy placement's makespan.
    """

    placement: Placement
    makespan: float
    curve: np.ndarray
    stages: dict[str, int] = field(default_factory=dict)
    greedy: float = float("nan")

    @property
    def calls(self) -> int:
        """Simulator calls spent."""
        return len(self.curve)


def _key(device: np.ndarray, order: np.ndarray) -> bytes:
    """A placement's identity in :class:`_Calls`: a 128-bit digest of its int64 devices
    and order (16 bytes a placement seen, whatever the graph's size)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(np.ascontiguousarray(device, dtype=np.int64).data)
    h.update(np.ascontiguousarray(order, dtype=np.int64).data)
    return h.digest()


class _Calls:
    """The simulator-call budget: simulates candidates, keeps the best, records the
    anytime curve, and never simulates a placement twice."""

    def __init__(
        self, graph: Graph, cluster: Cluster, budget: int, recompute: np.ndarray | None = None
    ) -> None:
        self.graph, self.cluster, self.budget = graph, cluster, budget
        # every candidate's recompute set (the decoder's mask's; default none)
        self.recompute = np.zeros(0, dtype=np.int64) if recompute is None else recompute
        self.curve: list[float] = []
        self.best: tuple[float, float, np.ndarray, np.ndarray] | None = None  # score, ms
        self.seen: dict[bytes, float] = {}  # placement -> makespan (nan: not yet known)
        self.memory = memory_may_bind(graph, cluster)  # some placement could OOM
        # an infeasible placement scores above every feasible one: its makespan plus the
        # serial upper bound, which no feasible makespan exceeds
        self.penalty = oom_makespan(graph, cluster) if self.memory else 0.0

    @property
    def left(self) -> int:
        return self.budget - len(self.curve)

    def new(self, devs: np.ndarray, ords: np.ndarray) -> np.ndarray:
        """Indices of the rows never simulated (first of duplicates), at most ``left``."""
        keep: list[int] = []
        for b in range(len(devs)):
            key = _key(devs[b], ords[b])
            if key not in self.seen and len(keep) < self.left:
                self.seen[key] = float("nan")
                keep.append(b)
        return np.array(keep, dtype=np.int64)

    def makespan_of(self, dev: np.ndarray, order: np.ndarray) -> float:
        """The simulated makespan of a placement simulated so far (nan if unknown)."""
        return self.seen.get(_key(dev, order), float("nan"))

    def simulate(self, devs: np.ndarray, ords: np.ndarray) -> np.ndarray:
        """Scores of rows already filtered by :meth:`new`: the makespan, plus the serial
        upper bound when over memory (so the best is feasible whenever one was seen)."""
        res = simulate_batch(
            self.graph, self.cluster, devs, ords, memory=self.memory, recompute=self.recompute
        )
        scores = res.makespan + self.penalty * res.oom
        self._keep(devs, ords, scores, res.makespan)
        return scores

    def _keep(
        self, devs: np.ndarray, ords: np.ndarray, scores: np.ndarray, makespan: np.ndarray
    ) -> None:
        for b in range(len(scores)):
            self.seen[_key(devs[b], ords[b])] = float(makespan[b])
            if self.best is None or scores[b] < self.best[0]:
                self.best = (float(scores[b]), float(makespan[b]), devs[b], ords[b])
            self.curve.append(self.best[1])

    def record(self, devs: np.ndarray, ords: np.ndarray, makespan: np.ndarray) -> None:
        """Count placements simulated elsewhere (a pricer's completions, noiseless and
        memory unchecked): candidates when no placement can exceed memory, else counted
        only."""
        if self.memory:
            for _ in range(len(devs)):
                self.count_extra()
            return
        self._keep(devs.copy(), ords.copy(), makespan, makespan)

    def count_extra(self) -> None:
        """Count one call made outside :meth:`simulate` (a schedule look-up)."""
        self.curve.append(self.curve[-1] if self.curve else float("inf"))

    def offer(self, devs: np.ndarray, ords: np.ndarray) -> None:
        keep = self.new(devs, ords)
        if len(keep):
            self.simulate(devs[keep], ords[keep])


def _topological(order: np.ndarray, edges: np.ndarray) -> bool:
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return not len(edges) or bool((rank[edges[:, 0]] < rank[edges[:, 1]]).all())


class _Improver:
    """The local search of stage 5 (module docstring): annealing over the moves of
    :mod:`placegym.teachers.anneal_moves` plus policy-sampled windows."""

    def __init__(self, dec: Decoder, calls: _Calls, cfg: SearchConfig, rng) -> None:
        self.dec, self.calls, self.cfg, self.rng = dec, calls, cfg, rng
        self.problem = move_problem(dec.graph, dec.cluster)
        w = effective_weights(cfg.move_weights, dec.graph.num_nodes, dec.cluster.num_devices)
        self.weights = w / w.sum() if w.sum() > 0 else w
        self.score, _, self.dev, self.order = calls.best  # type: ignore[misc]
        self.chain: np.ndarray | None = None

    def run(self) -> None:
        calls, cfg = self.calls, self.cfg
        first, span, idle = len(calls.curve), max(calls.left, 1), 0
        while calls.left > 0 and self.dec.graph.num_nodes > 0 and idle < 100:
            temp = cfg.t_start * (cfg.t_end / cfg.t_start) ** ((len(calls.curve) - first) / span)
            devs, ords = self.candidates()
            keep = calls.new(devs, ords)
            if not len(keep):
                idle += 1
                continue
            idle = 0
            scores = calls.simulate(devs[keep], ords[keep])
            j = int(np.argmin(scores))
            delta = (float(scores[j]) - self.score) / max(self.score, 1e-30)
            if delta < 0 or self.rng.random() < np.exp(-delta / temp):
                self.score, self.dev, self.order = float(scores[j]), devs[keep[j]], ords[keep[j]]
                self.chain = None

    def focus(self) -> int:
        """A node to move: on the incumbent's critical chain with probability ``guide``
        (the chain costs one call after each accepted step), else uniform."""
        cfg, rng, n = self.cfg, self.rng, self.dec.graph.num_nodes
        if cfg.guide > 0 and self.chain is None and self.calls.left > 1:
            incumbent = Placement(self.dev, self.order, self.calls.recompute)
            found = critical_chain(simulate(self.dec.graph, self.dec.cluster, incumbent))
            self.chain = found[found < n]  # recompute nodes are their forward node's
            self.calls.count_extra()
        if self.chain is not None and len(self.chain) and rng.random() < cfg.guide:
            return int(self.chain[rng.integers(len(self.chain))])
        return int(rng.integers(n))

    def candidates(self) -> tuple[np.ndarray, np.ndarray]:
        """``batch`` candidate placements around the incumbent."""
        cfg, rng, edges = self.cfg, self.rng, self.dec.graph.edges
        k = cfg.batch
        devs, ords = np.tile(self.dev, (k, 1)), np.tile(self.order, (k, 1))
        rank = np.empty_like(self.order)
        rank[self.order] = np.arange(len(self.order))
        k_policy = int(rng.binomial(k, cfg.policy_moves))
        if k_policy:
            start = int(rank[self.focus()])
            lengths = 1 + rng.integers(cfg.window, size=k_policy)
            devs[:k_policy] = self.dec.windows(
                Placement(self.dev, self.order), start, lengths, cfg.temperature, rng
            )
            for r in range(k_policy):  # members after the window follow their group
                hold_groups(self.problem, devs[r], self.dev)
        for r in range(k_policy, k):
            kind = int(rng.choice(len(MOVES), p=self.weights))
            propose_move(rng, self.problem, kind, self.focus(), devs[r], ords[r], rank)
            hold_groups(self.problem, devs[r], self.dev)  # a group moves whole
            if kind == MOVES.index("priority") and not _topological(ords[r], edges):
                ords[r] = self.order  # decoding replays orders: keep them topological
        return devs, ords


def _repair(
    graph: Graph, cluster: Cluster, placement: Placement, calls: _Calls
) -> tuple[Placement, float]:
    """:func:`~placegym.teachers.make_feasible` of an over-memory best and its makespan;
    its simulations are counted as calls beyond the budget (stage ``repair``)."""
    from placegym.teachers import make_feasible

    last: list[Any] = [None, None]  # the placement simulated last and its schedule

    def counted(g: Graph, c: Cluster, p: Placement) -> Schedule:
        calls.count_extra()
        last[:] = [p, simulate(g, c, p)]
        return last[1]

    fixed = make_feasible(graph, cluster, placement, sim=counted)
    # the repair's answer is the placement it simulated last, unless none fitted
    schedule = last[1] if last[0] is fixed else counted(graph, cluster, fixed)
    if not schedule.oom:
        calls.curve[-1] = schedule.makespan
    return fixed, float(schedule.makespan)


def _greedy_calls(policy: DopplerPolicy, graph: Graph, cluster: Cluster) -> int:
    """The most calls ``policy``'s greedy pass can take: 1, plus ``n * D`` priced
    completions with lookahead prices, plus the fortified pricer's starting placements
    (``heft_rule``'s and those of ``price_starts``), plus with ``price_follow`` one per
    SEL state (``heft_rule``'s own completion, which decides the pick)."""
    if not getattr(policy.config, "prices", False):
        return 1
    starts = getattr(policy.config, "price_starts", ())
    # price_follow needs price_starts (PolicyConfig)
    follow = graph.num_nodes if getattr(policy.config, "price_follow", False) else 0
    n_d = graph.num_nodes * cluster.num_devices
    return 1 + n_d + follow + (len(starts) + 1 if starts else 0)


def check_budget(policy: DopplerPolicy, graph: Graph, cluster: Cluster, budget: int) -> None:
    """Raise unless ``budget`` covers ``policy``'s greedy pass on ``graph`` and ``cluster``
    (one call; with lookahead prices up to ``n * D`` more, module docstring).

    Raises:
        ValueError: the budget is too small, naming the graph, cluster and the least budget.
    """
    need = _greedy_calls(policy, graph, cluster)
    if budget < need:
        raise ValueError(
            f"budget: a policy that reads lookahead prices (policy.prices) prices up to "
            f"{need - 1} placements (n * D, its pricer's starts and, following, n picks) "
            f"in its greedy pass on "
            f"{graph.name!r} "
            f"({graph.num_nodes} nodes) on {cluster.name!r} ({cluster.num_devices} "
            f"devices); expected a budget >= {need}, got {budget}"
        )


@torch.no_grad()
def policy_search(
    policy: DopplerPolicy,
    graph: Graph,
    cluster: Cluster,
    config: SearchConfig | None = None,
    *,
    seed: int = 0,
) -> SearchResult:
    """Search placements of ``graph`` on ``cluster`` with ``policy`` (module docstring)."""
    cfg = config or SearchConfig()
    check_budget(policy, graph, cluster, cfg.budget)
    rng = np.random.default_rng(seed)
    was_training = policy.training
    policy.eval()
    dec = Decoder(policy, graph, cluster, cfg.memory_mask)
    calls = _Calls(graph, cluster, cfg.budget, dec.recompute)
    stages: dict[str, int] = {}

    def stage(name: str, devs: np.ndarray, ords: np.ndarray) -> None:
        used = len(calls.curve)
        calls.offer(devs, ords)
        stages[name] = len(calls.curve) - used

    if dec.pricer is not None:
        cfg = dataclasses.replace(cfg, beam=0, samples=0, policy_moves=0.0)
    room = cfg.budget - _greedy_calls(policy, graph, cluster)  # the greedy pass always runs
    if cfg.starts[:room]:
        from placegym.teachers import get_teacher

        placements = [get_teacher(t).place(graph, cluster) for t in cfg.starts[:room]]
        stage(
            "starts",
            np.stack([p.device for p in placements]).astype(np.int64),
            np.stack([p.order for p in placements]).astype(np.int64),
        )
    used = len(calls.curve)
    if dec.pricer is not None:
        dec.pricer.observer = calls.record
    greedy = dec.greedy()
    if dec.pricer is not None:
        dec.pricer.observer = None
    priced_calls = len(calls.curve) - used  # the price features' completions
    stage("greedy", greedy.device[None], greedy.order[None])
    stages["greedy"] += priced_calls
    greedy_ms = calls.makespan_of(greedy.device, greedy.order)
    if cfg.beam and calls.left:
        beams = dec.beam(cfg.beam)
        stage("beam", np.stack([p.device for p in beams]), np.stack([p.order for p in beams]))
    if cfg.samples and calls.left:
        devs = dec.sample(min(cfg.samples, calls.left), cfg.temperature, rng)
        stage("samples", devs, dec._orders)
    used = len(calls.curve)
    if calls.left:
        _Improver(dec, calls, cfg, rng).run()
    stages["improve"] = len(calls.curve) - used
    policy.train(was_training)
    score, ms, dev, order = calls.best  # type: ignore[misc]
    best = Placement(device=dev.copy(), order=order.copy(), recompute=calls.recompute)
    if score > ms:  # every placement seen was over memory: repair the best of them
        best, ms = _repair(graph, cluster, best, calls)
    stages["repair"] = len(calls.curve) - used - stages["improve"]
    return SearchResult(
        best,
        ms,
        np.array(calls.curve),
        stages,
        greedy_ms,
    )


class PolicySearch:
    """:func:`policy_search` as a placer ``(graph, cluster, seed) -> Placement``.

    Args:
        policy: the dual policy.
        config: the search's budget and stages.
        name: label in benchmark tables.
    """

    def __init__(
        self, policy: DopplerPolicy, config: SearchConfig | None = None, *, name: str = "agent"
    ) -> None:
        self.policy, self.config, self.name = policy.eval(), config or SearchConfig(), name
        self.last_result: SearchResult | None = None

    def check(self, graph: Graph, cluster: Cluster) -> None:
        """Raise before any work if the budget cannot cover the greedy pass on ``graph``
        (:func:`check_budget`); benchmarks call it on every instance first."""
        check_budget(self.policy, graph, cluster, self.config.budget)

    def place(self, graph: Graph, cluster: Cluster, seed: int = 0) -> Placement:
        """The best placement :func:`policy_search` finds with ``seed``."""
        self.last_result = policy_search(self.policy, graph, cluster, self.config, seed=seed)
        return self.last_result.placement

    def __call__(self, graph: Graph, cluster: Cluster, seed: int) -> Placement:
        """:meth:`place` (the benchmark's placer signature)."""
        return self.place(graph, cluster, seed)

    def __repr__(self) -> str:
        return f"PolicySearch({self.name!r}, budget={self.config.budget})"
