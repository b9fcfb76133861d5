"""Optimiser, learning-rate schedules and the clipped gradient step shared by both phases."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

__all__ = ["clipped_step", "lr_factor", "make_optimizer"]


def lr_factor(schedule: str, total: int, end_factor: float) -> Callable[[int], float]:
    """The multiplier of the base rate after ``step`` scheduler steps out of ``total``.

    - ``constant``: 1;
    - ``linear``: from 1 down to ``end_factor`` at ``total``;
    - ``cosine``: ``end + (1 - end) * (1 + cos(pi * t)) / 2`` with ``t = step / total``.

    Steps beyond ``total`` keep the final factor.

    Raises:
        ValueError: unknown ``schedule``.
    """
    if schedule not in ("constant", "linear", "cosine"):
        raise ValueError(
            f"lr_schedule: expected one of constant, linear, cosine, got {schedule!r}"
        )
    span = max(int(total), 1)

    def factor(step: int) -> float:
        t = min(step / span, 1.0)
        if schedule == "linear":
            return 1.0 - (1.0 - end_factor) * t
        if schedule == "cosine":
            return end_factor + (1.0 - end_factor) * 0.5 * (1.0 + math.cos(math.pi * t))
        return 1.0

    return factor


def make_optimizer(
    params: Iterable[nn.Parameter], lr: float, schedule: str, total: int, end_factor: float
) -> tuple[torch.optim.Adam, LambdaLR]:
    """Adam at ``lr`` and a :class:`LambdaLR` that sets its rate to ``lr * factor(step)``
    (call ``scheduler.step()`` once per update). Both have ``state_dict`` s made of tensors
    and primitives only (the schedule function itself is rebuilt from the config)."""
    opt = torch.optim.Adam(params, lr=lr)
    return opt, LambdaLR(opt, lr_factor(schedule, total, end_factor))


def clipped_step(
    optimizer: torch.optim.Optimizer, params: list[nn.Parameter], max_grad_norm: float
) -> float:
    """Clip gradients to ``max_grad_norm`` (0: no clipping), step, and return the
    pre-clipping global gradient norm."""
    grads = [p for p in params if p.grad is not None]
    norm: torch.Tensor | float
    if max_grad_norm > 0:
        norm = torch.nn.utils.clip_grad_norm_(grads, max_grad_norm)
    else:
        norms = [g.norm() for p in grads if (g := p.grad) is not None]
        norm = torch.norm(torch.stack(norms)) if norms else 0.0
    optimizer.step()
    return float(norm)
