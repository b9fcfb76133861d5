"""Phase I: DAgger-style imitation of a teacher's tie sets.

Each update plays a batch of episodes in which every step follows the teacher with
probability ε (a uniform pick from its tie set) and the learner's own sampled action
otherwise; the teacher labels *every* visited state with its tie set of best actions
(:func:`placegym.agents.doppler.episodes.play_episodes` with ``record_teacher=True``).
ε decays linearly from ``eps_start`` (1: pure teacher roll-in, behaviour cloning) to
``eps_end`` (0: the learner's own state distribution, DAgger) over the first
``eps_decay`` of the updates.

The loss (:func:`placegym.train.losses.imitation_loss`) is the negative mean over steps
of ``log π(tie set)``, the log of the total probability the policy gives to the teacher's
equally good actions, so ties cost nothing and the policy may spread its mass over them
(DOPPLER imitates the critical-path teacher this way). With ``regret_coef`` > 0 and a
teacher that prices every device (``place_costs``: ``lookahead``), the loss adds
``regret_coef`` times :func:`~placegym.train.losses.regret_loss`, the policy's expected
relative regret per PLC step (AggreVaTe's cost-sensitive imitation): a label that the
tie-set loss counts as one miss whatever it loses is then weighed by what it loses. With
``price_coef`` > 0 the prices are dense targets as well
(:func:`~placegym.train.losses.price_loss`): the cross-entropy from ``softmax(-regret /
price_temperature)`` over the legal devices to the policy, so its PLC logits learn every
device's price, not only the argmax, and its greedy pick is the least predicted price.
Teachers come from
:func:`placegym.teachers.make_teacher` (plan teachers imitated up to device symmetries).
"""

from __future__ import annotations

import numpy as np
import torch

from placegym.agents.doppler.episodes import EpisodeRecord
from placegym.agents.doppler.policy import DopplerPolicy
from placegym.agents.doppler.scoring import Scores, backward_by_group
from placegym.train.losses import entropy_by_phase, imitation_loss, price_loss, regret_loss
from placegym.train.optim import clipped_step

__all__ = ["epsilon", "imitation_update", "teacher_agreement"]


def epsilon(update: int, total: int, start: float, end: float, decay: float) -> float:
    """Teacher roll-in probability at ``update`` (0-based) of ``total``: linear from
    ``start`` to ``end`` over the first ``decay * total`` updates, then ``end``."""
    span = decay * total
    if span <= 0:
        return end
    return start + (end - start) * min(update / span, 1.0)


def teacher_agreement(records: list[EpisodeRecord]) -> float:
    """Fraction of the learner's own actions (not the teacher's roll-in) that lie in the
    teacher's tie set; nan when every action came from the teacher."""
    hits = total = 0
    for r in records:
        own = ~r.from_teacher.reshape(-1, 2)  # (S, 2): SEL, PLC
        s = np.arange(len(r.sel_action))
        sel_ok = r.sel_teacher[s, r.sel_action]  # type: ignore[index]
        plc_ok = r.plc_teacher[s, r.plc_action]  # type: ignore[index]
        hits += int((sel_ok & own[:, 0]).sum() + (plc_ok & own[:, 1]).sum())
        total += int(own.sum())
    return hits / total if total else float("nan")


def imitation_update(
    policy: DopplerPolicy,
    optimizer: torch.optim.Optimizer,
    records: list[EpisodeRecord],
    max_grad_norm: float,
    regret_coef: float = 0.0,
    price_coef: float = 0.0,
    price_temperature: float = 0.05,
) -> dict[str, float]:
    """One gradient step on :func:`imitation_loss` of ``records`` (plus ``regret_coef``
    times :func:`regret_loss` and ``price_coef`` times :func:`price_loss` at
    ``price_temperature``); returns metrics.

    The loss is back-propagated one group at a time (records of one graph, at most
    :data:`~placegym.agents.doppler.scoring.BACKWARD_CELLS` of them scored at once:
    :func:`~placegym.agents.doppler.scoring.backward_by_group`), each group's losses
    weighted by its share of the steps: every loss is a mean over steps, so the gradients
    add up to those of the whole batch's loss (up to float rounding), while only one
    group's autograd tape is held at a time (a 4,500-node graph with a wide frontier
    needs 5 GB for its two episodes)."""
    total = sum(len(r.sel_action) for r in records)
    price_t = price_temperature if price_coef > 0 else None
    sums = {"nll": 0.0, "regret": 0.0, "prices": 0.0}
    # regret_loss raises on records without prices: asked for, it names the missing teacher
    with_regret = regret_coef > 0 or all(r.plc_regret is not None for r in records)

    def loss_of(members: list[int], scores: list[Scores]) -> torch.Tensor:
        weight = sum(len(records[i].sel_action) for i in members) / total
        nll = imitation_loss(scores)
        sums["nll"] += weight * nll.item()
        loss = nll
        if with_regret:
            regret = regret_loss(scores)
            sums["regret"] += weight * regret.item()
            if regret_coef > 0:
                loss = loss + regret_coef * regret
        if price_coef > 0:
            prices = price_loss(scores)
            sums["prices"] += weight * prices.item()
            loss = loss + price_coef * prices
        return weight * loss

    optimizer.zero_grad(set_to_none=True)
    kept = backward_by_group(policy, records, loss_of, price_temperature=price_t)
    grad_norm = clipped_step(optimizer, list(policy.parameters()), max_grad_norm)
    entropy = float(torch.cat([s.entropy for s in kept]).mean())
    in_ties = float(torch.cat([x for s in kept if (x := s.teacher_logp) is not None]).exp().mean())
    extra = {"losses/regret": sums["regret"]} if with_regret else {}
    if price_coef > 0:
        extra["losses/price"] = sums["prices"]
    return {
        "losses/imitation": sums["nll"],
        **extra,
        "losses/grad_norm": grad_norm,
        "charts/entropy": entropy,
        "charts/teacher_prob_mass": in_ties,
        "charts/teacher_agreement": teacher_agreement(records),
        **entropy_by_phase(kept),
    }
