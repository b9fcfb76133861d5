"""What a :class:`~placegym.agents.doppler.selector.ProposalSelector` reads: summaries of
a placement and of an instance, computed without a simulator, and the features built
from them.

- :func:`placement_summary` of a whole placement, ``O(n log n + E + D²)``
  (:data:`PLACEMENT_FIELDS`): two list schedules' estimated makespans, the busiest
  device's compute, the total, busiest-channel, busiest-egress and busiest-ingress copy
  time, the share of devices used and the largest resident share of a device's memory.
  Both list schedules take the nodes in the placement's priority order as they become
  ready (:func:`ready_order`), each at the later of its device's last finish and its
  inputs' arrival, an input from another device ``latency + bytes / bandwidth`` after
  its producer's finish:

  - ``estimate``: every copy at once, no contention;
  - ``contended``: one copy per output and destination device (the simulator's rule 4,
    DESIGN §3), which takes its channel (``links="pair"``: the ordered device pair) or
    its send and receive ports at its level (``links="port"``) when the list schedule
    first needs it, starting at the later of its producer's finish and the last arrival
    on what it takes. An estimate, not the simulator: copies queue in the order the
    list schedule asks for them, not their producers' finishes, and each device runs
    its nodes in the list's order, with no dispatch among ready nodes.

- :func:`instance_summary` of the graph and cluster, ``O(n · D + E + D²)``
  (:data:`INSTANCE_FIELDS`).
- :func:`proposal_features`: a proposal's summary relative to the agent's own (ratios,
  differences and both sides), with the proposal's name one-hot and the instance's
  summary; with ``contention`` the contended estimates' ratios after them
  (:data:`CONTENTION_FEATURES`).
"""

from __future__ import annotations

import heapq
import math
from typing import Any, NamedTuple

import numpy as np

from placegym.envs import Cluster, Graph, Placement
from placegym.envs.analysis.levels import step_costs
from placegym.envs.analysis.memory import memory_may_bind

__all__ = [
    "CONTENTION_FEATURES",
    "FEATURES",
    "INSTANCE_FIELDS",
    "PLACEMENT_FIELDS",
    "copies",
    "estimated_peak",
    "instance_summary",
    "placement_summary",
    "proposal_features",
    "ready_order",
]

#: The fields of :func:`placement_summary`, in order.
PLACEMENT_FIELDS = (
    "estimate",
    "load",
    "comm",
    "channel",
    "egress",
    "ingress",
    "used",
    "resident",
    "contended",
)
#: The fields of :func:`instance_summary`, in order.
INSTANCE_FIELDS = (
    "log_nodes",
    "log_devices",
    "log_ccr",
    "link_levels",
    "device_speeds",
    "memory_may_bind",
    "log_memory_share",
    "edges_per_node",
)
_TINY = 1e-30


def placement_summary(graph: Graph, cluster: Cluster, placement: Placement) -> np.ndarray:
    """``(len(PLACEMENT_FIELDS),)`` summary of ``placement`` (module docstring): the list
    schedule's estimated makespan, the busiest device's compute seconds, the copies'
    total, busiest-channel, busiest-egress and busiest-ingress seconds, the share of
    devices used, the largest resident-bytes share of a device's memory and the
    contended list schedule's estimated makespan."""
    costs = step_costs(graph, cluster)
    n, d = graph.num_nodes, cluster.num_devices
    dev = np.asarray(placement.device, dtype=np.int64)
    dur = costs.duration[np.arange(n), dev]
    load = np.bincount(dev, weights=dur, minlength=d)
    out = graph.out_bytes
    lat, inv_bw = costs.latency, costs.inv_bandwidth
    pairs = copies(graph, dev)
    a, b = dev[pairs[:, 0]], pairs[:, 1]
    channel = np.zeros((d, d))
    np.add.at(channel, (a, b), lat[a, b] + out[pairs[:, 0]] * inv_bw[a, b])
    sched = _list_schedules(costs, cluster, dev, ready_order(costs, placement.rank), dur, out)
    finish, contended = sched.finish, sched.contended
    resident = np.bincount(dev, weights=graph.param_bytes, minlength=d) / cluster.memory
    return np.array(
        [
            float(finish.max()) if n else 0.0,
            float(load.max()),
            float(channel.sum()),
            float(channel.max()),
            float(channel.sum(1).max()),
            float(channel.sum(0).max()),
            len(np.unique(dev)) / d,
            float(resident.max()),
            float(contended.max()) if n else 0.0,
        ]
    )


def copies(graph: Graph, dev: np.ndarray) -> np.ndarray:
    """``(c, 2)`` the copies a placement makes: (producer, destination device), one per
    output and device of another of its consumers (the simulator's rule)."""
    cptr, cidx = graph.consumer_csr
    src = np.repeat(np.arange(graph.num_nodes), np.diff(cptr))
    pairs = np.unique(np.stack([src, dev[cidx]], axis=1).reshape(-1, 2), axis=0).astype(np.int64)
    return pairs[dev[pairs[:, 0]] != pairs[:, 1]]


def ready_order(costs: Any, rank: np.ndarray) -> list[int]:
    """The nodes as a list schedule takes them: each time, of the nodes whose producers
    are all taken, the one of least ``rank`` (``costs``: the graph's
    :func:`~placegym.envs.analysis.levels.step_costs`, for its producer and consumer
    lists)."""
    succs = costs.successors
    waiting = [len(p) for p in costs.predecessors]
    heap = [(int(rank[v]), v) for v in range(len(waiting)) if not waiting[v]]
    heapq.heapify(heap)
    order = []
    while heap:
        _, v = heapq.heappop(heap)
        order.append(v)
        for w in succs[v]:
            waiting[w] -= 1
            if not waiting[w]:
                heapq.heappush(heap, (int(rank[w]), w))
    return order


class Schedules(NamedTuple):
    """The two list schedules of :func:`placement_summary`: ``finish`` per node of the
    contention-free one; ``start`` and ``contended`` (finish) per node of the contended
    one, and each of its copies, ``(producer, device): (start, arrival)``."""

    finish: np.ndarray
    start: np.ndarray
    contended: np.ndarray
    copies: dict[tuple[int, int], tuple[float, float]]


def _list_schedules(
    costs: Any,
    cluster: Cluster,
    dev: np.ndarray,
    order: list[int],
    dur: np.ndarray,
    out: np.ndarray,
) -> Schedules:
    """Finish per node of the two list schedules of :func:`placement_summary` (module
    docstring), contention-free and contended, taking the nodes in ``order``
    (:func:`ready_order`)."""
    preds, d = costs.predecessors, cluster.num_devices
    lat, inv_bw = costs.latency.tolist(), costs.inv_bandwidth.tolist()
    dv, dr, ob = dev.tolist(), dur.tolist(), out.tolist()
    port = cluster.links == "port"
    level = cluster.pair_level.tolist()
    finish, begin, late = [0.0] * len(dv), [0.0] * len(dv), [0.0] * len(dv)
    free, busy = [0.0] * d, [0.0] * d
    taken: dict[tuple[int, int], float] = {}  # a channel's or port's last arrival
    arrival: dict[tuple[int, int], tuple[float, float]] = {}  # (producer, device): copy
    for v in order:
        dd, ready, wait = dv[v], 0.0, 0.0
        for u in preds[v]:
            a = dv[u]
            if a == dd:
                t, c = finish[u], late[u]
            else:
                t = finish[u] + lat[a][dd] + ob[u] * inv_bw[a][dd]  # (summed in this order)
                c = arrival[(u, dd)][1] if (u, dd) in arrival else -1.0
                if c < 0:
                    # a channel is (a, -1 - b); the ports at level l are (a, l), (-1 - b, l)
                    lv = level[a][dd]
                    keys = ((a, lv), (-1 - dd, lv)) if port else ((a, -1 - dd),)
                    sent = max(late[u], *(taken.get(k, 0.0) for k in keys))
                    c = sent + lat[a][dd] + ob[u] * inv_bw[a][dd]
                    for k in keys:
                        taken[k] = c
                    arrival[(u, dd)] = (sent, c)
            if t > ready:
                ready = t
            if c > wait:
                wait = c
        finish[v] = max(ready, free[dd]) + dr[v]
        free[dd] = finish[v]
        begin[v] = max(wait, busy[dd])
        late[v] = begin[v] + dr[v]
        busy[dd] = late[v]
    return Schedules(np.asarray(finish), np.asarray(begin), np.asarray(late), arrival)


def estimated_peak(graph: Graph, cluster: Cluster, placement: Placement) -> np.ndarray:
    """``(D,)`` each device's peak bytes in the contended list schedule of
    :func:`placement_summary`, by DESIGN §3's lifetimes: its nodes' parameters for the
    whole run; a node's output from its start until its last consumer on its device has
    finished and its last copy has arrived (a sink's until its own finish); a copy from
    its start until its last consumer on the receiving device has finished (frees before
    allocations at equal times). ``O(n log n + E log E)``, no simulator call.

    An estimate: the list schedule's times are not the simulator's, so a peak can be
    missed (a margin is the caller's); a placement's recompute set is not modelled.
    """
    costs = step_costs(graph, cluster)
    n, d = graph.num_nodes, cluster.num_devices
    dev = np.asarray(placement.device, dtype=np.int64)
    dur = costs.duration[np.arange(n), dev]
    out = graph.out_bytes
    sched = _list_schedules(costs, cluster, dev, ready_order(costs, placement.rank), dur, out)
    finish, start = sched.contended, sched.start
    # each output's end: a sink's finish, else its last local consumer's finish
    cptr, cidx = graph.consumer_csr
    src = np.repeat(np.arange(n), np.diff(cptr))
    local = dev[cidx] == dev[src]
    end = np.where(np.diff(cptr) == 0, finish, -np.inf)
    np.maximum.at(end, src[local], finish[cidx[local]])
    k = len(sched.copies)
    pu = np.fromiter((u for u, _ in sched.copies), np.int64, k)
    pb = np.fromiter((b for _, b in sched.copies), np.int64, k)
    times = np.array(list(sched.copies.values())).reshape(k, 2)
    np.maximum.at(end, pu, times[:, 1])
    # each copy's end: its last consumer's finish on the receiving device
    served = np.full(k, -np.inf)
    row = {key: i for i, key in enumerate(sched.copies)}
    remote = np.flatnonzero(~local)
    hit = [row.get((u, b), -1) for u, b in zip(src[remote].tolist(), dev[cidx[remote]].tolist())]
    got = np.asarray(hit, dtype=np.int64)
    ok = got >= 0
    np.maximum.at(served, got[ok], finish[cidx[remote][ok]])
    where = np.concatenate([dev, pb])
    alloc = np.concatenate([start, times[:, 0]])
    free = np.concatenate([end, served])
    size = np.concatenate([out, out[pu]])
    ev_dev = np.concatenate([where, where])
    ev_t = np.concatenate([alloc, free])
    ev_kind = np.concatenate([np.ones(len(where)), np.zeros(len(where))])  # frees first
    ev_x = np.concatenate([size, -size])
    order = np.lexsort((ev_kind, ev_t, ev_dev))
    x, devs = ev_x[order], ev_dev[order]
    level = np.cumsum(x)
    first = np.searchsorted(devs, np.arange(d))  # each device's first event
    base = np.where(first > 0, level[np.maximum(first - 1, 0)], 0.0)
    peak = np.zeros(d)
    np.maximum.at(peak, devs, level - base[devs])
    return peak + np.bincount(dev, weights=graph.param_bytes, minlength=d)


def instance_summary(graph: Graph, cluster: Cluster) -> np.ndarray:
    """``(len(INSTANCE_FIELDS),)`` summary of the instance: log nodes and devices, log of
    the mean copy time over the mean compute time, the distinct channel bandwidths and
    device speeds, whether memory may bind, log of all parameter and output bytes over
    all memory, and edges per node."""
    costs = step_costs(graph, cluster)
    n, d = graph.num_nodes, cluster.num_devices
    mean_dur = float(costs.duration.mean()) if n else 0.0
    off = ~np.eye(d, dtype=bool)
    inv_bw = costs.inv_bandwidth[off]
    mean_comm = float(graph.out_bytes.mean() * inv_bw.mean()) if n and len(inv_bw) else 0.0
    levels = len(np.unique(np.round(np.log(inv_bw + _TINY), 3)))
    speeds = np.unique(np.round(costs.duration.mean(0) / max(mean_dur, _TINY), 3))
    share = float(graph.param_bytes.sum() + graph.out_bytes.sum()) / float(cluster.memory.sum())
    return np.array(
        [
            math.log(max(n, 1)),
            math.log(d),
            math.log(mean_comm / max(mean_dur, _TINY) + 1e-9),
            float(levels),
            float(len(speeds)),
            float(memory_may_bind(graph, cluster)),
            math.log(share + 1e-9),
            graph.num_edges / max(n, 1),
        ]
    )


def proposal_features(
    own: np.ndarray,
    proposal: np.ndarray,
    name_index: int,
    names: int,
    instance: np.ndarray,
    contention: bool = False,
) -> np.ndarray:
    """The selector's input for one proposal: its :func:`placement_summary` relative to
    the agent's own (``own``), the proposal's name one-hot (``name_index`` of
    ``names``) and the :func:`instance_summary`; with ``contention``, then the log
    ratios of the contended estimates, the proposal's to the agent's and each one's
    to its contention-free estimate (:data:`CONTENTION_FEATURES`)."""
    e = max(own[0], _TINY)
    p, o = proposal, own
    rel = [
        math.log(max(p[0], _TINY) / e),
        math.log(max(p[1], _TINY) / max(o[1], _TINY)),
        (p[2] - o[2]) / e,
        p[3] / e,
        o[3] / e,
        p[4] / e,
        o[4] / e,
        p[5] / e,
        o[5] / e,
        math.log(max(p[1], _TINY) / max(p[0], _TINY)),
        math.log(max(o[1], _TINY) / e),
        p[6],
        o[6],
        p[7],
        o[7],
        p[2] / e,
        o[2] / e,
    ]
    onehot = np.zeros(names)
    onehot[name_index] = 1.0
    parts = [np.asarray(rel), onehot, instance]
    if contention:
        ce, cp = max(own[8], _TINY), max(p[8], _TINY)
        parts.append(
            np.array([math.log(cp / ce), math.log(ce / e), math.log(cp / max(p[0], _TINY))])
        )
    return np.concatenate(parts).astype(np.float32)


#: Width of :func:`proposal_features` without the one-hot.
FEATURES = 17 + len(INSTANCE_FIELDS)
#: Width of the contention features :func:`proposal_features` appends with
#: ``contention``.
CONTENTION_FEATURES = 3
