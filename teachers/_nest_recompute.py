"""How a NEST plan runs: its priority order, its recomputation, and the memory of a plan
of one run as the simulator finds it.

:func:`stage_priority` is the priority order of every NEST plan. Under the relief option
:data:`~placegym.teachers._nest_cost.RECOMPUTE` the plan carries the recompute set of
:func:`recompute_nodes` (``Placement.recompute``, :mod:`placegym.envs.core.recompute`). The
memory of a plan of one run of every stage (the only run of a training step, whose
co-location groups span its stages) is what :class:`WholeRun` simulates: with
recomputation always, without it where the static bound of
:class:`~placegym.teachers.nest.NestTeacher` does not fit, so NEST's memory model of those
plans is the simulator's own.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from placegym.envs.analysis.levels import b_level
from placegym.envs.analysis.memory import memory_may_bind
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.core.recompute import recomputable
from placegym.envs.sim.simulator import simulate

__all__ = ["WholeRun", "recompute_nodes", "stage_priority", "whole_run_memory"]


def stage_priority(graph: Graph, cluster: Cluster, stage: np.ndarray) -> np.ndarray:
    """A topological order by (stage, descending b-level, topological rank): Kahn's
    algorithm taking the ready node with the smallest key."""
    n = graph.num_nodes
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    bl = b_level(graph, cluster)
    topo = np.empty(n, dtype=np.int64)
    topo[graph.topological_order] = np.arange(n)
    indeg = graph.in_degree.copy()
    ptr, idx = graph.consumer_csr
    heap = [(int(stage[v]), -float(bl[v]), int(topo[v]), v) for v in np.flatnonzero(indeg == 0)]
    heapq.heapify(heap)
    order = []
    while heap:
        v = heapq.heappop(heap)[3]
        order.append(v)
        for c in idx[ptr[v] : ptr[v + 1]].tolist():
            indeg[c] -= 1
            if indeg[c] == 0:
                heapq.heappush(heap, (int(stage[c]), -float(bl[c]), int(topo[c]), c))
    return np.array(order, dtype=np.int64)


def recompute_nodes(graph: Graph, stage: np.ndarray) -> np.ndarray:
    """The forward nodes NEST recomputes (ascending ids; empty unless ``graph`` is a
    training step): every node that may be recomputed
    (:func:`~placegym.envs.core.recompute.recomputable`) but the checkpoints, which keep their
    stash. Checkpoints, √n checkpointing counted in stages: with ``F`` stages holding such
    nodes and ``c = ⌈√F⌉``, the nodes of every ``c``-th of those stages (the ``c``-th,
    ``2c``-th, ...), and every node without a forward consumer (recomputing a forward
    sink saves nothing)."""
    ok = recomputable(graph)
    if not ok.any():
        return np.zeros(0, dtype=np.int64)
    n = graph.num_nodes // 2
    fwd = graph.edges[(graph.edges[:, 0] < n) & (graph.edges[:, 1] < n)]
    ok[np.setdiff1d(np.arange(n), fwd[:, 0])] = False  # forward sinks
    levels = np.unique(stage[ok])
    c = math.isqrt(max(levels.size - 1, 0)) + 1  # ⌈√F⌉
    checkpoint = levels[c - 1 :: c]
    ok &= ~np.isin(stage, checkpoint)
    return np.flatnonzero(ok).astype(np.int64)


def whole_run_memory(
    graph: Graph,
    cluster: Cluster,
    blocks: list[list[np.ndarray]],
    local: np.ndarray,
    order: np.ndarray,
    nodes: np.ndarray,
) -> list[list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """For each block size ``b`` and each block of that size (``blocks[b]``: the devices
    of each, by local index; ``local[b]``: every node's local device), ``(devices, peak,
    resident)``: the simulated peak and the resident bytes per local device of the whole
    graph spread on the block with priority ``order`` and recompute set ``nodes``. Blocks
    whose devices compute and connect alike (same kind, speeds, launch overhead, links
    among them) share one simulation: the peak does not depend on memory."""
    out = []
    for devs_of_size, loc in zip(blocks, local, strict=True):
        seen: dict[tuple[object, ...], tuple[np.ndarray, np.ndarray]] = {}
        rows = []
        for devs in devs_of_size:
            key = _signature(cluster, devs)
            if key not in seen:
                device = devs[loc]
                placement = Placement(device=device, order=order, recompute=nodes)
                peak = simulate(graph, cluster, placement).peak_memory[devs]
                held = np.bincount(loc, weights=graph.param_bytes, minlength=devs.size)
                seen[key] = (peak, held)
            rows.append((devs, *seen[key]))
        out.append(rows)
    return out


def _signature(cluster: Cluster, devs: np.ndarray) -> tuple[object, ...]:
    """What a block's simulation depends on besides the graph: its devices' kinds,
    speeds and launch overhead, and the links among them."""
    sub = np.ix_(devs, devs)
    parts = (
        cluster.flops[devs],
        cluster.mem_bandwidth[devs],
        cluster.launch_overhead[devs],
        cluster.pair_latency[sub].ravel(),
        cluster.pair_bandwidth[sub].ravel(),
        cluster.pair_level[sub].ravel().astype(np.float64),
    )
    kinds = tuple(cluster.devices[d].kind for d in devs.tolist())
    return kinds, np.concatenate(parts).tobytes()


@dataclass(eq=False)
class WholeRun:
    """The plan of one run of every stage of a NEST table on each block of each size,
    and its memory as the simulator finds it (simulated once per recompute option, when
    first asked for).

    Attributes:
        graph, cluster: what the plan places.
        stage: ``(n,)`` stage of each node (the plan's priority order,
            :func:`stage_priority`).
        loc: ``(K, n)`` local device of each node on a block of ``sizes[b]`` devices.
        recompute: the forward nodes recomputed under recomputation
            (:func:`recompute_nodes`).
        sizes: devices per block of each size ``b``.
        blocks: per size, the devices of every block of that size, by local index.
        gather_buf: per stage and size, ``(k,)`` the largest parameter block per local
            device (the ZeRO gather buffer).
        param_total: ``(m,)`` parameter bytes of each stage.
    """

    graph: Graph
    cluster: Cluster
    stage: np.ndarray
    loc: np.ndarray
    recompute: np.ndarray
    sizes: tuple[int, ...]
    blocks: list[list[np.ndarray]]
    gather_buf: list[list[np.ndarray]]
    param_total: np.ndarray
    _simulated: dict[bool, list] = field(default_factory=dict, repr=False)

    def memory(self, again: bool) -> list[list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
        """:func:`whole_run_memory` of the plan, with the recompute set when ``again``
        (simulated once per option)."""
        if again not in self._simulated:
            order = stage_priority(self.graph, self.cluster, self.stage)
            nodes = self.recompute if again else np.zeros(0, dtype=np.int64)
            self._simulated[again] = whole_run_memory(
                self.graph, self.cluster, self.blocks, self.loc, order, nodes
            )
        return self._simulated[again]

    def overflow(self, b: int, again: bool, zero: bool = False) -> float:
        """Bytes over memory of the plan on a block of ``sizes[b]`` devices, with
        recomputation when ``again`` (and ZeRO when ``zero``): the largest, over every
        block of that size, of the sum over its devices of the simulated peak
        (:meth:`memory`) beyond the device's memory; under ZeRO the resident bytes
        replaced by the total over the size plus the largest gather buffer. Inf for
        recomputation without recompute nodes."""
        if again and not self.recompute.size:
            return math.inf
        if not (again or zero) and not memory_may_bind(self.graph, self.cluster):
            return 0.0  # no placement exceeds memory: what the simulation would find
        worst = 0.0
        for devs, peak, resident in self.memory(again)[b]:
            need = peak
            if zero:
                buf = np.max([bufs[b] for bufs in self.gather_buf], axis=0)
                need = self.param_total.sum() / self.sizes[b] + buf + (peak - resident)
            worst = max(worst, float(np.maximum(need - self.cluster.memory[devs], 0.0).sum()))
        return worst
