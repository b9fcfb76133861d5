"""The dual policy's decoder: placements of one graph decoded without environments.

:class:`Decoder` decodes partial placements of one graph in lockstep with the policy
(encoders once, one batched forward per step), exactly as
:func:`~placegym.agents.doppler.episodes.play_episodes` plays them: its greedy placement,
sampled episodes, beam search over the SEL/PLC decisions and policy-sampled windows of
PLC decisions after an incumbent's prefix, for
:func:`~placegym.agents.doppler.search.policy_search`. :func:`sample_placements` and
:func:`best_of_samples` are the episodes ``play_episodes`` samples, decoded in lockstep
and simulated in one batch: the same placements and makespans, bit for bit.
:func:`reserved_greedy` is the greedy placement made to fit where memory binds, as the
teachers' single passes are (:func:`~placegym.teachers._memory.reserve_room`).

A policy with lookahead prices (``PolicyConfig.prices``) prices every PLC state it
decodes with a private pricer (:attr:`Decoder.pricer`), whose calls the search counts.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch

from placegym.agents.doppler.episodes import (
    GREEDY_TIE_TOL,
    device_logits,
    frontier_logits,
    greedy_pick,
    plc_tie_key,
    sample_index,
    sel_tie_key,
)
from placegym.agents.doppler.features import new_pricer
from placegym.agents.doppler.inputs import graph_inputs, plc_devices, sel_picks
from placegym.agents.doppler.policy import DopplerPolicy
from placegym.envs.analysis.memory import memory_may_bind
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.mdp.observation import ObservationBuilder
from placegym.envs.mdp.state import LIVE_MASKS, PlacementState, mask_recompute
from placegym.envs.sim.simulator import BatchResult, Dispatch, simulate_batch
from placegym.teachers.lookahead import LookaheadTeacher

__all__ = [
    "Decoder",
    "best_of_samples",
    "decodes_like_episodes",
    "reserved_greedy",
    "sample_placements",
]


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


class Decoder:
    """Partial placements of one graph decoded in lockstep with the policy (encoders
    once, one batched forward per step), exactly as
    :func:`~placegym.agents.doppler.episodes.play_episodes` plays them."""

    def __init__(
        self, policy: DopplerPolicy, graph: Graph, cluster: Cluster, memory_mask: bool | str = True
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
        if self.inputs.price_scale is not None:
            self.pricer = new_pricer(policy, cache_size=1 << 30)

    @property
    def recompute(self) -> np.ndarray:
        """The recompute set every placement decoded under the decoder's mask carries
        (:func:`~placegym.envs.mdp.state.mask_recompute`: empty but under ``"live"`` on a
        training step that provably needs one)."""
        return mask_recompute(self.graph, self.cluster, self.memory_mask)

    def fresh(self, reserve: np.ndarray | None = None) -> _Entry:
        """An entry of the empty placement; with a ``reserve``, under the ``"room"`` mask
        (``"live"`` or ``"timed"`` for a decoder of that mask) with that ``memory_reserve``
        (:class:`~placegym.envs.mdp.state.PlacementState`)."""
        builder = copy.copy(self._builder)
        builder.dynamic, builder.devices = builder.dynamic.copy(), builder.devices.copy()
        builder.reset_dynamic()
        keep = reserve is None or self.memory_mask in LIVE_MASKS
        mask = self.memory_mask if keep else "room"
        state = PlacementState(self.graph, self.cluster, memory_mask=mask, memory_reserve=reserve)
        return _Entry(state, builder, 0.0)

    @torch.no_grad()
    def logits(self, entries: list[_Entry]) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Per entry (all in one phase): its legal actions and their logits."""
        n = self.graph.num_nodes
        if entries[0].state.selected < 0:
            nodes = [e.state.frontier() for e in entries]
            dyn = np.stack([e.obs.dynamic[:n] for e in entries])
            picks = None
            if self.pricer is not None and self.pricer.follow:
                picks = [sel_picks(e.state, self.pricer) for e in entries]
            return nodes, frontier_logits(
                self.policy,
                self.inputs,
                self.enc,
                dyn,
                nodes,
                picks,  # type: ignore[arg-type]
            )
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
        """The greedy tie key of ``entry``'s legal ``actions`` (SEL or PLC, by its phase)."""
        if entry.state.selected < 0:
            return sel_tie_key(self.inputs, actions)
        return plc_tie_key(entry.obs.devices[actions])

    def greedy(self, reserve: np.ndarray | None = None) -> Placement:
        """The policy's greedy placement (:func:`~placegym.agents.doppler.episodes.
        play_episodes` with ``greedy=True``); with a ``reserve``, under the ``"room"``
        mask with that tensor reserve (:meth:`fresh`)."""
        entry = self.fresh(reserve)
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
            # a replay: the incumbent's device even where the memory mask would forbid it
            head.obs.act(head.state, int(device[order[k]]), checked=False)
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
        the incumbent's prefix (the window nodes are selected in the incumbent's order).
        A node after its window keeps the incumbent's device, or goes to its co-location
        group's where the window moved the group; the incumbent's decisions replay
        unchecked (a memory mask may forbid a device the incumbent uses)."""
        order, device = incumbent.order, incumbent.device
        head = self.prefix(incumbent, start)
        entries = [head.fork() for _ in lengths]
        out = np.tile(device, (len(lengths), 1))
        for k in range(start, min(start + int(lengths.max()), len(order))):
            v = int(order[k])
            for e in entries:
                e.act(v)
            free = [b for b in range(len(entries)) if k < start + lengths[b]]
            inside = set(free)
            acts, logits = self.logits([entries[b] for b in free])
            for b, a, z in zip(free, acts, logits):
                out[b, v] = int(a[sample_index(z / temperature, rng)])
            for b, e in enumerate(entries):
                if b in inside:
                    e.act(int(out[b, v]))
                    continue
                # past its window: the incumbent's device (a replay, unchecked), or its
                # group's where the window moved the group
                forced = e.state.group_device(v)
                if forced >= 0:
                    out[b, v] = forced
                e.obs.act(e.state, int(out[b, v]), checked=False)
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


def decodes_like_episodes(policy: DopplerPolicy) -> bool:
    """Whether the search's decoder plays ``policy``'s episodes as
    :func:`~placegym.agents.doppler.episodes.play_episodes` does: a policy that chooses
    both its SEL and its PLC actions (not a fixed-order baseline or a SEL-only / PLC-only
    ablation)."""
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
    memory_mask: bool | str = True,
    dispatch: Dispatch = "priority",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``k`` episodes sampled from ``policy`` and their simulated makespans: ``(devices,
    orders, makespans)``, shapes ``(k, n)``, ``(k, n)``, ``(k,)``.

    The episodes are those :func:`~placegym.agents.doppler.episodes.play_episodes` samples in ``k``
    environments of ``graph`` (with ``memory_mask`` and ``dispatch``) with
    ``numpy.random.default_rng(seed)``, decoded in lockstep without environments and
    simulated in one :func:`~placegym.envs.sim.simulator.simulate_batch` call: the same
    placements and makespans, bit for bit.

    Raises:
        ValueError: ``k`` < 1, or a policy that does not choose all its actions
            (:func:`decodes_like_episodes`).
    """
    devs, orders, res = _sampled(policy, graph, cluster, k, seed, memory_mask, dispatch, False)
    return devs, orders, res.makespan


def _sampled(
    policy: DopplerPolicy,
    graph: Graph,
    cluster: Cluster,
    k: int,
    seed: int,
    memory_mask: bool | str,
    dispatch: Dispatch,
    memory: bool,
) -> tuple[np.ndarray, np.ndarray, BatchResult]:
    """:func:`sample_placements`' episodes and their one batch simulation (tracking
    memory when ``memory``: the makespans are the same either way)."""
    if k < 1:
        raise ValueError(f"k: must be >= 1, got {k}")
    if not decodes_like_episodes(policy):
        raise ValueError("policy: expected one that chooses its SEL and PLC actions")
    dec = Decoder(policy, graph, cluster, memory_mask)
    devs = dec.sample(k, 1.0, np.random.default_rng(seed))
    res = simulate_batch(  # with the mask's recompute set, as the environments simulate
        graph,
        cluster,
        devs,
        dec._orders,
        dispatch=dispatch,
        memory=memory,
        recompute=dec.recompute,
    )
    return devs, dec._orders, res


def best_of_samples(
    policy: DopplerPolicy,
    graph: Graph,
    cluster: Cluster,
    k: int,
    seed: int,
    *,
    dispatch: Dispatch = "priority",
    feasible: bool = False,
    memory_mask: bool | str = True,
) -> tuple[Placement, float]:
    """The best of :func:`sample_placements` (with ``memory_mask`` and ``dispatch``) and
    its makespan; the first of equal makespans wins, as the best of the played episodes.
    With ``feasible``, a sample within every device's memory beats one over it (the one
    batch simulation then tracks memory, when memory can bind)."""
    memory = feasible and memory_may_bind(graph, cluster)
    devs, orders, res = _sampled(policy, graph, cluster, k, seed, memory_mask, dispatch, memory)
    makespans = res.makespan
    key = makespans
    if memory and not res.oom.all():
        key = np.where(res.oom, np.inf, makespans)
    best = int(np.argmin(key))
    rc = mask_recompute(graph, cluster, memory_mask)
    return Placement(devs[best], orders[best], rc), float(makespans[best])


def reserved_greedy(
    decoder: Decoder, passes: list[Placement] | None = None, first: Placement | None = None
) -> Placement:
    """The policy's greedy placement made to fit where memory binds, as the teachers'
    single passes are (:func:`~placegym.teachers._memory.reserve_room`): the greedy pass
    under the decoder's mask; if it is over memory (simulated), the greedy pass again
    under the ``"room"`` mask with per-device tensor reserves, each round raising the
    reserve of a device over memory by its simulated excess (at least to the live tensors
    it peaked with), a few rounds at most, until one fits. The first placement that fits,
    else the plain greedy one (which a placer then repairs). Where memory cannot bind,
    the plain greedy pass, unsimulated. Every pass is deterministic: the same weights,
    graph and cluster give the same placement. ``passes``, when given, receives every
    pass decoded, in order: each but the first (which a search simulates as its greedy
    pass) is one more simulator call. ``first``: the plain greedy pass when the caller
    has it already (played in environments), so it is not decoded again."""
    from placegym.teachers._memory import reserve_room, with_room

    decoded: dict[bytes | None, Placement] = {} if first is None else {None: first}
    if first is not None and passes is not None:
        passes.append(first)

    def roll(room: Any) -> Placement:
        key = None if room is None else room.reserve.tobytes()
        if key not in decoded:
            decoded[key] = decoder.greedy(None if room is None else room.reserve)
            if passes is not None:
                passes.append(decoded[key])
        return decoded[key]

    live = decoder.memory_mask in LIVE_MASKS  # its rooms keep live bytes, as the teachers' do
    room = reserve_room(decoder.graph, decoder.cluster, roll, live=live)
    return with_room(roll(room), room)
