"""Inference-time search with the dual policy, under a budget of simulator calls.

:func:`policy_search` places one graph on one cluster in stages, each optional:

1. **starts**: the placements of the heuristic teachers that anneal starts from
   (``critical_path``, ``heft``, ``nest``, ``metis``, ``round_robin``; ``starts``), so that
   the search is never worse than their best, as anneal at the same budget (as many as
   the budget leaves beside the greedy pass);
2. **greedy**: the policy's deterministic greedy placement (the one
   :func:`~placegym.agents.rollout.rollout` gives with ``greedy=True``);
3. **beam**: beam search over the SEL/PLC decisions, ranked by cumulative
   log-probability; actions whose logits tie exactly (structurally identical nodes, empty
   devices) are expanded once, by the greedy tie rule, so the beam holds distinct states;
4. **samples**: episodes sampled from the policy at ``temperature`` (multi-start);
5. **improve**: annealing from the best placement found. Each step draws ``batch``
   candidates around the incumbent and simulates them in one
   :func:`~placegym.envs.simulator.simulate_batch` call; the best is accepted by the
   Metropolis rule on its relative makespan change, with a temperature falling
   geometrically from ``t_start`` to ``t_end`` as the budget is spent. A share
   ``policy_moves`` of the candidates is *policy-guided*: the incumbent's decisions are
   replayed up to a node, and the PLC decisions of a window of the following nodes (1 to
   ``window`` of them, in the incumbent's priority order) are sampled from the policy
   given that prefix, the other nodes keeping their devices. The rest are the moves of
   the anneal teacher (:mod:`placegym.teachers.anneal`: move, swap, neighbourhood, layer
   exchange, adjacent priority swap), around a node of the incumbent's critical chain
   with probability ``guide`` (finding the chain costs one call after each accepted step,
   as in anneal). Priority swaps that would make the order non-topological are dropped.

Budget: every placement simulated counts one call. Decoding a policy calls the
simulator only when it reads rollout features (``PolicyConfig.rollout``): each PLC state
it decodes prices its legal devices by simulated ``heft_rule`` completions
(:func:`~placegym.agents.rollout.rollout_features`), one call per device, and those
completions are complete placements: they count in the budget and in the curve, and the
best of them is a candidate like any other (when no placement of the graph can exceed a
device's memory; otherwise they are counted only, since the prices do not check memory).
Such a policy's greedy pass costs up to ``n * D`` calls, so the budget must be at least
``n * D + 1``; beam search, sampling and policy-guided windows would price every state
they visit, so with such a policy the search is its greedy pass then annealing moves only
(``beam``, ``samples`` and ``policy_moves`` are not used). Duplicate candidates, and
candidates equal to the incumbent, are not simulated. :attr:`SearchResult.curve` ``[i]``
is the best makespan after ``i + 1`` calls (an anytime curve). All draws come from
``numpy.random.default_rng(seed)``: same checkpoint, graph, cluster, config and seed, same
result.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from dataclasses import dataclass, field

import numpy as np
import torch

from placegym.agents.doppler import DopplerPolicy
from placegym.agents.rollout import (
    GREEDY_TIE_TOL,
    device_logits,
    frontier_logits,
    graph_inputs,
    greedy_pick,
    new_pricer,
    plc_devices,
    plc_tie_key,
    sample_index,
    sel_tie_key,
)
from placegym.envs.cluster import Cluster
from placegym.envs.graph import Graph
from placegym.envs.observation import ObservationBuilder
from placegym.envs.placement import Placement
from placegym.envs.simulator import Dispatch, simulate, simulate_batch
from placegym.envs.state import PlacementState

# the annealing move set and critical chain of the anneal teacher, shared with it
from placegym.teachers.anneal import (
    MOVES,
    STARTS,
    _critical_chain,
    _problem,
    _propose,
    _weights,
)
from placegym.teachers.lookahead import LookaheadTeacher

__all__ = [
    "SearchConfig",
    "SearchPlacer",
    "SearchResult",
    "best_of_samples",
    "check_budget",
    "decodes_like_rollout",
    "policy_search",
    "sample_placements",
]


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
            (:data:`placegym.teachers.anneal.MOVES`).
        t_start, t_end: acceptance temperatures of the local search (relative makespan
            change), ``0 < t_end <= t_start``.
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

    def __post_init__(self) -> None:
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
            ``samples``, ``improve``); ``greedy`` includes a rollout policy's pricing calls.
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


class _Entry:
    """One partial placement being decoded: its state, features and log-probability."""

    __slots__ = ("logp", "obs", "state")

    def __init__(self, state: PlacementState, obs: ObservationBuilder, logp: float) -> None:
        self.state, self.obs, self.logp = state, obs, logp

    def fork(self) -> _Entry:
        obs = copy.copy(self.obs)
        obs.dynamic, obs.devices = self.obs.dynamic.copy(), self.obs.devices.copy()
        return _Entry(self.state.copy(), obs, self.logp)

    def act(self, action: int) -> None:
        """Take the SEL or PLC ``action`` (by the state's phase)."""
        self.obs.act(self.state, action)


class _Decoder:
    """Partial placements of one graph decoded in lockstep with the policy (encoders
    once, one batched forward per step), exactly as :func:`rollout` decodes them."""

    def __init__(
        self, policy: DopplerPolicy, graph: Graph, cluster: Cluster, memory_mask: bool = True
    ) -> None:
        self.policy, self.graph, self.cluster = policy, graph, cluster
        self.memory_mask = memory_mask
        n, e = graph.num_nodes, graph.num_edges
        self._builder = ObservationBuilder(graph, cluster, max(n, 1), e)
        obs = self._builder.observe(np.zeros(1, dtype=bool), 0)
        self.inputs = graph_inputs(policy, obs, graph, cluster)
        with torch.no_grad():
            self.enc = policy.encode(self.inputs)
        self._prefixes: dict = {}
        # a private pricer: its calls are this search's own (a shared cache would make
        # the budget depend on what was decoded before)
        self.pricer: LookaheadTeacher | None = None
        if self.inputs.rollout_scale is not None:
            self.pricer = new_pricer(policy, cache_size=1 << 30)

    def fresh(self) -> _Entry:
        builder = copy.copy(self._builder)
        builder.dynamic, builder.devices = builder.dynamic.copy(), builder.devices.copy()
        builder.reset_dynamic()
        state = PlacementState(self.graph, self.cluster, memory_mask=self.memory_mask)
        return _Entry(state, builder, 0.0)

    @torch.no_grad()
    def logits(self, entries: list[_Entry]) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Per entry (all in one phase): its legal actions and their logits."""
        n = self.graph.num_nodes
        if entries[0].state.selected < 0:
            nodes = [e.state.frontier() for e in entries]
            dyn = np.stack([e.obs.dynamic[:n] for e in entries])
            return nodes, frontier_logits(self.policy, self.inputs, self.enc, dyn, nodes)
        rows = device_logits(
            self.policy,
            self.enc,
            np.array([e.state.selected for e in entries], dtype=np.int64),
            np.stack([e.state.device for e in entries]),
            np.stack(
                [plc_devices(self.inputs, e.state, e.obs.devices, self.pricer) for e in entries]
            ),
        )
        legal = [np.flatnonzero(e.state.place_mask()) for e in entries]
        return legal, [row[a] for row, a in zip(rows, legal)]

    def tie_key(self, entry: _Entry, actions: np.ndarray) -> np.ndarray:
        if entry.state.selected < 0:
            return sel_tie_key(self.inputs, actions)
        return plc_tie_key(entry.obs.devices[actions])

    def greedy(self) -> Placement:
        entry = self.fresh()
        for _ in range(2 * self.graph.num_nodes):
            [acts], [logit] = self.logits([entry])
            entry.act(int(acts[greedy_pick(logit, self.tie_key(entry, acts))]))
        return entry.state.to_placement()

    def sample(self, count: int, temperature: float, rng: np.random.Generator) -> np.ndarray:
        """``(count, n)`` devices of episodes sampled in lockstep (orders in ``_orders``)."""
        entries = [self.fresh() for _ in range(count)]
        for _ in range(2 * self.graph.num_nodes):
            acts, logits = self.logits(entries)
            for e, a, z in zip(entries, acts, logits):
                e.act(int(a[sample_index(z / temperature, rng)]))
        self._orders = np.stack([np.array(e.state.order, dtype=np.int64) for e in entries])
        return np.stack([e.state.device for e in entries])

    def beam(self, width: int) -> list[Placement]:
        """The ``width`` most probable placements found by beam search."""
        entries = [self.fresh()]
        for _ in range(2 * self.graph.num_nodes):
            acts, logits = self.logits(entries)
            cands: list[tuple[float, int, int]] = []
            for i, (e, a, z) in enumerate(zip(entries, acts, logits)):
                logp = z - np.logaddexp.reduce(z)
                for j in _distinct(z, self.tie_key(e, a)):
                    cands.append((-(e.logp + float(logp[j])), i, int(a[j])))
            cands.sort()
            kept = cands[:width]
            uses = np.bincount([i for _, i, _ in kept], minlength=len(entries))
            nxt = []
            for score, i, action in kept:
                uses[i] -= 1
                e = entries[i] if uses[i] == 0 else entries[i].fork()
                e.logp = -score
                e.act(action)
                nxt.append(e)
            entries = nxt
        return [e.state.to_placement() for e in entries]

    def prefix(self, placement: Placement, start: int) -> _Entry:
        """A fresh entry holding the first ``start`` decisions of ``placement``. Replays
        start from the latest cached entry of the same placement prefix (entries are
        cached every :data:`_CHECKPOINT_EVERY` positions; a prefix is identified by its
        nodes' order and devices)."""
        order, device = placement.order, placement.device
        cache = self._prefixes
        if cache.get("order") is None or not (
            np.array_equal(cache["order"], order) and np.array_equal(cache["device"], device)
        ):
            first = _first_difference(cache, order, device)
            cache["entries"] = {k: e for k, e in cache.get("entries", {}).items() if k <= first}
            cache["order"], cache["device"] = order.copy(), device.copy()
        entries = cache["entries"]
        k0 = max((k for k in entries if k <= start), default=0)
        head = entries[k0].fork() if k0 else self.fresh()
        for k in range(k0, start):
            head.act(int(order[k]))
            head.act(int(device[order[k]]))
            if (k + 1) % _CHECKPOINT_EVERY == 0 and k + 1 not in entries:
                entries[k + 1] = head.fork()
        return head

    def windows(
        self,
        incumbent: Placement,
        start: int,
        lengths: np.ndarray,
        temperature: float,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """``(B, n)`` devices: the incumbent's, with the PLC decisions of its nodes at
        order positions ``start .. start + lengths[b] - 1`` sampled from the policy given
        the incumbent's prefix (the window nodes are selected in the incumbent's order)."""
        order, device = incumbent.order, incumbent.device
        head = self.prefix(incumbent, start)
        entries = [head.fork() for _ in lengths]
        out = np.tile(device, (len(lengths), 1))
        for k in range(start, min(start + int(lengths.max()), len(order))):
            v = int(order[k])
            for e in entries:
                e.act(v)
            free = [b for b in range(len(entries)) if k < start + lengths[b]]
            acts, logits = self.logits([entries[b] for b in free])
            for b, a, z in zip(free, acts, logits):
                out[b, v] = int(a[sample_index(z / temperature, rng)])
            for b, e in enumerate(entries):
                e.act(int(out[b, v]))
        return out


#: Positions between cached prefix entries of the local search's incumbent.
_CHECKPOINT_EVERY = 16


def _first_difference(cache: dict, order: np.ndarray, device: np.ndarray) -> int:
    """Number of leading order positions at which ``(order, device)`` agrees with the
    cached prefix (node and its device); 0 without a cached prefix."""
    if cache.get("order") is None:
        return 0
    same = (cache["order"] == order) & (cache["device"][cache["order"]] == device[order])
    bad = np.flatnonzero(~same)
    return int(bad[0]) if len(bad) else len(order)


def _distinct(logits: np.ndarray, key: np.ndarray) -> list[int]:
    """One index per group of exactly tied logits (within :data:`GREEDY_TIE_TOL`), the
    group's smallest ``key``; groups in decreasing logit order."""
    idx = np.argsort(-logits, kind="stable")
    out, group = [], [int(idx[0])]
    for j in idx[1:].tolist():
        if logits[group[0]] - logits[j] <= GREEDY_TIE_TOL:
            group.append(j)
        else:
            out.append(min(group, key=lambda g: (key[g], g)))
            group = [j]
    out.append(min(group, key=lambda g: (key[g], g)))
    return out


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

    def __init__(self, graph: Graph, cluster: Cluster, budget: int) -> None:
        self.graph, self.cluster, self.budget = graph, cluster, budget
        self.curve: list[float] = []
        self.best: tuple[float, float, np.ndarray, np.ndarray] | None = None  # score, ms
        self.seen: dict[bytes, float] = {}  # placement -> makespan (nan: not yet known)
        worst = float(graph.param_bytes.sum() + graph.out_bytes.sum())
        self.memory = worst > float(cluster.memory.min())  # some placement could OOM
        self.penalty = 0.0

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
        """Scores (makespan, plus a penalty if OOM) of rows already filtered by :meth:`new`."""
        res = simulate_batch(self.graph, self.cluster, devs, ords, memory=self.memory)
        if self.penalty <= 0:
            self.penalty = 10.0 * max(float(res.makespan.max()), 1e-30)
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
    :mod:`placegym.teachers.anneal` plus policy-sampled windows."""

    def __init__(self, dec: _Decoder, calls: _Calls, cfg: SearchConfig, rng) -> None:
        self.dec, self.calls, self.cfg, self.rng = dec, calls, cfg, rng
        self.problem = _problem(dec.graph, dec.cluster)
        w = _weights(cfg.move_weights, dec.graph.num_nodes, dec.cluster.num_devices)
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
            schedule = simulate(self.dec.graph, self.dec.cluster, Placement(self.dev, self.order))
            self.chain = _critical_chain(schedule)
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
        for r in range(k_policy, k):
            kind = int(rng.choice(len(MOVES), p=self.weights))
            _propose(rng, self.problem, kind, self.focus(), devs[r], ords[r], rank)
            if kind == MOVES.index("priority") and not _topological(ords[r], edges):
                ords[r] = self.order  # decoding replays orders: keep them topological
        return devs, ords


def decodes_like_rollout(policy: DopplerPolicy) -> bool:
    """Whether the search's decoder plays ``policy``'s episodes as
    :func:`~placegym.agents.rollout.rollout` does: a policy that chooses both its SEL and
    its PLC actions (not a fixed-order baseline or a SEL-only / PLC-only ablation)."""
    return (
        getattr(policy, "learns_selection", True)
        and getattr(policy, "learns_placement", True)
        and getattr(policy, "fixed_teacher", None) is None
    )


def sample_placements(
    policy: DopplerPolicy,
    graph: Graph,
    cluster: Cluster,
    k: int,
    seed: int,
    *,
    memory_mask: bool = True,
    dispatch: Dispatch = "priority",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``k`` episodes sampled from ``policy`` and their simulated makespans: ``(devices,
    orders, makespans)``, shapes ``(k, n)``, ``(k, n)``, ``(k,)``.

    The episodes are those :func:`~placegym.agents.rollout.rollout` samples in ``k``
    environments of ``graph`` (with ``memory_mask`` and ``dispatch``) with
    ``numpy.random.default_rng(seed)``, decoded in lockstep without environments and
    simulated in one :func:`~placegym.envs.simulator.simulate_batch` call: the same
    placements and makespans, bit for bit.

    Raises:
        ValueError: ``k`` < 1, or a policy that does not choose all its actions
            (:func:`decodes_like_rollout`).
    """
    if k < 1:
        raise ValueError(f"k: must be >= 1, got {k}")
    if not decodes_like_rollout(policy):
        raise ValueError("policy: expected one that chooses its SEL and PLC actions")
    dec = _Decoder(policy, graph, cluster, memory_mask)
    devs = dec.sample(k, 1.0, np.random.default_rng(seed))
    res = simulate_batch(graph, cluster, devs, dec._orders, dispatch=dispatch, memory=False)
    return devs, dec._orders, res.makespan


def best_of_samples(
    policy: DopplerPolicy,
    graph: Graph,
    cluster: Cluster,
    k: int,
    seed: int,
    *,
    dispatch: Dispatch = "priority",
) -> tuple[Placement, float]:
    """The best of :func:`sample_placements` (default environment options) and its
    makespan; the first of equal makespans wins, as the best of the rollout's episodes."""
    devs, orders, makespans = sample_placements(policy, graph, cluster, k, seed, dispatch=dispatch)
    best = int(np.argmin(makespans))
    return Placement(devs[best], orders[best]), float(makespans[best])


def _greedy_calls(policy: DopplerPolicy, graph: Graph, cluster: Cluster) -> int:
    """The most calls ``policy``'s greedy pass can take: 1, plus ``n * D`` priced
    completions with rollout features, plus the fortified pricer's starting placements
    (``heft_rule``'s and those of ``rollout_starts``)."""
    if not getattr(policy.config, "rollout", False):
        return 1
    starts = getattr(policy.config, "rollout_starts", ())
    return 1 + graph.num_nodes * cluster.num_devices + (len(starts) + 1 if starts else 0)


def check_budget(policy: DopplerPolicy, graph: Graph, cluster: Cluster, budget: int) -> None:
    """Raise unless ``budget`` covers ``policy``'s greedy pass on ``graph`` and ``cluster``
    (one call; with rollout features up to ``n * D`` more, module docstring).

    Raises:
        ValueError: the budget is too small, naming the graph, cluster and the least budget.
    """
    need = _greedy_calls(policy, graph, cluster)
    if budget < need:
        raise ValueError(
            f"budget: a policy that reads rollout features (policy.rollout) prices up to "
            f"{need - 1} placements (n * D and its pricer's starts) in its greedy pass on "
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
    dec = _Decoder(policy, graph, cluster)
    calls = _Calls(graph, cluster, cfg.budget)
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
    priced_calls = len(calls.curve) - used  # the rollout features' completions
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
    _, ms, dev, order = calls.best  # type: ignore[misc]
    return SearchResult(
        Placement(device=dev.copy(), order=order.copy()),
        ms,
        np.array(calls.curve),
        stages,
        greedy_ms,
    )


class SearchPlacer:
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
        return f"SearchPlacer({self.name!r}, budget={self.config.budget})"
