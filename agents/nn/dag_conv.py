"""``DAGConv``: bidirectional message passing on a DAG with edge features."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch_geometric.nn import MessagePassing


class DAGConv(nn.Module):
    r"""One round of message passing along and against the edges of a DAG.

    .. math::
        m^{\rightarrow}_v = \operatorname{mean}_{u \to v} \phi_f([h_u \,\|\, e_{uv}]), \quad
        m^{\leftarrow}_v = \operatorname{mean}_{v \to w} \phi_b([h_w \,\|\, e_{vw}]),

        h'_v = \operatorname{LayerNorm}\bigl(h_v + \psi([h_v \,\|\, m^{\rightarrow}_v
               \,\|\, m^{\leftarrow}_v])\bigr)

    with two-layer MLPs :math:`\phi_f, \phi_b, \psi`. Separate forward and backward
    messages let a node see both its producers (when its inputs come) and its consumers
    (how much work waits on it). Mean aggregation keeps scales independent of degree, so
    the layer transfers across graph sizes.

    Args:
        channels: node embedding size ``H`` (input and output).
        edge_dim: edge feature size ``F_e``.

    Shapes:
        - input: ``x (n, H)``, ``edge_index (2, E)`` long, ``edge_attr (E, F_e)``
        - output: ``(n, H)``
    """

    def __init__(self, channels: int, edge_dim: int) -> None:
        super().__init__()
        self.channels, self.edge_dim = channels, edge_dim
        self.forward_msg = _mlp(channels + edge_dim, channels)
        self.backward_msg = _mlp(channels + edge_dim, channels)
        self.update = _mlp(3 * channels, channels)
        self.norm = nn.LayerNorm(channels)
        self._mean = _MeanAggregate()
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-initialise the layer's weights."""
        for m in (self.forward_msg, self.backward_msg, self.update):
            for layer in m:
                if isinstance(layer, nn.Linear):
                    layer.reset_parameters()
        self.norm.reset_parameters()

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor) -> Tensor:
        """One round of messages along the edges (see the class docstring)."""
        src, dst = edge_index
        n = x.shape[0]
        fwd = self.forward_msg(torch.cat([x[src], edge_attr], dim=-1))
        bwd = self.backward_msg(torch.cat([x[dst], edge_attr], dim=-1))
        m_in = self._mean(fwd, dst, n)
        m_out = self._mean(bwd, src, n)
        return self.norm(x + self.update(torch.cat([x, m_in, m_out], dim=-1)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.channels}, edge_dim={self.edge_dim})"


class _MeanAggregate(MessagePassing):
    """Mean of per-edge messages per target node (zeros where there are none)."""

    def __init__(self) -> None:
        super().__init__(aggr="mean")

    def forward(self, messages: Tensor, index: Tensor, n: int) -> Tensor:
        return self.aggr_module(messages, index, dim_size=n)


def _mlp(inp: int, out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inp, out), nn.ReLU(), nn.Linear(out, out))
