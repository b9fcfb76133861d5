"""Recomputation (activation checkpointing): the exact semantics of ``Placement.recompute``.

A placement of a training-step graph (:func:`~placegym.envs.workloads.training.
to_training_step`: ``N = 2n`` nodes, forward node ``v < n``, its backward node ``v' = n +
v``, the stash edge ``v -> v'``, co-location group ``{v, v'}``) may carry a set ``R`` of
forward nodes to recompute: each drops its stash, and its forward runs once more, on
``v'``'s device, when the backward pass needs it. Time is traded for memory per node, as
Checkmate and Piper choose it per layer.

**Which nodes.** ``v`` may be recomputed iff ``v < n``, node ``n + v`` is its backward node
(spec kind ``"backward"`` with ``"forward": v``) in ``v``'s co-location group, the stash
edge ``v -> v'`` exists, ``v`` reads forward nodes only, ``v'`` reads ``v`` and backward
nodes ``x'`` of forward consumers ``x`` of ``v`` only (the gradients), and ``v`` is not a
data input (:func:`~placegym.envs.core.specs.is_data_input`: it is read, not
computed). Every graph :func:`to_training_step` makes satisfies this for every forward
node but its data inputs. Any other node is refused with a ``ValueError`` naming
``recompute[i]``, the node and the reason (:func:`check_recompute`).

**The rewrite** (:func:`expand`). A placement with ``R = r_0 < ... < r_{k-1}`` is simulated
as the placement of an *extended graph* of ``N + k`` nodes under DESIGN §3 unchanged, so
the compiled simulator and the oracle agree by construction, with either ``links``.
Node ``N + i`` is ``v^r``, the recompute node of ``v = r_i``, on ``v``'s device ``d``
(that of ``v'`` too):

- attributes: ``v``'s ``flops``, ``out_bytes``, ``layer`` and group; ``param_bytes`` 0
  (the parameters are resident with ``v``); op ``"rc:<op>"``; spec ``{"kind":
  "recompute", "forward": v}``; a measured ``time`` equal to rule 1's term of ``v`` on
  ``d`` (profiled, measured or roofline), so its duration on ``d`` is ``v``'s exactly
  (with noise it has its own factor: the factors are drawn for the ``N + k`` nodes in id
  order, ``N`` first, as for any graph).
- inputs: for each producer ``u`` of ``v``, ``u^r -> v^r`` when ``u`` is recomputed on
  ``d`` too, else ``u -> v^r``: ``u``'s output as it is on ``d``, kept there by ``u``'s
  stash, or the copy received on ``d`` for ``v``, which now lives until ``v^r`` has run
  (the checkpoint of ``v``'s input). Recomputation never crosses devices.
- output: the stash edge ``v -> v'`` is replaced, in its place in the edge list, by
  ``v^r -> v'``; ``v``'s output is freed when its forward consumers are done.
- triggers: let ``S(v)`` be the nodes reachable from ``v`` along forward edges between
  nodes of ``R`` on ``d`` (``v`` included): the recompute nodes that read ``v^r``,
  directly or not. For each ``y`` in ``S(v)`` and each gradient ``x' -> y'`` where ``x``
  is a forward descendant of every node of ``S(v)``, the edge ``x' -> v^r``: ``v^r``
  starts only once the backward pass has reached ``S(v)``. For a lone recomputed node
  (``S(v) = {v}``) these are all the gradients ``v'`` reads: ``v^r`` waits for what ``v'``
  waits for. In a recomputed chain ``a .. b`` every ``v^r`` waits for ``(b+1)'``; the
  gradient ``(v+1)' -> v'`` cannot trigger ``v^r``, since ``(v+1)'`` itself waits for
  ``v^r`` through ``(v+1)^r``: that edge would close a cycle.
- priority: ``v^r`` is ranked immediately before the first-ranked ``y'`` over ``y`` in
  ``S(v)`` (the first backward node that needs it); recompute nodes ranked before one
  node keep the order of :attr:`~placegym.envs.core.graph.Graph.topological_order`. Other
  nodes keep their relative order.

**Consequences** (tested): the extended graph is acyclic (order the backward and
recompute nodes by any topological order ``τ`` of the forward graph: ``x' -> v^r`` needs
``τ(x)`` above ``τ`` of all of ``S(v)``, ``v^r -> y^r`` and ``v^r -> v'`` do not increase
``max τ(S)``, gradients decrease ``τ``). Recomputation adds no transfer: a recompute node's
consumers are all on its device, its inputs were sent there for ``v`` already, and a
trigger ``x'`` already feeds ``y'`` on ``d``. Triggers add no memory: ``y'`` finishes after
``v^r``, so the copy of ``x'``'s output on ``d`` (or ``x'``'s own, on ``d``) lives exactly as
long as without them. What recomputation costs is ``v^r``'s time on ``d``, its output from
its start until ``v'`` (and the recomputes on ``d`` that read it) finish, and ``v``'s inputs
kept for ``v^r``: a copy received on ``d``, or a data input on ``d`` (whose own backward
node would have freed it early). When no node descends from all of ``S(v)`` (the
recomputed nodes reach a forward sink) ``v^r`` has no trigger: it may start as soon as
its inputs are there, and the priority order decides when it does; recomputing a sink
``v`` leaves its forward with no consumer.

**Schedules** of such a placement are those of the extended graph and placement:
``Schedule.graph`` and ``Schedule.placement`` have ``N + k`` nodes, node ``N + i``
recomputes ``R[i]``, and ``Schedule.recomputation`` is the :class:`Recomputation`
(``None`` without recompute). The placement file keeps ``R`` under the optional key
``"recompute"`` (:class:`~placegym.envs.core.placement.Placement`).
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from placegym.envs.core.costs import cost_table
from placegym.envs.core.graph import Graph
from placegym.envs.core.recompute_rule import check_recompute, recomputable, recompute_problem

if TYPE_CHECKING:
    from placegym.envs.core.cluster import Cluster
    from placegym.envs.core.placement import Placement

__all__ = ["Recomputation", "check_recompute", "expand", "recomputable", "recompute_problem"]


@dataclass(frozen=True, eq=False)
class Recomputation:
    """The rewrite of a placement with recompute (module docstring).

    Attributes:
        graph: the extended graph, ``N + k`` nodes.
        placement: its placement (no recompute): the caller's devices and order, with
            the recompute nodes added.
        nodes: ``(k,)`` the recomputed nodes, ascending: node ``N + i`` recomputes
            ``nodes[i]``.
        triggers: ``(T, 2)`` the trigger edges ``(x', N + i)``.
        source: the caller's graph (``N`` nodes); ``base`` the caller's placement.
    """

    graph: Graph
    placement: Placement
    nodes: np.ndarray
    triggers: np.ndarray
    source: Graph
    base: Placement

    @property
    def num_source_nodes(self) -> int:
        """``N``: nodes of the caller's graph (recompute nodes are ``N ..``)."""
        return self.source.num_nodes

    def forward_of(self, node: int) -> int:
        """The node a node of the extended graph runs: itself below ``N``, else the
        forward node it recomputes."""
        big = self.source.num_nodes
        return int(node) if node < big else int(self.nodes[node - big])


@dataclass(frozen=True, eq=False)
class _Rewrite:
    """The part of a rewrite that depends on (graph, cluster, devices, R) only, not on
    the order: kept for the last few such keys."""

    graph: Graph
    triggers: np.ndarray
    serve_ptr: np.ndarray  # (k + 1,) recompute node i serves backward nodes
    serve_idx: np.ndarray  # serve_idx[serve_ptr[i]:serve_ptr[i + 1]] (those of S(v))
    topo: np.ndarray  # (k,) topological position of each recomputed node


_CACHE: OrderedDict[tuple[Any, ...], tuple[Graph, Any, _Rewrite]] = OrderedDict()
_CACHE_SIZE = 16
_LOCK = threading.Lock()


def expand(graph: Graph, cluster: Cluster, placement: Placement) -> Recomputation:
    """The extended graph and placement of ``placement`` (which must fit ``graph`` and
    ``cluster``: :meth:`Placement.check`) with its recompute set (module docstring). The
    extended graph is kept for the last few (graph, cluster, devices, recompute) keys, so
    placements that differ only in their order share it."""
    nodes = placement.recompute
    dev = placement.device
    if nodes.size == 0:
        return Recomputation(graph, placement, nodes, np.zeros((0, 2), np.int64), graph, placement)
    key = (id(graph), id(cluster), nodes.tobytes(), dev.tobytes())
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None and hit[0] is graph and hit[1] is cluster:
            _CACHE.move_to_end(key)
            rw = hit[2]
        else:
            hit = None
    if hit is None:
        rw = _rewrite(graph, cluster, dev, nodes)
        with _LOCK:
            _CACHE[key] = (graph, cluster, rw)
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
    # ranks: each recompute node just before the first-ranked node it serves, ties by
    # topological position (a recompute node before those that read it)
    first = np.minimum.reduceat(placement.rank[rw.serve_idx], rw.serve_ptr[:-1])
    key_rank = np.concatenate([placement.rank * 2 + 1, first * 2])
    key_topo = np.concatenate([np.zeros(graph.num_nodes, dtype=np.int64), rw.topo])
    order = np.lexsort((key_topo, key_rank))
    device = np.concatenate([dev, dev[nodes]])
    ext = dataclasses.replace(placement, device=device, order=order, recompute=nodes[:0])
    return Recomputation(rw.graph, ext, nodes, rw.triggers, graph, placement)


def base_time(graph: Graph, cluster: Cluster, v: int, d: int) -> float:
    """Rule 1's term of node ``v`` on device ``d`` without noise or launch overhead, with
    the simulator's arithmetic (:func:`placegym.envs.sim._kernel.durations`)."""
    table, dclass = cost_table(graph, cluster)
    c = int(dclass[d])
    t = float(table[v, c]) if c >= 0 else math.nan
    if math.isnan(t):
        a = float(graph.flops[v] / cluster.flops[d])
        b = float(graph.io_bytes[v] / cluster.mem_bandwidth[d])
        t = a if a >= b else b
    return t


def _rewrite(graph: Graph, cluster: Cluster, dev: np.ndarray, nodes: np.ndarray) -> _Rewrite:
    big, n, k = graph.num_nodes, graph.num_nodes // 2, nodes.size
    rid = np.full(big, -1, dtype=np.int64)
    rid[nodes] = np.arange(k)
    topo = np.empty(big, dtype=np.int64)
    topo[graph.topological_order] = np.arange(big)
    fwd_order = [v for v in graph.topological_order.tolist() if v < n]
    # S(v) as bit masks over R's indices: v and the R nodes on v's device it reaches
    # along forward edges between R nodes there
    reach = [0] * k
    for v in reversed(fwd_order):
        i = rid[v]
        if i < 0:
            continue
        mask = 1 << int(i)
        for w in graph.successors(v).tolist():
            if w < n and rid[w] >= 0 and dev[w] == dev[v]:
                mask |= reach[rid[w]]
        reach[i] = mask
    # each forward node's strict ancestors among R (bit masks)
    anc = [0] * n
    for x in fwd_order:
        mask = 0
        for u in graph.predecessors(x).tolist():
            if u < n:
                mask |= anc[u] | ((1 << int(rid[u])) if rid[u] >= 0 else 0)
        anc[x] = mask
    edges = graph.edges.copy()
    src = edges[:, 0]
    stash = (src < n) & (edges[:, 1] == src + n) & (rid[src] >= 0)
    edges[stash, 0] = big + rid[src[stash]]  # v -> v' becomes v^r -> v', in place
    extra: list[tuple[int, int]] = []
    triggers: list[tuple[int, int]] = []
    serves: list[int] = []
    ptr = [0]
    for i, v in enumerate(nodes.tolist()):
        d = dev[v]
        for u in graph.predecessors(v).tolist():
            same = rid[u] >= 0 and dev[u] == d
            extra.append((big + int(rid[u]) if same else u, big + i))
        members = [int(nodes[j]) for j in _bits(reach[i])]
        found: set[int] = set()
        for y in members:
            for p in graph.predecessors(n + y).tolist():
                if p != y and (anc[p - n] & reach[i]) == reach[i] and p not in found:
                    found.add(p)
                    triggers.append((p, big + i))
        serves += [n + y for y in members]
        ptr.append(len(serves))
    ext_edges = np.concatenate([edges, np.array(extra + triggers, dtype=np.int64).reshape(-1, 2)])
    base = np.array([base_time(graph, cluster, v, int(dev[v])) for v in nodes.tolist()])
    ext = _extended_graph(graph, nodes, ext_edges, base)
    return _Rewrite(
        graph=ext,
        triggers=np.array(triggers, dtype=np.int64).reshape(-1, 2),
        serve_ptr=np.array(ptr, dtype=np.int64),
        serve_idx=np.array(serves, dtype=np.int64),
        topo=topo[nodes],
    )


def _bits(mask: int) -> list[int]:
    """The indices of the set bits of ``mask``, ascending."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def _extended_graph(graph: Graph, nodes: np.ndarray, edges: np.ndarray, base: np.ndarray) -> Graph:
    k = nodes.size
    nan = np.full(k, np.nan)
    try:
        return Graph(
            flops=np.concatenate([graph.flops, graph.flops[nodes]]),
            out_bytes=np.concatenate([graph.out_bytes, graph.out_bytes[nodes]]),
            edges=edges,
            param_bytes=np.concatenate([graph.param_bytes, np.zeros(k)]),
            layer=np.concatenate([graph.layer, graph.layer[nodes]]),
            op=(*graph.op, *(f"rc:{graph.op[v]}" for v in nodes.tolist())),
            spec=(*graph.spec, *({"kind": "recompute", "forward": v} for v in nodes.tolist())),
            name=graph.name,
            time=np.concatenate([graph.time, base]),
            group=np.concatenate([graph.group, graph.group[nodes]]),
            kind_time={kind: np.concatenate([t, nan]) for kind, t in graph.kind_time.items()},
        )
    except ValueError as e:  # only a graph that is not a training step can get here
        raise ValueError(
            f"recompute: the recompute nodes do not fit graph {graph.name!r}: {e}"
        ) from None
