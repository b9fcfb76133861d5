"""Compiled kernels of :mod:`placegym.agents.doppler.polish` (numba, cached on disk): the
eager list schedule, its peak memory and the local search over both."""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["eager_kernel", "eager_run", "fresh_state", "peak_kernel", "polish_kernel"]


@njit(cache=True)
def eager_kernel(ops):  # pragma: no cover - compiled
    """The schedule of :func:`~placegym.agents.doppler.polish.eager_schedule` into
    ``ops``' ``start``, ``finish`` and ``binding``, from an empty cluster (:func:`eager_run`
    with nothing recorded and no bound); returns the makespan."""
    n = ops[0].shape[0]
    d = ops[9].shape[0]
    zero = np.zeros((1, 1))
    state = fresh_state(d, ops[12], ops[13])
    return eager_run(ops, 0, state, 0.0, np.inf, np.zeros(n), 0, zero, zero, zero)


@njit(cache=True)
def fresh_state(d, levels, port):  # pragma: no cover - compiled
    """An empty cluster's state for :func:`eager_run`: each device's busy-until time, last
    node and work still to run (zero: the caller's to fill where it bounds), each link's
    free-from time (``port``: the send then the receive ports, ``d * levels`` each; else
    the ``d * d`` ordered device pairs) and each device's count of busy intervals
    (insertion)."""
    link = np.zeros(2 * d * levels if port else d * d)
    return np.zeros(d), np.full(d, -1.0), np.zeros(d), link, np.zeros(d, dtype=np.int64)


@njit(cache=True)
def eager_run(
    ops, i0, state, span, bound, tail, every, ck_dev, ck_link, ck_span
):  # pragma: no cover - compiled
    """The schedule's positions ``i0``, ``i0 + 1``, ... of ``ops``' ``order`` (``order``,
    ``dev``, ``duration``, ``out``, ``pptr``, ``pidx``, ``pedge``, ``cptr``, ``cidx``,
    ``lat``, ``inv_bw``, ``level``, ``levels``, ``port``, ``insert``, ``start``,
    ``finish``, ``binding``, ``earr``, ``slot_t``, ``slot_n``) from the state before
    position ``i0`` (``state``: :func:`fresh_state`'s arrays, updated in place; ``span``, the
    makespan so far; with ``insert``, ``i0`` is 0): writes each node's ``start``,
    ``finish`` and ``binding`` (the producer or device predecessor its start waited for,
    -1 for none) and its copies' start and arrival in ``earr (E, 2)`` (per consumer edge,
    remote edges only), reading those of the nodes before ``i0``; returns the makespan.

    ``tail``: per node a lower bound on what follows its finish; ``rem``: per device the
    work of its nodes from position ``i0`` on (each device runs its nodes in list order
    without ``insert``, so what remains follows each finish); the run stops and returns
    ``inf`` as soon as a node's finish plus either bound reaches ``bound`` (the makespan
    would). ``every`` > 0: the state before each position ``i`` with ``i % every == 0``
    is recorded into row ``i // every`` of ``ck_dev (C, 3D)`` (busy times, last nodes,
    work to run), ``ck_link`` and ``ck_span``. ``slot_t``/``slot_n``: per device, its busy
    intervals' (start, finish) and nodes, in a block of as many slots as it has nodes
    (scratch, with ``insert``)."""
    order, dev, duration, out, pptr, pidx, pedge = ops[:7]
    cptr, cidx, lat, inv_bw, level, levels, port, insert = ops[7:15]
    start, finish, binding, earr, slot_t, slot_n = ops[15:]
    busy, last, rem, link, size = state
    n = order.shape[0]
    d = lat.shape[0]
    half = d * levels  # the receive ports' offset in ``link`` (port links)
    off = np.zeros(d + 1, dtype=np.int64)  # each device's block of slots (insertion)
    if insert:
        for v in range(n):
            off[dev[v] + 1] += 1
        for k in range(d):
            off[k + 1] += off[k]
    darr = np.zeros(d)
    dsent = np.zeros(d)
    dmark = np.full(d, -1, dtype=np.int64)
    dests = np.zeros(d, dtype=np.int64)
    for i in range(i0, n):
        if every > 0 and i % every == 0:
            c = i // every
            ck_dev[c, :d] = busy
            ck_dev[c, d : 2 * d] = last
            ck_dev[c, 2 * d :] = rem
            ck_link[c, :] = link
            ck_span[c] = span
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
                why = int(last[dd])
            busy[dd] = t + dv
            last[dd] = v
        start[v] = t
        finish[v] = t + dv
        binding[v] = why
        if finish[v] > span:
            span = finish[v]
        rem[dd] -= dv
        after = tail[v]
        # less a margin over the subtractions' rounding (the makespan is at least each
        # device's work)
        if not insert and rem[dd] - 1e-9 * bound > after:
            after = rem[dd] - 1e-9 * bound
        if finish[v] + after >= bound:
            return np.inf
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
                ks, kr = dd * levels + lv, half + b * levels + lv
                if link[ks] > sent:
                    sent = link[ks]
                if link[kr] > sent:
                    sent = link[kr]
                arr = sent + lat[dd, b] + out[v] * inv_bw[dd, b]
                link[ks] = arr
                link[kr] = arr
            else:
                kc = dd * d + b
                if link[kc] > sent:
                    sent = link[kc]
                arr = sent + lat[dd, b] + out[v] * inv_bw[dd, b]
                link[kc] = arr
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
def _copy_positions(order, lo, hi, cptr, src, dst):  # pragma: no cover - compiled
    """Copy the schedule of the nodes at positions ``lo .. hi - 1`` of ``order`` from
    ``src`` into ``dst`` (each ``(start, finish, binding, earr)``): their start, finish
    and binding and their copies' rows of ``earr``."""
    for i in range(lo, hi):
        v = order[i]
        dst[0][v] = src[0][v]
        dst[1][v] = src[1][v]
        dst[2][v] = src[2][v]
        for e in range(cptr[v], cptr[v + 1]):
            dst[3][e, 0] = src[3][e, 0]
            dst[3][e, 1] = src[3][e, 1]


@njit(cache=True)
def _hosts(w, device, stamp, moving, ops):  # pragma: no cover - compiled
    """Whether a consumer of ``w`` that does not move (``moving`` is not ``stamp``) is
    on ``device``."""
    dev, cptr, cidx = ops[1], ops[7], ops[8]
    for e in range(cptr[w], cptr[w + 1]):
        x = cidx[e]
        if dev[x] == device and moving[x] != stamp:
            return True
    return False


@njit(cache=True)
def _gather(heads, group, gptr, gidx, moving, stamp, out):  # pragma: no cover - compiled
    """Write into ``out`` the nodes that move with ``heads`` (each itself, or its
    co-location group's nodes in ascending order), each once, marking them in ``moving``
    with ``stamp``; returns their count."""
    k = 0
    for x in heads:
        lo, hi = (gptr[group[x]], gptr[group[x] + 1]) if group[x] >= 0 else (-1, 0)
        for r in range(lo, hi):
            u = x if r < 0 else gidx[r]
            if moving[u] != stamp:
                moving[u] = stamp
                out[k] = u
                k += 1
    return k


@njit(cache=True)
def _restore(row, link_row, state, nodes, olds, t, duration):  # pragma: no cover - compiled
    """The state :func:`eager_run` recorded in ``row`` and ``link_row`` into ``state``
    (the arrays of :func:`fresh_state`; no busy interval: insertion starts from position
    0), the work still to run counting ``nodes`` (from devices ``olds``) on ``t``."""
    busy, last, rem, link, size = state
    d = busy.shape[0]
    busy[:] = row[:d]
    last[:] = row[d : 2 * d]
    rem[:] = row[2 * d :]
    link[:] = link_row
    size[:] = 0
    _shift_work(rem, nodes, olds, t, duration)


@njit(cache=True, inline="always")
def _shift_work(rem, nodes, olds, t, duration):  # pragma: no cover - compiled
    """Move ``nodes``' work in ``rem`` (per device) from their devices ``olds`` to ``t``."""
    for r in range(nodes.shape[0]):
        u = nodes[r]
        rem[olds[r]] -= duration[u, olds[r]]
        rem[t] += duration[u, t]


@njit(cache=True)
def _reroute(producers, i0, t, stamp, moving, pos, ops):  # pragma: no cover - compiled
    """For each of ``producers`` listed before ``i0`` (not run again) whose copies are
    the same after the move of the nodes ``moving`` marks with ``stamp`` to ``t``: its
    edges to the moved nodes take the arrival of its copy to ``t`` (or are local there);
    returns the first position whose rows of ``earr`` it changed, else ``i0``."""
    dev, cptr, cidx, earr = ops[1], ops[7], ops[8], ops[18]
    lo = i0
    for s in range(producers.shape[0]):
        w = producers[s]
        if pos[w] >= i0 or dev[w] == t:
            continue
        lo = min(lo, pos[w])
        src = -1
        for e in range(cptr[w], cptr[w + 1]):
            if dev[cidx[e]] == t and moving[cidx[e]] != stamp:
                src = e
                break
        for e in range(cptr[w], cptr[w + 1]):
            if moving[cidx[e]] == stamp:
                earr[e, 0] = earr[src, 0]
                earr[e, 1] = earr[src, 1]
    return lo


@njit(cache=True)
def polish_kernel(
    evals, all_devices, group, gptr, gidx, mem, param, cap, ops, every, pairs
):  # pragma: no cover - compiled
    """The search of :func:`~placegym.agents.doppler.polish.polish` on ``dev`` (moved in
    place); returns whether it moved a node and the schedules it made. ``ops``: the
    operands of :func:`eager_run`, ``dev`` among them. ``group``: per node its
    co-location group (-1: none), whose nodes are ``gidx[gptr[g] : gptr[g + 1]]``; with
    ``mem``, a move is kept only if every device's estimated peak (:func:`peak_kernel`,
    ``param`` bytes per node) stays at most ``cap`` or at most its peak before the
    search. With ``pairs``, once no single move on the chain helps, each node moves
    with the next on the chain (and their groups) before the search ends; a kept pair
    move returns to single moves.

    Each move's schedule is the kept schedule's up to the first position the move can
    change (a moved node's, or a producer's whose copies then go to other devices): it
    runs from the state recorded at the last multiple of ``every`` before it (``every``
    > ``n`` with insertion), and stops once a node's finish plus a lower bound on what
    follows (its tail, the longest path to a sink over the fastest devices; or its
    device's work still to run) shows it cannot shorten the makespan; a kept move
    re-records the states after its start. The same moves, the same count, as full
    schedules."""
    order, dev, duration, out, pptr, pidx = ops[:6]
    cptr, cidx, lat, levels, port = ops[7], ops[8], ops[9], ops[12], ops[13]
    start, finish, binding, earr = ops[15:19]
    n = order.shape[0]
    d = lat.shape[0]
    pos = np.empty(n, dtype=np.int64)
    for i in range(n):
        pos[order[i]] = i
    # per move, the moved nodes' producers and whether each one's copy to its moved
    # consumer's device goes (no other consumer there)
    wlist = np.empty(pidx.shape[0], dtype=np.int64)
    gone = np.empty(pidx.shape[0], dtype=np.bool_)
    tail = np.zeros(n)
    for i in range(n - 1, -1, -1):
        v = order[i]
        for e in range(cptr[v], cptr[v + 1]):
            w = cidx[e]
            tail[v] = max(tail[v], duration[w].min() + tail[w])
    for v in range(n):  # a margin for the sums' rounding: a lower bound still
        tail[v] *= 1 - 1e-10
    busy, last, rem, link, size = fresh_state(d, levels, port)
    for v in range(n):
        rem[dev[v]] += duration[v, dev[v]]
    rows = n // every + 1
    ck_dev = np.empty((rows, 3 * d))
    ck_link = np.empty((rows, link.shape[0]))
    ck_span = np.empty(rows)
    state = (busy, last, rem, link, size)
    best = eager_run(ops, 0, state, 0.0, np.inf, tail, every, ck_dev, ck_link, ck_span)
    kept = (start.copy(), finish.copy(), binding.copy(), earr.copy())
    work = (start, finish, binding, earr)
    valid = n  # the working schedule equals the kept one before this position
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
    olds = np.empty(n, dtype=np.int64)  # the moved nodes' devices before the move
    kfinish, kbinding = kept[1], kept[2]
    moving = np.full(n, -1, dtype=np.int64)  # the nodes of the move tried: its stamp
    nodes_all = np.empty(n, dtype=np.int64)
    width = 1  # 1: single moves (with their groups); 2: pairs along the chain
    while used < evals:
        m = 0
        v = int(np.argmax(kfinish))
        while v >= 0 and m < n:
            chain[m] = v
            m += 1
            v = kbinding[v]
        improved = False
        for ci in range(m - width + 1):
            v = chain[ci]
            stamp += 1
            nodes = nodes_all[
                : _gather(chain[ci : ci + width], group, gptr, gidx, moving, stamp, nodes_all)
            ]
            # no move to v's device; for a pair, only where all its nodes are there
            here = dev[v]
            if width > 1:
                for r in range(nodes.shape[0]):
                    if dev[nodes[r]] != here:
                        here = -1
            lo0, nw = n, 0
            for r in range(nodes.shape[0]):
                u = nodes[r]
                lo0 = min(lo0, pos[u])
                for j in range(pptr[u], pptr[u + 1]):
                    w = pidx[j]
                    if moving[w] != stamp:
                        wlist[nw] = w
                        gone[nw] = dev[w] != dev[u] and not _hosts(w, dev[u], stamp, moving, ops)
                        nw += 1
            k = 0
            if all_devices:
                for t in range(d):
                    targets[k] = t
                    k += 1
            else:
                for x in chain[ci : ci + width]:
                    k = _add_devices(pptr, pidx, x, dev, mark, stamp, targets, k)
                    k = _add_devices(cptr, cidx, x, dev, mark, stamp, targets, k)
                targets[:k].sort()
            for q in range(k):
                t = targets[q]
                if t == here:
                    continue
                # the first position the move changes: a moved node's, or a producer's
                # whose copies go to other devices after it
                lo = lo0
                for s in range(nw):
                    w = wlist[s]
                    if pos[w] < lo and (
                        gone[s] or (t != dev[w] and not _hosts(w, t, stamp, moving, ops))
                    ):
                        lo = pos[w]
                c = lo // every
                i0 = c * every
                for r in range(nodes.shape[0]):
                    u = nodes[r]
                    olds[r] = dev[u]
                    base[dev[u]] -= param[u]
                    base[t] += param[u]
                    dev[u] = t
                if valid < i0:
                    _copy_positions(order, valid, i0, cptr, kept, work)
                    valid = i0
                # the copies from producers listed before i0 now arrive at t
                plo = _reroute(wlist[:nw], i0, t, stamp, moving, pos, ops)
                _restore(ck_dev[c], ck_link[c], state, nodes, olds, t, duration)
                bound = best * (1 - 1e-9)
                span = eager_run(
                    ops, i0, state, ck_span[c], bound, tail, 0, ck_dev, ck_link, ck_span
                )
                valid = min(valid, plo)
                used += 1
                fits = True
                if mem and span < bound:
                    peak_kernel(dev, start, finish, out, cptr, cidx, earr, base, peak)
                    for q2 in range(d):
                        if peak[q2] > limit[q2]:
                            fits = False
                if fits and span < bound:
                    best = span
                    improved = True
                    moved = True
                    # the states after i0 change: record them again
                    _restore(ck_dev[c], ck_link[c], state, nodes, olds, t, duration)
                    eager_run(
                        ops, i0, state, ck_span[c], np.inf, tail, every, ck_dev, ck_link, ck_span
                    )
                    # the records before i0 count the moved nodes' work on their new device
                    for c2 in range(c):
                        _shift_work(ck_dev[c2, 2 * d :], nodes, olds, t, duration)
                    _copy_positions(order, plo, n, cptr, work, kept)
                    valid = n
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
        if improved:
            width = 1
        elif width == 1 and pairs:
            width = 2
        else:
            break
    if valid < n:
        _copy_positions(order, valid, n, cptr, kept, work)
    return moved, used
