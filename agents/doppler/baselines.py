"""Learned baselines from DOPPLER's comparison, behind :class:`DopplerPolicy`'s interface.

Both place nodes in a fixed order and learn only the device choice: they set
``learns_selection = False``, so :func:`~placegym.agents.doppler.episodes.play_episodes`
selects the frontier node earliest in the graph's topological order and
:func:`~placegym.agents.doppler.scoring.score` gives SEL steps log-probability 0 and entropy
0. Everything else (``encode``, ``plc_logits``, episodes, score, REINFORCE / PPO /
imitation) is shared with the DOPPLER policy.

- :class:`PlacetoPolicy` (Addanki et al., 2019): the node embeddings are *recomputed at
  every step* from the current partial placement: node features are the static ones
  plus the one-hot device of every placed node and flags "placed" and "current"; a
  GNN (:class:`~placegym.agents.nn.encoder.GraphEncoder`) runs on that graph and the current
  node's embedding, its critical-path embeddings and the graph mean give the device
  logits. Scoring S steps runs the GNN on S copies of the graph, as expensive as in the
  paper.
- :class:`GdpPolicy` (Zhou et al., 2019): a GNN plus one transformer layer over all node
  embeddings (full attention, ``O(n^2)`` memory) give per-node device logits *once per
  episode*, from the static graph alone; the PLC step reads the node's row.

Both output a fixed number of device logits (``max_devices``, cut to the cluster's D),
as the originals do, so a cluster with more devices raises ``ValueError``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from placegym.agents.nn.encoder import GraphEncoder, GraphInputs
from placegym.envs.mdp.observation import NODE_STATIC

__all__ = [
    "BASELINES",
    "BaselineConfig",
    "GdpEncoding",
    "GdpPolicy",
    "PlacetoEncoding",
    "PlacetoPolicy",
    "make_baseline",
]


@dataclass(frozen=True)
class BaselineConfig:
    """Sizes of a baseline policy.

    Attributes:
        hidden: embedding width ``H``.
        layers: message-passing rounds of the GNN.
        max_devices: number of device logits ``M`` (clusters need ``D <= M``).
        heads: attention heads of GDP's transformer layer (must divide ``hidden``).
        chunk_nodes: Placeto scores states in chunks of about this many graph nodes.
    """

    hidden: int = 64
    layers: int = 3
    max_devices: int = 16
    heads: int = 4
    chunk_nodes: int = 32768


def _readout(inp: int, hidden: int, out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(inp, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, out),
    )


class _FixedOrder(nn.Module):
    """Shared part: SEL is not learned (the episode player picks the frontier node
    earliest in topological order); device logits are cut to the cluster's device count."""

    learns_selection = False

    def __init__(self, config: BaselineConfig | None) -> None:
        super().__init__()
        self.config = config or BaselineConfig()

    def sel_scores(self, enc: object, nodes: Tensor, dyn: Tensor) -> Tensor:
        raise NotImplementedError(
            f"{type(self).__name__}: selection is a fixed rule (learns_selection = False); "
            "use placegym.agents.doppler.episodes.play_episodes, which honours it"
        )

    def _check_devices(self, num_devices: int) -> None:
        m = self.config.max_devices
        if num_devices > m:
            raise ValueError(
                f"{type(self).__name__}: the cluster has {num_devices} devices, more than "
                f"max_devices={m}"
            )

    def _cut(self, logits: Tensor, num_devices: int) -> Tensor:
        self._check_devices(num_devices)
        return logits[..., :num_devices]


# ---------------------------------------------------------------------- Placeto
@dataclass
class PlacetoEncoding:
    """Placeto keeps only the static graph: embeddings depend on the placement."""

    graph: GraphInputs


def state_graphs(g: GraphInputs, node: Tensor, placed: Tensor, max_devices: int) -> GraphInputs:
    """``S`` copies of ``g`` as one disjoint graph whose node features describe each
    state: static features, one-hot device (``max_devices`` columns, 0 if unplaced),
    placed flag, current-node flag.

    Shapes:
        - input: ``node (S,)`` long, ``placed (S, n)`` long (-1 unplaced)
        - output: ``x (S * n, 7 + M + 2)``; copy ``s`` holds nodes ``s * n ... s * n + n - 1``
    """
    s, n = placed.shape
    dtype = g.x.dtype
    onehot = torch.zeros(s, n, max_devices + 1, dtype=dtype)
    onehot.scatter_(2, (placed.long() + 1).unsqueeze(-1), 1.0)
    current = (torch.arange(n).unsqueeze(0) == node.unsqueeze(1)).to(dtype)
    x = torch.cat(
        [
            g.x.unsqueeze(0).expand(s, n, -1),
            onehot[..., 1:],
            (placed >= 0).to(dtype).unsqueeze(-1),
            current.unsqueeze(-1),
        ],
        dim=-1,
    ).reshape(s * n, -1)
    offset = torch.arange(s) * n
    edge_index = (g.edge_index.unsqueeze(1) + offset.view(1, s, 1)).reshape(2, -1)

    def shift(ptr: Tensor) -> Tensor:
        return torch.where(ptr >= 0, ptr + offset.view(s, 1), ptr).reshape(-1)

    return GraphInputs(x, edge_index, g.edge_attr.repeat(s, 1), shift(g.down), shift(g.up))


class PlacetoPolicy(_FixedOrder):
    """Placeto-style baseline (see the module docstring).

    Shapes (``S`` PLC states, ``n`` nodes, ``D`` devices):
        - :meth:`plc_logits`: ``node (S,)``, ``placed (S, n)``, ``dev (S, D, 7)`` ->
          ``(S, D)`` (``dev`` only gives D: Placeto's state is the placement itself)
    """

    def __init__(self, config: BaselineConfig | None = None) -> None:
        super().__init__(config)
        c = self.config
        self.encoder = GraphEncoder(c.hidden, c.layers, node_dim=NODE_STATIC + c.max_devices + 2)
        self.head = _readout(4 * c.hidden, c.hidden, c.max_devices)

    def encode(self, g: GraphInputs) -> PlacetoEncoding:
        """The graph's inputs as they are: Placeto re-encodes the graph at every step."""
        return PlacetoEncoding(g)

    def plc_logits(
        self, enc: PlacetoEncoding, node: Tensor, placed: Tensor, dev: Tensor
    ) -> Tensor:
        """Device logits ``(S, D)``: the GNN on each state's graph (placements as features)."""
        self._check_devices(dev.shape[1])
        s, n = placed.shape
        step = max(1, self.config.chunk_nodes // max(n, 1))
        out = [
            self._chunk(enc.graph, node[i : i + step], placed[i : i + step])
            for i in range(0, s, step)
        ]
        return self._cut(torch.cat(out), dev.shape[1])

    def _chunk(self, g: GraphInputs, node: Tensor, placed: Tensor) -> Tensor:
        s, n = placed.shape
        h, cp = self.encoder(state_graphs(g, node, placed, self.config.max_devices))
        h, cp = h.view(s, n, -1), cp.view(s, n, -1)
        rows = torch.arange(s)
        x = torch.cat([h[rows, node], cp[rows, node], h.mean(dim=1)], dim=-1)
        return self.head(x)


# ---------------------------------------------------------------------- GDP
@dataclass
class GdpEncoding:
    """GDP's per-node device logits ``(n, M)``, computed once per episode."""

    logits: Tensor


class GdpPolicy(_FixedOrder):
    """GDP-style baseline (see the module docstring).

    Shapes (``S`` PLC states, ``n`` nodes, ``D`` devices):
        - :meth:`encode`: a graph of ``n`` nodes -> ``logits (n, M)``
        - :meth:`plc_logits`: ``node (S,)``, ``placed (S, n)``, ``dev (S, D, 7)`` ->
          ``(S, D)`` (only ``node`` and D are read: the placement is one-shot)
    """

    def __init__(self, config: BaselineConfig | None = None) -> None:
        super().__init__(config)
        c = self.config
        self.encoder = GraphEncoder(c.hidden, c.layers)
        self.proj = nn.Linear(3 * c.hidden, c.hidden)
        self.attention = nn.TransformerEncoderLayer(
            c.hidden, c.heads, dim_feedforward=2 * c.hidden, dropout=0.0, batch_first=True
        )
        self.head = _readout(c.hidden, c.hidden, c.max_devices)

    def encode(self, g: GraphInputs) -> GdpEncoding:
        """Per-node device logits of the whole graph, once per episode (GNN + attention)."""
        h, cp = self.encoder(g)
        z = self.attention(self.proj(torch.cat([h, cp], dim=-1)).unsqueeze(0)).squeeze(0)
        return GdpEncoding(self.head(z))

    def plc_logits(self, enc: GdpEncoding, node: Tensor, placed: Tensor, dev: Tensor) -> Tensor:
        """The rows of the selected nodes, cut to the cluster's ``D`` devices."""
        return self._cut(enc.logits[node], dev.shape[1])


#: Baselines by name (the training configs' ``policy:`` key can use these).
BASELINES: dict[str, type[_FixedOrder]] = {"placeto": PlacetoPolicy, "gdp": GdpPolicy}


def make_baseline(name: str, config: BaselineConfig | None = None) -> _FixedOrder:
    """The baseline ``name`` (``"placeto"`` or ``"gdp"``) with ``config``."""
    if name not in BASELINES:
        raise ValueError(f"baseline: unknown name {name!r} (baselines: {', '.join(BASELINES)})")
    return BASELINES[name](config)
