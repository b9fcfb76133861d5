"""Phase II: policy-gradient RL against the simulator environment.

DOPPLER's recipe: each update samples several episodes of each drawn graph with the
current policy; the **baseline** of an episode is the mean return of the episodes of the
same graph in the batch (a per-graph, per-update control variate that needs no value
network and is unbiased across graphs of very different difficulty).

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

**Self-imitation** (``imitation_coef`` > 0; expert iteration): ``imitation_coef *
(-mean log π(tie set))`` toward the best placement known for each graph (label-invariant,
see :mod:`placegym.teachers.canonical_plan`) is added to the loss, taken either on the sampled
episodes' own states (``imitation_states="sampled"``, DAgger-style: the episodes carry the
plan's tie sets) or on one extra episode per graph that follows the plan itself
(``"plan"``, behaviour cloning along the plan's trajectory, whose labels are always
consistent with the states they are asked in).

Every mean is over steps, so the entropy bonus and the policy term have comparable
scales on graphs of any size.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from placegym.agents.doppler import DopplerPolicy
from placegym.agents.rollout import EpisodeRecord, Scores, score
from placegym.train.config import RLConfig
from placegym.train.optim import clipped_step

__all__ = [
    "entropy_by_phase",
    "group_advantages",
    "ppo_update",
    "reinforce_update",
    "rl_update",
    "self_imitation_loss",
]


def group_advantages(
    records: Sequence[EpisodeRecord],
    groups: Sequence[int],
    *,
    reward_to_go: bool,
    normalize: bool,
) -> list[Tensor]:
    """Per-step advantages ``(2S,)`` of each record against its group's mean.

    Args:
        records: episodes; records of one group must have the same number of steps.
        groups: group id of each record (its graph).
        reward_to_go: use ``G_t`` (shaped rewards) instead of the whole return.
        normalize: divide by the standard deviation over all steps of the batch.

    Raises:
        ValueError: a group of one episode (no baseline), or unequal lengths in a group.
    """
    if len(records) != len(groups):
        raise ValueError(f"groups: expected {len(records)} ids, got {len(groups)}")
    returns = []
    for r in records:
        g = np.cumsum(r.rewards[::-1])[::-1] if reward_to_go else np.full_like(r.rewards, r.ret)
        returns.append(g)
    adv: list[np.ndarray] = [np.empty(0)] * len(records)
    for gid in dict.fromkeys(groups):
        members = [i for i, g in enumerate(groups) if g == gid]
        if len(members) < 2:
            raise ValueError(f"groups: group {gid!r} has one episode; the baseline needs >= 2")
        lengths = {len(returns[i]) for i in members}
        if len(lengths) != 1:
            raise ValueError(f"groups: group {gid!r} mixes episode lengths {sorted(lengths)}")
        stacked = np.stack([returns[i] for i in members])
        centred = stacked - stacked.mean(axis=0, keepdims=True)
        for i, row in zip(members, centred):
            adv[i] = row
    if normalize:
        std = float(np.concatenate(adv).std())
        adv = [a / (std + 1e-8) for a in adv]
    return [torch.from_numpy(a.astype(np.float32)) for a in adv]


def entropy_by_phase(scores: Sequence[Scores]) -> dict[str, float]:
    """Mean entropy of the SEL steps and of the PLC steps (steps alternate SEL, PLC)."""
    with torch.no_grad():
        ent = torch.cat([s.entropy.view(-1, 2) for s in scores])
    return {
        "charts/entropy_sel": float(ent[:, 0].mean()),
        "charts/entropy_plc": float(ent[:, 1].mean()),
    }


def _mean_steps(values: Sequence[Tensor]) -> Tensor:
    """Mean over episodes of the per-episode mean over steps."""
    return torch.stack([v.mean() for v in values]).mean()


def _pg_terms(scores: list[Scores], adv: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
    policy_loss = -_mean_steps([s.logp * a for s, a in zip(scores, adv)])
    return policy_loss, _mean_steps([s.entropy for s in scores])


def self_imitation_loss(scores: Sequence[Scores]) -> Tensor | None:
    """``-mean log π(plan tie set)`` over the steps of episodes recorded with the
    best-known plans' tie sets (self-imitation), or None when none were recorded."""
    if not scores or any(s.teacher_logp is None for s in scores):
        return None
    return -torch.cat([s.teacher_logp for s in scores]).mean()  # type: ignore[misc]


def _imitation_term(
    policy: DopplerPolicy,
    scores: Sequence[Scores],
    plan_records: Sequence[EpisodeRecord] | None,
    cfg: RLConfig,
) -> Tensor | None:
    """The self-imitation loss: on ``plan_records`` (episodes that followed the plans)
    when given, else on the sampled episodes' ``scores``; None when it is off."""
    if cfg.imitation_coef <= 0:
        return None
    if plan_records:
        return self_imitation_loss(score(policy, list(plan_records)))
    return self_imitation_loss(scores)


def reinforce_update(
    policy: DopplerPolicy,
    optimizer: torch.optim.Optimizer,
    records: list[EpisodeRecord],
    advantages: list[Tensor],
    cfg: RLConfig,
    plan_records: Sequence[EpisodeRecord] | None = None,
) -> dict[str, float]:
    """One REINFORCE step with entropy bonus and gradient clipping; returns metrics."""
    scores = score(policy, records)
    policy_loss, entropy = _pg_terms(scores, advantages)
    loss = policy_loss - cfg.entropy_coef * entropy
    extra = {}
    imitation = _imitation_term(policy, scores, plan_records, cfg)
    if imitation is not None:
        loss = loss + cfg.imitation_coef * imitation
        extra["losses/self_imitation"] = imitation.item()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = clipped_step(optimizer, list(policy.parameters()), cfg.max_grad_norm)
    return {
        **extra,
        "losses/policy": policy_loss.item(),
        "losses/entropy": entropy.item(),
        "losses/grad_norm": grad_norm,
        "charts/entropy": entropy.item(),
        **entropy_by_phase(scores),
    }


def ppo_update(
    policy: DopplerPolicy,
    optimizer: torch.optim.Optimizer,
    records: list[EpisodeRecord],
    advantages: list[Tensor],
    cfg: RLConfig,
    rng: np.random.Generator,
    plan_records: Sequence[EpisodeRecord] | None = None,
) -> dict[str, float]:
    """PPO epochs over minibatches of whole episodes (order drawn from ``rng``)."""
    with torch.no_grad():
        old = [s.logp for s in score(policy, records)]
    stats: list[dict[str, float]] = []
    n_mb = min(cfg.ppo_minibatches, len(records))
    for _ in range(cfg.ppo_epochs):
        for mb in np.array_split(rng.permutation(len(records)), n_mb):
            stats.append(
                _ppo_step(policy, optimizer, records, advantages, old, mb, cfg, plan_records)
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
    plan_records: Sequence[EpisodeRecord] | None = None,
) -> dict[str, float]:
    """One clipped-surrogate gradient step on the episodes ``mb``."""
    scores = score(policy, [records[i] for i in mb])
    ratio = [torch.exp(s.logp - old[i]) for s, i in zip(scores, mb)]
    lo, hi = 1 - cfg.ppo_clip, 1 + cfg.ppo_clip
    surr = [
        torch.minimum(r * advantages[i], r.clamp(lo, hi) * advantages[i])
        for r, i in zip(ratio, mb)
    ]
    policy_loss = -_mean_steps(surr)
    entropy = _mean_steps([s.entropy for s in scores])
    loss = policy_loss - cfg.entropy_coef * entropy
    imitation = _imitation_term(policy, scores, plan_records, cfg)
    if imitation is not None:
        loss = loss + cfg.imitation_coef * imitation
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = clipped_step(optimizer, list(policy.parameters()), cfg.max_grad_norm)
    with torch.no_grad():
        r = torch.cat(ratio).detach()
        kl = float(((r - 1) - torch.log(r)).mean())
        clipfrac = float(((r - 1).abs() > cfg.ppo_clip).float().mean())
    return {
        "losses/policy": policy_loss.item(),
        "losses/entropy": entropy.item(),
        "losses/approx_kl": kl,
        "losses/clipfrac": clipfrac,
        "losses/grad_norm": grad_norm,
        **entropy_by_phase(scores),
    }


def rl_update(
    policy: DopplerPolicy,
    optimizer: torch.optim.Optimizer,
    records: list[EpisodeRecord],
    groups: Sequence[int],
    cfg: RLConfig,
    rng: np.random.Generator,
    plan_records: Sequence[EpisodeRecord] | None = None,
) -> dict[str, float]:
    """Advantages against the per-graph mean, then one REINFORCE step or a PPO round;
    ``plan_records`` (episodes that followed the best-known plans, with their tie sets)
    carry the self-imitation loss when given."""
    adv = group_advantages(
        records,
        groups,
        reward_to_go=cfg.reward == "nest",
        normalize=cfg.normalize_advantages,
    )
    if cfg.algo == "ppo":
        return ppo_update(policy, optimizer, records, adv, cfg, rng, plan_records)
    return reinforce_update(policy, optimizer, records, adv, cfg, plan_records)
