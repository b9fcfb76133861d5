"""Batched episodes of the dual policy: :func:`play_episodes` and what it records.

:func:`play_episodes` plays one episode in each of several :class:`PlacementEnv` s in
lockstep without gradients (SEL and PLC phases stay aligned because the policy only takes
legal actions), recording everything needed to score the episode again
(:class:`EpisodeRecord`). :func:`~placegym.agents.doppler.scoring.score` then recomputes
every step's log-probability and entropy *with* gradients in a few batched calls per
graph (encoders once, frontier nodes only), which serves REINFORCE, PPO and imitation
alike.

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
(the baselines of :mod:`placegym.agents.doppler.baselines`) does not choose SEL actions:
every SEL step takes the frontier node earliest in the graph's topological order (teacher
steps included) and scores log-probability 0, entropy 0 and teacher log-probability 0.
A policy with a ``fixed_teacher`` (the SEL-only / PLC-only ablations of
:class:`~placegym.agents.doppler.policy.DopplerPolicy`) takes that teacher's first tie-set
action in the phase it does not learn (``learns_selection`` / ``learns_placement``
False), scored the same way.

The per-graph inputs come from :func:`~placegym.agents.doppler.inputs.graph_inputs` and
each PLC state's device rows from :func:`~placegym.agents.doppler.inputs.plc_devices`. A
policy with ``PolicyConfig.prices`` prices each PLC state's devices by simulated
``heft_rule`` completions (:func:`~placegym.agents.doppler.features.price_features`; with
``price_starts``, the fortified lookahead's prices); when the teacher is that same
lookahead (:func:`~placegym.agents.doppler.features.prices_with`), its labels and those
prices come from one cache, so a labelled state is priced once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from placegym.agents.doppler._kernels import greedy_pick_kernel
from placegym.agents.doppler._steps import Steps
from placegym.agents.doppler.encoding import Encoding
from placegym.agents.doppler.features import SelPairs, prices_with, sel_pairs
from placegym.agents.doppler.inputs import graph_inputs, plc_devices, sel_picks
from placegym.agents.doppler.policy import DopplerPolicy
from placegym.agents.nn.encoder import GraphInputs
from placegym.envs.core.cache import IdentityCache
from placegym.envs.mdp.env import PlacementEnv
from placegym.envs.mdp.state import PlacementState
from placegym.teachers.base import Teacher
from placegym.teachers.lookahead import LookaheadTeacher

__all__ = [
    "GREEDY_TIE_TOL",
    "EpisodeRecord",
    "device_logits",
    "frontier_logits",
    "greedy_pick",
    "pair_logits",
    "placed_dtype",
    "play_episodes",
    "plc_tie_key",
    "sample_index",
    "sample_rows",
    "sel_tie_key",
]


@dataclass
class EpisodeRecord:
    """One episode. ``S`` = number of nodes = SEL steps = PLC steps; step ``2k`` is the
    k-th SEL, ``2k + 1`` the k-th PLC.

    Attributes:
        graph: the episode's :class:`GraphInputs` (shared by episodes of one graph).
        sel_mask: ``(S, n)`` the SEL action mask (the frontier) of each SEL step.
        sel_rows, sel_ready: ``(K, 6)`` and ``(K, 3)``, the
            :class:`~placegym.agents.doppler.features.SelPairs` of the ``K`` (step, node)
            pairs of ``sel_mask`` (row-major: by step, then node id): all SEL reads of the
            states, where their whole node_dynamic would be ``(S, n, 6)``.
        sel_action: ``(S,)``; plc_node ``(S,)`` the node being placed.
        plc_placed: ``(S, n)`` device of every node before each PLC step (-1 unplaced), in
            the smallest signed integer type that holds the devices (:func:`placed_dtype`).
        plc_dev: ``(S, D, 7)`` device features; plc_mask ``(S, D)``; plc_action ``(S,)``.
        sel_teacher, plc_teacher: teacher tie sets as masks (imitation), or None.
        sel_pick: ``(S,)`` with a following pricer (``PolicyConfig.price_follow``): the
            node it selects next at each SEL step (the ``pick`` column), or None.
        plc_regret: ``(S, D)`` with a teacher that prices devices (``place_costs``, e.g.
            :class:`~placegym.teachers.lookahead.LookaheadTeacher`): each device's cost
            over the least one, relative (0 for the best and for illegal devices), or None.
        rewards: ``(2S,)`` environment rewards; info: the final step's info.
        from_teacher: ``(2S,)`` whether the teacher chose that step's action.

    A record of :func:`play_episodes` with ``keep_inputs=False`` holds the inputs (``sel_mask``,
    ``sel_rows``, ``sel_ready``, ``plc_placed``, ``plc_dev``, ``plc_mask``) of its last steps
    only and cannot be scored.

    Memory: about ``S · n · 3`` bytes (the masks and ``plc_placed`` on up to 127
    devices), ``36 · K`` for the frontier pairs and ``S · D · 4 · F`` for the device rows.
    """

    graph: GraphInputs
    sel_mask: np.ndarray
    sel_rows: np.ndarray
    sel_ready: np.ndarray
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
    sel_pick: np.ndarray | None = None

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
    keep_inputs: bool = True
    buf: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        # the step inputs (_INPUTS) and labels in one array each (Steps), the rest listed
        n, keep = self.n, self.keep_inputs
        lists = ("sel_pick", "sel_action", "plc_node", "plc_action", "rewards", "from_teacher")
        self.buf = {
            **{k: Steps(n, keep=keep) for k in _INPUTS},
            "plc_placed": Steps(n, keep=keep, dtype=placed_dtype(self.d)),
            **{k: Steps(n, keep=keep, ragged=True) for k in ("sel_rows", "sel_ready")},
            **{k: Steps(n) for k in ("sel_teacher", "plc_teacher", "plc_regret")},
            **{k: [] for k in lists},
        }

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
    the tied index of smallest ``tie_key`` wins (the first such index on equal keys).
    ``logits`` is 1-D, float32 or float64 (the tolerance and the subtraction are in its
    precision); compiled (:func:`~placegym.agents.doppler._kernels.greedy_pick_kernel`).

    Raises:
        ValueError: no logits, or a NaN among them (e.g. a policy whose weights are NaN).
    """
    tol = logits.dtype.type(GREEDY_TIE_TOL)
    pick = int(greedy_pick_kernel(logits, tie_key, tol))
    if pick < 0:
        raise ValueError(f"logits: no largest logit among {logits.tolist()!r}")
    return pick


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


@torch.no_grad()
def play_episodes(
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
    temperature: float = 1.0,
) -> list[EpisodeRecord]:
    """One episode per env (``env.reset(seed=seeds[i])``); see the module docstring.

    Sampled actions are drawn from ``softmax(logits / temperature)`` (``temperature``
    has no effect on greedy and teacher steps; at 1 the logits are used as they are).

    With ``keep_inputs=False`` (evaluation: records that are never scored) only the last
    SEL and PLC step's inputs (``sel_mask``, ``sel_rows``, ``sel_ready``, ``plc_placed``,
    ``plc_dev``, ``plc_mask``) are kept, so memory stays ``O(n)`` instead of ``O(n²)`` per
    episode; actions, rewards and info are complete.

    Envs that share a graph object and cluster share one encoding, and at every step their policy
    forwards run as one batched call (one per graph and phase), so many episodes of one
    graph cost little more than one; greedy envs get one call each (see the module
    docstring). ``graph_cache`` (unbounded, keyed by the graph and cluster objects; one
    cache serves one policy, whose hints it holds) keeps the :class:`GraphInputs` across
    calls.

    Envs with compact observations (``observation="compact"``, as
    :class:`~placegym.agents.doppler.placer.EnvPool` builds them) are read the same way: the
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
                keep_inputs,
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
        actions = _decide(policy, lives, use, greedy, teacher, record_teacher, temperature)
        for lv, action, t in zip(lives, actions, use):
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
    temperature: float = 1.0,
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
            policy, [lives[j] for j in members], greedy, temperature
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
        mask = lv.info["action_mask"][: lv.n]  # Steps keep copies
        nodes = torch.from_numpy(np.flatnonzero(mask))
        dyn = torch.from_numpy(lv.obs["node_dynamic"][None, : lv.n])
        pairs = sel_pairs(lv.graph, dyn, torch.zeros_like(nodes), nodes)  # copies of dyn
        b["sel_mask"].append(mask)
        b["sel_rows"].append(pairs.rows.numpy())
        b["sel_ready"].append(pairs.ready.numpy())
        pick = sel_picks(state, pricer)
        if pick is not None:
            b["sel_pick"].append(pick)
        if record:
            assert ties is not None
            b["sel_teacher"].append(_as_mask(ties, lv.n))
    else:
        b["plc_node"].append(state.selected)
        b["plc_placed"].append(state.device)
        b["plc_dev"].append(plc_devices(lv.graph, state, lv.obs["device"], pricer))
        b["plc_mask"].append(lv.info["action_mask"][: lv.d])
        if record:
            assert ties is not None
            b["plc_teacher"].append(_as_mask(ties, lv.d))


#: Per-step inputs of size n or D, kept for the last step only by ``keep_inputs=False``
#: (with ``plc_placed``, in :func:`placed_dtype`, and ``sel_rows`` and ``sel_ready``,
#: whose size is the frontier's).
_INPUTS = ("sel_mask", "plc_dev", "plc_mask")


def placed_dtype(devices: int) -> np.dtype:
    """The smallest signed integer type holding device ids below ``devices`` and -1 (a
    record's ``plc_placed``: ``int8`` up to 127 devices, ``int16`` up to 32,767)."""
    for t in (np.int8, np.int16, np.int32):
        if devices - 1 <= np.iinfo(t).max:
            return np.dtype(t)
    return np.dtype(np.int64)


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
    picks: list[int] | None = None,
) -> list[np.ndarray]:
    """SEL logits of several states of one graph in one call: ``dyn (S, n, 6)`` the
    states' node_dynamic, ``nodes[s]`` the frontier of state s, ``picks[s]`` the node its
    following pricer selects next (:func:`~placegym.agents.doppler.inputs.sel_picks`;
    None without one); one array per state."""
    step, flat = _pair_index(nodes)
    return pair_logits(
        policy, graph, enc, sel_pairs(graph, torch.from_numpy(dyn), step, flat), nodes, picks
    )


def pair_logits(
    policy: DopplerPolicy,
    graph: GraphInputs,
    enc: Encoding,
    pairs: SelPairs,
    nodes: list[np.ndarray],
    picks: list[int] | None = None,
) -> list[np.ndarray]:
    """:func:`frontier_logits` of states given by their frontier pairs' ``pairs``
    (:func:`~placegym.agents.doppler.features.sel_pairs`, state by state, node ids
    ascending within each ``nodes[s]``)."""
    step, flat = _pair_index(nodes)
    pick = None if picks is None else torch.tensor(picks, dtype=torch.int64)
    x = policy.sel_inputs(graph, pairs, step, flat, pick)
    scores = policy.sel_scores(enc, flat, x)
    return np.split(scores.numpy(), np.cumsum([len(v) for v in nodes])[:-1])


def _pair_index(nodes: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(step, node)`` of the pairs of the frontiers ``nodes``, state by state."""
    step = torch.from_numpy(np.repeat(np.arange(len(nodes)), [len(v) for v in nodes]))
    return step, torch.from_numpy(np.concatenate(nodes))


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


def _select_batch(
    policy: DopplerPolicy, lives: list[_Live], greedy: bool, temperature: float = 1.0
) -> list[int]:
    """SEL actions of envs sharing one encoding: one scoring call over all frontiers."""
    nodes = [np.flatnonzero(lv.buf["sel_mask"][-1]) for lv in lives]
    pairs = SelPairs(
        *(
            torch.from_numpy(np.concatenate([lv.buf[key][-1] for lv in lives]))
            for key in ("sel_rows", "sel_ready")
        )
    )
    g = lives[0].graph
    pricer_picks = [lv.buf["sel_pick"][-1] for lv in lives] if lives[0].buf["sel_pick"] else None
    parts = pair_logits(policy, g, lives[0].enc, pairs, nodes, pricer_picks)
    if greedy:  # the tie key only matters (and is only computed) for the greedy choice
        return [int(v[greedy_pick(s, sel_tie_key(g, v))]) for v, s in zip(nodes, parts)]
    sizes = np.array([len(v) for v in nodes])
    legal = np.arange(sizes.max()) < sizes[:, None]
    padded = np.zeros(legal.shape, dtype=parts[0].dtype)
    padded[legal] = np.concatenate(parts)
    picks = sample_rows(_tempered(padded, temperature), legal, [lv.rng.random() for lv in lives])
    return [int(v[i]) for v, i in zip(nodes, picks)]


def _tempered(logits: np.ndarray, temperature: float) -> np.ndarray:
    """``logits / temperature`` (``logits`` themselves at 1, so that the draws at 1 are
    bit for bit those of an untempered policy)."""
    return logits if temperature == 1.0 else logits / temperature


def _place_batch(
    policy: DopplerPolicy, lives: list[_Live], greedy: bool, temperature: float = 1.0
) -> list[int]:
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
            draws = [lv.rng.random() for lv in ls]
            picks = sample_rows(_tempered(logits, temperature), legal, draws)
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
        sel_mask=b["sel_mask"].joined(),
        sel_rows=b["sel_rows"].joined(),
        sel_ready=b["sel_ready"].joined(),
        sel_action=np.array(b["sel_action"], dtype=np.int64),
        plc_node=np.array(b["plc_node"], dtype=np.int64),
        plc_placed=b["plc_placed"].joined(),
        plc_dev=b["plc_dev"].joined(),
        plc_mask=b["plc_mask"].joined(),
        plc_action=np.array(b["plc_action"], dtype=np.int64),
        rewards=np.array(b["rewards"], dtype=np.float64),
        from_teacher=np.array(b["from_teacher"], dtype=bool),
        info=lv.info,
        sel_teacher=b["sel_teacher"].joined() if record_teacher else None,
        plc_teacher=b["plc_teacher"].joined() if record_teacher else None,
        plc_regret=(
            b["plc_regret"].joined()
            if b["plc_regret"] and len(b["plc_regret"]) == len(b["plc_action"])
            else None
        ),
        sel_pick=np.array(b["sel_pick"], dtype=np.int64) if b["sel_pick"] else None,
    )
