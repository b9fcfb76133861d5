"""Certified lower bounds on the makespan of any placement of a graph on a cluster.

:func:`lower_bound` returns the largest of the bounds below. Each holds for every
placement, every priority order and either dispatch rule under DESIGN §3 without noise
(memory plays no part in times). Notation: ``w_v = min_d dur(v, d)``, the shortest
duration of ``v`` on any device (rule 1, launch overhead included); ``c_u = min over
ordered pairs a != b of latency_ab + out_bytes_u / bandwidth_ab``, the fastest any
transfer of ``u``'s output can be (``+inf`` with one device: nothing is ever sent).

1. **Work.** The devices' busy times add up to ``Σ_v dur(v, d_v) >= Σ_v w_v`` and none
   exceeds the makespan ``T``, so ``T >= Σ_v w_v / D``. Also, device ``d`` does at most
   ``flops_d · T`` FLOP in ``T``, so ``T >= Σ flops / Σ_d flops_d`` (total work over total
   device speed), and likewise ``T >= Σ io_bytes / Σ_d mem_bandwidth_d`` when every device
   has a memory bandwidth. With profiled costs (:mod:`placegym.envs.core.costs`) these two
   sums run over the nodes whose duration is the roofline on every device.
2. **Critical path with free communication.** A node starts after its producers finish,
   so ``T`` is at least the longest path with node weights ``w``.
3. **Communication-aware heads and tails** (always >= 2). *Head* ``h_v <= start(v)``:
   let ``S`` be the producers of ``v`` placed on ``v``'s device and ``e_u = h_u + w_u``
   (``<= finish(u)``). A producer outside ``S`` delivers at ``>= e_u + c_u`` (its
   transfer starts after it finishes); those in ``S`` finish before ``v`` starts, one at a
   time on one device, after the earliest of them starts: ``start(v) >= f(S) = max(
   max_{u∉S}(e_u + c_u), max_{u∈S} e_u, min_{u∈P} h_u + Σ_{u∈S} w_u)``. ``S`` is unknown,
   so ``h_v = min_S f(S)``, computed exactly over the ``|P| + 1`` candidates below: sort
   the producers by ``e_u + c_u`` descending; for any ``S``, let ``j`` be the first
   position not in ``S``; then ``S`` holds positions ``1..j-1`` and ``f(S) >= max(e_(j) +
   c_(j), max_{i<j} e_(i), min h + Σ_{i<j} w_(i))`` because each term is monotone in
   ``S``, and that value is ``f`` of the prefix itself. *Tail* ``q_v <= (last finish) −
   start(v)``, symmetrically over the consumers ``Q`` of ``v``, which all wait for the
   one output of ``v``: ``q_v = w_v + min_S max(c_v + max_{x∉S} q_x, max_{x∈S} q_x,
   Σ_{x∈S} w_x)`` (those in ``S`` run after ``v`` on its device, one at a time), again
   exact over the prefixes of ``Q`` sorted by ``q`` descending. Every schedule has
   ``start(v) >= h_v`` and a finish at ``>= start(v) + q_v``, so ``T >= max_v (h_v +
   q_v)``. With ``c = 0`` both reduce to bound 2.

Floating-point sums can round a bound up by a few ulps; the value returned is lowered by a
relative :data:`SLACK` (1e-9) so that it never exceeds the true optimum. Every bound costs
``O(n·D + E log E)``.

:func:`memory_infeasibility` is the memory counterpart: a certificate that *no* placement
fits in memory (DESIGN §3's peak), or None when it finds none.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from placegym.envs.analysis.levels import durations_on
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.costs import roofline_nodes
from placegym.envs.core.graph import Graph

__all__ = [
    "SLACK",
    "LowerBound",
    "lower_bound",
    "min_transfer_times",
    "serial_upper_bound",
]

#: Relative amount by which :func:`lower_bound` lowers its value (see the module docstring).
SLACK = 1e-9


class LowerBound(NamedTuple):
    """Lower bounds on the makespan (seconds); ``value`` is the largest, lowered by SLACK.

    Attributes:
        value: the certified bound.
        work: bound 1 (work over devices).
        free_comm_path: bound 2 (critical path with free communication).
        path: bound 3 (communication-aware heads and tails).
    """

    value: float
    work: float
    free_comm_path: float
    path: float

    @property
    def kind(self) -> str:
        """Which bound is binding: ``"work"`` or ``"path"``."""
        return "work" if self.work >= self.path else "path"


def min_transfer_times(graph: Graph, cluster: Cluster) -> np.ndarray:
    """``(n,)`` fastest transfer of each node's output between two devices (inf if D = 1)."""
    d = cluster.num_devices
    if d == 1:
        return np.full(graph.num_nodes, math.inf)
    used = np.unique(cluster.pair_level[~np.eye(d, dtype=bool)])
    lat = np.array([cluster.levels[k].latency for k in used])
    bw = np.array([cluster.levels[k].bandwidth for k in used])
    return (lat[None, :] + graph.out_bytes[:, None] / bw[None, :]).min(axis=1)


def _best_split(ranked: list[tuple[float, float, float]], base: float, other: float) -> float:
    """``min over j`` of ``max(other + key_(j), max_{i<j} key_(i), base + Σ_{i<j} w_(i))``.

    ``ranked`` holds ``(key_far, key_near, w)`` sorted by ``key_far`` descending, where
    ``key_far`` is the node's time if it is *not* on the shared device and ``key_near`` if
    it is; ``other`` is added to ``key_far`` (0 for heads, ``c_v`` for tails).
    """
    best = other + ranked[0][0]
    near, total = 0.0, 0.0
    for i, (_, key_near, w) in enumerate(ranked):
        near = max(near, key_near)
        total += w
        nxt = other + ranked[i + 1][0] if i + 1 < len(ranked) else 0.0
        best = min(best, max(nxt, near, base + total))
    return best


def _heads(graph: Graph, w: list[float], comm: list[float]) -> list[float]:
    ptr, idx = (a.tolist() for a in graph.producer_csr)
    head = [0.0] * graph.num_nodes
    for v in graph.topological_order.tolist():
        producers = idx[ptr[v] : ptr[v + 1]]
        if not producers:
            continue
        ends = {u: head[u] + w[u] for u in producers}
        ranked = sorted(((ends[u] + comm[u], ends[u], w[u]) for u in producers), reverse=True)
        head[v] = _best_split(ranked, min(head[u] for u in producers), 0.0)
    return head


def _tails(graph: Graph, w: list[float], comm: list[float]) -> list[float]:
    ptr, idx = (a.tolist() for a in graph.consumer_csr)
    tail = [0.0] * graph.num_nodes
    for v in reversed(graph.topological_order.tolist()):
        consumers = idx[ptr[v] : ptr[v + 1]]
        after = 0.0
        if consumers:
            ranked = sorted(((tail[x], tail[x], w[x]) for x in consumers), reverse=True)
            after = _best_split(ranked, 0.0, comm[v])
        tail[v] = w[v] + after
    return tail


def _free_comm_path(graph: Graph, w: list[float]) -> float:
    ptr, idx = (a.tolist() for a in graph.producer_csr)
    finish = [0.0] * graph.num_nodes
    for v in graph.topological_order.tolist():
        finish[v] = w[v] + max((finish[u] for u in idx[ptr[v] : ptr[v + 1]]), default=0.0)
    return max(finish, default=0.0)


def _work(graph: Graph, cluster: Cluster, w: np.ndarray) -> float:
    bounds = [float(w.sum()) / cluster.num_devices]
    # FLOP and bytes bound only the nodes whose durations are the roofline everywhere
    roof = roofline_nodes(graph, cluster)
    bounds.append(float(graph.flops[roof].sum()) / float(cluster.flops.sum()))
    if np.isfinite(cluster.mem_bandwidth).all():
        bounds.append(float(graph.io_bytes[roof].sum()) / float(cluster.mem_bandwidth.sum()))
    return max(bounds)


def lower_bound(graph: Graph, cluster: Cluster) -> LowerBound:
    """Certified lower bounds on the makespan of ``graph`` on ``cluster`` (module docstring).

    Returns:
        A :class:`LowerBound`; ``value <= simulate(graph, cluster, p).makespan`` for every
        placement ``p`` (no noise, either dispatch rule).
    """
    if graph.num_nodes == 0:
        return LowerBound(0.0, 0.0, 0.0, 0.0)
    w = durations_on(graph, cluster).min(axis=1)
    comm = min_transfer_times(graph, cluster).tolist()
    wl = w.tolist()
    head, tail = _heads(graph, wl, comm), _tails(graph, wl, comm)
    path = max(h + q for h, q in zip(head, tail))
    work = _work(graph, cluster, w)
    free = _free_comm_path(graph, wl)
    value = max(work, free, path) * (1.0 - SLACK)
    return LowerBound(value=value, work=work, free_comm_path=free, path=path)


def serial_upper_bound(graph: Graph, cluster: Cluster) -> float:
    """An upper bound on the makespan of every placement (no noise, either dispatch):
    ``Σ_v max_d dur(v, d) + Σ_v k_v · max_{a≠b}(latency_ab + out_bytes_v / bandwidth_ab)``,
    ``k_v = min(consumers of v, D - 1)`` (the most transfers ``v``'s output can need).

    Work conservation makes it one: at every moment before the end some node runs or some
    transfer is in flight (the first unfinished node in topological order has every
    input produced; each is on its device, and then it runs or its device runs another
    node, or in transit, and a queued transfer waits only for one in flight), so the
    makespan is at most the summed durations of the nodes and transfers, each at most
    its largest. It scores infeasible episodes (:func:`placegym.envs.mdp.reward.oom_makespan`):
    no feasible placement is worse.
    """
    if graph.num_nodes == 0:
        return 0.0
    compute = float(durations_on(graph, cluster).max(axis=1).sum())
    d = cluster.num_devices
    if d < 2 or graph.num_edges == 0:
        return compute
    off = ~np.eye(d, dtype=bool)
    latency = float(cluster.pair_latency[off].max())
    per_byte = float((1.0 / cluster.pair_bandwidth[off]).max())
    consumers = np.bincount(graph.edges[:, 0], minlength=graph.num_nodes)
    sends = np.minimum(consumers, d - 1)
    return compute + float((sends * (latency + graph.out_bytes * per_byte)).sum())
