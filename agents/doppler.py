"""The DOPPLER dual policy: separate SEL and PLC networks over a cached graph encoding.

- **SEL** scores every node from its SEL-encoder embedding ``h``, its critical-path
  embeddings (mean embedding along its longest path to a sink and from a source) and its
  dynamic features (assigned, device, in frontier, selected, rank, estimated finish); the
  environment's mask keeps the frontier.
- **PLC** scores every device from the selected node's PLC-encoder embedding, the mean
  PLC embedding of the nodes already placed on that device (and how many), and the
  device's dynamic features (estimated start of the node there and its lead over the best
  device, share of its inputs already there, load, free time, memory use, speed) plus
  their mean over devices as context.

Encoders run once per episode (their outputs are reused at every step), heads are small
MLPs applied per node / per device, so the policy works for any graph size and any
device count.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from placegym.agents.encoder import GraphEncoder, GraphInputs
from placegym.envs.observation import DEVICE_FEATURES, NODE_DYNAMIC

__all__ = ["DopplerPolicy", "Encoding", "PolicyConfig"]


@dataclass(frozen=True)
class PolicyConfig:
    """Sizes of the dual policy.

    Attributes:
        hidden: embedding width ``H`` of both encoders and heads.
        layers: message-passing rounds per encoder.
    """

    hidden: int = 64
    layers: int = 3


@dataclass
class Encoding:
    """Per-graph encoder outputs: SEL ``h (n, H)``, ``cp (n, 2H)`` and their projection
    into the SEL head ``sel_static (n, H)``; PLC ``h (n, H)``."""

    sel_h: Tensor
    sel_cp: Tensor
    sel_static: Tensor
    plc_h: Tensor


def _mlp_tail(hidden: int) -> nn.Sequential:
    return nn.Sequential(nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))


class DopplerPolicy(nn.Module):
    """Dual SEL/PLC policy (see the module docstring).

    Shapes (``K`` scored (node, state) pairs, ``S`` PLC states, ``n`` nodes, ``D`` devices):
        - :meth:`sel_scores`: ``nodes (K,)``, ``dyn (K, 6)`` -> ``(K,)``
        - :meth:`plc_logits`: ``node (S,)``, ``placed (S, n)`` (device of each node, -1
          if unplaced), ``dev (S, D, 7)`` -> ``(S, D)``
    """

    def __init__(self, config: PolicyConfig | None = None) -> None:
        super().__init__()
        self.config = config or PolicyConfig()
        h = self.config.hidden
        self.sel_encoder = GraphEncoder(h, self.config.layers)
        self.plc_encoder = GraphEncoder(h, self.config.layers)
        # SEL head: Linear([h, cp, dyn]) split into a per-graph static part and a per-step
        # dynamic part, so only (node, step) pairs in the frontier are ever scored.
        self.sel_static = nn.Linear(3 * h, h)
        self.sel_dynamic = nn.Linear(NODE_DYNAMIC, h, bias=False)
        self.sel_tail = _mlp_tail(h)
        self.plc_head = nn.Sequential(
            nn.Linear(2 * h + 1 + 2 * DEVICE_FEATURES + 1, h), _mlp_tail(h)
        )

    def encode(self, g: GraphInputs) -> Encoding:
        sel_h, sel_cp = self.sel_encoder(g)
        plc_h, _ = self.plc_encoder(g)
        return Encoding(sel_h, sel_cp, self.sel_static(torch.cat([sel_h, sel_cp], -1)), plc_h)

    def sel_scores(self, enc: Encoding, nodes: Tensor, dyn: Tensor) -> Tensor:
        return self.sel_tail(enc.sel_static[nodes] + self.sel_dynamic(dyn)).squeeze(-1)

    def plc_logits(self, enc: Encoding, node: Tensor, placed: Tensor, dev: Tensor) -> Tensor:
        s, d, _ = dev.shape
        onehot = torch.zeros(s, placed.shape[1], d + 1, dtype=enc.plc_h.dtype)
        onehot.scatter_(2, (placed + 1).unsqueeze(-1), 1.0)
        onehot = onehot[:, :, 1:]  # drop the "unplaced" bin
        count = onehot.sum(dim=1)  # (S, D)
        agg = torch.einsum("snd,nh->sdh", onehot, enc.plc_h) / count.clamp(min=1).unsqueeze(-1)
        lead = dev[..., :1] - dev[..., :1].min(dim=1, keepdim=True).values
        context = dev.mean(dim=1, keepdim=True).expand(-1, d, -1)
        x = torch.cat(
            [
                enc.plc_h[node].unsqueeze(1).expand(-1, d, -1),
                agg,
                torch.log1p(count).unsqueeze(-1),
                dev,
                context,
                lead,
            ],
            dim=-1,
        )
        return self.plc_head(x).squeeze(-1)
