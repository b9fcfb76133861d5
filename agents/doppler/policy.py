"""The DOPPLER dual policy: separate SEL and PLC networks over a cached graph encoding.

- **SEL** scores every node from its SEL-encoder embedding ``h``, its critical-path
  embeddings (mean embedding along its longest path to a sink and from a source), its
  dynamic features (assigned, device, in frontier, selected, rank, estimated finish) and
  its *readiness* in the current state
  (:func:`~placegym.agents.doppler.features.sel_context`: when its inputs are estimated
  to be ready, locally and across the network, relative to the current estimated
  makespan and to the earliest-ready frontier node), so that structurally identical
  nodes are told apart by where and when their producers ran; the environment's mask
  keeps the frontier.
- **PLC** scores every device from the selected node's PLC-encoder embedding, the mean
  PLC embedding of the nodes already placed on that device (and how many), and the
  device's dynamic features (estimated start of the node there and its lead over the best
  device, share of its inputs already there, load, free time, memory use, speed) plus
  their mean over devices as context, and the share of the node's siblings' bytes (the
  other producers of its consumers) already there
  (:func:`~placegym.agents.doppler.features.sibling_share`): where its consumers will
  find their other inputs; with :attr:`~placegym.agents.doppler.config.PolicyConfig.hints`,
  also how the node's hint mates (nodes a heuristic puts with it) are spread over the
  devices (:func:`~placegym.agents.doppler.hints.hint_share`); with
  :attr:`~placegym.agents.doppler.config.PolicyConfig.topology`, also a per-device
  embedding from message passing over the cluster's links
  (:meth:`DopplerPolicy.device_topology`): where a device sits in the network relative to
  the devices in use.

Both heads' optional inputs are declared in :mod:`placegym.agents.doppler.inputs`, which
also sizes their first layers and assembles their columns. Encoders run once per episode
(their outputs are reused at every step), heads are small MLPs applied per node / per
device, so the policy works for any graph size and any device count.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor, nn

from placegym.agents.doppler.config import PolicyConfig
from placegym.agents.doppler.encoding import Encoding
from placegym.agents.doppler.features import SelPairs
from placegym.agents.doppler.inputs import (
    plc_columns,
    plc_encode,
    plc_modules,
    plc_width,
    sel_columns,
    sel_width,
)
from placegym.agents.nn.encoder import POSITION_FEATURES, GraphEncoder, GraphInputs
from placegym.envs.mdp.observation import NODE_STATIC

__all__ = ["DopplerPolicy", "Encoding"]


def _mlp_tail(hidden: int) -> nn.Sequential:
    return nn.Sequential(nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))


class DopplerPolicy(nn.Module):
    """Dual SEL/PLC policy (see the module docstring).

    Shapes (``K`` scored (node, state) pairs, ``S`` PLC states, ``n`` nodes, ``D`` devices):
        - :meth:`sel_inputs`: ``pairs`` (:class:`~placegym.agents.doppler.features.
          SelPairs`: ``(K, 6)`` and ``(K, 3)``), ``step (K,)``, ``node (K,)`` -> ``(K, F)``,
          ``F`` = :func:`~placegym.agents.doppler.inputs.sel_width` (9 without optional
          inputs)
        - :meth:`sel_scores`: ``nodes (K,)``, ``x (K, F)`` (from :meth:`sel_inputs`) -> ``(K,)``
        - :meth:`plc_logits`: ``node (S,)``, ``placed (S, n)`` (device of each node, -1
          if unplaced), ``dev (S, D, F)`` (the device rows of
          :func:`~placegym.agents.doppler.inputs.plc_devices`, ``F`` =
          :func:`~placegym.agents.doppler.inputs.device_width`: 7, +3 with ``insertion``,
          +2 with ``prices``) -> ``(S, D)``

    The learned layers of the optional PLC inputs (``plc_query`` and ``plc_key`` with
    ``affinity``; ``topo_in``, ``topo_gate`` and ``topo_rounds`` with ``topology``) are
    created by :func:`~placegym.agents.doppler.inputs.plc_modules`.
    """

    plc_query: nn.Linear
    plc_key: nn.Linear
    topo_in: nn.Linear
    topo_gate: nn.Sequential
    topo_rounds: nn.ModuleList

    def __init__(self, config: PolicyConfig | None = None) -> None:
        super().__init__()
        self.config = config or PolicyConfig()
        h = self.config.hidden
        node_dim = NODE_STATIC + (POSITION_FEATURES if self.config.positions else 0)
        self.sel_encoder = GraphEncoder(h, self.config.layers, node_dim=node_dim)
        self.plc_encoder = GraphEncoder(h, self.config.layers, node_dim=node_dim)
        # SEL head: Linear([h, cp, dyn]) split into a per-graph static part and a per-step
        # dynamic part, so only (node, step) pairs in the frontier are ever scored.
        self.sel_static = nn.Linear(3 * h, h)
        self.sel_dynamic = nn.Linear(sel_width(self.config), h, bias=False)
        self.sel_tail = _mlp_tail(h)
        for name, module in plc_modules(self.config):
            self.add_module(name, module)
        self.plc_head = nn.Sequential(nn.Linear(plc_width(self.config), h), _mlp_tail(h))

    @property
    def learns_selection(self) -> bool:
        """Whether SEL actions are the policy's (else :attr:`fixed_teacher`'s)."""
        return self.config.learn in ("both", "select")

    @property
    def learns_placement(self) -> bool:
        """Whether PLC actions are the policy's (else :attr:`fixed_teacher`'s)."""
        return self.config.learn in ("both", "place")

    @property
    def fixed_teacher(self):  # -> Teacher | None
        """The critical-path teacher answering the phase the policy does not learn (the
        first action of its tie set), or None for the dual policy."""
        if self.config.learn == "both":
            return None
        if getattr(self, "_fixed", None) is None:
            from placegym.teachers import get_teacher

            self._fixed = get_teacher("critical_path")
        return self._fixed

    def encode(self, g: GraphInputs) -> Encoding:
        """Both encoders' outputs and the static part of the SEL head (once per graph),
        with what the enabled PLC inputs add (their ``encode``)."""
        if self.config.positions:
            if g.pos is None:
                raise ValueError("graph inputs: the policy reads node positions, got none")
            g = dataclasses.replace(g, x=torch.cat([g.x, g.pos], dim=-1))
        sel_h, sel_cp = self.sel_encoder(g)
        plc_h, _ = self.plc_encoder(g)
        static = self.sel_static(torch.cat([sel_h, sel_cp], -1))
        enc = Encoding(sel_h, sel_cp, static, plc_h, graph=g)
        plc_encode(self, enc)
        return enc

    def sel_inputs(
        self,
        g: GraphInputs,
        pairs: SelPairs,
        step: Tensor,
        node: Tensor,
        picks: Tensor | None = None,
    ) -> Tensor:
        """Per-pair SEL inputs (:func:`~placegym.agents.doppler.inputs.sel_columns`: the
        pairs' node_dynamic rows and readiness, ``pairs`` from
        :func:`~placegym.agents.doppler.features.sel_pairs`, and the enabled SEL inputs;
        ``step`` groups the pairs by state, so each state's pairs must be its whole
        frontier; ``picks`` per state the pricer's next node, with ``price_follow``)."""
        return sel_columns(self.config, g, pairs, step, node, picks)

    def sel_scores(self, enc: Encoding, nodes: Tensor, x: Tensor) -> Tensor:
        """SEL scores ``(K,)`` of the (state, node) pairs ``x`` (from :meth:`sel_inputs`)."""
        return self.sel_tail(enc.sel_static[nodes] + self.sel_dynamic(x)).squeeze(-1)

    def plc_logits(self, enc: Encoding, node: Tensor, placed: Tensor, dev: Tensor) -> Tensor:
        """PLC logits ``(S, D)`` of the selected nodes on every device (see the class;
        the columns of :func:`~placegym.agents.doppler.inputs.plc_columns`)."""
        return self.plc_head(plc_columns(self, enc, node, placed, dev)).squeeze(-1)

    def device_topology(
        self, links: Tensor | None, dev: Tensor, count: Tensor, agg: Tensor
    ) -> Tensor:
        """``(S, D, T)`` per-device embeddings from message passing over the cluster's
        links (``PolicyConfig.topology``).

        Each device starts from its features ``dev (S, D, F)``, ``log1p`` of its node
        count ``(S, D)`` and the mean embedding of its nodes ``agg (S, D, H)``; each of
        :data:`~placegym.agents.doppler.config.TOPOLOGY_ROUNDS` rounds updates it from its
        own state and, per channel, the gated mean of the other devices' states, the
        gates a learned function of each pair's
        :func:`~placegym.agents.doppler.features.cluster_links` row (``links (D, D, 2)``).

        Raises:
            ValueError: no links in the graph inputs (built without the cluster).
        """
        if links is None:
            raise ValueError(
                "graph inputs: the policy reads the cluster's links (policy.topology), got "
                "none; build the inputs with placegym.agents.doppler.inputs.graph_inputs"
            )
        s, d, _ = dev.shape
        x = torch.relu(self.topo_in(torch.cat([dev, torch.log1p(count).unsqueeze(-1), agg], -1)))
        off = 1.0 - torch.eye(d, dtype=x.dtype, device=x.device)
        gate = self.topo_gate(links.to(x.dtype)) * off.unsqueeze(-1) / max(d - 1, 1)
        for layer in self.topo_rounds:
            msg = torch.einsum("dec,set->sdct", gate, x).reshape(s, d, -1)
            x = torch.relu(layer(torch.cat([x, msg], dim=-1)))
        return x
