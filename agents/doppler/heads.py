"""The heads as the one-pass decode runs them: their layers without the modules' call
overhead (:func:`head_layers`, :func:`forward`), and the PLC head on many devices with
its first layer evaluated by parts (:class:`PartedHead`).

The PLC head's input row for device ``k`` (:func:`~placegym.agents.doppler.inputs.
plc_columns`) is ``[h_v, m_k, log1p(c_k), r_k, mean(r), rest_k]``: the node's embedding
``h_v`` and the mean of the device rows ``mean(r)`` are the same on every device, and the
device's mean embedding ``m_k`` changes only when a node is placed there. The head's
first layer ``W x + b`` is a sum over these column blocks, so
:class:`PartedHead` evaluates it as

- ``W_h h_v + b``: once per node for the whole graph (``O(n · H²)`` per decode);
- ``W_r mean(r)``: once per step, ``O(F · H)``;
- ``W_m m_k``: kept per device and recomputed only for the device a step placed on,
  ``O(H²)`` a step;
- the per-device columns, ``O(D · (W - 2H - F) · H)`` a step,

instead of ``O(D · W · H)`` a step for the whole input; the layers after the first
run as they are. On 1,024 devices (``W`` = 168, ``H`` = 64) this halves the head's
cost per step.

The sums are float32 in another order than one matrix product over the whole row, so
the logits can differ from the head's own in the last bits; the one-pass decode uses
this form only from :data:`PARTED_MIN_DEVICES` devices, where the head dominates the
step, and keeps the whole-row product (bit for bit the step-by-step decode's) below.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

__all__ = ["PARTED_MIN_DEVICES", "Layer", "PartedHead", "forward", "head_layers"]

#: One layer of a head as :func:`forward` runs it: ``(weight, bias)`` of a linear
#: layer, or None for a ReLU.
Layer = tuple[Tensor, Tensor | None] | None


def head_layers(module: torch.nn.Module) -> list[Layer]:
    """The layers of a head (``Linear`` and ``ReLU`` modules, nested ``Sequential`` s
    flattened) in the order its forward applies them.

    Raises:
        ValueError: any other module.
    """
    if isinstance(module, torch.nn.Sequential):
        return [layer for child in module for layer in head_layers(child)]
    if isinstance(module, torch.nn.Linear):
        return [(module.weight, module.bias)]
    if isinstance(module, torch.nn.ReLU):
        return [None]
    raise ValueError(f"policy: a one-pass head runs Linear and ReLU layers, got {module!r}")


def forward(layers: list[Layer], x: Tensor) -> Tensor:
    """The head of ``layers`` on ``x``: the same kernels as the modules' forwards,
    without their call overhead."""
    for layer in layers:
        x = torch.relu(x) if layer is None else torch.nn.functional.linear(x, *layer)
    return x


#: Devices from which the one-pass decode evaluates the PLC head by parts.
PARTED_MIN_DEVICES = 256


class PartedHead:
    """The PLC head of ``layers`` on ``(D, W)`` input rows laid out as above.

    Args:
        layers: the head as the one-pass decode runs it (``(weight, bias)`` of a linear
            layer, or None for a ReLU); the first must be linear.
        node_h: ``(n, H)`` float32, every node's PLC embedding (the ``h_v`` block).
        h: the embedding width ``H`` (columns ``[0, H)`` and ``[H, 2H)``).
        col_mean: the first column of the ``mean(r)`` block.
        col_rest: the first column after it.
        d: the devices.

    Raises:
        ValueError: a head whose first layer is not linear.
    """

    def __init__(
        self,
        layers: list[Layer],
        node_h: np.ndarray,
        *,
        h: int,
        col_mean: int,
        col_rest: int,
        d: int,
    ) -> None:
        if not layers or layers[0] is None:
            raise ValueError("layers: the first layer of a parted head must be linear")
        weight, bias = layers[0]
        self.rest_layers = layers[1:]
        self.h, self.col_mean, self.col_rest = h, col_mean, col_rest
        self.node = torch.nn.functional.linear(torch.from_numpy(node_h), weight[:, :h], bias)
        self.w_mean = weight[:, col_mean:col_rest]
        self.w_emb_t = weight[:, h : 2 * h].t()
        self.w_dev_t = weight[:, 2 * h : col_mean].t()
        self.w_rest_t = weight[:, col_rest:].t()
        self.emb = torch.zeros((d, weight.shape[0]), dtype=weight.dtype)

    def __call__(self, x: Tensor, v: int, dirty: int) -> Tensor:
        """``(D,)`` logits of node ``v`` on input rows ``x (D, W)``; ``dirty``: the one
        device whose mean embedding changed since the last call (< 0: every device, as
        on the first call; ``D``: none)."""
        h = self.h
        if dirty < 0:
            torch.mm(x[:, h : 2 * h], self.w_emb_t, out=self.emb)
        elif dirty < len(self.emb):
            self.emb[dirty] = x[dirty, h : 2 * h] @ self.w_emb_t
        shared = self.node[v] + self.w_mean @ x[0, self.col_mean : self.col_rest]
        z = torch.addmm(self.emb + shared, x[:, 2 * h : self.col_mean], self.w_dev_t)
        if self.w_rest_t.shape[0]:
            z.addmm_(x[:, self.col_rest :], self.w_rest_t)
        return forward(self.rest_layers, z).squeeze(-1)
