"""Observations of the placement MDP: a flat ``Dict`` of fixed-shape ``Box`` es.

Shapes (``N`` = max_nodes, ``E`` = max_edges, ``D`` = devices, ``A = max(N, D)``); times
are divided by the graph's critical-path length ``CP`` (mean costs, see
:mod:`placegym.envs.analysis.levels`), so features are scale-free across workloads. Float
features lie in ``[0, FEATURE_MAX]`` (clipped):

==================  ===========  =======  ==================================================
key                 shape        dtype    content
==================  ===========  =======  ==================================================
``node_static``     (N, 7)       float32  mean compute time, output comm time, input comm
                                          time, b-level, t-level (all / CP), param_bytes /
                                          mean device memory, out_bytes / max out_bytes
``node_dynamic``    (N, 6)       float32  assigned, (device + 1) / D (0 if unassigned), in
                                          frontier, selected, (rank + 1) / n (0 if not
                                          selected), estimated finish / CP (0 if unassigned)
``edge_index``      (2, E)       int64    producer and consumer ids; padding is 0 → 0
``edge_attr``       (E, 2)       float32  comm time of the edge / CP, bytes / max out_bytes
``node_mask``       (N,)         int8     1 for real nodes
``edge_mask``       (E,)         int8     1 for real edges
``device``          (D, 7)       float32  for the selected node (0 in SEL): earliest start /
                                          CP, fraction of its input bytes already there;
                                          for every device: load / CP, free time / CP,
                                          params used / memory, free memory / memory
                                          (clipped at 0), flops / max flops
``phase``           (1,)         int8     0 = SEL, 1 = PLC
``action_mask``     (A,)         int8     legal actions of the current phase
==================  ===========  =======  ==================================================

Every step returns fresh arrays (nothing is shared between observations).

*Compact* observations (``PlacementEnv(observation="compact")``, for large graphs) leave
out the five per-graph keys (``node_static``, ``edge_index``, ``edge_attr``,
``node_mask``, ``edge_mask``), which never change within an episode: a step then copies
only ``node_dynamic``, ``device``, ``phase`` and ``action_mask``. The per-graph part is
read once per episode, unpadded (``n`` nodes, ``e`` edges), from
``env.unwrapped.graph_observation()``.
:func:`obs_to_pyg` turns one observation (numpy or torch, as SB3 passes it) into a
``torch_geometric.data.Data``; :func:`batch_to_pyg` a batch into a ``Batch``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from placegym.envs.analysis.levels import b_level, mean_comm, mean_durations, t_level
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.mdp._vector_kernel import FEATURE_MAX
from placegym.envs.mdp.state import PlacementState

NODE_STATIC = 7
NODE_DYNAMIC = 6
EDGE_FEATURES = 2
DEVICE_FEATURES = 7

__all__ = [
    "GRAPH_KEYS",
    "ObservationBuilder",
    "batch_to_pyg",
    "obs_to_pyg",
    "observation_space",
    "time_unit",
]

#: The keys fixed per graph, left out of compact observations.
GRAPH_KEYS = ("node_static", "edge_index", "edge_attr", "node_mask", "edge_mask")


def observation_space(
    max_nodes: int, max_edges: int, num_devices: int, *, compact: bool = False
) -> spaces.Dict:
    """The ``Dict`` space of the table above."""
    n, e, d = max_nodes, max_edges, num_devices

    def box(shape: tuple[int, ...]) -> spaces.Box:
        return spaces.Box(0.0, FEATURE_MAX, shape, np.float32)

    def flags(shape: tuple[int, ...]) -> spaces.Box:
        return spaces.Box(0, 1, shape, np.int8)

    full = spaces.Dict(
        {
            "node_static": box((n, NODE_STATIC)),
            "node_dynamic": box((n, NODE_DYNAMIC)),
            "edge_index": spaces.Box(0, max(n - 1, 0), (2, e), np.int64),
            "edge_attr": box((e, EDGE_FEATURES)),
            "node_mask": flags((n,)),
            "edge_mask": flags((e,)),
            "device": box((d, DEVICE_FEATURES)),
            "phase": flags((1,)),
            "action_mask": flags((max(n, d),)),
        }
    )
    if not compact:
        return full
    return spaces.Dict({k: s for k, s in full.spaces.items() if k not in GRAPH_KEYS})


def time_unit(b_levels: np.ndarray) -> float:
    """The critical-path length ``CP`` that every time feature is divided by: the largest
    of the graph's ``b_levels`` (1 for an empty graph or one without costs)."""
    return float(b_levels.max()) if len(b_levels) and b_levels.max() > 0 else 1.0


class ObservationBuilder:
    """Static features of one (graph, cluster) plus the per-step dynamic ones."""

    def __init__(self, graph: Graph, cluster: Cluster, max_nodes: int, max_edges: int) -> None:
        n, e, d = graph.num_nodes, graph.num_edges, cluster.num_devices
        self.graph, self.cluster = graph, cluster
        self.max_nodes, self.max_edges = max_nodes, max_edges
        bl = b_level(graph, cluster)
        self.cp = time_unit(bl)
        w, comm = mean_durations(graph, cluster), mean_comm(graph, cluster)
        comm_in = np.bincount(graph.edges[:, 1], weights=comm[graph.edges[:, 0]], minlength=n)
        max_out = float(graph.out_bytes.max()) if n and graph.out_bytes.max() > 0 else 1.0
        static = np.zeros((max_nodes, NODE_STATIC), np.float32)
        static[:n] = (
            np.stack(
                [
                    w / self.cp,
                    comm / self.cp,
                    comm_in / self.cp,
                    bl / self.cp,
                    t_level(graph, cluster) / self.cp,
                    graph.param_bytes / cluster.memory.mean(),
                    graph.out_bytes / max_out,
                ],
                axis=1,
            )
            if n
            else np.zeros((0, NODE_STATIC))
        )
        edge_index = np.zeros((2, max_edges), np.int64)
        edge_index[:, :e] = graph.edges.T
        edge_attr = np.zeros((max_edges, EDGE_FEATURES), np.float32)
        src = graph.edges[:, 0]
        edge_attr[:e] = np.stack([comm[src] / self.cp, graph.out_bytes[src] / max_out], axis=1)
        node_mask = np.zeros(max_nodes, np.int8)
        node_mask[:n] = 1
        edge_mask = np.zeros(max_edges, np.int8)
        edge_mask[:e] = 1
        self.static: dict[str, np.ndarray] = {
            "node_static": static,
            "edge_index": edge_index,
            "edge_attr": edge_attr,
            "node_mask": node_mask,
            "edge_mask": edge_mask,
        }
        for arr in (static, edge_attr):
            np.minimum(arr, FEATURE_MAX, out=arr)
        for arr in self.static.values():
            arr.setflags(write=False)
        self.dynamic = np.zeros((max_nodes, NODE_DYNAMIC), np.float32)
        self.devices = np.zeros((d, DEVICE_FEATURES), np.float32)
        self.mask = np.zeros(max(max_nodes, d), np.int8)
        self._phases = (np.zeros(1, np.int8), np.ones(1, np.int8))  # copied, never shared
        self._inv_mem = 1.0 / cluster.memory
        self.reset_dynamic()

    def reset_dynamic(self) -> None:
        """Back to the empty assignment (sources in the frontier, devices empty)."""
        self.dynamic[:] = 0.0
        self.dynamic[: self.graph.num_nodes, 2] = self.graph.in_degree == 0
        self.devices[:] = 0.0
        self.devices[:, 5] = 1.0
        self.devices[:, 6] = self.cluster.flops / self.cluster.flops.max()

    def act(self, state: PlacementState, action: int, *, checked: bool = True) -> int:
        """Take the SEL or PLC ``action`` on ``state`` (by its phase) and update the
        features; returns the node just placed, or -1 after a selection. An illegal
        action raises ``ValueError``; ``checked=False`` skips that check, for an int
        action the caller has already found legal."""
        if state.selected < 0:
            state.select(action, checked=checked)
            self.on_select(state, action)
            return -1
        v = state.selected
        state.place(action, checked=checked)
        self.on_place(state, v, action)
        return v

    def on_select(self, state: PlacementState, v: int) -> None:
        """Update the dynamic features after node ``v`` was selected."""
        dyn = self.dynamic
        dyn[v, 2] = 0.0
        dyn[v, 3] = 1.0
        dyn[v, 4] = len(state.order) / self.graph.num_nodes  # (rank + 1) / n
        self.devices[:, 0] = np.minimum(state.earliest_start(v) / self.cp, FEATURE_MAX)
        self.devices[:, 1] = state.inputs_present(v)

    def on_place(self, state: PlacementState, v: int, device: int) -> None:
        """Update the dynamic features after node ``v`` was placed on ``device``."""
        dyn = self.dynamic
        dyn[v, 0] = 1.0
        dyn[v, 1] = (device + 1) / self.cluster.num_devices
        dyn[v, 3] = 0.0
        dyn[v, 5] = min(state.est_finish[v] / self.cp, FEATURE_MAX)
        frontier = state.frontier_mask
        for c in state.costs.successors[v]:
            if frontier[c]:
                dyn[c, 2] = 1.0
        row = self.devices[device]
        used = state.param_used[device] * self._inv_mem[device]
        row[2] = min(state.load[device] / self.cp, FEATURE_MAX)
        row[3] = min(state.device_free[device] / self.cp, FEATURE_MAX)
        row[4] = min(used, FEATURE_MAX)
        row[5] = max(1.0 - used, 0.0)
        self.devices[:, :2] = 0.0

    def observe(self, mask: np.ndarray, phase: int, *, compact: bool = False) -> dict[str, Any]:
        """The current observation; ``mask`` is the action mask (bool), ``phase`` 0/1;
        ``compact`` leaves out the per-graph keys (:data:`GRAPH_KEYS`)."""
        if len(mask) == len(self.mask):
            action_mask = mask.astype(np.int8)
        else:
            self.mask[:] = 0
            self.mask[: len(mask)] = mask
            action_mask = self.mask.copy()
        obs = {} if compact else {k: v.copy() for k, v in self.static.items()}
        obs["node_dynamic"] = self.dynamic.copy()
        obs["device"] = self.devices.copy()
        obs["phase"] = self._phases[phase].copy()
        obs["action_mask"] = action_mask
        return obs

    def graph_observation(self) -> dict[str, np.ndarray]:
        """The per-graph keys (:data:`GRAPH_KEYS`) cut to the graph's nodes and edges."""
        n, e = self.graph.num_nodes, self.graph.num_edges
        cut = {"node_static": n, "node_mask": n, "edge_attr": e, "edge_mask": e}
        obs = {k: self.static[k][:size].copy() for k, size in cut.items()}
        obs["edge_index"] = self.static["edge_index"][:, :e].copy()
        return obs


_NDIM = {
    "node_static": 2,
    "node_dynamic": 2,
    "edge_index": 2,
    "edge_attr": 2,
    "node_mask": 1,
    "edge_mask": 1,
    "device": 2,
    "phase": 1,
    "action_mask": 1,
}


def _tensor(obs: dict[str, Any], key: str, batched: bool):
    import torch

    x = obs[key]
    x = x if torch.is_tensor(x) else torch.as_tensor(np.asarray(x))
    if batched and x.dim() == _NDIM[key]:
        x = x.unsqueeze(0)
    if not batched and x.dim() == _NDIM[key] + 1:
        x = x[0]
    return x


def obs_to_pyg(obs: dict[str, Any]):
    """One observation (numpy arrays or torch tensors, with or without a leading batch
    dim of 1) as a ``torch_geometric.data.Data`` with the padding removed: ``x`` =
    node_static ‖ node_dynamic (float), ``edge_index`` (long), ``edge_attr``, and the
    graph-level ``device``, ``phase`` and ``action_mask``."""
    from torch_geometric.data import Data

    def t(key: str):
        return _tensor(obs, key, batched=False)

    n, e = int(t("node_mask").sum()), int(t("edge_mask").sum())
    x = torch_cat([t("node_static")[:n], t("node_dynamic")[:n]])
    return Data(
        x=x,
        edge_index=t("edge_index")[:, :e].long(),
        edge_attr=t("edge_attr")[:e].float(),
        device=t("device").float(),
        phase=t("phase").long(),
        action_mask=t("action_mask").bool(),
        num_nodes=n,
    )


def batch_to_pyg(obs: dict[str, Any]):
    """A batch of observations (leading dim B, numpy or torch) as a
    ``torch_geometric.data.Batch``, built by vectorised index offsetting (no Python loop
    over graphs). Per-graph ``device`` (B, D, F), ``phase`` (B, 1) and ``action_mask``
    (B, A) stay batched tensors; ``node_index`` maps each real node to its padded index."""
    import torch
    from torch_geometric.data import Batch

    def t(key: str):
        return _tensor(obs, key, batched=True)

    node_mask, edge_mask = t("node_mask").bool(), t("edge_mask").bool()
    b, n_max = node_mask.shape
    counts = node_mask.sum(dim=1)
    offset = torch.cumsum(counts, 0) - counts  # first node id of each graph
    x = torch_cat([t("node_static"), t("node_dynamic")])[node_mask]
    ei = t("edge_index").long() + offset.view(b, 1, 1)
    edge_index = ei.permute(1, 0, 2)[:, edge_mask]
    edge_attr = t("edge_attr").float()[edge_mask]
    graph_of_node = torch.arange(b).repeat_interleave(counts)
    ptr = torch.cat([offset, counts.sum().view(1)])
    node_index = (torch.arange(n_max).expand(b, n_max))[node_mask]
    out = Batch(
        x=x,
        edge_index=edge_index,
        edge_attr=edge_attr,
        batch=graph_of_node,
        ptr=ptr,
        device=t("device").float(),
        phase=t("phase").long(),
        action_mask=t("action_mask").bool(),
        node_index=node_index,
    )
    out._num_graphs = b
    return out


def torch_cat(parts):
    import torch

    return torch.cat([p.float() for p in parts], dim=-1)
