"""Compiled core of the simulator (numba, cached on disk).

The rules are DESIGN §3; :mod:`placegym.envs.sim.simulator` documents them and
:mod:`placegym.envs.sim.oracle` is a plain-Python implementation of the same rules that the
tests compare this one against. Everything compiled lives in this one file: numba's disk
cache is invalidated per source file, so a function calling into another file would keep
running a stale copy of it after an edit there. That is why this module is the one file
of the package over 600 lines.

:func:`durations` is rule 1 (per-node compute time on its device), kept apart from the
event loop :func:`run_into`, which takes durations as input and simulates rules 2-7.
:func:`simulate_one` returns a full trace, :func:`makespan_one` only the makespan, and
:func:`run_rows` runs rows of a batch in one workspace with the GIL released, so threads
can run parts of one batch at once, each row computed exactly as a single call would.

Queues: the event heap is ordered by time; the events of one instant are popped together
(a *round*) and applied in ascending key: a finish's key is the node's rank, so finishes
at one instant apply in ascending rank (rule 4); an arrival's is ``n + transfer index``;
the node of a rank is ``order[rank]``. Ready heaps (one segment per device) hold int keys:
the rank for priority dispatch; ``n × instant + rank`` for fifo, which orders by (ready
time, rank) because instants only move forward. Each instant is one or more rounds:
every event already queued at ``t`` is popped, then applied, then idle devices dispatch;
events created at ``t`` with zero delay land in the next round at the same ``t`` (rule 7).

Channels (ordered device pairs, ``links="pair"``) live in a table indexed ``a * D + b``
when ``D²`` is small, else in an open-addressing hash table sized by the number of edges,
so a call costs nothing in ``D²`` (or ``n × D``) on large clusters. Ports
(``links="port"``, the cluster's ``L`` levels) take the channel table's place, which then
holds ``2 D L`` free times: send port ``(a, l)`` at ``a * L + l``, receive port ``(b, l)``
at ``D L + b * L + l``. A transfer takes both of its ports when it is enqueued (its start
is known then): it starts at the latest of its enqueue time and their free times, and
both become free at its arrival. Either way a transfer's start is fixed when it is
enqueued, which is what keeps the links first-in first-out.

Peak memory is tracked during the loop: a node's output is allocated at its start and
freed at its last release (each local consumer's finish, each outgoing transfer's
arrival; a sink's at its own finish); a received copy is allocated at the transfer's
start and freed at the finish of the last consumer it serves. A transfer that waits for
its links starts at the arrival of the transfer it waits for, so its copy is allocated
when that arrival is applied: each transfer keeps the one that starts at its arrival on
its channel (``next_tr``), or with ports on its send port (``next_tr``) and on its receive
port (``next_rx``). At one instant every free comes before every allocation (half-open
intervals), so a device's peak is checked once per instant, after all of that instant's
rounds.

Packed arguments (tuples of arrays): ``g = (out_bytes, param_bytes, cons_ptr, cons_idx,
prod_ptr, prod_idx, npred, multi)`` (``multi``: the nodes with two consumers or more),
``links = (pair_latency, pair_bandwidth, ci)`` (``ci``: see :func:`pack_static`), ``p =
(device, rank, order)``, ``out = (start, finish, tr_node, tr_dst, tr_start, tr_arrival,
peak)``.
"""

from __future__ import annotations

import numpy as np
from numba import literally, njit


@njit(cache=True)
def durations(flops, io, dflops, dmembw, dlaunch, dev, factor, table, dclass):
    """Rule 1: ``t * factor + launch`` per node on its device, where ``t`` is the profiled
    ``table[v, dclass[d]]`` when ``dclass[d] >= 0`` and that entry is not NaN, else the
    roofline ``max(flops/F, io/B)`` (:mod:`placegym.envs.core.costs`); an empty ``factor``
    means 1 for every node."""
    n = flops.shape[0]
    dur = np.empty(n)
    noisy = factor.shape[0] > 0
    for v in range(n):
        d = dev[v]
        t = _base_time(flops, io, dflops, dmembw, table, dclass, v, d)
        dur[v] = (t * factor[v] if noisy else t) + dlaunch[d]
    return dur


@njit(cache=True, inline="always")
def _base_time(flops, io, dflops, dmembw, table, dclass, v, d):
    """Rule 1's ``t`` of node ``v`` on device ``d`` (see :func:`durations`)."""
    c = dclass[d]
    t = table[v, c] if c >= 0 else np.nan
    if t != t:
        a = flops[v] / dflops[d]
        b = io[v] / dmembw[d]
        t = a if a >= b else b
    return t


@njit(cache=True)
def base_times(flops, io, dflops, dmembw, dlaunch, table, dclass):
    """``(n, D)`` rule 1's ``t`` of every node on every device (launch and noise not
    applied), for :func:`durations_from`."""
    n = flops.shape[0]
    ndev = dflops.shape[0]
    out = np.empty((n, ndev))
    for v in range(n):
        for d in range(ndev):
            out[v, d] = _base_time(flops, io, dflops, dmembw, table, dclass, v, d)
    return out


@njit(cache=True, inline="always")
def durations_from(base, dlaunch, dev, factor, dur):
    """:func:`durations` into ``dur`` from :func:`base_times`' table: the same
    operations, so bit for bit the same durations."""
    noisy = factor.shape[0] > 0
    for v in range(dur.shape[0]):
        d = _u(dev[v])
        t = base[_u(v), d]
        dur[v] = (t * factor[v] if noisy else t) + dlaunch[d]


#: An empty slot of the channel hash table.
_EMPTY = np.int64(-1)


@njit(cache=True)
def workspace(n, ne, ndev, nports):
    """Scratch arrays for :func:`run_into` on graphs of ``n`` nodes and ``ne`` edges, in
    the order :func:`run_into` unpacks them (views of three buffers: fewer allocations).
    With ``nports`` ports of each direction (``D L`` for ``links="port"``, else 0), the
    channel arrays hold the ports instead: ``chfree`` their free times, ``chlast`` the
    last transfer that took each, and ``chkey`` (no hashing then) ``next_rx`` per
    transfer (see :func:`run_into`)."""
    bits = 1
    while (1 << bits) < 2 * ne + 2:
        bits += 1
    nch = ndev * ndev if ndev * ndev <= (1 << bits) else 1 << bits
    nkey = nch
    if nports > 0:
        nch = 2 * nports
        nkey = ne
    cap = n + ne
    nd1 = ndev + 1
    sizes = (ne, ne, ne, nd1, n, ndev, cap, cap, n, nkey, nch, ne, nd1, n, ne, n, n, nd1)
    total = 0
    for k in sizes:
        total += k
    ints = np.empty(total, np.int64)
    floats = np.empty(cap + nch + ndev)
    flags = np.empty(3 * ndev, np.bool_)
    at = np.zeros(len(sizes) + 1, np.int64)
    for i, k in enumerate(sizes):
        at[i + 1] = at[i] + k
    return (
        ints[at[0] : at[1]],  # cons: consumers regrouped by device
        ints[at[1] : at[2]],  # tr_lo: first consumer slot a transfer serves
        ints[at[2] : at[3]],  # tr_hi: one past its last
        ints[at[3] : at[4]],  # off: ready-heap segment of each device (D + 1)
        ints[at[4] : at[5]],  # ready: ready-heap keys
        ints[at[5] : at[6]],  # rsize: ready-heap sizes
        floats[:cap],  # et: event-heap times
        ints[at[6] : at[7]],  # es: event-heap keys
        ints[at[7] : at[8]],  # buf: keys of one round
        ints[at[8] : at[9]],  # missing: inputs not yet present
        flags[:ndev],  # busy
        ints[at[9] : at[10]],  # chkey: channel keys (hash table only); ports: next_rx
        floats[cap : cap + nch],  # chfree: channel (or port) free time
        ints[at[10] : at[11]],  # chlast: last transfer enqueued per channel (or port)
        ints[at[11] : at[12]],  # next_tr: transfer that starts at this one's arrival
        ints[at[12] : at[13]],  # dirty: devices to dispatch (D + 1: see _mark)
        flags[ndev : 2 * ndev],  # is_dirty: in dirty
        ints[at[13] : at[14]],  # pend: releases pending per node output
        ints[at[14] : at[15]],  # tr_pend: consumers pending per received copy
        ints[at[15] : at[16]],  # trf: first transfer of each node
        ints[at[16] : at[17]],  # trc: number of transfers of each node
        floats[cap + nch :],  # cur: live bytes per device
        ints[at[17] : at[18]],  # touched: devices allocated on at this instant (D + 1)
        flags[2 * ndev :],  # is_touched: in touched
    )


# ---------------------------------------------------------------------- indices
#: Array indices in the hot paths are cast to unsigned (``_u(i)``, free at run time):
#: numba wraps a signed index (``if i < 0: i += len``) on every access, which costs an
#: instruction and keeps every array's length live in a register; an unsigned index
#: skips both. Only indices are unsigned: arithmetic mixing uint64 and int64 would
#: promote to float64, so values stay int64 and are cast where they index.
_u = np.uint64
_U0 = np.uint64(0)
_U1 = np.uint64(1)


# ---------------------------------------------------------------------- queues
@njit(cache=True, inline="always")
def _push(ht, hs, size, t, s):
    i = _u(size)
    while i > _U0:
        p = (i - _U1) >> _U1
        if ht[p] <= t:
            break
        ht[i] = ht[p]
        hs[i] = hs[p]
        i = p
    ht[i] = t
    hs[i] = s
    return size + 1


@njit(cache=True, inline="always")
def _pop(ht, hs, size):
    """Remove the root; the caller reads it first. Returns the new size."""
    size -= 1
    last = _u(size)
    t = ht[last]
    s = hs[last]
    i = _U0
    while True:
        c = i + i + _U1
        if c >= last:
            break
        if c + _U1 < last and ht[c + _U1] < ht[c]:
            c += _U1
        if ht[c] >= t:
            break
        ht[i] = ht[c]
        hs[i] = hs[c]
        i = c
    ht[i] = t
    hs[i] = s
    return size


@njit(cache=True, inline="always")
def _ipush(h, base, size, key):
    b = _u(base)
    i = _u(size)
    while i > _U0:
        p = (i - _U1) >> _U1
        if h[b + p] <= key:
            break
        h[b + i] = h[b + p]
        i = p
    h[b + i] = key
    return size + 1


@njit(cache=True, inline="always")
def _ipop(h, base, size):
    """Remove the root (the smallest key); the caller reads it first. Returns the new size."""
    size -= 1
    b = _u(base)
    last = _u(size)
    key = h[b + last]
    i = _U0
    while True:
        c = i + i + _U1
        if c >= last:
            break
        if c + _U1 < last and h[b + c + _U1] < h[b + c]:
            c += _U1
        if h[b + c] >= key:
            break
        h[b + i] = h[b + c]
        i = c
    h[b + i] = key
    return size


@njit(cache=True, inline="always")
def _pop_round(et, es, buf, esize, t):
    """Pop every event at time ``t`` into ``buf`` in ascending key. Returns (esize, count)."""
    nb = _U0
    while esize > 0 and et[0] == t:
        x = es[0]
        esize = _pop(et, es, esize)
        j = nb  # insertion sort (a round rarely holds more than a few events)
        while j > _U0 and buf[j - _U1] > x:
            buf[j] = buf[j - _U1]
            j -= _U1
        buf[j] = x
        nb += _U1
    return esize, nb


@njit(cache=True, inline="always")
def _mark(d, lst, flag, size):
    """Append ``d`` to ``lst[:size]`` unless ``flag[d]``; returns the new size. Branch
    free (``lst`` has one spare slot): numba's reference-count pruning keeps no
    incref/decref of the arrays where an inlined helper has no branch."""
    lst[_u(size)] = d
    added = 0 if flag[_u(d)] else 1
    flag[_u(d)] = True
    return size + added


@njit(cache=True, inline="always")
def _channel(chkey, chfree, dense, key):
    """Slot of channel ``key`` (``a * D + b``), created at free time 0 if new."""
    if dense:
        return _u(key)
    mask = _u(chkey.shape[0] - 1)
    h = _u(key) * _u(2654435761)
    i = (h ^ (h >> _u(17))) & mask
    while chkey[i] != key:
        if chkey[i] == _EMPTY:
            chkey[i] = key
            chfree[i] = 0.0
            return i
        i = (i + _U1) & mask
    return i


@njit(cache=True, inline="always")
def _copy_of(tr_dst, first, count, b):
    """The transfer among ``first .. first + count - 1`` (ascending dst) that goes to ``b``."""
    lo = _u(first)
    hi = _u(first + count - 1)
    while lo < hi:
        mid = (lo + hi) >> _U1
        if tr_dst[mid] < b:
            lo = mid + _U1
        else:
            hi = mid
    return lo


# ---------------------------------------------------------------------- set-up
@njit(cache=True)
def _group_consumers(cons_ptr, cons_idx, multi, dev, out, count):
    """Consumers of each node into ``out``, stably regrouped by device (ascending index);
    ``multi`` lists the nodes with two consumers or more (the others have nothing to
    sort), ``count`` is scratch of length D."""
    out[:] = cons_idx
    for i in range(multi.shape[0]):
        v = _u(multi[i])
        lo = _u(cons_ptr[v])
        hi = _u(cons_ptr[v + _U1])
        if hi - lo <= _u(16):  # insertion sort, stable
            for j in range(lo + _U1, hi):
                c = out[j]
                dc = dev[_u(c)]
                k = j
                while k > lo and dev[_u(out[k - _U1])] > dc:
                    out[k] = out[k - _U1]
                    k -= _U1
                out[k] = c
        else:  # counting sort by device, stable
            count[:] = 0
            for j in range(lo, hi):
                count[_u(dev[_u(cons_idx[j])])] += 1
            acc = lo
            for d in range(count.shape[0]):
                c = count[d]
                count[d] = acc
                acc += _u(c)
            for j in range(lo, hi):
                c = cons_idx[j]
                d = _u(dev[_u(c)])
                out[_u(count[d])] = c
                count[d] += 1


@njit(cache=True)
def run_into(dur, g, links, p, fifo, memory, ports, ws, out):
    """Simulate one placement ``p`` with durations ``dur`` in workspace ``ws``.

    Writes start and finish (n), the first ``ntr`` rows of the transfer arrays (ne) and,
    when ``memory``, the peak per device (params included) into ``out``. Returns
    ``(makespan, ntr)``; ``makespan`` is -1 if some node never ran (impossible for a
    validated DAG).

    Set-up and event handlers stay in this one function on purpose: numba
    reference-counts an array each time it is taken out of a tuple, so helpers that read
    the packed arguments in a loop run several times slower; arrays are unpacked once,
    here. ``fifo``, ``memory`` and ``ports`` (``links="port"``) must be compile-time
    constants (callers go through :func:`_run`): each of the eight combinations is
    compiled apart, without the code and the registers of the branches it does not take
    (a tenth of the time). Indices are unsigned (``_u``, see above).

    With ports the channel arrays hold the ports (:func:`workspace`): ``chfree`` their
    free times, ``chlast`` the last transfer that took each, and ``chkey`` is
    ``next_rx``, the transfer that starts at this one's arrival on its receive port
    (``next_tr`` then keeps the one that starts at its arrival on its send port).
    """
    literally(fifo)
    literally(memory)
    literally(ports)
    out_bytes, param_bytes, cons_ptr, _, prod_ptr, prod_idx, npred, multi = g
    pair_lat, pair_bw, ci = links
    dev, rank, order = p
    start, finish, tr_node, tr_dst, tr_start, tr_arr, peak = out
    (cons, tr_lo, tr_hi, off, ready, rsize, et, es, buf, missing, busy, chkey, chfree) = ws[:13]
    (chlast, next_tr, dirty, is_dirty, pend, tr_pend, trf, trc, cur, touched, is_touched) = ws[13:]
    n = dur.shape[0]
    ndev = pair_lat.shape[0]
    nlev = ci[ndev]  # ports: the number of levels L
    nports = ndev * nlev  # ports of each direction
    dense = chfree.shape[0] == ndev * ndev
    _group_consumers(cons_ptr, g[3], multi, dev, cons, rsize)  # set-up
    off[:] = 0
    for v in range(n):
        off[_u(dev[v] + 1)] += 1
    for d in range(ndev):
        off[d + 1] += off[d]
    rsize[:] = 0
    missing[:] = npred
    busy[:] = False
    is_dirty[:] = False
    if ports or dense:  # (ports: every port free at 0)
        chfree[:] = 0.0
    else:
        chkey[:] = _EMPTY
    if memory:
        cur[:] = 0.0
        peak[:] = 0.0
        is_touched[:] = False
    ndirty = 0
    for v in range(n):  # sources are ready at 0
        if missing[v] == 0:
            d = _u(dev[v])
            rsize[d] = _ipush(ready, off[d], rsize[d], rank[v])
            ndirty = _mark(d, dirty, is_dirty, ndirty)
    t = 0.0
    tick = 0  # fifo: n × (index of the instant)
    esize = ntr = ntouched = done = 0
    makespan = 0.0
    while True:
        for i in range(ndirty):  # every idle device with ready nodes starts its best one
            d = _u(dirty[i])
            is_dirty[d] = False
            if not busy[d] and rsize[d] > 0:
                key = ready[_u(off[d])]
                c = _u(order[_u(key) % _u(n) if fifo else _u(key)])
                rsize[d] = _ipop(ready, off[d], rsize[d])
                start[c] = t
                f = t + dur[c]
                finish[c] = f
                busy[d] = True
                esize = _push(et, es, esize, f, rank[c])
                if memory:
                    cur[d] += out_bytes[c]
                    ntouched = _mark(d, touched, is_touched, ntouched)
        ndirty = 0
        if memory and (esize == 0 or et[0] > t):  # the instant t is over: check peaks
            for i in range(ntouched):
                d = _u(touched[i])
                is_touched[d] = False
                peak[d] = cur[d] if cur[d] > peak[d] else peak[d]
            ntouched = 0
        if esize == 0:
            break
        if fifo and et[0] > t:
            tick += n
        t = et[0]
        esize, nb = _pop_round(et, es, buf, esize, t)
        for i in range(nb):
            x = buf[i]
            if x >= n:  # arrival of transfer m: its consumers on b have the input
                m = _u(x - n)
                b = tr_dst[m]
                ub = _u(b)
                for q in range(_u(tr_lo[m]), _u(tr_hi[m])):
                    c = _u(cons[q])
                    missing[c] -= 1
                    if missing[c] == 0:
                        rsize[ub] = _ipush(ready, off[ub], rsize[ub], tick + rank[c])
                        ndirty = _mark(b, dirty, is_dirty, ndirty)
                if memory:  # one release of the sender's output; the channel's next starts
                    u = _u(tr_node[m])
                    pend[u] -= 1
                    if pend[u] == 0:
                        cur[_u(dev[u])] -= out_bytes[u]
                    if next_tr[m] >= 0:
                        nx = _u(next_tr[m])
                        d = tr_dst[nx]
                        cur[_u(d)] += out_bytes[_u(tr_node[nx])]
                        ntouched = _mark(d, touched, is_touched, ntouched)
                    if ports and chkey[m] >= 0:  # next_rx
                        nx = _u(chkey[m])
                        d = tr_dst[nx]
                        cur[_u(d)] += out_bytes[_u(tr_node[nx])]
                        ntouched = _mark(d, touched, is_touched, ntouched)
                continue
            v = _u(order[_u(x)])  # finish of the node of rank x
            a = dev[v]
            ua = _u(a)
            busy[ua] = False
            ndirty = _mark(a, dirty, is_dirty, ndirty)
            done += 1
            makespan = t if t > makespan else makespan
            for q in range(_u(prod_ptr[v]), _u(prod_ptr[v + _U1]) if memory else _U0):
                u = _u(prod_idx[q])  # memory: v's inputs on a have one release fewer
                if dev[u] == a:
                    pend[u] -= 1
                    if pend[u] == 0:
                        cur[ua] -= out_bytes[u]
                    continue
                m = _copy_of(tr_dst, trf[u], trc[u], a)
                tr_pend[m] -= 1
                if tr_pend[m] == 0:
                    cur[ua] -= out_bytes[u]
            releases = 0
            trf[v] = ntr
            j = _u(cons_ptr[v])
            hi = _u(cons_ptr[v + _U1])
            while j < hi:  # consumers grouped by device, ascending
                b = dev[_u(cons[j])]
                k = j + _U1
                while k < hi and dev[_u(cons[k])] == b:
                    k += _U1
                if b == a:
                    for q in range(j, k):
                        c = _u(cons[q])
                        missing[c] -= 1
                        if missing[c] == 0:
                            rsize[ua] = _ipush(ready, off[ua], rsize[ua], tick + rank[c])
                    releases += np.int64(k - j)
                    j = k
                    continue
                ub = _u(b)
                s0 = t  # one transfer to b
                if ports:  # it takes the send port (a, l) and the receive port (b, l)
                    lv = ci[_u(ndev + 1) + ua * _u(ndev) + ub]
                    sp = _u(a * nlev + lv)
                    rp = _u(nports + b * nlev + lv)
                    if chfree[sp] > s0:
                        s0 = chfree[sp]
                    if chfree[rp] > s0:
                        s0 = chfree[rp]
                    if memory:  # the copy is allocated when the later port frees up
                        if s0 == t:
                            cur[ub] += out_bytes[v]
                            ntouched = _mark(b, touched, is_touched, ntouched)
                        elif s0 == chfree[sp]:
                            next_tr[_u(chlast[sp])] = ntr
                        else:
                            chkey[_u(chlast[rp])] = ntr  # next_rx
                        chkey[_u(ntr)] = -1
                    arr = s0 + (pair_lat[ua, ub] + out_bytes[v] / pair_bw[ua, ub])
                    chfree[sp] = arr
                    chfree[rp] = arr
                    chlast[sp] = ntr
                    chlast[rp] = ntr
                else:
                    ch = _channel(chkey, chfree, dense, a * ndev + b)
                    if chfree[ch] > t:
                        s0 = chfree[ch]
                        if memory:  # the copy is allocated when the channel frees up
                            next_tr[_u(chlast[ch])] = ntr
                    elif memory:
                        cur[ub] += out_bytes[v]
                        ntouched = _mark(b, touched, is_touched, ntouched)
                    arr = s0 + (pair_lat[ua, ub] + out_bytes[v] / pair_bw[ua, ub])
                    chfree[ch] = arr
                    chlast[ch] = ntr
                m = _u(ntr)
                tr_node[m], tr_dst[m], tr_start[m], tr_arr[m] = v, b, s0, arr
                tr_lo[m], tr_hi[m], next_tr[m], tr_pend[m] = j, k, -1, k - j
                esize = _push(et, es, esize, arr, n + ntr)
                ntr += 1
                releases += 1
                j = k
            trc[v] = ntr - trf[v]
            pend[v] = releases
            if memory and releases == 0:  # a sink's output lives until its own finish
                cur[ua] -= out_bytes[v]
    if memory:
        for v in range(n):
            peak[_u(dev[v])] += param_bytes[v]
    return (makespan if done == n else -1.0), ntr


@njit(cache=True)
def _run(dur, g, links, p, fifo, memory, ws, out):
    """:func:`run_into` with run-time ``fifo``, ``memory`` and ports (``links``' ``L >
    0``): calls the version compiled for their values."""
    if links[2][links[0].shape[0]] > 0:
        if fifo:
            if memory:
                return run_into(dur, g, links, p, True, True, True, ws, out)
            return run_into(dur, g, links, p, True, False, True, ws, out)
        if memory:
            return run_into(dur, g, links, p, False, True, True, ws, out)
        return run_into(dur, g, links, p, False, False, True, ws, out)
    if fifo:
        if memory:
            return run_into(dur, g, links, p, True, True, False, ws, out)
        return run_into(dur, g, links, p, True, False, False, ws, out)
    if memory:
        return run_into(dur, g, links, p, False, True, False, ws, out)
    return run_into(dur, g, links, p, False, False, False, ws, out)


def pack_static(graph_arrays, cost_arrays, memory, ports=None):
    """The arrays every call on one (graph, cluster) pair shares, packed into seven.

    The compiled entry points take these first (each array argument costs ~0.1 µs to
    pass):

    ``gf (4, n)`` = out_bytes, param_bytes, flops, io_bytes; ``gi`` = cons_ptr (n + 1) |
    prod_ptr (n + 1) | npred (n) | cons_idx (ne) | prod_idx (ne) | multi (the nodes with
    two consumers or more, ascending; computed here once per graph); ``cf (4, D)`` = device
    flops, mem_bandwidth, launch_overhead, memory; then pair_latency, pair_bandwidth and
    the profiled table as they are; ``ci`` = profile class (D) | L (1) | pair_level (D²,
    row-major), with ``L = 0`` and no pair_level for ``links="pair"`` (the rule-1 code
    reads a device's class as ``ci[d]``). Plain numpy (not compiled); read-only.

    Args:
        graph_arrays: ``(out_bytes, param_bytes, flops, io_bytes, cons_ptr, cons_idx,
            prod_ptr, prod_idx, npred)``.
        cost_arrays: ``(device flops, mem_bandwidth, launch_overhead, pair_latency,
            pair_bandwidth, profiled table, profile class)``.
        memory: ``(D,)`` capacity per device.
        ports: ``(L, pair_level (D, D))`` for ``links="port"``, None for ``"pair"``.
    """
    out_b, param_b, flops, io, cptr, cidx, pptr, pidx, npred = graph_arrays
    dflops, dmembw, dlaunch, lat, bw, table, dclass = cost_arrays
    gf = np.array([out_b, param_b, flops, io], dtype=np.float64).reshape(4, -1)
    multi = np.flatnonzero(np.diff(cptr) >= 2)
    gi = np.concatenate([cptr, pptr, npred, cidx, pidx, multi]).astype(np.int64)
    cf = np.array([dflops, dmembw, dlaunch, memory], dtype=np.float64)
    nlev, level = (0, np.zeros(0)) if ports is None else ports
    ci = np.concatenate([dclass, [nlev], np.ravel(level)]).astype(np.int64)
    packed = (gf, gi, cf, lat, bw, table, ci)
    for a in (gf, gi, cf, ci):
        a.setflags(write=False)
    return packed


@njit(cache=True, inline="always")
def _unpack(gf, gi, cf, lat, bw, table, ci):
    """``(costs, g, links)`` of :func:`pack_static`'s arrays, ``costs = (flops, io_bytes,
    device flops, mem_bandwidth, launch_overhead, profiled table, ci)`` being
    :func:`durations`' inputs (``ci[:D]`` the profile classes; ``g`` and ``links``: see
    above)."""
    n = gf.shape[1]
    ne = gi[n]  # cons_ptr[n]
    at = 3 * n + 2
    g = (gf[0], gf[1], gi[: n + 1], gi[at : at + ne], gi[n + 1 : 2 * n + 2])
    g = (*g, gi[at + ne : at + 2 * ne], gi[2 * n + 2 : at], gi[at + 2 * ne :])
    return (gf[2], gf[3], cf[0], cf[1], cf[2], table, ci), g, (lat, bw, ci)


@njit(cache=True, inline="always")
def _durations_of(costs, dev, factor):
    flops, io, dflops, dmembw, dlaunch, table, dclass = costs
    return durations(flops, io, dflops, dmembw, dlaunch, dev, factor, table, dclass)


@njit(cache=True)
def simulate_one(gf, gi, cf, lat, bw, table, ci, factor, dev, rank, order, fifo, times, ints):
    """One placement ``(dev, rank, order)`` with its full trace and memory; the first
    seven arguments are :func:`pack_static`'s.

    Fills ``times`` (``2n + D + 3ne``) = start (n) | finish (n) | peak (D) | transfer
    start (ne) | arrival (ne) | bytes (ne) and ``ints`` (``3ne``) = transfer node (ne) |
    src (ne) | dst (ne), of which the first ``ntr`` entries of each transfer block are
    used (given by the caller: returning arrays to Python costs more than passing them).
    Returns ``(makespan, ntr, oom)``, ``oom``: a peak exceeds the device's memory."""
    costs, g, links = _unpack(gf, gi, cf, lat, bw, table, ci)
    dur = _durations_of(costs, dev, factor)
    n = dur.shape[0]
    ne = g[3].shape[0]
    ndev = lat.shape[0]
    k = 2 * n + ndev
    peak = times[2 * n : k]
    out = (
        times[:n],
        times[n : 2 * n],
        ints[:ne],
        ints[2 * ne :],
        times[k : k + ne],
        times[k + ne : k + 2 * ne],
        peak,
    )
    ws = workspace(n, ne, ndev, ndev * ci[ndev])
    makespan, ntr = _run(dur, g, links, (dev, rank, order), fifo, True, ws, out)
    for m in range(ntr):
        u = ints[m]
        ints[ne + m] = dev[u]
        times[k + 2 * ne + m] = gf[0, u]
    oom = False
    for d in range(ndev):
        oom = oom or peak[d] > cf[3, d]
    return makespan, ntr, oom


@njit(cache=True)
def makespan_one(gf, gi, cf, lat, bw, table, ci, factor, dev, rank, order, fifo):
    """The makespan of one placement (no trace kept, no memory tracked); arguments as in
    :func:`simulate_one`."""
    costs, g, links = _unpack(gf, gi, cf, lat, bw, table, ci)
    dur = _durations_of(costs, dev, factor)
    n = dur.shape[0]
    ne = g[3].shape[0]
    ndev = lat.shape[0]
    ws = workspace(n, ne, ndev, ndev * ci[ndev])
    return _run(dur, g, links, (dev, rank, order), fifo, False, ws, _scratch_out(n, ne, ndev))[0]


@njit(cache=True)
def _scratch_out(n, ne, ndev):
    return (
        np.empty(n),
        np.empty(n),
        np.empty(ne, np.int64),
        np.empty(ne, np.int64),
        np.empty(ne),
        np.empty(ne),
        np.zeros(ndev),
    )


@njit(cache=True, inline="always")
def _checked_ranks(dev, order, ndev, rank):
    """Fill ``rank`` (the inverse of ``order``); False when a device is out of ``0 ..
    ndev - 1`` or ``order`` is not a permutation (nothing may be simulated then)."""
    n = order.shape[0]
    for v in range(n):
        if dev[v] < 0 or dev[v] >= ndev:
            return False
        rank[v] = -1
    for k in range(n):
        v = order[k]
        if v < 0 or v >= n or rank[v] >= 0:
            return False
        rank[v] = k
    return True


#: Most entries of the per-batch duration table of :func:`run_rows` (8 MiB).
_MAX_BASE_TABLE = 1 << 20


@njit(cache=True, nogil=True)
def run_rows(static, devs, orders, factors, fifo, memory, lo, hi, makespans, peaks):
    """Rows ``lo .. hi - 1`` of a batch, one after another in one workspace, into
    ``makespans (B,)`` and (when ``memory``) ``peaks (B, D)``; ``static`` is the tuple
    of :func:`pack_static`. Releases the GIL; ``factors`` is ``(B, n)`` or ``(B, 0)``
    (no noise). A row whose devices are out of range or whose order is not a
    permutation is not simulated: its makespan is NaN."""
    gf, gi, cf, lat, bw, table, ci = static
    costs, g, links = _unpack(gf, gi, cf, lat, bw, table, ci)
    n = devs.shape[1]
    ne = g[3].shape[0]
    ndev = links[0].shape[0]
    ws = workspace(n, ne, ndev, ndev * ci[ndev])
    out = _scratch_out(n, ne, ndev)
    rank = np.empty(n, np.int64)
    # rule 1's per-(node, device) part once for all rows, when that is less work than
    # the rows themselves (few devices) and small
    use_base = hi - lo >= ndev and n * ndev <= _MAX_BASE_TABLE
    if use_base:
        flops, io, dflops, dmembw, dlaunch, prof, pclass = costs
        base = base_times(flops, io, dflops, dmembw, dlaunch, prof, pclass)
    else:
        base = np.empty((0, 0))
    dur = np.empty(n)
    for i in range(lo, hi):
        if not _checked_ranks(devs[i], orders[i], ndev, rank):
            makespans[i] = np.nan
            continue
        p = (devs[i], rank, orders[i])
        if use_base:
            durations_from(base, costs[4], devs[i], factors[i], dur)
        else:
            dur = _durations_of(costs, devs[i], factors[i])
        makespans[i] = _run(dur, g, links, p, fifo, memory, ws, out)[0]
        if memory:
            peaks[i] = out[6]
