"""Polishing a placement by local search on an estimated schedule, with no simulator call.

A one-pass agent's kept placement (:func:`~placegym.agents.doppler.selector.choose`) is
the policy's own or a proposal's; :func:`polish` moves single nodes (a co-location group
moves whole) between devices where :func:`eager_schedule` says the makespan falls, and
stops after ``evals`` schedules or when no move on the critical chain helps.

**The estimate** (:func:`eager_schedule`, ``O(n + E)`` per call, compiled): a list
schedule in the placement's ready order (:func:`~placegym.agents.doppler.summaries.
ready_order`), nearer to the simulator's rules (DESIGN §3) than the selector's
summaries on two points:

- **copies leave when their producer finishes.** When a node is scheduled, one copy
  per other device hosting a consumer (rule 4), in ascending device index, is queued on
  its channel (``links="pair"``: the ordered device pair) or its send and receive ports
  at its level (``links="port"``), starting at the later of the producer's finish and
  the last arrival on what it takes; the summaries' contended estimate queues a copy
  only when a consumer first needs it, which lets a late copy jump the queue;
- **with ``insert``, a node fills the earliest idle gap** on its device at or after its
  inputs' arrival that is long enough (HEFT's insertion rule), the way a
  work-conserving device runs a ready node before one listed earlier that is not yet
  ready; without it, each device runs its nodes in list order.

It is not the simulator: copies queue in list order rather than by time, no device
dispatches among its ready nodes, and memory is not modelled.

**The search** (:func:`polish`): from the last node to finish, the chain of what bound
each start (the input that arrived last, or the node before it on its device); for each
node of the chain in turn, each other device (every one on up to :data:`ALL_DEVICES`
devices, else those of its producers and consumers), the first move that shortens the
estimate by more than a relative ``1e-9`` is kept and the chain is traced again. The
priority order and the recompute set stay as they are. Deterministic: no random draw.
Memory is the caller's to check (:func:`~placegym.agents.doppler.selector.one_pass_select`
admits the result as it admits a proposal, else keeps the placement it polished).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from placegym.agents.doppler.summaries import ready_order
from placegym.envs import Cluster, Graph, Placement
from placegym.envs.analysis.levels import step_costs

__all__ = ["ALL_DEVICES", "VISITS", "EagerInputs", "eager_peak", "eager_schedule", "polish"]

#: :func:`polish` tries every device for a node on clusters of at most this many devices,
#: else only its producers' and consumers' devices.
ALL_DEVICES = 32
#: :func:`polish` makes at most this many visits in all, a schedule visiting ``n + E``
#: nodes and edges and its ``D * D`` channels (``D * levels`` ports): on large graphs
#: fewer schedules than asked for, about 0.1 s of search per 1,000 nodes at most.
VISITS = 1_000_000


@njit(cache=True)
def _eager_kernel(
    order,
    dev,
    duration,
    out,
    pptr,
    pidx,
    pedge,
    cptr,
    cidx,
    lat,
    inv_bw,
    level,
    levels,
    port,
    insert,
    start,
    finish,
    binding,
    earr,
    slot_t,
    slot_n,
):  # pragma: no cover - compiled
    """The schedule of :func:`eager_schedule` into ``start``, ``finish`` and ``binding``
    (per node: the producer or device predecessor its start waited for, -1 for none);
    returns the makespan. ``duration (n, D)``; ``earr (E, 2)``: per consumer edge, its
    copy's start and arrival (remote edges only); ``slot_t``/``slot_n``: per device, its
    busy intervals' (start, finish) and nodes, in a block of as many slots as it has
    nodes (scratch)."""
    n = order.shape[0]
    d = lat.shape[0]
    cnt = np.zeros(d, dtype=np.int64)
    for v in range(n):
        cnt[dev[v]] += 1
    if port:
        sendf = np.zeros(d * levels)
        recvf = np.zeros(d * levels)
        chan = np.zeros(1)
    else:
        sendf = np.zeros(1)
        recvf = np.zeros(1)
        chan = np.zeros(d * d)
    off = np.zeros(d + 1, dtype=np.int64)
    for k in range(d):
        off[k + 1] = off[k] + cnt[k]
    size = np.zeros(d, dtype=np.int64)
    busy = np.zeros(d)
    last = np.full(d, -1, dtype=np.int64)
    darr = np.zeros(d)
    dsent = np.zeros(d)
    dmark = np.full(d, -1, dtype=np.int64)
    dests = np.zeros(d, dtype=np.int64)
    span = 0.0
    for i in range(n):
        v = order[i]
        dd = dev[v]
        dv = duration[v, dd]
        wait = 0.0
        why = -1
        for j in range(pptr[v], pptr[v + 1]):
            u = pidx[j]
            t = finish[u] if dev[u] == dd else earr[pedge[j], 1]
            if t > wait:
                wait = t
                why = u
        if insert:
            lo = off[dd]
            hi = lo + size[dd]
            # first interval ending after wait (ends ascend: intervals do not overlap)
            a, b = lo, hi
            while a < b:
                mid = (a + b) // 2
                if wait < slot_t[mid, 1]:
                    b = mid
                else:
                    a = mid + 1
            t = wait
            k = a
            while k < hi:
                if t + dv <= slot_t[k, 0]:
                    break
                if slot_t[k, 1] > t:
                    t = slot_t[k, 1]
                    why = slot_n[k]
                k += 1
            for m in range(hi, k, -1):
                slot_t[m, 0] = slot_t[m - 1, 0]
                slot_t[m, 1] = slot_t[m - 1, 1]
                slot_n[m] = slot_n[m - 1]
            slot_t[k, 0] = t
            slot_t[k, 1] = t + dv
            slot_n[k] = v
            size[dd] += 1
        else:
            t = wait
            if busy[dd] > t:
                t = busy[dd]
                why = last[dd]
            busy[dd] = t + dv
            last[dd] = v
        start[v] = t
        finish[v] = t + dv
        binding[v] = why
        if finish[v] > span:
            span = finish[v]
        # one copy per other device hosting a consumer, in ascending device index
        m = 0
        for e in range(cptr[v], cptr[v + 1]):
            b = dev[cidx[e]]
            if b != dd and dmark[b] != v:
                dmark[b] = v
                dests[m] = b
                m += 1
        dests[:m].sort()
        for q in range(m):
            b = dests[q]
            sent = finish[v]
            if port:
                lv = level[dd, b]
                ks, kr = dd * levels + lv, b * levels + lv
                if sendf[ks] > sent:
                    sent = sendf[ks]
                if recvf[kr] > sent:
                    sent = recvf[kr]
                arr = sent + lat[dd, b] + out[v] * inv_bw[dd, b]
                sendf[ks] = arr
                recvf[kr] = arr
            else:
                kc = dd * d + b
                if chan[kc] > sent:
                    sent = chan[kc]
                arr = sent + lat[dd, b] + out[v] * inv_bw[dd, b]
                chan[kc] = arr
            darr[b] = arr
            dsent[b] = sent
        for e in range(cptr[v], cptr[v + 1]):
            b = dev[cidx[e]]
            if b != dd:
                earr[e, 0] = dsent[b]
                earr[e, 1] = darr[b]
    return span


@njit(cache=True)
def _peak_kernel(dev, start, finish, out, cptr, cidx, earr, base, peak):  # pragma: no cover
    """``peak (D,)``: each device's peak bytes in the schedule ``start``, ``finish``,
    ``earr`` of :func:`_eager_kernel` by DESIGN §3's lifetimes (``base``: each device's
    parameter bytes, held throughout): an output from its node's start until its last
    local consumer has finished and its last copy has arrived (a sink's until its own
    finish); a copy from its start until its last consumer on the receiving device has
    finished; frees before allocations at equal times."""
    n = dev.shape[0]
    d = peak.shape[0]
    m = 2 * (n + cidx.shape[0])
    ev_t = np.empty(m)
    ev_x = np.empty(m)
    ev_d = np.empty(m, dtype=np.int64)
    ev_free = np.empty(m, dtype=np.bool_)
    k = 0
    last = np.full(d, -np.inf)
    for v in range(n):
        dd = dev[v]
        end = finish[v] if cptr[v + 1] == cptr[v] else -np.inf
        for e in range(cptr[v], cptr[v + 1]):
            b = dev[cidx[e]]
            if b == dd:
                end = max(end, finish[cidx[e]])
            else:
                end = max(end, earr[e, 1])
                last[b] = max(last[b], finish[cidx[e]])
        ev_t[k], ev_x[k], ev_d[k], ev_free[k] = start[v], out[v], dd, False
        ev_t[k + 1], ev_x[k + 1], ev_d[k + 1], ev_free[k + 1] = end, -out[v], dd, True
        k += 2
        for e in range(cptr[v], cptr[v + 1]):
            b = dev[cidx[e]]
            if b != dd and last[b] > -np.inf:
                ev_t[k], ev_x[k], ev_d[k], ev_free[k] = earr[e, 0], out[v], b, False
                ev_t[k + 1], ev_x[k + 1], ev_d[k + 1], ev_free[k + 1] = last[b], -out[v], b, True
                k += 2
                last[b] = -np.inf  # one copy per device
    # by device, then time, frees first
    key = np.empty(k)
    for i in range(k):
        key[i] = ev_t[i]
    idx = np.argsort(key, kind="mergesort")
    level = np.zeros(d)
    for q in range(d):
        peak[q] = 0.0
    # frees first at equal times: a stable pass of the frees, then the allocations
    i = 0
    while i < k:
        j = i
        while j < k and key[idx[j]] == key[idx[i]]:
            j += 1
        for r in range(i, j):
            e = idx[r]
            if ev_free[e]:
                level[ev_d[e]] += ev_x[e]
        for r in range(i, j):
            e = idx[r]
            if not ev_free[e]:
                level[ev_d[e]] += ev_x[e]
                if level[ev_d[e]] > peak[ev_d[e]]:
                    peak[ev_d[e]] = level[ev_d[e]]
        i = j
    for q in range(d):
        peak[q] += base[q]


@njit(cache=True)
def _polish_kernel(
    evals,
    all_devices,
    group,
    gptr,
    gidx,
    mem,
    param,
    cap,
    order,
    dev,
    duration,
    out,
    pptr,
    pidx,
    pedge,
    cptr,
    cidx,
    lat,
    inv_bw,
    level,
    levels,
    port,
    insert,
    start,
    finish,
    binding,
    earr,
    slot_t,
    slot_n,
):  # pragma: no cover - compiled
    """The search of :func:`polish` on ``dev`` (moved in place); returns whether it moved
    a node and the schedules it made. ``group``: per node its co-location group (-1:
    none), whose nodes are ``gidx[gptr[g] : gptr[g + 1]]``; with ``mem``, a move is kept
    only if every device's estimated peak (:func:`_peak_kernel`, ``param`` bytes per node)
    stays at most ``cap`` or at most its peak before the search."""
    n = order.shape[0]
    d = lat.shape[0]
    best = _eager_kernel(
        order,
        dev,
        duration,
        out,
        pptr,
        pidx,
        pedge,
        cptr,
        cidx,
        lat,
        inv_bw,
        level,
        levels,
        port,
        insert,
        start,
        finish,
        binding,
        earr,
        slot_t,
        slot_n,
    )
    limit = cap.copy()
    peak = np.zeros(d)
    base = np.zeros(d)
    for v in range(n):
        base[dev[v]] += param[v]
    if mem:
        _peak_kernel(dev, start, finish, out, cptr, cidx, earr, base, peak)
        for q in range(d):
            limit[q] = max(cap[q], peak[q])
    used, moved = 1, False
    chain = np.empty(n, dtype=np.int64)
    targets = np.empty(d, dtype=np.int64)
    mark = np.full(d, -1, dtype=np.int64)
    stamp = 0
    one = np.empty(1, dtype=np.int64)
    olds = np.empty(n, dtype=np.int64)  # the moved nodes' devices before the move
    while used < evals:
        m = 0
        v = int(np.argmax(finish))
        while v >= 0 and m < n:
            chain[m] = v
            m += 1
            v = binding[v]
        improved = False
        for ci in range(m):
            v = chain[ci]
            here = dev[v]
            if group[v] >= 0:
                nodes = gidx[gptr[group[v]] : gptr[group[v] + 1]]
            else:
                one[0] = v
                nodes = one
            k = 0
            if all_devices:
                for t in range(d):
                    targets[k] = t
                    k += 1
            else:
                stamp += 1
                for j in range(pptr[v], pptr[v + 1]):
                    t = dev[pidx[j]]
                    if mark[t] != stamp:
                        mark[t] = stamp
                        targets[k] = t
                        k += 1
                for j in range(cptr[v], cptr[v + 1]):
                    t = dev[cidx[j]]
                    if mark[t] != stamp:
                        mark[t] = stamp
                        targets[k] = t
                        k += 1
                targets[:k].sort()
            for q in range(k):
                t = targets[q]
                if t == here:
                    continue
                for r in range(nodes.shape[0]):
                    u = nodes[r]
                    olds[r] = dev[u]
                    base[dev[u]] -= param[u]
                    base[t] += param[u]
                    dev[u] = t
                span = _eager_kernel(
                    order,
                    dev,
                    duration,
                    out,
                    pptr,
                    pidx,
                    pedge,
                    cptr,
                    cidx,
                    lat,
                    inv_bw,
                    level,
                    levels,
                    port,
                    insert,
                    start,
                    finish,
                    binding,
                    earr,
                    slot_t,
                    slot_n,
                )
                used += 1
                fits = True
                if mem and span < best * (1 - 1e-9):
                    _peak_kernel(dev, start, finish, out, cptr, cidx, earr, base, peak)
                    for q in range(d):
                        if peak[q] > limit[q]:
                            fits = False
                if fits and span < best * (1 - 1e-9):
                    best = span
                    improved = True
                    moved = True
                    break
                for r in range(nodes.shape[0]):
                    u = nodes[r]
                    dev[u] = olds[r]
                    base[t] -= param[u]
                    base[olds[r]] += param[u]
                if used >= evals:
                    break
            if improved or used >= evals:
                break
        if not improved:
            break
    return moved, used


class EagerInputs:
    """What :func:`eager_schedule` reads of a graph, a cluster and a priority order,
    built once (``O(n log n + E)``) for the many schedules of one search; the devices
    are each call's."""

    def __init__(self, graph: Graph, cluster: Cluster, order: np.ndarray) -> None:
        costs = step_costs(graph, cluster)
        self.duration = np.ascontiguousarray(costs.duration, dtype=np.float64)
        self.order = np.asarray(ready_order(costs, _rank(order)), dtype=np.int64)
        self.pptr, self.pidx = (np.asarray(a, dtype=np.int64) for a in graph.producer_csr)
        self.cptr, self.cidx = (np.asarray(a, dtype=np.int64) for a in graph.consumer_csr)
        # producer-list entry j (edge u -> v) as its index in u's consumer list
        n = graph.num_nodes
        v_of_j = np.repeat(np.arange(n), np.diff(self.pptr))
        u_of_e = np.repeat(np.arange(n), np.diff(self.cptr))
        by_pair = np.lexsort((self.cidx, u_of_e))  # consumer entries by (u, v)
        want = np.lexsort((v_of_j, self.pidx))  # producer entries by (u, v)
        self.pedge = np.empty(len(self.pidx), dtype=np.int64)
        self.pedge[want] = by_pair
        self.out = np.asarray(graph.out_bytes, dtype=np.float64)
        self.latency = np.ascontiguousarray(costs.latency, dtype=np.float64)
        self.inv_bandwidth = np.ascontiguousarray(costs.inv_bandwidth, dtype=np.float64)
        self.level = np.ascontiguousarray(cluster.pair_level, dtype=np.int64)
        self.levels = int(self.level.max()) + 1 if self.level.size else 1
        self.port = cluster.links == "port"
        self.start = np.zeros(n)
        self.finish = np.zeros(n)
        self.binding = np.zeros(n, dtype=np.int64)
        self.earr = np.zeros((len(self.cidx), 2))
        self.slot_t = np.zeros((n + cluster.num_devices, 2))
        self.slot_n = np.zeros(n + cluster.num_devices, dtype=np.int64)

    def operands(self, device: np.ndarray, insert: bool) -> tuple:
        """The compiled schedule's operands for ``device`` (an int64 array)."""
        return (
            self.order,
            device,
            self.duration,
            self.out,
            self.pptr,
            self.pidx,
            self.pedge,
            self.cptr,
            self.cidx,
            self.latency,
            self.inv_bandwidth,
            self.level,
            self.levels,
            self.port,
            bool(insert),
            self.start,
            self.finish,
            self.binding,
            self.earr,
            self.slot_t,
            self.slot_n,
        )

    def schedule(self, device: np.ndarray, insert: bool) -> float:
        """The makespan of :func:`eager_schedule` for ``device`` (an int64 array);
        ``start``, ``finish`` and ``binding`` hold its schedule until the next call."""
        return float(_eager_kernel(*self.operands(device, insert)))


def _rank(order: np.ndarray) -> np.ndarray:
    rank = np.empty(len(order), dtype=np.int64)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(len(order))
    return rank


def eager_schedule(
    graph: Graph, cluster: Cluster, placement: Placement, insert: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """``(start, finish)`` per node of the estimated schedule of ``placement`` (module
    docstring), ``O(n log n + E)`` with its set-up; no simulator call."""
    inputs = EagerInputs(graph, cluster, placement.order)
    inputs.schedule(np.asarray(placement.device, dtype=np.int64), insert)
    return inputs.start.copy(), inputs.finish.copy()


def eager_peak(
    graph: Graph, cluster: Cluster, placement: Placement, insert: bool = False
) -> np.ndarray:
    """``(D,)`` each device's peak bytes in the estimated schedule of ``placement``, by
    DESIGN §3's lifetimes (the ``memory`` test of :func:`polish`; a recompute set is not
    modelled); no simulator call."""
    inputs = EagerInputs(graph, cluster, placement.order)
    dev = np.asarray(placement.device, dtype=np.int64)
    inputs.schedule(dev, insert)
    base = np.bincount(dev, weights=graph.param_bytes, minlength=cluster.num_devices)
    peak = np.zeros(cluster.num_devices)
    _peak_kernel(
        dev,
        inputs.start,
        inputs.finish,
        inputs.out,
        inputs.cptr,
        inputs.cidx,
        inputs.earr,
        base.astype(np.float64),
        peak,
    )
    return peak


def polish(
    graph: Graph,
    cluster: Cluster,
    placement: Placement,
    evals: int,
    insert: bool = False,
    memory: np.ndarray | None = None,
) -> Placement:
    """``placement`` with nodes moved where :func:`eager_schedule` says the makespan falls
    (module docstring), after at most ``evals`` schedules (each ``O(n + E)``; fewer
    where they would make more than :data:`VISITS` visits); the same placement where no
    move helps. Its order and recompute set are ``placement``'s.

    ``memory``: ``(D,)`` bytes; where given, a move is kept only if every device's peak
    bytes in the estimated schedule (DESIGN §3's lifetimes, as
    :func:`~placegym.agents.doppler.summaries.estimated_peak` takes them; its recompute
    set is not modelled) stay within its ``memory`` or, on a device already above it,
    within its peak before the search (``O((n + E) log(n + E))`` more per kept move).

    Raises:
        ValueError: ``evals`` < 0, or ``memory`` not one value per device.
    """
    if evals < 0:
        raise ValueError(f"evals: must be >= 0, got {evals}")
    if memory is not None and np.shape(memory) != (cluster.num_devices,):
        raise ValueError(
            f"memory: expected {cluster.num_devices} values (one per device), "
            f"got shape {np.shape(memory)}"
        )
    n, d = graph.num_nodes, cluster.num_devices
    levels = int(cluster.pair_level.max()) + 1 if d else 1
    links = d * levels if cluster.links == "port" else d * d
    evals = min(evals, VISITS // (n + len(graph.edges) + links))
    if n == 0 or d < 2 or evals < 2:
        return placement
    inputs = EagerInputs(graph, cluster, placement.order)
    dev = np.array(placement.device, dtype=np.int64)
    group = np.asarray(graph.group, dtype=np.int64)
    members = graph.groups
    ids = sorted(members)
    gptr = np.zeros(max(ids, default=-1) + 2, dtype=np.int64)
    for g in ids:
        gptr[g + 1] = len(members[g])
    gptr = np.cumsum(gptr)
    gidx = np.zeros(int(gptr[-1]), dtype=np.int64)
    for g in ids:
        gidx[gptr[g] : gptr[g + 1]] = members[g]
    param = np.asarray(graph.param_bytes, dtype=np.float64)
    cap = np.full(d, np.inf) if memory is None else np.asarray(memory, dtype=np.float64)
    moved, _ = _polish_kernel(
        evals,
        d <= ALL_DEVICES,
        group,
        gptr,
        gidx,
        memory is not None,
        param,
        cap,
        *inputs.operands(dev, insert),
    )
    if not moved:
        return placement
    # every move tried and not kept was undone
    return Placement(device=dev, order=placement.order, recompute=placement.recompute)
