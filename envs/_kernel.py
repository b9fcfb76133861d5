"""Compiled event loop of the simulator (numba, cached on disk).

The rules are DESIGN §3; :mod:`placegym.envs.simulator` documents them and
:mod:`placegym.envs.reference` is a plain-Python implementation of the same rules that the
tests compare this one against.

Layout: the event heap and the per-device ready heaps are array heaps keyed by
``(time, secondary)``. A finish event's secondary key is the node's rank, so finishes at
one instant are applied in ascending rank (rule 4); an arrival's is ``n + transfer index``.
Ready heaps are keyed ``(0, rank)`` for priority dispatch and ``(ready time, rank)`` for
fifo. Each instant is one *round*: every event already queued at ``t`` is popped first,
then applied, then idle devices dispatch; events created at ``t`` with zero delay land in
the next round at the same ``t`` (rule 7).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def _less(t1, s1, t2, s2):
    return t1 < t2 or (t1 == t2 and s1 < s2)


@njit(cache=True, inline="always")
def _push(ht, hs, hv, base, size, t, s, v):
    i = size
    while i > 0:
        p = (i - 1) >> 1
        if not _less(t, s, ht[base + p], hs[base + p]):
            break
        ht[base + i] = ht[base + p]
        hs[base + i] = hs[base + p]
        hv[base + i] = hv[base + p]
        i = p
    ht[base + i] = t
    hs[base + i] = s
    hv[base + i] = v
    return size + 1


@njit(cache=True, inline="always")
def _pop(ht, hs, hv, base, size):
    """Remove the root; the caller reads it first. Returns the new size."""
    size -= 1
    t = ht[base + size]
    s = hs[base + size]
    v = hv[base + size]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and _less(ht[base + c + 1], hs[base + c + 1], ht[base + c], hs[base + c]):
            c += 1
        if not _less(ht[base + c], hs[base + c], t, s):
            break
        ht[base + i] = ht[base + c]
        hs[base + i] = hs[base + c]
        hv[base + i] = hv[base + c]
        i = c
    ht[base + i] = t
    hs[base + i] = s
    hv[base + i] = v
    return size


@njit(cache=True)
def _group_consumers(cons_ptr, cons_idx, dev, ndev):
    """Consumers of each node, stably regrouped by device (ascending device index)."""
    n = cons_ptr.shape[0] - 1
    out = cons_idx.copy()
    count = np.zeros(ndev, dtype=np.int64)
    for v in range(n):
        lo = cons_ptr[v]
        hi = cons_ptr[v + 1]
        if hi - lo <= 16:  # insertion sort, stable
            for j in range(lo + 1, hi):
                c = out[j]
                k = j
                while k > lo and dev[out[k - 1]] > dev[c]:
                    out[k] = out[k - 1]
                    k -= 1
                out[k] = c
        else:  # counting sort by device, stable
            count[:] = 0
            for j in range(lo, hi):
                count[dev[cons_idx[j]]] += 1
            acc = lo
            for d in range(ndev):
                c = count[d]
                count[d] = acc
                acc += c
            for j in range(lo, hi):
                c = cons_idx[j]
                out[count[dev[c]]] = c
                count[dev[c]] += 1
    return out


@njit(cache=True)
def durations(flops, io, dflops, dmembw, dlaunch, dev, factor, table, dclass):
    """Rule 1: ``t * factor + launch`` per node on its device, where ``t`` is the profiled
    ``table[v, dclass[d]]`` when ``dclass[d] >= 0`` and that entry is not NaN, else the
    roofline ``max(flops/F, io/B)`` (:mod:`placegym.envs.costs`)."""
    n = flops.shape[0]
    dur = np.empty(n)
    for v in range(n):
        d = dev[v]
        c = dclass[d]
        t = table[v, c] if c >= 0 else np.nan
        if t != t:
            a = flops[v] / dflops[d]
            b = io[v] / dmembw[d]
            t = a if a >= b else b
        dur[v] = t * factor[v] + dlaunch[d]
    return dur


@njit(cache=True)
def run(dur, out_bytes, cons_ptr, cons_idx, npred, pair_lat, pair_bw, dev, rank, fifo):
    """Simulate one placement.

    Returns ``(makespan, start, finish, cons, ntr, tr_node, tr_dst, tr_start, tr_arr,
    tr_lo, tr_hi)`` where ``cons`` is the consumer list regrouped by device and transfer
    ``m`` serves consumers ``cons[tr_lo[m]:tr_hi[m]]``. ``makespan`` is -1 if some node
    never ran (impossible for a validated DAG).
    """
    n = dur.shape[0]
    ndev = pair_lat.shape[0]
    ne = cons_idx.shape[0]
    cons = _group_consumers(cons_ptr, cons_idx, dev, ndev)

    start = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    tr_node = np.empty(ne, dtype=np.int64)
    tr_dst = np.empty(ne, dtype=np.int64)
    tr_lo = np.empty(ne, dtype=np.int64)
    tr_hi = np.empty(ne, dtype=np.int64)
    tr_start = np.empty(ne)
    tr_arr = np.empty(ne)
    ntr = 0

    # ready heaps, one segment per device
    off = np.zeros(ndev + 1, dtype=np.int64)
    for v in range(n):
        off[dev[v] + 1] += 1
    for d in range(ndev):
        off[d + 1] += off[d]
    rt = np.empty(n)
    rs = np.empty(n, dtype=np.int64)
    rv = np.empty(n, dtype=np.int64)
    rsize = np.zeros(ndev, dtype=np.int64)

    cap = n + ne
    et = np.empty(cap)
    es = np.empty(cap, dtype=np.int64)
    ev = np.empty(cap, dtype=np.int64)
    esize = 0
    buf = np.empty(cap, dtype=np.int64)

    missing = npred.copy()
    busy = np.zeros(ndev, dtype=np.bool_)
    chfree = np.zeros(ndev * ndev)
    dirty = np.empty(ndev, dtype=np.int64)
    is_dirty = np.zeros(ndev, dtype=np.bool_)
    ndirty = 0
    done = 0
    makespan = 0.0

    for v in range(n):
        if missing[v] == 0:
            d = dev[v]
            rsize[d] = _push(rt, rs, rv, off[d], rsize[d], 0.0, rank[v], v)
            if not is_dirty[d]:
                is_dirty[d] = True
                dirty[ndirty] = d
                ndirty += 1

    t = 0.0
    while True:
        # dispatch: every idle device with ready nodes starts its best one
        for i in range(ndirty):
            d = dirty[i]
            is_dirty[d] = False
            if not busy[d] and rsize[d] > 0:
                c = rv[off[d]]
                rsize[d] = _pop(rt, rs, rv, off[d], rsize[d])
                start[c] = t
                f = t + dur[c]
                finish[c] = f
                busy[d] = True
                esize = _push(et, es, ev, 0, esize, f, rank[c], c)
        ndirty = 0
        if esize == 0:
            break
        # one round: pop every event queued at the earliest time, then apply them
        t = et[0]
        nb = 0
        while esize > 0 and et[0] == t:
            buf[nb] = ev[0]
            nb += 1
            esize = _pop(et, es, ev, 0, esize)
        for i in range(nb):
            x = buf[i]
            if x < n:  # finish of node x
                v = x
                a = dev[v]
                busy[a] = False
                done += 1
                if t > makespan:
                    makespan = t
                if not is_dirty[a]:
                    is_dirty[a] = True
                    dirty[ndirty] = a
                    ndirty += 1
                j = cons_ptr[v]
                hi = cons_ptr[v + 1]
                while j < hi:
                    b = dev[cons[j]]
                    k = j + 1
                    while k < hi and dev[cons[k]] == b:
                        k += 1
                    if b == a:
                        for q in range(j, k):
                            c = cons[q]
                            missing[c] -= 1
                            if missing[c] == 0:
                                rsize[a] = _push(
                                    rt, rs, rv, off[a], rsize[a], t if fifo else 0.0, rank[c], c
                                )
                    else:
                        ch = a * ndev + b
                        s0 = chfree[ch] if chfree[ch] > t else t
                        arr = s0 + (pair_lat[a, b] + out_bytes[v] / pair_bw[a, b])
                        chfree[ch] = arr
                        tr_node[ntr] = v
                        tr_dst[ntr] = b
                        tr_start[ntr] = s0
                        tr_arr[ntr] = arr
                        tr_lo[ntr] = j
                        tr_hi[ntr] = k
                        esize = _push(et, es, ev, 0, esize, arr, n + ntr, n + ntr)
                        ntr += 1
                    j = k
            else:  # arrival of transfer m
                m = x - n
                b = tr_dst[m]
                for q in range(tr_lo[m], tr_hi[m]):
                    c = cons[q]
                    missing[c] -= 1
                    if missing[c] == 0:
                        rsize[b] = _push(
                            rt, rs, rv, off[b], rsize[b], t if fifo else 0.0, rank[c], c
                        )
                        if not is_dirty[b]:
                            is_dirty[b] = True
                            dirty[ndirty] = b
                            ndirty += 1
    if done != n:
        makespan = -1.0
    return (
        makespan,
        start,
        finish,
        cons,
        ntr,
        tr_node[:ntr],
        tr_dst[:ntr],
        tr_start[:ntr],
        tr_arr[:ntr],
        tr_lo[:ntr],
        tr_hi[:ntr],
    )


@njit(cache=True)
def peak_memory(
    dev,
    start,
    finish,
    out_bytes,
    param_bytes,
    cons_ptr,
    cons,
    tr_node,
    tr_dst,
    tr_start,
    tr_arr,
    tr_lo,
    tr_hi,
    ndev,
):
    """Peak bytes per device: resident params plus live tensors (DESIGN §3, Memory).

    Live intervals are half-open ``[alloc, free)``: at one instant frees apply before
    allocations, so a tensor freed at ``t`` and one allocated at ``t`` never coexist, and
    a zero-length interval never counts.
    """
    n = dev.shape[0]
    ntr = tr_node.shape[0]
    free_v = np.full(n, -np.inf)
    for v in range(n):
        lo = cons_ptr[v]
        hi = cons_ptr[v + 1]
        if lo == hi:
            free_v[v] = finish[v]  # a sink's output lives until its own finish
        for q in range(lo, hi):
            c = cons[q]
            if dev[c] == dev[v] and finish[c] > free_v[v]:
                free_v[v] = finish[c]
    free_tr = np.full(ntr, -np.inf)
    for m in range(ntr):
        v = tr_node[m]
        if tr_arr[m] > free_v[v]:
            free_v[v] = tr_arr[m]
        for q in range(tr_lo[m], tr_hi[m]):
            f = finish[cons[q]]
            if f > free_tr[m]:
                free_tr[m] = f
    k = n + ntr
    times = np.empty(2 * k)
    delta = np.empty(2 * k)
    where = np.empty(2 * k, dtype=np.int64)
    for v in range(n):  # frees first, so a stable sort keeps them before allocations
        times[v] = free_v[v]
        delta[v] = -out_bytes[v]
        where[v] = dev[v]
        times[k + v] = start[v]
        delta[k + v] = out_bytes[v]
        where[k + v] = dev[v]
    for m in range(ntr):
        i = n + m
        times[i] = free_tr[m]
        delta[i] = -out_bytes[tr_node[m]]
        where[i] = tr_dst[m]
        times[k + i] = tr_start[m]
        delta[k + i] = out_bytes[tr_node[m]]
        where[k + i] = tr_dst[m]
    order = np.argsort(times, kind="mergesort")
    cur = np.zeros(ndev)
    peak = np.zeros(ndev)
    for i in order:
        d = where[i]
        cur[d] += delta[i]
        if cur[d] > peak[d]:
            peak[d] = cur[d]
    for v in range(n):
        peak[dev[v]] += param_bytes[v]
    return peak


@njit(cache=True)
def run_batch(
    flops,
    io,
    out_bytes,
    param_bytes,
    cons_ptr,
    cons_idx,
    npred,
    dflops,
    dmembw,
    dlaunch,
    pair_lat,
    pair_bw,
    devs,
    ranks,
    factors,
    fifo,
    with_memory,
    table,
    dclass,
):
    """Makespan (and peak memory) of many placements of one graph, one call; ``table``
    and ``dclass`` are the profiled costs of :func:`durations`."""
    nb = devs.shape[0]
    ndev = dflops.shape[0]
    makespans = np.empty(nb)
    peaks = np.zeros((nb, ndev))
    for i in range(nb):
        dev = devs[i]
        dur = durations(flops, io, dflops, dmembw, dlaunch, dev, factors[i], table, dclass)
        res = run(
            dur, out_bytes, cons_ptr, cons_idx, npred, pair_lat, pair_bw, dev, ranks[i], fifo
        )
        makespans[i] = res[0]
        if with_memory:
            peaks[i] = peak_memory(
                dev,
                res[1],
                res[2],
                out_bytes,
                param_bytes,
                cons_ptr,
                res[3],
                res[5],
                res[6],
                res[7],
                res[8],
                res[9],
                res[10],
                ndev,
            )
    return makespans, peaks
