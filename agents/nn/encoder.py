"""``GraphEncoder``: node embeddings of a placement graph, computed once per episode."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from placegym.agents.nn.critical_path import CriticalPathPool, critical_path_pointers
from placegym.agents.nn.dag_conv import DAGConv
from placegym.envs.mdp.observation import EDGE_FEATURES, NODE_STATIC

# node_static columns (see placegym.envs.mdp.observation)
_W, _COMM_OUT, _B_LEVEL, _T_LEVEL, _OUT_BYTES = 0, 1, 3, 4, 6


@dataclass(frozen=True)
class GraphInputs:
    """The static description of one graph as the encoder reads it.

    Attributes:
        x: ``(n, 7)`` node_static features; edge_index ``(2, E)`` long; edge_attr ``(E, 2)``.
        down, up: ``(n,)`` long pointers to the next node on the critical path to a sink /
            from a source (-1 at its end).
        siblings: optional CSR ``(ptr (n+1,), idx (K,), weight (K,))`` of each node's
            siblings (the other producers of its consumers), weighted by the sibling's
            output size (summed over shared consumers).
        groups: optional ``(n, K)`` long hint groups (device of each node in each hint
            placement, :func:`placegym.agents.doppler.hints.hint_groups`).
        pos: ``(n, 2)`` node positions (:func:`node_positions`), or None.
        quality: optional ``(K,)`` quality of each hint placement on this graph
            (:func:`placegym.agents.doppler.hints.hint_quality`).
        links: ``(D, D, 2)`` the cluster's links as the PLC topology encoder reads them
            (:func:`placegym.agents.doppler.features.cluster_links`), or None.
        scale: the graph's critical-path length on the cluster, the time unit of the
            observation's features, for the device columns of
            :func:`placegym.agents.doppler.features.insertion_features`
            (``PolicyConfig.insertion``), or None.
        price_scale: the same time unit for
            :func:`placegym.agents.doppler.features.price_features`
            (``PolicyConfig.prices``), or None when the policy does not read them.
        successor_scale: the same time unit for
            :func:`placegym.agents.doppler.features.successor_features`
            (``PolicyConfig.successors``), or None when the policy does not read them.
        b_level: ``(n,)`` float64 exact b-levels (``PolicyConfig.prices``: SEL's
            :func:`placegym.agents.doppler.features.sel_pick`), or None.
    """

    x: Tensor
    edge_index: Tensor
    edge_attr: Tensor
    down: Tensor
    up: Tensor
    siblings: tuple[Tensor, Tensor, Tensor] | None = None
    groups: Tensor | None = None
    pos: Tensor | None = None
    quality: Tensor | None = None
    links: Tensor | None = None
    scale: float | None = None
    price_scale: float | None = None
    successor_scale: float | None = None
    b_level: Tensor | None = None

    @property
    def num_nodes(self) -> int:
        """Number of nodes ``n``."""
        return int(self.x.shape[0])

    def to(self, device: torch.device | str) -> GraphInputs:
        """These inputs with every tensor on ``device`` (the float time units as they
        are): ``self`` when every tensor is there already, else a
        new :class:`GraphInputs` holding copies of the tensors that were elsewhere;
        ``self`` is never changed (the episodes' cached inputs stay on the CPU while a
        learner on a GPU encodes a copy)."""
        device = torch.device(device)
        moved: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Tensor) and value.device != device:
                moved[f.name] = value.to(device)
            elif isinstance(value, tuple) and any(t.device != device for t in value):
                moved[f.name] = tuple(t.to(device) for t in value)
        return dataclasses.replace(self, **moved) if moved else self

    @classmethod
    def from_obs(cls, obs: dict) -> GraphInputs:
        """From one (unbatched, numpy) observation of :class:`PlacementEnv`."""
        n = int(np.asarray(obs["node_mask"]).sum())
        e = int(np.asarray(obs["edge_mask"]).sum())
        x = np.asarray(obs["node_static"], dtype=np.float32)[:n]
        edges = np.asarray(obs["edge_index"], dtype=np.int64)[:, :e]
        down_key = x[:, _B_LEVEL]
        up_key = x[:, _T_LEVEL] + x[:, _W] + x[:, _COMM_OUT]
        nxt, prv = critical_path_pointers(edges.T, down_key, up_key, n)
        return cls(
            x=torch.from_numpy(x.copy()),
            edge_index=torch.from_numpy(edges.copy()),
            edge_attr=torch.from_numpy(np.asarray(obs["edge_attr"], np.float32)[:e].copy()),
            down=torch.from_numpy(nxt),
            up=torch.from_numpy(prv),
            siblings=sibling_csr(edges.T, x[:, _OUT_BYTES], n),
            pos=torch.from_numpy(node_positions(edges.T, n)),
        )


#: Columns of :func:`node_positions`.
POSITION_FEATURES = 2


def node_positions(edges: np.ndarray, n: int) -> np.ndarray:
    """``(n, 2)`` float32: each node's depth (edges on its longest path from a source)
    divided by the largest depth, and its position among the nodes of its depth by id
    (0 for the smallest id, 1 for the largest; 0 when alone). The second column depends
    on node ids: it tells apart nodes that the graph structure alone cannot."""
    depth = np.zeros(n, dtype=np.int64)
    if len(edges):
        order = np.argsort(edges[:, 1], kind="stable")
        src, dst = edges[order, 0], edges[order, 1]
        ptr = np.searchsorted(dst, np.arange(n + 1))
        indeg = np.bincount(dst, minlength=n)
        out: list[list[int]] = [[] for _ in range(n)]
        for u, v in edges.tolist():
            out[u].append(v)
        ready = [v for v in range(n) if indeg[v] == 0]
        left = indeg.copy()
        while ready:
            u = ready.pop()
            for v in out[u]:
                left[v] -= 1
                if left[v] == 0:
                    depth[v] = depth[src[ptr[v] : ptr[v + 1]]].max() + 1
                    ready.append(v)
    pos = np.zeros((n, POSITION_FEATURES), dtype=np.float32)
    if n:
        pos[:, 0] = depth / max(int(depth.max()), 1)
        key = np.lexsort((np.arange(n), depth))
        level_start = np.searchsorted(depth[key], depth[key], side="left")
        level_size = np.searchsorted(depth[key], depth[key], side="right") - level_start
        rank = np.arange(n) - level_start
        pos[key, 1] = rank / np.maximum(level_size - 1, 1)
    return pos


def sibling_csr(edges: np.ndarray, size: np.ndarray, n: int) -> tuple[Tensor, Tensor, Tensor]:
    """CSR of sibling weights: ``w[v, u] = size[u] · #(consumers shared by v and u)``."""
    by_consumer: dict[int, list[int]] = {}
    for u, c in edges.tolist():
        by_consumer.setdefault(c, []).append(u)
    rows: list[int] = []
    cols: list[int] = []
    for producers in by_consumer.values():
        for v in producers:
            for u in producers:
                if u != v:
                    rows.append(v)
                    cols.append(u)
    r, c = np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64)
    w = size[c].astype(np.float32) if len(c) else np.zeros(0, np.float32)
    order = np.lexsort((c, r))
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=n), out=ptr[1:])
    return torch.from_numpy(ptr), torch.from_numpy(c[order]), torch.from_numpy(w[order])


class GraphEncoder(nn.Module):
    """Input MLP, ``layers`` rounds of :class:`DAGConv`, and critical-path pooling.

    Returns the node embeddings ``h (n, H)`` and the critical-path embeddings
    ``cp (n, 2H)``: the mean embedding along each node's longest path to a sink and from a
    source. Independent of graph size and device count.
    """

    def __init__(
        self,
        hidden: int = 64,
        layers: int = 3,
        node_dim: int = NODE_STATIC,
        edge_dim: int = EDGE_FEATURES,
    ) -> None:
        super().__init__()
        self.hidden = hidden
        self.inp = nn.Sequential(nn.Linear(node_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.convs = nn.ModuleList([DAGConv(hidden, edge_dim) for _ in range(layers)])
        self.pool = CriticalPathPool()

    def forward(self, g: GraphInputs) -> tuple[Tensor, Tensor]:
        """Node embeddings ``(n, H)`` and their critical-path pooling ``(n, 2H)``."""
        h = self.inp(g.x)
        for conv in self.convs:
            h = conv(h, g.edge_index, g.edge_attr)
        return h, torch.cat([self.pool(h, g.down), self.pool(h, g.up)], dim=-1)
