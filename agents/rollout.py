"""Batched episodes of the dual policy, and their log-probabilities for learning.

:func:`rollout` plays one episode in each of several :class:`PlacementEnv` s in lockstep
without gradients (SEL and PLC phases stay aligned because the policy only takes legal
actions), recording everything needed to score the episode again. :func:`score` then
recomputes every step's log-probability and entropy *with* gradients in a few batched
calls per graph (encoders once, frontier nodes only), which serves REINFORCE, PPO and
imitation alike.

Action choice per step: the teacher's (a uniform pick from its tie set) with probability
``teacher_prob`` (DAgger roll-in), else the policy's: argmax (``greedy``) or a sample.
All draws come from the ``rng`` passed in.

**Greedy episodes are a pure function of (weights, graph, cluster).** They draw nothing
from ``rng``, and every greedy env gets its own policy forwards (a forward batched over
several envs may round differently in the last bits, which could flip a near-tie).
Logits within :data:`GREEDY_TIE_TOL` of the largest are tied (structurally identical
nodes score identically) and the tie goes by a fixed rule (:func:`greedy_pick`): SEL
takes the tied node of largest b-level, then smallest id; PLC the tied device of
earliest estimated start, then smallest index. A policy with ``learns_selection = False``
(the baselines of :mod:`placegym.agents.baselines`) does not choose SEL actions: every
SEL step takes the frontier node earliest in the graph's topological order (teacher
steps included) and scores log-probability 0, entropy 0 and teacher log-probability 0.
A policy with a ``fixed_teacher`` (the SEL-only / PLC-only ablations of
:class:`~placegym.agents.doppler.DopplerPolicy`) takes that teacher's first tie-set
action in the phase it does not learn (``learns_selection`` / ``learns_placement``
False), scored the same way.

A policy with ``PolicyConfig.rollout`` prices each PLC state's devices by simulated
``heft_rule`` completions (:func:`rollout_features`; with ``rollout_starts``, the
fortified lookahead's prices); when the teacher is that same lookahead
(:func:`prices_with`), its labels and those prices come from one cache, so a labelled
state is priced once.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from placegym.agents.doppler import RULE_RTOL, DopplerPolicy, Encoding, cluster_links
from placegym.agents.nn.encoder import GraphInputs
from placegym.agents.hints import hint_groups, hint_placements, hint_quality
from placegym.envs.analysis import b_level
from placegym.envs.cache import IdentityCache
from placegym.envs.cluster import Cluster
from placegym.envs.env import PlacementEnv
from placegym.envs.graph import Graph
from placegym.envs.observation import FEATURE_MAX, time_unit
from placegym.envs.state import PlacementState
from placegym.teachers.base import Teacher
from placegym.teachers.lookahead import LookaheadTeacher

__all__ = [
    "GREEDY_TIE_TOL",
    "EpisodeRecord",
    "Scores",
    "device_logits",
    "frontier_logits",
    "graph_inputs",
    "greedy_pick",
    "new_pricer",
    "plc_tie_key",
    "prices_with",
    "rollout",
    "sample_index",
    "sample_rows",
    "score",
    "segment_log_softmax",
    "sel_tie_key",
]


@dataclass
class EpisodeRecord:
    """One episode. ``S`` = number of nodes = SEL steps = PLC steps; step ``2k`` is the
    k-th SEL, ``2k + 1`` the k-th PLC.

    Attributes:
        graph: the episode's :class:`GraphInputs` (shared by episodes of one graph).
        sel_dyn: ``(S, n, 6)`` node_dynamic at each SEL step; sel_mask ``(S, n)`` bool.
        sel_action: ``(S,)``; plc_node ``(S,)`` the node being placed.
        plc_placed: ``(S, n)`` device of every node before each PLC step (-1 unplaced).
        plc_dev: ``(S, D, 7)`` device features; plc_mask ``(S, D)``; plc_action ``(S,)``.
        sel_teacher, plc_teacher: teacher tie sets as masks (imitation), or None.
        plc_regret: ``(S, D)`` with a teacher that prices devices (``place_costs``, e.g.
            :class:`~placegym.teachers.lookahead.LookaheadTeacher`): each device's cost
            over the least one, relative (0 for the best and for illegal devices), or None.
        rewards: ``(2S,)`` environment rewards; info: the final step's info.
        from_teacher: ``(2S,)`` whether the teacher chose that step's action.

    A record of :func:`rollout` with ``keep_inputs=False`` holds the inputs (``sel_dyn``,
    ``sel_mask``, ``plc_placed``, ``plc_dev``, ``plc_mask``) of its last steps only and
    cannot be scored.
    """

    graph: GraphInputs
    sel_dyn: np.ndarray
    sel_mask: np.ndarray
    sel_action: np.ndarray
    plc_node: np.ndarray
    plc_placed: np.ndarray
    plc_dev: np.ndarray
    plc_mask: np.ndarray
    plc_action: np.ndarray
    rewards: np.ndarray
    from_teacher: np.ndarray
    info: dict[str, Any]
    sel_teacher: np.ndarray | None = None
    plc_teacher: np.ndarray | None = None
    plc_regret: np.ndarray | None = None

    @property
    def makespan(self) -> float:
        """The episode's makespan (seconds)."""
        return float(self.info["makespan"])

    @property
    def ret(self) -> float:
        """The episode's return (sum of its rewards)."""
        return float(self.rewards.sum())


@dataclass
class _Live:
    """Per-env buffers while an episode runs."""

    env: PlacementEnv
    obs: dict[str, Any]
    info: dict[str, Any]
    graph: GraphInputs
    enc: Encoding
    n: int
    d: int
    rng: np.random.Generator
    buf: dict[str, list] = field(
        default_factory=lambda: {
            k: []
            for k in (
                "sel_dyn",
                "sel_mask",
                "sel_action",
                "plc_node",
                "plc_placed",
                "plc_dev",
                "plc_mask",
                "plc_action",
                "rewards",
                "from_teacher",
                "sel_teacher",
                "plc_teacher",
                "plc_regret",
            )
        }
    )

    @property
    def state(self) -> PlacementState:
        """The environment's placement state (set by ``reset``)."""
        state = self.env.state
        assert state is not None
        return state


#: Logits within this of the largest count as tied for the greedy choice.
GREEDY_TIE_TOL = 1e-6
_B_LEVEL = 3  # node_static column: b-level / CP
_EST_START = 0  # device column: estimated start of the selected node there / CP


def greedy_pick(logits: np.ndarray, tie_key: np.ndarray) -> int:
    """Index of the largest logit; logits within :data:`GREEDY_TIE_TOL` of it are tied and
    the tied index of smallest ``tie_key`` wins (the first such index on equal keys)."""
    tied = np.flatnonzero(logits >= logits.max() - GREEDY_TIE_TOL)
    if len(tied) == 1:
        return int(tied[0])
    return int(tied[np.argmin(tie_key[tied])])


def sample_index(logits: np.ndarray, rng: np.random.Generator) -> int:
    """An index drawn with probability ``softmax(logits)`` (one ``rng.random()`` draw)."""
    c = np.exp(logits - logits.max()).cumsum()
    return min(int(c.searchsorted(rng.random() * c[-1], side="right")), len(c) - 1)


def sample_rows(logits: np.ndarray, legal: np.ndarray, draws: Sequence[float]) -> np.ndarray:
    """Per row b of ``logits (B, L)``, the index of the entry that :func:`sample_index`
    draws from the row's ``legal`` entries with the uniform draw ``draws[b]``: the same
    floating-point operations, vectorised over the rows (illegal entries add exact zeros
    to the cumulative masses, so the legal entries' cumulative masses are unchanged)."""
    masked = np.where(legal, logits, -np.inf)
    c = np.exp(masked - masked.max(axis=1, keepdims=True)).cumsum(axis=1)
    x = np.asarray(draws).astype(c.dtype) * c[:, -1]  # as a Python float times c[-1]
    first = (c <= x[:, None]).sum(axis=1)  # the first entry whose mass passes the draw
    last = legal.shape[1] - 1 - legal[:, ::-1].argmax(axis=1)  # when none does (rounding)
    return np.where(first < legal.shape[1], first, last)


def _hints(policy: Any) -> tuple[str, ...]:
    return tuple(getattr(getattr(policy, "config", None), "hints", ()))


def graph_inputs(policy: Any, obs: dict[str, Any], graph: Graph, cluster: Cluster) -> GraphInputs:
    """The static inputs of ``policy`` for ``graph`` on ``cluster``: those of the first
    observation ``obs``, plus the hint groups of the policy's ``config.hints`` (and
    their quality with ``config.hint_quality``) and, with ``config.topology``, the
    cluster's links."""
    inputs = GraphInputs.from_obs(obs)
    hints = _hints(policy)
    if hints:
        placements = hint_placements(graph, cluster, hints)
        groups = torch.from_numpy(hint_groups(graph, cluster, hints, placements))
        inputs = dataclasses.replace(inputs, groups=groups)
        if getattr(getattr(policy, "config", None), "hint_quality", False):
            quality = torch.from_numpy(hint_quality(graph, cluster, placements))
            inputs = dataclasses.replace(inputs, quality=quality)
    if getattr(getattr(policy, "config", None), "topology", False):
        inputs = dataclasses.replace(inputs, links=cluster_links(cluster))
    with_insertion = getattr(getattr(policy, "config", None), "insertion", False)
    with_rollout = getattr(getattr(policy, "config", None), "rollout", False)
    if with_insertion or with_rollout:
        levels = b_level(graph, cluster)  # heft_rule's SEL key, as its completions'
        unit = time_unit(levels)
        if with_insertion:
            inputs = dataclasses.replace(inputs, scale=unit)
        if with_rollout:
            inputs = dataclasses.replace(
                inputs, rollout_scale=unit, b_level=torch.from_numpy(levels.copy())
            )
    return inputs


def insertion_features(state: PlacementState, scale: float) -> np.ndarray:
    """``(D, 3)`` float32 per device, for the selected node (``PolicyConfig.insertion``):
    its insertion-based estimated start (:meth:`PlacementState.insertion_start`) /
    ``scale``, its insertion-based finish there minus the earliest over the devices /
    ``scale``, and whether that lead is within :data:`RULE_RTOL` of the earliest (HEFT's
    tie set; devices the mask forbids are the caller's to drop)."""
    start = state.insertion_start()
    finish = start + state.costs.duration[state.selected]
    first = finish.min()
    lead = finish - first
    return np.stack(
        [
            np.minimum(start / scale, FEATURE_MAX),
            np.minimum(lead / scale, FEATURE_MAX),
            lead <= RULE_RTOL * abs(first),
        ],
        axis=-1,
    ).astype(np.float32)


@functools.cache
def _pricer(starts: tuple[str, ...] = ()) -> LookaheadTeacher:
    """The lookahead teacher whose per-device prices :func:`rollout_features` reads (one
    per process and ``starts``; it keeps the prices of recent states of a few graphs)."""
    return LookaheadTeacher("heft_rule", cache_size=4096, starts=starts)


def new_pricer(policy: Any, cache_size: int = 4096) -> LookaheadTeacher | None:
    """A fresh lookahead pricing ``policy``'s rollout inputs (None if it reads none): over
    ``heft_rule``, fortified with its ``PolicyConfig.rollout_starts``."""
    config = getattr(policy, "config", None)
    if not getattr(config, "rollout", False):
        return None
    return LookaheadTeacher(
        "heft_rule", cache_size=cache_size, starts=getattr(config, "rollout_starts", ())
    )


def prices_with(teacher: Teacher | None, policy: Any = None) -> LookaheadTeacher | None:
    """The lookahead that prices ``policy``'s rollout inputs in :func:`rollout`:
    ``teacher`` itself when it is a :class:`~placegym.teachers.lookahead.
    LookaheadTeacher` over ``heft_rule`` with the policy's ``rollout_starts``, no
    ``moves``, that caches its answers (its PLC labels and the :func:`rollout_features`
    are then one computation per state; the prices do not depend on its ``rtol``); else
    the process-wide pricer of those starts (None for a plain pricer, which
    :func:`rollout_features` finds itself)."""
    starts = tuple(getattr(getattr(policy, "config", None), "rollout_starts", ()))
    if (
        isinstance(teacher, LookaheadTeacher)
        and teacher.base == "heft_rule"
        and teacher.starts == starts
        and not teacher.moves
        and teacher.cache_size > 0
    ):
        return teacher
    return _pricer(starts) if starts else None


def rollout_features(
    state: PlacementState, scale: float, pricer: LookaheadTeacher | None = None
) -> np.ndarray:
    """``(D, 2)`` float32 per device, for the selected node (``PolicyConfig.rollout``):
    the simulated makespan of ``heft_rule``'s completion of ``state`` with the node on
    the device (:meth:`~placegym.teachers.lookahead.LookaheadTeacher.place_costs`) minus
    the least over the legal devices, / ``scale``, and whether that lead is within
    :data:`RULE_RTOL` of the least (the lookahead's tie set). Devices the mask forbids
    get ``FEATURE_MAX`` and 0 (the caller drops them). One simulator call per legal
    device, unless the state's prices are cached.

    ``pricer``: the lookahead over ``heft_rule`` that prices the devices (its cache and
    its :attr:`~placegym.teachers.lookahead.LookaheadTeacher.calls`); the process-wide
    one by default. Any such pricer of the same ``starts`` gives the same features."""
    if pricer is None:
        pricer = _pricer()
    elif pricer.base != "heft_rule":
        raise ValueError(f"pricer: expected a lookahead over 'heft_rule', got {pricer!r}")
    cost = pricer.place_costs(state)
    best = cost.min()
    lead = cost - best
    return np.stack(
        [np.minimum(lead / scale, FEATURE_MAX), lead <= RULE_RTOL * abs(best)], axis=-1
    ).astype(np.float32)


def plc_devices(
    graph: GraphInputs,
    state: PlacementState,
    devices: np.ndarray,
    pricer: LookaheadTeacher | None = None,
) -> np.ndarray:
    """The PLC's device features in ``state``: the observation's ``device`` rows and, when
    the graph inputs carry a ``scale`` (``PolicyConfig.insertion``), the
    :func:`insertion_features`, and with a ``rollout_scale`` (``PolicyConfig.rollout``)
    the :func:`rollout_features` (priced by ``pricer``; a new array)."""
    parts = [devices]
    if graph.scale is not None:
        parts.append(insertion_features(state, graph.scale))
    if graph.rollout_scale is not None:
        parts.append(rollout_features(state, graph.rollout_scale, pricer))
    return np.concatenate(parts, axis=1) if len(parts) > 1 else devices.copy()


@torch.no_grad()
def rollout(
    policy: DopplerPolicy,
    envs: list[PlacementEnv],
    seeds: Sequence[int | None],
    *,
    rng: np.random.Generator | Sequence[np.random.Generator],
    greedy: bool = False,
    teacher: Teacher | None = None,
    teacher_prob: float = 0.0,
    record_teacher: bool = False,
    graph_cache: IdentityCache[GraphInputs] | None = None,
    keep_inputs: bool = True,
) -> list[EpisodeRecord]:
    """One episode per env (``env.reset(seed=seeds[i])``); see the module docstring.

    With ``keep_inputs=False`` (evaluation: records that are never scored) only the last
    SEL and PLC step's inputs (``sel_dyn``, ``sel_mask``, ``plc_placed``, ``plc_dev``,
    ``plc_mask``) are kept, so memory stays ``O(n)`` instead of ``O(n²)`` per episode
    (7 GB on a 10,000-node graph otherwise); actions, rewards and info are complete.

    Envs that share a graph object and cluster share one encoding, and at every step their policy
    forwards run as one batched call (one per graph and phase), so many episodes of one
    graph cost little more than one; greedy envs get one call each (see the module
    docstring). ``graph_cache`` (unbounded, keyed by the graph and cluster objects; one
    cache serves one policy, whose hints it holds) keeps the :class:`GraphInputs` across
    calls.

    Envs with compact observations (``observation="compact"``, as
    :class:`~placegym.train.evaluate.EnvPool` builds them) are read the same way: the
    per-graph keys come from ``env.graph_observation()`` once per graph.

    ``rng`` is one generator for every draw, or one generator per env for the draws of
    that env's episode: each episode is then a function of its own generator whatever the
    other envs are, so that a batch split over several processes by graph (the groups
    that share forwards) plays the same episodes.
    """
    rngs = [rng] * len(envs) if isinstance(rng, np.random.Generator) else list(rng)
    if len(rngs) != len(envs):
        raise ValueError(f"rng: expected one generator per env ({len(envs)}), got {len(rngs)}")
    cache: IdentityCache[GraphInputs] = (
        IdentityCache(size=None) if graph_cache is None else graph_cache
    )
    live: list[_Live] = []
    encodings: dict[int, Encoding] = {}
    for env, seed, env_rng in zip(envs, seeds, rngs, strict=True):
        obs, info = env.reset(seed=seed)
        g = env.graph
        inputs = cache.get(g, env.cluster)
        if inputs is None:  # compact observations leave out the per-graph keys
            static = obs if "node_static" in obs else env.graph_observation()
            inputs = graph_inputs(policy, static, g, env.cluster)
            cache.put(g, env.cluster, value=inputs)
        if id(inputs) not in encodings:  # one per (graph, cluster); alive in the cache
            encodings[id(inputs)] = policy.encode(inputs)
        live.append(
            _Live(
                env,
                obs,
                info,
                inputs,
                encodings[id(inputs)],
                g.num_nodes,
                env.cluster.num_devices,
                env_rng,
            )
        )
    done: dict[int, EpisodeRecord] = {}
    active = [i for i in range(len(live)) if not live[i].state.done]
    for i in range(len(live)):
        if i not in active:
            done[i] = _finish(live[i], record_teacher)
    while active:
        lives = [live[i] for i in active]
        use = [
            teacher is not None and teacher_prob > 0 and lv.rng.random() < teacher_prob
            for lv in lives
        ]
        actions = _decide(policy, lives, use, greedy, teacher, record_teacher)
        for lv, action, t in zip(lives, actions, use):
            if not keep_inputs:
                _drop_old_inputs(lv.buf)
            lv.buf["from_teacher"].append(t)
            lv.obs, reward, _, _, lv.info = lv.env.step(action)
            lv.buf["rewards"].append(reward)
        for i in [i for i in active if live[i].state.done]:
            done[i] = _finish(live[i], record_teacher)
        active = [i for i in active if i not in done]
    return [done[i] for i in range(len(live))]


def _decide(
    policy: DopplerPolicy,
    lives: list[_Live],
    use_teacher: list[bool],
    greedy: bool,
    teacher: Teacher | None,
    record_teacher: bool,
) -> list[int]:
    """One action per live env: record each env's step inputs, ask the teacher where it
    acts (or its tie set is recorded), and batch the policy's forwards per graph."""
    actions: list[int | None] = [None] * len(lives)
    groups: dict[tuple[bool, int, int], list[int]] = {}
    fixed_sel = not getattr(policy, "learns_selection", True)
    fixed_plc = not getattr(policy, "learns_placement", True)
    fixed_teacher: Teacher | None = getattr(policy, "fixed_teacher", None)
    pricer = prices_with(teacher, policy)
    for j, (lv, use) in enumerate(zip(lives, use_teacher)):
        state = lv.state
        select = state.selected < 0
        ties = None
        if use or record_teacher:
            assert teacher is not None
            ties = teacher.select_actions(state) if select else teacher.place_actions(state)
        _record_inputs(lv, select, ties, record_teacher, pricer)
        if record_teacher and not select and hasattr(teacher, "place_costs"):
            lv.buf["plc_regret"].append(_regret(teacher.place_costs(state)))  # type: ignore[union-attr]
        if (select and fixed_sel) or (not select and fixed_plc):
            if fixed_teacher is not None:
                fixed = (
                    fixed_teacher.select_actions(state)
                    if select
                    else fixed_teacher.place_actions(state)
                )
                actions[j] = int(fixed[0])
            else:
                actions[j] = _topological_first(lv)
        elif use:
            assert ties is not None
            actions[j] = int(ties[lv.rng.integers(len(ties))])
        else:  # greedy: one env per forward, so that batching cannot change a decision
            groups.setdefault((select, id(lv.enc), j if greedy else -1), []).append(j)
    for (select, _, _), members in groups.items():
        chosen = (_select_batch if select else _place_batch)(
            policy, [lives[j] for j in members], greedy
        )
        for j, a in zip(members, chosen):
            actions[j] = a
    for lv, act in zip(lives, actions):
        lv.buf["sel_action" if lv.state.selected < 0 else "plc_action"].append(act)
    return actions  # type: ignore[return-value]


def _record_inputs(
    lv: _Live,
    select: bool,
    ties: np.ndarray | None,
    record: bool,
    pricer: LookaheadTeacher | None = None,
) -> None:
    b, state = lv.buf, lv.state
    if select:
        b["sel_dyn"].append(lv.obs["node_dynamic"][: lv.n].copy())
        b["sel_mask"].append(lv.info["action_mask"][: lv.n].copy())
        if record:
            assert ties is not None
            b["sel_teacher"].append(_as_mask(ties, lv.n))
    else:
        b["plc_node"].append(state.selected)
        b["plc_placed"].append(state.device.copy())
        b["plc_dev"].append(plc_devices(lv.graph, state, lv.obs["device"], pricer))
        b["plc_mask"].append(lv.info["action_mask"][: lv.d].copy())
        if record:
            assert ties is not None
            b["plc_teacher"].append(_as_mask(ties, lv.d))


#: Per-step inputs of size n or D, trimmed to their last entry by ``keep_inputs=False``.
_INPUTS = ("sel_dyn", "sel_mask", "plc_placed", "plc_dev", "plc_mask")


def _drop_old_inputs(buf: dict[str, list]) -> None:
    for key in _INPUTS:
        del buf[key][:-1]


def _topological_first(lv: _Live) -> int:
    """The frontier node earliest in the graph's topological order (fixed-order SEL)."""
    topo = lv.env.graph.topological_order
    return int(topo[np.argmax(lv.buf["sel_mask"][-1][topo])])


def frontier_logits(
    policy: DopplerPolicy,
    graph: GraphInputs,
    enc: Encoding,
    dyn: np.ndarray,
    nodes: list[np.ndarray],
) -> list[np.ndarray]:
    """SEL logits of several states of one graph in one call: ``dyn (S, n, 6)`` the
    states' node_dynamic, ``nodes[s]`` the frontier of state s; one array per state."""
    step = torch.from_numpy(np.repeat(np.arange(len(nodes)), [len(v) for v in nodes]))
    flat = torch.from_numpy(np.concatenate(nodes))
    x = policy.sel_inputs(graph, torch.from_numpy(dyn), step, flat)
    scores = policy.sel_scores(enc, flat, x)
    return np.split(scores.numpy(), np.cumsum([len(v) for v in nodes])[:-1])


def device_logits(
    policy: DopplerPolicy, enc: Encoding, node: np.ndarray, placed: np.ndarray, dev: np.ndarray
) -> np.ndarray:
    """PLC logits ``(S, D)`` of several states of one graph (one device count) in one
    call: ``node (S,)`` the selected nodes, ``placed (S, n)``, ``dev (S, D, F)`` (from
    :func:`plc_devices`)."""
    return policy.plc_logits(
        enc, torch.from_numpy(node), torch.from_numpy(placed), torch.from_numpy(dev)
    ).numpy()


def sel_tie_key(graph: GraphInputs, nodes: np.ndarray) -> np.ndarray:
    """Greedy SEL tie key of ``nodes``: largest b-level first (then smallest id)."""
    return -graph.x[nodes, _B_LEVEL].numpy()


def plc_tie_key(dev: np.ndarray) -> np.ndarray:
    """Greedy PLC tie key of devices with features ``dev (D, F)``: earliest start first
    (then smallest index)."""
    return dev[:, _EST_START]


def _select_batch(policy: DopplerPolicy, lives: list[_Live], greedy: bool) -> list[int]:
    """SEL actions of envs sharing one encoding: one scoring call over all frontiers."""
    nodes = [np.flatnonzero(lv.buf["sel_mask"][-1]) for lv in lives]
    dyn = np.stack([lv.buf["sel_dyn"][-1] for lv in lives])
    g = lives[0].graph
    parts = frontier_logits(policy, g, lives[0].enc, dyn, nodes)
    if greedy:  # the tie key only matters (and is only computed) for the greedy choice
        return [int(v[greedy_pick(s, sel_tie_key(g, v))]) for v, s in zip(nodes, parts)]
    sizes = np.array([len(v) for v in nodes])
    legal = np.arange(sizes.max()) < sizes[:, None]
    padded = np.zeros(legal.shape, dtype=parts[0].dtype)
    padded[legal] = np.concatenate(parts)
    picks = sample_rows(padded, legal, [lv.rng.random() for lv in lives])
    return [int(v[i]) for v, i in zip(nodes, picks)]


def _place_batch(policy: DopplerPolicy, lives: list[_Live], greedy: bool) -> list[int]:
    """PLC actions of envs sharing one encoding (and so one graph): one batched call."""
    by_d: dict[int, list[int]] = {}
    for j, lv in enumerate(lives):
        by_d.setdefault(lv.d, []).append(j)
    out = [0] * len(lives)
    for members in by_d.values():
        ls = [lives[j] for j in members]
        logits = device_logits(
            policy,
            ls[0].enc,
            np.array([lv.buf["plc_node"][-1] for lv in ls], dtype=np.int64),
            np.stack([lv.buf["plc_placed"][-1] for lv in ls]),
            np.stack([lv.buf["plc_dev"][-1] for lv in ls]),
        )
        if not greedy:
            legal = np.stack([lv.buf["plc_mask"][-1] for lv in ls])
            picks = sample_rows(logits, legal, [lv.rng.random() for lv in ls])
            for j, pick in zip(members, picks):
                out[j] = int(pick)
            continue
        for j, lv, row in zip(members, ls, logits):
            legal = np.flatnonzero(lv.buf["plc_mask"][-1])
            pick = greedy_pick(row[legal], plc_tie_key(lv.buf["plc_dev"][-1][legal]))
            out[j] = int(legal[pick])
    return out


def _regret(costs: np.ndarray) -> np.ndarray:
    """Relative regret of each device, ``cost / least - 1`` (0 where the cost is inf)."""
    finite = np.isfinite(costs)
    best = costs[finite].min()
    out = np.zeros(len(costs))
    out[finite] = costs[finite] / best - 1.0
    return out


def _as_mask(ids: np.ndarray, size: int) -> np.ndarray:
    m = np.zeros(size, dtype=bool)
    m[ids] = True
    return m


def _finish(lv: _Live, record_teacher: bool) -> EpisodeRecord:
    b = lv.buf
    return EpisodeRecord(
        graph=lv.graph,
        sel_dyn=np.stack(b["sel_dyn"]),
        sel_mask=np.stack(b["sel_mask"]),
        sel_action=np.array(b["sel_action"], dtype=np.int64),
        plc_node=np.array(b["plc_node"], dtype=np.int64),
        plc_placed=np.stack(b["plc_placed"]),
        plc_dev=np.stack(b["plc_dev"]),
        plc_mask=np.stack(b["plc_mask"]),
        plc_action=np.array(b["plc_action"], dtype=np.int64),
        rewards=np.array(b["rewards"], dtype=np.float64),
        from_teacher=np.array(b["from_teacher"], dtype=bool),
        info=lv.info,
        sel_teacher=np.stack(b["sel_teacher"]) if record_teacher else None,
        plc_teacher=np.stack(b["plc_teacher"]) if record_teacher else None,
        plc_regret=(
            np.stack(b["plc_regret"])
            if b["plc_regret"] and len(b["plc_regret"]) == len(b["plc_action"])
            else None
        ),
    )


# ---------------------------------------------------------------------- scoring
def segment_log_softmax(logits: Tensor, segment: Tensor, num_segments: int) -> Tensor:
    """Log-softmax of ``logits`` within each segment (``segment`` ids, any order)."""
    top = torch.full((num_segments,), -torch.inf, dtype=logits.dtype)
    top = top.scatter_reduce(0, segment, logits.detach(), reduce="amax", include_self=True)
    z = logits - top[segment]
    total = torch.zeros(num_segments, dtype=logits.dtype).index_add(0, segment, z.exp())
    return z - total.log()[segment]


@dataclass
class Scores:
    """Per-step log-probabilities of the taken actions and entropies, ``(2S,)`` each,
    interleaved SEL/PLC; ``teacher_logp`` is ``log π(teacher tie set)`` when recorded;
    ``plc_regret`` ``(S,)`` the policy's expected regret ``Σ_d π(d) regret(d)`` at each
    PLC step when the record has :attr:`EpisodeRecord.plc_regret`."""

    logp: Tensor
    entropy: Tensor
    teacher_logp: Tensor | None
    plc_regret: Tensor | None = None


def score(policy: DopplerPolicy, records: list[EpisodeRecord]) -> list[Scores]:
    """Recompute log-probs (with gradients) for ``records``; encoders run once per graph
    and the heads once per graph over all its records' steps (concatenated)."""
    groups: dict[int, list[int]] = {}
    for i, r in enumerate(records):
        groups.setdefault(id(r.graph), []).append(i)
    out: list[Scores | None] = [None] * len(records)
    for members in groups.values():
        rs = [records[i] for i in members]
        enc = policy.encode(rs[0].graph)
        for i, sc in zip(members, _score_graph(policy, enc, rs)):
            out[i] = sc
    return out  # type: ignore[return-value]


def _cat(records: list[EpisodeRecord], key: str) -> Tensor:
    return torch.from_numpy(np.concatenate([getattr(r, key) for r in records]))


def _score_graph(policy: DopplerPolicy, enc: Encoding, rs: list[EpisodeRecord]) -> list[Scores]:
    """Scores of records of one graph; their steps are stacked (``s`` steps each)."""
    s, m = len(rs[0].sel_action), len(rs)
    total = s * m  # stacked SEL steps (= PLC steps)
    step, node = (
        torch.from_numpy(x) for x in np.nonzero(np.concatenate([r.sel_mask for r in rs]))
    )
    learns_sel = getattr(policy, "learns_selection", True)
    if learns_sel:
        x = policy.sel_inputs(rs[0].graph, _cat(rs, "sel_dyn"), step, node)
        sel = policy.sel_scores(enc, node, x)
    else:
        sel = torch.zeros(len(node))
    logp_all = segment_log_softmax(sel, step, total)
    chosen = node == _cat(rs, "sel_action")[step]
    sel_logp = torch.zeros(total, dtype=logp_all.dtype).index_add(
        0, step[chosen], logp_all[chosen]
    )
    sel_ent = -torch.zeros(total, dtype=logp_all.dtype).index_add(
        0, step, logp_all.exp() * logp_all
    )
    plc = policy.plc_logits(enc, _cat(rs, "plc_node"), _cat(rs, "plc_placed"), _cat(rs, "plc_dev"))
    plc = plc.masked_fill(~_cat(rs, "plc_mask"), -torch.inf)
    plc_logp_all = torch.log_softmax(plc, dim=-1)
    plc_logp = plc_logp_all.gather(1, _cat(rs, "plc_action")[:, None]).squeeze(1)
    plc_ent = -(plc_logp_all.exp() * plc_logp_all.nan_to_num(neginf=0.0)).sum(dim=1)
    if not learns_sel:  # SEL by a fixed rule: probability 1
        sel_logp = sel_ent = torch.zeros_like(plc_logp)
    if not getattr(policy, "learns_placement", True):  # PLC by a fixed rule
        plc_logp = plc_ent = torch.zeros_like(sel_logp)
    logp = torch.stack([sel_logp, plc_logp], dim=1).reshape(m, 2 * s)
    entropy = torch.stack([sel_ent, plc_ent], dim=1).reshape(m, 2 * s)
    teacher_logp = None
    if all(r.sel_teacher is not None and r.plc_teacher is not None for r in rs):
        in_ties = _cat(rs, "sel_teacher")[step, node]
        t_sel = segment_logsumexp(logp_all.masked_fill(~in_ties, -torch.inf), step, total)
        t_plc = torch.logsumexp(
            plc_logp_all.masked_fill(~_cat(rs, "plc_teacher"), -torch.inf), dim=1
        )
        if not learns_sel:
            t_sel = torch.zeros_like(t_plc)
        if not getattr(policy, "learns_placement", True):
            t_plc = torch.zeros_like(t_sel)
        teacher_logp = torch.stack([t_sel, t_plc], dim=1).reshape(m, 2 * s)
    regret = None
    if all(r.plc_regret is not None for r in rs):
        probs = plc_logp_all.exp()  # 0 on illegal devices, whose regret is 0 too
        regret = (probs * _cat(rs, "plc_regret").to(probs.dtype)).sum(dim=1).reshape(m, s)
    return [
        Scores(
            logp[k],
            entropy[k],
            None if teacher_logp is None else teacher_logp[k],
            None if regret is None else regret[k],
        )
        for k in range(m)
    ]


def segment_logsumexp(x: Tensor, segment: Tensor, num_segments: int) -> Tensor:
    """``log Σ exp(x)`` within each segment (entries may be ``-inf``)."""
    top = torch.full((num_segments,), -torch.inf, dtype=x.dtype)
    top = top.scatter_reduce(0, segment, x.detach(), reduce="amax", include_self=True)
    safe_top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    total = torch.zeros(num_segments, dtype=x.dtype).index_add(
        0, segment, (x - safe_top[segment]).exp()
    )
    return total.log() + safe_top
