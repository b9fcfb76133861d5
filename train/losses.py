"""Losses shared by phase I (imitation) and phases II/III (policy-gradient RL).

- :func:`imitation_loss`: ``-mean log π(tie set)`` over every step of the episodes, the
  log of the total probability the policy gives to a teacher's equally good actions, so
  ties cost nothing (phase I's loss, and self-imitation's in phase II);
- :class:`ImitationTerm`: that loss, weighted, as an extra term of the RL loss (on the
  sampled episodes' own states or on episodes that followed the plans);
- :func:`regret_loss`: the mean over PLC steps of the policy's expected regret under a
  teacher that prices every device (the cost-sensitive imitation of AggreVaTe: a miss
  costs what it loses, so decisive states weigh more than near-ties);
- :func:`mean_steps`: the mean over episodes of the per-episode mean over steps, so the
  policy term and the entropy bonus have comparable scales on graphs of any size;
- :func:`entropy_by_phase`: the mean entropy of SEL steps and of PLC steps (metrics).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from placegym.agents.doppler.episodes import EpisodeRecord
from placegym.agents.doppler.policy import DopplerPolicy
from placegym.agents.doppler.scoring import Scores, score

__all__ = [
    "ImitationTerm",
    "entropy_by_phase",
    "imitation_loss",
    "mean_steps",
    "price_loss",
    "regret_loss",
]


def imitation_loss(scores: Sequence[Scores]) -> Tensor:
    """``-mean`` over all steps of all episodes of ``log π(teacher tie set)``.

    Raises:
        ValueError: an episode was recorded without the teacher's tie sets.
    """
    logps = [s.teacher_logp for s in scores]
    if not logps or any(x is None for x in logps):
        raise ValueError("imitation_loss: episodes must be recorded with record_teacher=True")
    return -torch.cat(logps).mean()  # type: ignore[arg-type]


def regret_loss(scores: Sequence[Scores]) -> Tensor:
    """Mean over all PLC steps of ``Σ_d π(d) regret(d)`` (:attr:`Scores.plc_regret`).

    Raises:
        ValueError: an episode was recorded without device costs (a teacher without
            ``place_costs``).
    """
    regrets = [s.plc_regret for s in scores]
    if not regrets or any(x is None for x in regrets):
        raise ValueError(
            "regret_loss: episodes must be recorded with a teacher that prices devices "
            "(place_costs, e.g. phase1.teacher: lookahead)"
        )
    return torch.cat(regrets).mean()  # type: ignore[arg-type]


def price_loss(scores: Sequence[Scores]) -> Tensor:
    """Mean over all PLC steps of the cross-entropy from the teacher's device prices to
    the policy (:attr:`Scores.plc_price_ce`: the prices as dense targets).

    Raises:
        ValueError: an episode was recorded without device costs, or scored without a
            price temperature.
    """
    ces = [s.plc_price_ce for s in scores]
    if not ces or any(x is None for x in ces):
        raise ValueError(
            "price_loss: episodes must be recorded with a teacher that prices devices "
            "(place_costs, e.g. phase1.teacher: lookahead) and scored with a price_temperature"
        )
    return torch.cat(ces).mean()  # type: ignore[arg-type]


def mean_steps(values: Sequence[Tensor]) -> Tensor:
    """Mean over episodes of the per-episode mean over steps."""
    return torch.stack([v.mean() for v in values]).mean()


def entropy_by_phase(scores: Sequence[Scores]) -> dict[str, float]:
    """Mean entropy of the SEL steps and of the PLC steps (steps alternate SEL, PLC)."""
    with torch.no_grad():
        ent = torch.cat([s.entropy.view(-1, 2) for s in scores])
    return {
        "charts/entropy_sel": float(ent[:, 0].mean()),
        "charts/entropy_plc": float(ent[:, 1].mean()),
    }


@dataclass(frozen=True)
class ImitationTerm:
    """``coef * imitation_loss`` added to an RL loss (self-imitation of the best plans).

    Attributes:
        coef: weight of the term.
        plan_records: episodes that followed the plans, recorded with their tie sets:
            the loss is taken on them; None takes it on the scored episodes themselves
            (recorded with the plans' tie sets).
    """

    coef: float
    plan_records: Sequence[EpisodeRecord] | None = None

    def loss(self, policy: DopplerPolicy, scores: Sequence[Scores]) -> Tensor:
        """The (unweighted) imitation loss, given the scored episodes' ``scores``."""
        if self.plan_records:
            return imitation_loss(score(policy, list(self.plan_records)))
        return imitation_loss(scores)
