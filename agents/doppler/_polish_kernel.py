"""Compiled kernels of :mod:`placegym.agents.doppler.polish` (numba, cached on disk): the
eager list schedule, its peak memory and the local search over both."""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["eager_kernel", "peak_kernel", "polish_kernel"]


@njit(cache=True)
def eager_kernel(
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
    """The schedule of :func:`~placegym.agents.doppler.polish.eager_schedule` into
    ``start``, ``finish`` and ``binding`` (per node: the producer or device predecessor
    its start waited for, -1 for none); returns the makespan. ``duration (n, D)``;
    ``earr (E, 2)``: per consumer edge, its copy's start and arrival (remote edges
    only); ``slot_t``/``slot_n``: per device, its busy intervals' (start, finish) and
    nodes, in a block of as many slots as it has nodes (scratch, with ``insert``)."""
    n = order.shape[0]
    d = lat.shape[0]
    off = np.zeros(d + 1, dtype=np.int64)  # each device's block of slots (insertion)
    if insert:
        for v in range(n):
            off[dev[v] + 1] += 1
        for k in range(d):
            off[k + 1] += off[k]
    if port:
        sendf = np.zeros(d * levels)
        recvf = np.zeros(d * levels)
        chan = np.zeros(1)
    else:
        sendf = np.zeros(1)
        recvf = np.zeros(1)
        chan = np.zeros(d * d)
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
def peak_kernel(dev, start, finish, out, cptr, cidx, earr, base, peak):  # pragma: no cover
    """``peak (D,)``: each device's peak bytes in the schedule ``start``, ``finish``,
    ``earr`` of :func:`eager_kernel` by DESIGN §3's lifetimes (``base``: each device's
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
    # by time; each device keeps its own level
    key = ev_t[:k]
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


@njit(cache=True, inline="always")
def _add_devices(ptr, idx, v, dev, mark, stamp, targets, k):  # pragma: no cover - compiled
    """Append to ``targets[k:]`` the devices of ``v``'s neighbours ``idx[ptr[v] :
    ptr[v + 1]]`` not yet marked with ``stamp``; returns the new count."""
    for j in range(ptr[v], ptr[v + 1]):
        t = dev[idx[j]]
        if mark[t] != stamp:
            mark[t] = stamp
            targets[k] = t
            k += 1
    return k


@njit(cache=True)
def polish_kernel(
    evals, all_devices, group, gptr, gidx, mem, param, cap, ops
):  # pragma: no cover - compiled
    """The search of :func:`~placegym.agents.doppler.polish.polish` on ``dev`` (moved in
    place); returns whether it moved a node and the schedules it made. ``ops``: the
    operands of :func:`eager_kernel`, ``dev`` among them. ``group``: per node its
    co-location group (-1: none), whose nodes are ``gidx[gptr[g] : gptr[g + 1]]``; with
    ``mem``, a move is kept only if every device's estimated peak (:func:`peak_kernel`,
    ``param`` bytes per node) stays at most ``cap`` or at most its peak before the
    search."""
    order, dev, out, pptr, pidx = ops[0], ops[1], ops[3], ops[4], ops[5]
    cptr, cidx, lat = ops[7], ops[8], ops[9]
    start, finish, binding, earr = ops[15], ops[16], ops[17], ops[18]
    n = order.shape[0]
    d = lat.shape[0]
    best = eager_kernel(*ops)
    limit = cap.copy()
    peak = np.zeros(d)
    base = np.zeros(d)
    for v in range(n):
        base[dev[v]] += param[v]
    if mem:
        peak_kernel(dev, start, finish, out, cptr, cidx, earr, base, peak)
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
                k = _add_devices(pptr, pidx, v, dev, mark, stamp, targets, k)
                k = _add_devices(cptr, cidx, v, dev, mark, stamp, targets, k)
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
                span = eager_kernel(*ops)
                used += 1
                fits = True
                if mem and span < best * (1 - 1e-9):
                    peak_kernel(dev, start, finish, out, cptr, cidx, earr, base, peak)
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
