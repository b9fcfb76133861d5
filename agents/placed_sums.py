"""Per-device sums of node embeddings over many placement states (compiled, exact).

PLC reads, for every scored state and device, the sum of the embeddings of the nodes
already placed there (:func:`placed_sums`). Scoring a PPO minibatch asks for it over
thousands of states at once; written with ``index_add`` it gathers one embedding row per
(state, placed node) pair (``S · n · H`` floats, 33 MB for 16 episodes of 128 nodes) and
its gradient scatters them back, which made it the largest single cost of an update.

The compiled kernels here add the same rows in the same order without that intermediate:
a state's sum on a device accumulates its nodes in ascending id, a node's gradient its
states in ascending index, each from zero. That is the order in which ``index_add`` and
the ``index_put`` of its gradient add them on one CPU thread (training's setting), so the
results are bit for bit those of :func:`placed_sums_reference`, the plain ``torch``
formulation (tested), and training with either gives the same weights. (On several
threads ``index_put`` accumulates with atomic adds in no fixed order; the kernels keep
theirs.) Tensors off the CPU use the reference formulation.
The kernels live in their own file because numba's disk cache is invalidated per file.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from numba import njit
from torch import Tensor

__all__ = ["placed_sums", "placed_sums_reference"]


@njit(cache=True)
def _sums_kernel(placed, values, d):  # pragma: no cover - compiled
    """``(S, D, H)`` sums of ``values[v]`` per state and device, in ascending ``v``, and
    ``(S, D)`` counts; ``placed (S, n)`` holds devices in ``[-1, d)``."""
    s, n = placed.shape
    h = values.shape[1]
    sums = np.zeros((s, d, h), dtype=values.dtype)
    count = np.zeros((s, d), dtype=np.int64)
    for st in range(s):
        for v in range(n):
            dev = placed[st, v]
            if dev >= 0:
                count[st, dev] += 1
                for k in range(h):
                    sums[st, dev, k] += values[v, k]
    return sums, count


@njit(cache=True)
def _grad_kernel(placed, grad):  # pragma: no cover - compiled
    """``(n, H)``: each node's sum of ``grad[s, placed[s, v]]`` over the states ``s``
    where it is placed, in ascending ``s`` (the gradient of :func:`_sums_kernel`)."""
    s, n = placed.shape
    h = grad.shape[2]
    out = np.zeros((n, h), dtype=grad.dtype)
    for st in range(s):
        for v in range(n):
            dev = placed[st, v]
            if dev >= 0:
                for k in range(h):
                    out[v, k] += grad[st, dev, k]
    return out


class _PlacedSums(torch.autograd.Function):
    """:func:`placed_sums` as one autograd node (gradient to ``values`` only)."""

    @staticmethod
    def forward(ctx: Any, placed: Tensor, values: Tensor, d: int) -> tuple[Tensor, Tensor]:
        p = np.ascontiguousarray(placed.numpy())
        sums, count = _sums_kernel(p, np.ascontiguousarray(values.detach().numpy()), d)
        ctx.placed = p
        counts = torch.from_numpy(count)
        ctx.mark_non_differentiable(counts)
        return torch.from_numpy(sums), counts

    @staticmethod
    def backward(ctx: Any, grad_sums: Tensor, _grad_count: Tensor) -> tuple[None, Tensor, None]:
        grad = np.ascontiguousarray(grad_sums.numpy())
        return None, torch.from_numpy(_grad_kernel(ctx.placed, grad)), None


def placed_sums(placed: Tensor, values: Tensor, d: int) -> tuple[Tensor, Tensor]:
    """``(S, D, H)`` sums of ``values[v]`` over the nodes ``v`` placed on each device in
    each state, and ``(S, D)`` their counts (as ``values.dtype``), from ``placed (S, n)``
    (device, -1 unplaced): ``O(S · n · H)``, never an ``(S, n, D)`` one-hot. Gradients
    flow to ``values``; results equal :func:`placed_sums_reference` bit for bit.

    Raises:
        ValueError: a device in ``placed`` outside ``[-1, d)``.
    """
    if placed.numel() and (int(placed.max()) >= d or int(placed.min()) < -1):
        raise ValueError(
            f"placed: devices must lie in [-1, {d}), got [{int(placed.min())}, "
            f"{int(placed.max())}]"
        )
    if placed.device.type != "cpu" or values.device.type != "cpu":
        return placed_sums_reference(placed, values, d)
    sums, count = _PlacedSums.apply(placed, values, d)
    return sums, count.to(values.dtype)


def placed_sums_reference(placed: Tensor, values: Tensor, d: int) -> tuple[Tensor, Tensor]:
    """:func:`placed_sums` in plain ``torch`` (``index_add`` over the placed pairs)."""
    s = placed.shape[0]
    st, v = torch.nonzero(placed >= 0, as_tuple=True)
    flat = st * d + placed[st, v]
    sums = torch.zeros(s * d, values.shape[-1], dtype=values.dtype, device=values.device)
    sums = sums.index_add(0, flat, values[v])
    count = torch.bincount(flat, minlength=s * d).to(values.dtype)
    return sums.view(s, d, -1), count.view(s, d)
