"""Phases II and III: policy-gradient RL on simulated (II) or measured (III) makespans.

DOPPLER's recipe: each update samples several episodes of each drawn graph with the
current policy; the **baseline** of an episode is the mean return of the episodes of the
same graph in the batch (a per-graph, per-update control variate that needs no value
network and is unbiased across graphs of very different difficulty). With
``baseline="greedy"`` it is instead the return of the policy's greedy episode of the
graph (the self-critical baseline: Rennie et al., 2017; Kool et al., 2019), given to
:func:`group_advantages` as ``baselines``: a sample is reinforced exactly when it beats
the greedy pass. Episodes sampled at a ``temperature`` are scored at that temperature
(:func:`~placegym.agents.doppler.scoring.score`), so the gradient is the tempered
policy's.

- Terminal rewards (``reward="relative"``): every step of an episode gets the advantage
  ``R - mean(R of its graph's episodes)``.
- Shaped rewards (``reward="nest"``): step t gets the reward-to-go ``G_t = Σ_{t'≥t} r_t'``
  minus the mean ``G_t`` of its graph's episodes at the same step (episodes of one graph
  have the same length 2n, so steps align).

Advantages are optionally divided by their standard deviation over the batch. Two
update rules share them:

- **REINFORCE**: one gradient step on ``-mean_steps(A_t log π(a_t|s_t)) - c_H H``.
- **PPO** (value-free): the same advantages, the clipped surrogate
  ``-mean min(ρ A, clip(ρ, 1±ε) A)`` with ``ρ = π/π_old``, several epochs over
  minibatches of whole episodes, optional early stop on the approximate KL. Without a
  critic it is REINFORCE with a trust region, which lets one batch of episodes be
  reused safely for several steps.

An extra imitation term (:class:`~placegym.train.losses.ImitationTerm`: self-imitation
of the best placements found, :mod:`placegym.train.self_imitation`) may be added to
either loss. Every mean is over steps (:func:`~placegym.train.losses.mean_steps`), so
the entropy bonus and the policy term have comparable scales on graphs of any size.

Both rules score and back-propagate their loss one group of episodes at a time
(episodes of one graph, at most :data:`~placegym.agents.doppler.scoring.BACKWARD_CELLS`
of them: :func:`~placegym.agents.doppler.scoring.backward_by_group`), each group's terms
weighted by its share of the means, as the imitation step does: the gradients add up to
the whole batch's (up to float rounding) while one group's autograd tape is held at a
time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from placegym.agents.doppler.episodes import EpisodeRecord
from placegym.agents.doppler.policy import DopplerPolicy
from placegym.agents.doppler.scoring import (
    Scores,
    backward_by_group,
    policy_device,
    score_by_group,
)
from placegym.train.config import RLConfig
from placegym.train.losses import ImitationTerm, entropy_by_phase, mean_steps
from placegym.train.optim import clipped_step

__all__ = ["baseline_metrics", "group_advantages", "ppo_update", "reinforce_update", "rl_update"]


def group_advantages(
    records: Sequence[EpisodeRecord],
    groups: Sequence[int],
    *,
    reward_to_go: bool,
    normalize: bool,
    baselines: Mapping[int, EpisodeRecord] | None = None,
    per_group: bool = False,
) -> list[Tensor]:
    """Per-step advantages ``(2S,)`` of each record against its group's mean, or against
    its group's baseline episode.

    Args:
        records: episodes; records of one group must have the same number of steps.
        groups: group id of each record (its graph).
        reward_to_go: use ``G_t`` (shaped rewards) instead of the whole return.
        normalize: divide by the standard deviation over all steps of the batch.
        per_group: with ``normalize``, by that over the steps of each group instead.
        baselines: per group id, the episode whose return (``G_t`` with
            ``reward_to_go``) is the baseline of the group's records (the greedy
            episode); None: the mean of the group's records.

    Raises:
        ValueError: a group of one episode (no baseline), a group with no baseline
            episode, or unequal lengths in a group (its baseline episode included).
    """
    if len(records) != len(groups):
        raise ValueError(f"groups: expected {len(records)} ids, got {len(groups)}")
    returns = [_returns(r, reward_to_go) for r in records]
    adv: list[np.ndarray] = [np.empty(0)] * len(records)
    by_group: dict[int, list[int]] = {}
    for i, g in enumerate(groups):
        by_group.setdefault(g, []).append(i)
    for gid, members in by_group.items():
        base = None
        if baselines is not None:
            if gid not in baselines:
                raise ValueError(f"baselines: group {gid!r} has no baseline episode")
            base = _returns(baselines[gid], reward_to_go)
        elif len(members) < 2:
            raise ValueError(f"groups: group {gid!r} has one episode; the baseline needs >= 2")
        lengths = {len(returns[i]) for i in members} | ({len(base)} if base is not None else set())
        if len(lengths) != 1:
            raise ValueError(f"groups: group {gid!r} mixes episode lengths {sorted(lengths)}")
        stacked = np.stack([returns[i] for i in members])
        centred = stacked - (stacked.mean(axis=0, keepdims=True) if base is None else base)
        for i, row in zip(members, centred):
            adv[i] = row
    if normalize and per_group:
        for members in by_group.values():
            std = float(np.concatenate([adv[i] for i in members]).std())
            for i in members:
                adv[i] = adv[i] / (std + 1e-8)
    elif normalize:
        std = float(np.concatenate(adv).std())
        adv = [a / (std + 1e-8) for a in adv]
    return [torch.from_numpy(a.astype(np.float32)) for a in adv]


def baseline_metrics(
    records: Sequence[EpisodeRecord], groups: Sequence[int], baselines: Mapping[int, EpisodeRecord]
) -> dict[str, float]:
    """``charts/greedy_return``: the mean return of the baseline (greedy) episodes;
    ``charts/beats_greedy``: the share of ``records`` whose return is above their
    group's baseline episode's."""
    beats = [r.ret > baselines[g].ret for r, g in zip(records, groups)]
    return {
        "charts/greedy_return": float(np.mean([b.ret for b in baselines.values()])),
        "charts/beats_greedy": float(np.mean(beats)),
    }


def _returns(record: EpisodeRecord, reward_to_go: bool) -> np.ndarray:
    """Per-step return of ``record``: ``G_t``, or its whole return at every step."""
    r = record.rewards
    return np.cumsum(r[::-1])[::-1] if reward_to_go else np.full_like(r, record.ret)


def _on_policy_device(policy: DopplerPolicy, advantages: Sequence[Tensor]) -> list[Tensor]:
    """``advantages`` (from :func:`group_advantages`, on the CPU) on the device of
    ``policy``, where :func:`~placegym.agents.doppler.scoring.score` puts the scores
    (the same tensors when that is the CPU)."""
    device = policy_device(policy)
    return [a.to(device) for a in advantages]


def _steps(records: Sequence[EpisodeRecord], members: Sequence[int]) -> int:
    return sum(len(records[i].sel_action) for i in members)


def _pg_step(
    policy: DopplerPolicy,
    optimizer: torch.optim.Optimizer,
    records: Sequence[EpisodeRecord],
    cfg: RLConfig,
    imitation: ImitationTerm | None,
    surrogate: Callable[[Scores, int], Tensor],
) -> tuple[list[Scores], dict[str, float], float]:
    """One gradient step on ``-mean_steps(surrogate) - c_H H`` (plus the imitation term)
    with gradient clipping, back-propagated one group at a time (module docstring):
    ``surrogate(scores, j)`` the per-step terms of ``records[j]``. Each group's terms are
    weighted by its share of the episodes (``mean_steps`` is a mean over episodes), the
    self-imitation term on the scored episodes by its share of their steps (a mean over
    steps); the term on ``plan_records`` is back-propagated on its own. Returns the
    detached scores, the loss terms (``policy``, ``entropy``, ``imitation``) and the
    gradient norm before clipping."""
    sums = {"policy": 0.0, "entropy": 0.0, "imitation": 0.0}
    own_imitation = imitation is not None and not imitation.plan_records
    total = _steps(records, range(len(records)))

    def loss_of(members: list[int], scores: list[Scores]) -> Tensor:
        share = len(members) / len(records)
        policy_loss = -mean_steps([surrogate(s, j) for s, j in zip(scores, members)])
        entropy = mean_steps([s.entropy for s in scores])
        sums["policy"] += share * policy_loss.item()
        sums["entropy"] += share * entropy.item()
        loss = share * (policy_loss - cfg.entropy_coef * entropy)
        if own_imitation:
            assert imitation is not None
            steps_share = _steps(records, members) / total
            term = imitation.loss(policy, scores)
            sums["imitation"] += steps_share * term.item()
            loss = loss + imitation.coef * steps_share * term
        return loss

    optimizer.zero_grad(set_to_none=True)
    kept = backward_by_group(policy, records, loss_of, temperature=cfg.temperature)
    if imitation is not None and imitation.plan_records:
        term = imitation.loss(policy, [])
        (imitation.coef * term).backward()
        sums["imitation"] = term.item()
    grad_norm = clipped_step(optimizer, list(policy.parameters()), cfg.max_grad_norm)
    return kept, sums, grad_norm


def reinforce_update(
    policy: DopplerPolicy,
    optimizer: torch.optim.Optimizer,
    records: list[EpisodeRecord],
    advantages: list[Tensor],
    cfg: RLConfig,
    imitation: ImitationTerm | None = None,
) -> dict[str, float]:
    """One REINFORCE step with entropy bonus and gradient clipping, back-propagated one
    graph at a time (module docstring); returns metrics (``advantages`` on any device:
    they are copied to the policy's)."""
    advantages = _on_policy_device(policy, advantages)
    kept, sums, grad_norm = _pg_step(
        policy, optimizer, records, cfg, imitation, lambda s, j: s.logp * advantages[j]
    )
    extra = {} if imitation is None else {"losses/self_imitation": sums["imitation"]}
    return {
        **extra,
        "losses/policy": sums["policy"],
        "losses/entropy": sums["entropy"],
        "losses/grad_norm": grad_norm,
        "charts/entropy": sums["entropy"],
        **entropy_by_phase(kept),
    }


def ppo_update(
    policy: DopplerPolicy,
    optimizer: torch.optim.Optimizer,
    records: list[EpisodeRecord],
    advantages: list[Tensor],
    cfg: RLConfig,
    rng: np.random.Generator,
    imitation: ImitationTerm | None = None,
) -> dict[str, float]:
    """PPO epochs over minibatches of whole episodes (order drawn from ``rng``;
    ``advantages`` on any device: they are copied to the policy's)."""
    advantages = _on_policy_device(policy, advantages)
    old = [s.logp for s in score_by_group(policy, records, cfg.temperature)]
    stats: list[dict[str, float]] = []
    n_mb = min(cfg.ppo_minibatches, len(records))
    for _ in range(cfg.ppo_epochs):
        for mb in np.array_split(rng.permutation(len(records)), n_mb):
            stats.append(
                _ppo_step(policy, optimizer, records, advantages, old, mb, cfg, imitation)
            )
            if cfg.target_kl is not None and stats[-1]["losses/approx_kl"] > cfg.target_kl:
                break
        else:
            continue
        break
    out = {k: float(np.mean([s[k] for s in stats])) for k in stats[0]}
    out["charts/entropy"] = out["losses/entropy"]
    out["charts/ppo_steps"] = float(len(stats))
    return out


def _ppo_step(
    policy: DopplerPolicy,
    optimizer: torch.optim.Optimizer,
    records: list[EpisodeRecord],
    advantages: list[Tensor],
    old: list[Tensor],
    mb: np.ndarray,
    cfg: RLConfig,
    imitation: ImitationTerm | None = None,
) -> dict[str, float]:
    """One clipped-surrogate gradient step on the episodes ``mb``, back-propagated one
    graph at a time (module docstring)."""
    lo, hi = 1 - cfg.ppo_clip, 1 + cfg.ppo_clip

    def surrogate(s: Scores, j: int) -> Tensor:
        ratio, adv = torch.exp(s.logp - old[mb[j]]), advantages[mb[j]]
        return torch.minimum(ratio * adv, ratio.clamp(lo, hi) * adv)

    batch = [records[i] for i in mb]
    kept, sums, grad_norm = _pg_step(policy, optimizer, batch, cfg, imitation, surrogate)
    with torch.no_grad():
        r = torch.cat([torch.exp(s.logp - old[i]) for s, i in zip(kept, mb)])
        kl = float(((r - 1) - torch.log(r)).mean())
        clipfrac = float(((r - 1).abs() > cfg.ppo_clip).float().mean())
    return {
        "losses/policy": sums["policy"],
        "losses/entropy": sums["entropy"],
        "losses/approx_kl": kl,
        "losses/clipfrac": clipfrac,
        "losses/grad_norm": grad_norm,
        **entropy_by_phase(kept),
    }


def rl_update(
    policy: DopplerPolicy,
    optimizer: torch.optim.Optimizer,
    records: list[EpisodeRecord],
    groups: Sequence[int],
    cfg: RLConfig,
    rng: np.random.Generator,
    *,
    reward_to_go: bool = False,
    imitation: ImitationTerm | None = None,
    baselines: Mapping[int, EpisodeRecord] | None = None,
) -> dict[str, float]:
    """Advantages against the per-graph mean (or ``baselines``), then one REINFORCE step
    or a PPO round.

    Args:
        policy: the policy to update.
        optimizer: its optimiser.
        records: the batch's episodes.
        groups: the graph index of each episode (the baseline groups).
        cfg: the algorithm (``algo``, PPO settings, entropy, clipping).
        rng: PPO's minibatch order.
        reward_to_go: per-step returns (shaped rewards, ``reward="nest"``) instead of the
            whole return at every step.
        imitation: an imitation term added to the loss (self-imitation), or None.
        baselines: per graph index, its baseline episode (``baseline: greedy``), or None.
    """
    adv = group_advantages(
        records,
        groups,
        reward_to_go=reward_to_go,
        normalize=cfg.normalize_advantages,
        baselines=baselines,
        per_group=cfg.normalize_per_graph,
    )
    if cfg.algo == "ppo":
        return ppo_update(policy, optimizer, records, adv, cfg, rng, imitation)
    return reinforce_update(policy, optimizer, records, adv, cfg, imitation)
