"""The cost model of the NEST teacher: stages, device blocks, spreads and cost tables.

:class:`~placegym.teachers.nest.NestTeacher` runs a dynamic program over the tables built
here; its class docstring is the specification of the search space and the recurrence.
This module holds the pieces that define the model:

- :func:`stage_index`: the chain of stages (layers) of a graph;
- :class:`StageRun`: consecutive stages on one block, the unit of a plan (the blocks,
  aligned blocks of a level-wise tree in a canonical device order, "addresses", are
  :class:`~placegym.teachers._nest_blocks.Hierarchy`'s);
- :class:`NestTables`: per stage and block size, the spread of the stage's nodes over
  the block, its compute / communication / memory figures, and the link costs between
  consecutive stages (:func:`placegym.teachers.nest.evaluate_plan` prices one plan
  from them directly, the oracle that the DP is tested against).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from placegym.envs.analysis.levels import durations_on
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.teachers._nest_blocks import Hierarchy
from placegym.teachers._nest_kernel import channel_max_kernel
from placegym.teachers._nest_recompute import WholeRun, recompute_nodes

__all__ = [
    "RECOMPUTE",
    "RELIEF_NAMES",
    "ZERO",
    "NestTables",
    "StageRun",
    "durations_fn",
    "stage_index",
]

#: Relief bit: ZeRO-style sharding of the run's parameters over its block.
ZERO = 1
#: Relief bit: recomputation (the plan's ``Placement.recompute``: stashes dropped, compute
#: paid again; :mod:`placegym.teachers._nest_recompute`).
RECOMPUTE = 2
#: Names of the relief options 0..3 (bit combinations of ZERO and RECOMPUTE).
RELIEF_NAMES = ("none", "zero", "recompute", "zero+recompute")

#: ``dur(nodes, devices)``: rule-1 durations of each node on the paired device.
DurationFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


def stage_index(graph: Graph) -> np.ndarray:
    """``(n,)`` stage of each node, ``0..m-1``.

    The graph's ``layer`` field (renumbered densely) when every node has one and no edge
    goes to a lower layer; otherwise the topological depth (longest path, in edges, from
    a source), under which every edge goes to a later stage.
    """
    n = graph.num_nodes
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    u, v = graph.edges[:, 0], graph.edges[:, 1]
    if (graph.layer >= 0).all():
        stage = np.unique(graph.layer, return_inverse=True)[1].reshape(-1).astype(np.int64)
        if (stage[u] <= stage[v]).all():
            return stage
    depth = np.zeros(n, dtype=np.int64)
    ptr, idx = graph.producer_csr
    for w in graph.topological_order.tolist():
        if ptr[w + 1] > ptr[w]:
            depth[w] = depth[idx[ptr[w] : ptr[w + 1]]].max() + 1
    return depth


@dataclass(frozen=True)
class StageRun:
    """Consecutive stages ``start..stop-1`` on one block.

    Attributes:
        start, stop: the stages of the run.
        size: devices in the block.
        address: the block's first address (see :class:`Hierarchy`).
        relief: 0..3, bits :data:`ZERO` and :data:`RECOMPUTE` (see :data:`RELIEF_NAMES`).
        link_level: network level between the previous run's block and this one
            (-1 for the first run).
    """

    start: int
    stop: int
    size: int
    address: int
    relief: int = 0
    link_level: int = -1


# ---------------------------------------------------------------------- spreads


def _components(edges: np.ndarray, n: int) -> np.ndarray:
    """``(n,)`` smallest node of each node's connected component under ``edges``."""
    parent = list(range(n))  # a list: its items read 10x faster than an array's

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges.tolist():
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return np.array([find(x) for x in range(n)], dtype=np.int64)


def _stage_layouts(graph: Graph, stage: np.ndarray, m: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per stage: ``(nodes, unit)``, nodes in spread order and their unit (0, 1, ...).

    Units are the connected pieces of the stage's internal edges, kept together where
    the block has fewer devices than units. They are ordered by the mean position of
    their producers in earlier stages (barycentre; ties by topological rank), so units
    that read the same tensors sit next to each other and land on the same device.
    """
    n = graph.num_nodes
    topo = np.empty(n, dtype=np.int64)
    topo[graph.topological_order] = np.arange(n)
    u, v = graph.edges[:, 0], graph.edges[:, 1]
    internal = stage[u] == stage[v]
    root = _components(graph.edges[internal], n)
    pos = np.zeros(n)
    out = []
    ext = ~internal
    for s in range(m):
        nodes = np.flatnonzero(stage == s)
        roots, comp = np.unique(root[nodes], return_inverse=True)
        comp = comp.reshape(-1)
        c = len(roots)
        into = ext & (stage[v] == s)
        cv = comp[np.searchsorted(nodes, v[into])]
        cnt = np.bincount(cv, minlength=c)
        bary = np.bincount(cv, weights=pos[u[into]], minlength=c) / np.maximum(cnt, 1)
        bary[cnt == 0] = np.inf
        first = np.full(c, n)
        np.minimum.at(first, comp, topo[nodes])
        rank = np.empty(c, dtype=np.int64)
        rank[np.lexsort((first, bary))] = np.arange(c)
        pos[nodes] = (rank[comp] + 0.5) / c
        sort = np.lexsort((topo[nodes], rank[comp]))
        out.append((nodes[sort], rank[comp][sort]))
    return out


def _chunks(weight: np.ndarray, k: int) -> np.ndarray:
    """Contiguous split of items with ``weight`` into ``k`` parts: each item goes to the
    part its weight midpoint falls into (balanced within one item's weight)."""
    w = weight if weight.sum() > 0 else np.ones_like(weight)
    mid = np.cumsum(w) - w / 2
    return np.minimum((mid / w.sum() * k).astype(np.int64), k - 1)


def _lpt(weight: np.ndarray, k: int) -> np.ndarray:
    """Longest processing time first: heaviest item to the least loaded part (ties: the
    lower item, the lower part)."""
    part = np.zeros(weight.size, dtype=np.int64)
    heap = [(0.0, j) for j in range(k)]
    for i in np.argsort(-weight, kind="stable").tolist():
        total, j = heapq.heappop(heap)
        part[i] = j
        heapq.heappush(heap, (total + float(weight[i]), j))
    return part


def _spreads(unit: np.ndarray, load: np.ndarray, k: int) -> list[np.ndarray]:
    """Candidate local devices ``0..k-1`` for a stage's nodes (in layout order): whole
    units in contiguous parts, whole units by LPT (when there are at least ``k`` units),
    and single nodes in contiguous parts."""
    units = int(unit[-1]) + 1 if unit.size else 0
    out = []
    if units >= k:
        weight = np.bincount(unit, weights=load, minlength=units)
        out += [_chunks(weight, k)[unit], _lpt(weight, k)[unit]]
    return [*out, _chunks(load, k)]


@dataclass(frozen=True, eq=False)
class _Stage:
    """One stage: its nodes in layout order, their units, and its internal edges
    (``eu -> ev``, as positions in ``nodes``) grouped by the depth of their consumer."""

    nodes: np.ndarray
    unit: np.ndarray
    eu: np.ndarray
    ev: np.ndarray
    steps: tuple[tuple[np.ndarray, np.ndarray], ...]

    @classmethod
    def build(cls, graph: Graph, nodes: np.ndarray, unit: np.ndarray) -> _Stage:
        pos = np.full(graph.num_nodes, -1)
        pos[nodes] = np.arange(nodes.size)
        eu, ev = pos[graph.edges[:, 0]], pos[graph.edges[:, 1]]
        keep = (eu >= 0) & (ev >= 0)
        eu, ev = eu[keep], ev[keep]
        depth = np.zeros(nodes.size, dtype=np.int64)
        while eu.size:  # longest path in edges; at most (internal depth + 1) rounds
            new = depth.copy()
            np.maximum.at(new, ev, depth[eu] + 1)
            if (new == depth).all():
                break
            depth = new
        steps = tuple(
            (np.flatnonzero(depth[ev] == x), np.flatnonzero(depth == x))
            for x in range(1, int(depth.max(initial=0)) + 1)
        )
        return cls(nodes, unit, eu, ev, steps)

    def figures(
        self, local: np.ndarray, devs: np.ndarray, dur: DurationFn, g: Graph, c: Cluster
    ) -> tuple[np.ndarray, float, float]:
        """For nodes on local devices ``local`` of the block ``devs``: per-device compute,
        the longest internal path (durations plus the transfer time of every edge that
        crosses devices) and the busiest internal channel."""
        d = dur(self.nodes, devs[local])
        busy = np.bincount(local, weights=d, minlength=devs.size)
        u = self.nodes[self.eu]
        src, dst = devs[local[self.eu]], devs[local[self.ev]]
        intra = _channel_max(u, src, dst, g.out_bytes, c)
        xfer = c.pair_latency[src, dst] + g.out_bytes[u] / c.pair_bandwidth[src, dst]
        xfer[src == dst] = 0.0
        start, finish = np.zeros(d.size), d.copy()
        for edges, heads in self.steps:
            np.maximum.at(start, self.ev[edges], finish[self.eu[edges]] + xfer[edges])
            finish[heads] = start[heads] + d[heads]
        return busy, float(finish.max(initial=0.0)), intra

    def pick_spread(self, devs: np.ndarray, dur: DurationFn, g: Graph, c: Cluster):
        """The candidate spread over the block ``devs`` with the shortest relief-free
        stage time (``max(busiest device, longest path) + busiest channel``); the first
        one on ties."""
        load = dur(self.nodes, np.full(self.nodes.size, devs[0]))
        best, best_time = None, np.inf
        for cand in _spreads(self.unit, load, devs.size):
            busy, path, intra = self.figures(cand, devs, dur, g, c)
            time = max(busy.max(), path) + intra
            if time < best_time:
                best, best_time = cand, time
        return best


def _channel_max(
    u: np.ndarray, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, cluster: Cluster
) -> float:
    """Largest total transfer time over channels; one transfer per (producer, device)
    (compiled: :func:`~placegym.teachers._nest_kernel.channel_max_kernel`)."""
    return float(
        channel_max_kernel(
            np.asarray(u, dtype=np.int64),
            np.asarray(src, dtype=np.int64),
            np.asarray(dst, dtype=np.int64),
            np.asarray(nbytes, dtype=np.float64),
            cluster.pair_latency,
            cluster.pair_bandwidth,
            cluster.num_devices,
        )
    )


def channel_max_numpy(
    u: np.ndarray, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, cluster: Cluster
) -> float:
    """:func:`_channel_max` in numpy (the kernel's oracle in the tests)."""
    cross = src != dst
    if not cross.any():
        return 0.0
    u, src, dst = u[cross], src[cross], dst[cross]
    d = cluster.num_devices
    first = np.unique(u * d + dst, return_index=True)[1]
    u, src, dst = u[first], src[first], dst[first]
    t = cluster.pair_latency[src, dst] + nbytes[u] / cluster.pair_bandwidth[src, dst]
    channel = np.unique(src * d + dst, return_inverse=True)[1].reshape(-1)
    return float(np.bincount(channel, weights=t).max())


# ---------------------------------------------------------------------- tables


@dataclass(eq=False)
class NestTables:
    """Everything the DP needs, per stage ``s`` (m), block size ``b`` (K), relief ``o`` (4)
    and link level ``l`` (NL). Figures are computed on the representative block of each
    size (the one at address 0), and for links on the first block of the consumer's
    size at that level after it; exact for regular homogeneous trees.

    Attributes:
        stage: ``(n,)`` stage of each node; ``m`` stages.
        loc: ``(K, n)`` local device of each node when its stage is spread over a block
            of ``sizes[b]`` devices.
        stage_cost: ``(m, K, 4)`` stage time: the larger of the busiest local device's
            compute (plus ``recompute_factor`` times its recomputed nodes' durations under
            recomputation, plus its all-gather time under ZeRO) and the longest path
            through the stage's internal edges (durations plus the transfer of every edge
            crossing devices), plus the busiest channel inside the block (stage-internal
            edges).
        same_link: ``(m, K)`` busiest channel of the edges into stage s when its producer
            stage sits on the same block (0 for s = 0).
        move_link: ``(m, K, K, NL)`` the same when the producer's block (size b) and the
            consumer's block (size b2) are disjoint and meet at level l (inf: no such
            pair of blocks exists).
        params, acts, gather_buf: per stage and size, ``(k,)`` per local device:
            resident parameter bytes; activations (outputs made there plus every distinct
            input read there: every tensor the stage ever holds on the device); the
            largest parameter block (ZeRO gather buffer).
        recompute: the forward nodes recomputed under :data:`RECOMPUTE`
            (:func:`~placegym.teachers._nest_recompute.recompute_nodes`; empty unless the
            graph is a training step, and then the relief does nothing).
        param_total: ``(m,)`` parameter bytes of each stage.
        memory: per size, ``(k,)`` capacity per local device: the least over every block
            of that size (so a run that fits the model fits on any address).
        cuttable: ``(m + 1,)`` whether a run may start (or end) at each stage boundary:
            False inside the stage span of a co-location group (``0`` and ``m`` always).
        whole_run: the plan of one run of every stage, whose memory is simulated
            (:class:`~placegym.teachers._nest_recompute.WholeRun`; set by :meth:`build`).
    """

    graph: Graph
    cluster: Cluster
    hier: Hierarchy
    stage: np.ndarray
    m: int
    loc: np.ndarray
    stage_cost: np.ndarray
    same_link: np.ndarray
    move_link: np.ndarray
    params: list[list[np.ndarray]]
    acts: list[list[np.ndarray]]
    gather_buf: list[list[np.ndarray]]
    param_total: np.ndarray
    memory: list[np.ndarray]
    cuttable: np.ndarray
    recompute: np.ndarray
    whole_run: WholeRun = field(init=False, repr=False)

    @property
    def sizes(self) -> tuple[int, ...]:
        return self.hier.sizes

    def devices(self, b: int, address: int) -> np.ndarray:
        """Devices of the block of ``sizes[b]`` devices at ``address``, by local index."""
        return self.hier.order[address : address + self.sizes[b]]

    @classmethod
    def build(
        cls,
        graph: Graph,
        cluster: Cluster,
        recompute_factor: float = 1.0,
        max_stages: int | None = None,
    ) -> NestTables:
        """The tables of ``graph`` on ``cluster``; more than ``max_stages`` stages are
        merged, consecutive ones evenly, into ``max_stages``."""
        hier = Hierarchy.build(cluster)
        stage = stage_index(graph)
        m = int(stage.max()) + 1 if stage.size else 0
        if max_stages is not None and m > max_stages:
            stage, m = stage * max_stages // m, max_stages
        layouts = _stage_layouts(graph, stage, m)
        n, nk = graph.num_nodes, len(hier.sizes)
        dur = durations_fn(graph, cluster)
        stages = [_Stage.build(graph, nodes, unit) for nodes, unit in layouts]
        loc = np.zeros((nk, n), dtype=np.int64)
        for st in stages:
            for b, k in enumerate(hier.sizes):
                loc[b, st.nodes] = st.pick_spread(hier.order[:k], dur, graph, cluster)
        for nodes in graph.groups.values():  # a group on its first node's local device
            loc[:, nodes] = loc[:, nodes[:1]]
        tables = _empty_tables(m, nk, hier.num_levels, recompute_nodes(graph, stage))
        t = cls(graph, cluster, hier, stage, m, loc, *tables)
        t.param_total = np.bincount(stage, weights=graph.param_bytes, minlength=m)
        blocks = [
            [t.devices(b, int(a)) for a in np.flatnonzero(v)] for b, v in enumerate(hier.valid)
        ]
        t.memory = [np.min([cluster.memory[devs] for devs in bs], axis=0) for bs in blocks]
        for nodes in graph.groups.values():  # no run boundary inside a group's stages
            t.cuttable[stage[nodes].min() + 1 : stage[nodes].max() + 1] = False
        rings = [_ring_link(t.devices(b, 0), cluster) for b in range(nk)]
        for s, st in enumerate(stages):
            t._fill_stage(s, st, dur, recompute_factor, rings)
        t._fill_links()
        t.whole_run = WholeRun(
            graph,
            cluster,
            stage,
            loc,
            t.recompute,
            hier.sizes,
            blocks,
            t.gather_buf,
            t.param_total,
        )
        return t

    def _fill_stage(
        self, s: int, st: _Stage, dur: DurationFn, rho: float, rings: list[tuple[float, float]]
    ) -> None:
        g, c, nodes = self.graph, self.cluster, st.nodes
        into = self.stage[g.edges[:, 1]] == s
        again = np.isin(nodes, self.recompute)
        for b, k in enumerate(self.sizes):
            devs = self.devices(b, 0)
            lv = self.loc[b, nodes]
            comp, path, intra = st.figures(lv, devs, dur, g, c)
            self.params[s].append(np.bincount(lv, weights=g.param_bytes[nodes], minlength=k))
            self.acts[s].append(_activations(g, self.loc[b], nodes, into, k))
            self.gather_buf[s].append(_max_by(lv, g.param_bytes[nodes], k))
            gather = _gather_times(g.param_bytes[nodes], lv, k, *rings[b])
            redo = np.bincount(lv[again], weights=dur(nodes[again], devs[lv[again]]), minlength=k)
            for o in range(4):
                busy = comp + rho * redo if o & RECOMPUTE else comp
                if o & ZERO:
                    busy = busy + gather if k > 1 else np.full(k, np.inf)
                self.stage_cost[s, b, o] = max(busy.max(), path) + intra

    def _fill_links(self) -> None:
        g = self.graph
        u, v = g.edges[:, 0], g.edges[:, 1]
        consumer = self.link_blocks()
        for s in range(1, self.m):
            into = (self.stage[v] == s) & (self.stage[u] < s)
            eu, ev = u[into], v[into]
            for b in range(len(self.sizes)):
                src = self.devices(b, 0)[self.loc[b, eu]]
                same = self.devices(b, 0)[self.loc[b, ev]]
                self.same_link[s, b] = _channel_max(eu, src, same, g.out_bytes, self.cluster)
                for (b2, lv), x in consumer[b].items():
                    dst = self.devices(b2, x)[self.loc[b2, ev]]
                    cost = _channel_max(eu, src, dst, g.out_bytes, self.cluster)
                    self.move_link[s, b, b2, lv] = cost

    def link_blocks(self) -> list[dict[tuple[int, int], int]]:
        """Per producer size ``b`` (block at address 0): ``{(b2, level): address}`` of the
        first block of size ``b2`` after it that meets it at ``level``."""
        h = self.hier
        addr = np.arange(h.num_devices)
        level0 = np.array([h.level(0, int(x)) for x in addr])
        out = []
        for k in self.sizes:
            found = {}
            for b2 in range(len(self.sizes)):
                for lv in range(h.num_levels):
                    ok = h.valid[b2] & (addr >= k) & (level0 == lv)
                    if ok.any():
                        found[b2, lv] = int(np.argmax(ok))
            out.append(found)
        return out

    def run_tables(self, reliefs: Sequence[int] = (0, 1, 2, 3)) -> tuple[np.ndarray, np.ndarray]:
        """``(cost, overflow)``, each ``(m, m + 1, K, 4)``: entry ``[i, j, b, o]`` is the run
        of stages ``i..j-1`` on a block of ``sizes[b]`` devices with relief ``o`` (only
        ``j > i`` is meaningful): Σ stage_cost + Σ same_link after the first stage, and
        :func:`~placegym.teachers.nest.run_overflow`, summed in the same order. Overflows
        of recomputation are simulated only when ``reliefs`` has one (else inf)."""
        m, nk = self.m, len(self.sizes)
        cost = np.zeros((m, m + 1, nk, 4))
        over = np.zeros((m, m + 1, nk, 4))
        for i in range(m):
            acc = self.stage_cost[i].copy()
            cost[i, i + 1] = acc
            for j in range(i + 2, m + 1):
                acc = acc + self.stage_cost[j - 1]
                acc = acc + self.same_link[j - 1][:, None]
                cost[i, j] = acc
        for b, k in enumerate(self.sizes):
            par = np.array([self.params[s][b] for s in range(m)])
            buf = np.array([self.gather_buf[s][b] for s in range(m)])
            act = np.array([self.acts[s][b] for s in range(m)])
            for o in (0, ZERO):
                for i in range(m):
                    if o & ZERO:
                        resident = (np.cumsum(self.param_total[i:]) / k)[:, None]
                        live = np.cumsum(act[i:], axis=0) + np.maximum.accumulate(buf[i:])
                    else:
                        resident = np.cumsum(par[i:], axis=0)
                        live = np.cumsum(act[i:], axis=0)
                    excess = np.maximum(resident + live - self.memory[b], 0.0)
                    over[i, i + 1 :, b, o] = excess.sum(axis=1)
            if m and over[0, m, b, 0] > 0:  # the bound does not fit: simulate the plan
                over[0, m, b, 0] = self.whole_run.overflow(b, False)
            for o in (RECOMPUTE, RECOMPUTE | ZERO):
                over[:, :, b, o] = np.inf
                if o in reliefs and m:
                    over[0, m, b, o] = self.whole_run.overflow(b, True, bool(o & ZERO))
        return cost, over


def _empty_tables(m: int, nk: int, nl: int, recompute: np.ndarray) -> tuple:
    return (
        np.zeros((m, nk, 4)),
        np.zeros((m, nk)),
        np.full((m, nk, nk, nl), np.inf),
        [[] for _ in range(m)],
        [[] for _ in range(m)],
        [[] for _ in range(m)],
        np.zeros(m),
        [],
        np.ones(m + 1, dtype=bool),
        recompute,
    )


def durations_fn(graph: Graph, cluster: Cluster) -> DurationFn:
    """The :data:`DurationFn` of ``graph`` on ``cluster`` (DESIGN §3.1 with profiled costs,
    no noise): entries of the ``(n, D)`` durations computed once per graph and cluster
    (:func:`~placegym.envs.analysis.levels.durations_on`), the values
    :func:`~placegym.envs.core.costs.node_durations` computes."""
    table = durations_on(graph, cluster)

    def dur(nodes: np.ndarray, devs: np.ndarray) -> np.ndarray:
        return table[nodes, devs]

    return dur


def _max_by(idx: np.ndarray, x: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros(k)
    np.maximum.at(out, idx, x)
    return out


def _activations(
    g: Graph, loc: np.ndarray, nodes: np.ndarray, into: np.ndarray, k: int
) -> np.ndarray:
    """Outputs made on each local device plus every distinct input read there (any
    producer whose output is live on the device while the stage runs)."""
    made = np.bincount(loc[nodes], weights=g.out_bytes[nodes], minlength=k)
    u, v = g.edges[into, 0], g.edges[into, 1]
    dst = loc[v]
    keep = np.unique(u * k + dst, return_index=True)[1]
    # local producers of the same stage are already counted in `made`
    same_stage = np.isin(u[keep], nodes) & (loc[u[keep]] == dst[keep])
    keep = keep[~same_stage]
    read = np.bincount(dst[keep], weights=g.out_bytes[u[keep]], minlength=k)
    return made + read


def _ring_link(devs: np.ndarray, c: Cluster) -> tuple[float, float]:
    """The ring's link over the block ``devs``: its slowest pair's latency and bandwidth
    (0 and inf for one device)."""
    k = devs.size
    if k < 2:
        return 0.0, np.inf
    sub = np.ix_(devs, devs)
    off = ~np.eye(k, dtype=bool)
    return float(c.pair_latency[sub][off].max()), float(c.pair_bandwidth[sub][off].min())


def _gather_times(params: np.ndarray, lv: np.ndarray, k: int, lat: float, bw: float) -> np.ndarray:
    """Per local device: ring all-gather time of its nodes' parameters over a block of
    ``k`` devices whose ring link is ``(lat, bw)`` (:func:`_ring_link`)."""
    if k < 2:
        return np.zeros(k)
    per = np.where(params > 0, (k - 1) * lat + params * (k - 1) / k / bw, 0.0)
    return np.bincount(lv, weights=per, minlength=k)
