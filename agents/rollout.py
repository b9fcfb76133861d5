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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from placegym.agents.doppler import DopplerPolicy, Encoding
from placegym.agents.encoder import GraphInputs
from placegym.envs.env import PlacementEnv
from placegym.teachers.base import Teacher

__all__ = ["EpisodeRecord", "Scores", "rollout", "score", "segment_log_softmax"]


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
        rewards: ``(2S,)`` environment rewards; info: the final step's info.
        from_teacher: ``(2S,)`` whether the teacher chose that step's action.
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

    @property
    def makespan(self) -> float:
        return float(self.info["makespan"])

    @property
    def ret(self) -> float:
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
            )
        }
    )


def _choose(logits: np.ndarray, greedy: bool, rng: np.random.Generator) -> int:
    if greedy:
        return int(np.argmax(logits))
    p = np.exp(logits - logits.max())
    c = np.cumsum(p)
    return int(min(np.searchsorted(c, rng.random() * c[-1], side="right"), len(c) - 1))


@torch.no_grad()
def rollout(
    policy: DopplerPolicy,
    envs: list[PlacementEnv],
    seeds: list[int | None],
    *,
    rng: np.random.Generator,
    greedy: bool = False,
    teacher: Teacher | None = None,
    teacher_prob: float = 0.0,
    record_teacher: bool = False,
    graph_cache: dict[int, tuple[Any, GraphInputs]] | None = None,
) -> list[EpisodeRecord]:
    """One episode per env (``env.reset(seed=seeds[i])``); see the module docstring."""
    cache = {} if graph_cache is None else graph_cache
    live: list[_Live] = []
    encodings: dict[int, Encoding] = {}
    for env, seed in zip(envs, seeds, strict=True):
        obs, info = env.reset(seed=seed)
        g = env.graph
        hit = cache.get(id(g))
        if hit is None or hit[0] is not g:
            hit = (g, GraphInputs.from_obs(obs))
            cache[id(g)] = hit
        if id(g) not in encodings:
            encodings[id(g)] = policy.encode(hit[1])
        live.append(
            _Live(env, obs, info, hit[1], encodings[id(g)], g.num_nodes, env.cluster.num_devices)
        )
    done: dict[int, EpisodeRecord] = {}
    active = list(range(len(live)))
    while active:
        for i in active:
            _step(policy, live[i], rng, greedy, teacher, teacher_prob, record_teacher)
        for i in [i for i in active if live[i].env.state.done]:
            done[i] = _finish(live[i], record_teacher)
        active = [i for i in active if i not in done]
    return [done[i] for i in range(len(live))]


def _step(
    policy: DopplerPolicy,
    lv: _Live,
    rng: np.random.Generator,
    greedy: bool,
    teacher: Teacher | None,
    teacher_prob: float,
    record_teacher: bool,
) -> None:
    state, b = lv.env.state, lv.buf
    use_teacher = teacher is not None and teacher_prob > 0 and rng.random() < teacher_prob
    if state.phase == "select":
        mask = lv.info["action_mask"][: lv.n].copy()
        dyn = lv.obs["node_dynamic"][: lv.n]
        ties = teacher.select_actions(state) if (use_teacher or record_teacher) else None
        if use_teacher:
            action = int(ties[rng.integers(len(ties))])
        else:
            nodes = np.flatnonzero(mask)
            scores = policy.sel_scores(
                lv.enc, torch.from_numpy(nodes), torch.from_numpy(dyn[nodes])
            ).numpy()
            action = int(nodes[_choose(scores, greedy, rng)])
        b["sel_dyn"].append(dyn.copy())
        b["sel_mask"].append(mask)
        b["sel_action"].append(action)
        if record_teacher:
            b["sel_teacher"].append(_as_mask(ties, lv.n))
    else:
        mask = lv.info["action_mask"][: lv.d].copy()
        node, placed = state.selected, state.device.copy()
        dev = lv.obs["device"]
        ties = teacher.place_actions(state) if (use_teacher or record_teacher) else None
        if use_teacher:
            action = int(ties[rng.integers(len(ties))])
        else:
            logits = policy.plc_logits(
                lv.enc,
                torch.tensor([node]),
                torch.from_numpy(placed[None]),
                torch.from_numpy(dev[None]),
            )[0].numpy()
            legal = np.flatnonzero(mask)
            action = int(legal[_choose(logits[legal], greedy, rng)])
        b["plc_node"].append(node)
        b["plc_placed"].append(placed)
        b["plc_dev"].append(dev.copy())
        b["plc_mask"].append(mask)
        b["plc_action"].append(action)
        if record_teacher:
            b["plc_teacher"].append(_as_mask(ties, lv.d))
    b["from_teacher"].append(use_teacher)
    lv.obs, reward, _, _, lv.info = lv.env.step(action)
    b["rewards"].append(reward)


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
    interleaved SEL/PLC; ``teacher_logp`` is ``log π(teacher tie set)`` when recorded."""

    logp: Tensor
    entropy: Tensor
    teacher_logp: Tensor | None


def score(policy: DopplerPolicy, records: list[EpisodeRecord]) -> list[Scores]:
    """Recompute log-probs (with gradients) for ``records``; encoders run once per graph."""
    encodings: dict[int, Encoding] = {}
    out = []
    for r in records:
        key = id(r.graph)
        if key not in encodings:
            encodings[key] = policy.encode(r.graph)
        out.append(_score_one(policy, encodings[key], r))
    return out


def _score_one(policy: DopplerPolicy, enc: Encoding, r: EpisodeRecord) -> Scores:
    s = len(r.sel_action)
    step, node = (torch.from_numpy(x) for x in np.nonzero(r.sel_mask))
    dyn = torch.from_numpy(r.sel_dyn)[step, node]
    logp_all = segment_log_softmax(policy.sel_scores(enc, node, dyn), step, s)
    chosen = node == torch.from_numpy(r.sel_action)[step]
    sel_logp = torch.zeros(s, dtype=logp_all.dtype).index_add(0, step[chosen], logp_all[chosen])
    sel_ent = -torch.zeros(s, dtype=logp_all.dtype).index_add(0, step, logp_all.exp() * logp_all)
    plc = policy.plc_logits(
        enc,
        torch.from_numpy(r.plc_node),
        torch.from_numpy(r.plc_placed),
        torch.from_numpy(r.plc_dev),
    )
    plc = plc.masked_fill(~torch.from_numpy(r.plc_mask), -torch.inf)
    plc_logp_all = torch.log_softmax(plc, dim=-1)
    plc_logp = plc_logp_all.gather(1, torch.from_numpy(r.plc_action)[:, None]).squeeze(1)
    p = plc_logp_all.exp()
    plc_ent = -(p * plc_logp_all.nan_to_num(neginf=0.0)).sum(dim=1)
    logp = torch.stack([sel_logp, plc_logp], dim=1).reshape(-1)
    entropy = torch.stack([sel_ent, plc_ent], dim=1).reshape(-1)
    teacher_logp = None
    if r.sel_teacher is not None and r.plc_teacher is not None:
        in_ties = torch.from_numpy(r.sel_teacher)[step, node]
        t_sel = segment_logsumexp(logp_all.masked_fill(~in_ties, -torch.inf), step, s)
        t_plc = torch.logsumexp(
            plc_logp_all.masked_fill(~torch.from_numpy(r.plc_teacher), -torch.inf), dim=1
        )
        teacher_logp = torch.stack([t_sel, t_plc], dim=1).reshape(-1)
    return Scores(logp, entropy, teacher_logp)


def segment_logsumexp(x: Tensor, segment: Tensor, num_segments: int) -> Tensor:
    """``log Σ exp(x)`` within each segment (entries may be ``-inf``)."""
    top = torch.full((num_segments,), -torch.inf, dtype=x.dtype)
    top = top.scatter_reduce(0, segment, x.detach(), reduce="amax", include_self=True)
    safe_top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    total = torch.zeros(num_segments, dtype=x.dtype).index_add(
        0, segment, (x - safe_top[segment]).exp()
    )
    return total.log() + safe_top
