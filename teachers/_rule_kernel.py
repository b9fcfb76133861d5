"""Compiled completions of a partial placement by a b-level list rule (numba, cached on disk).

:func:`complete_candidates` finishes one partial placement once per candidate device of
its selected node, each time by :class:`~placegym.teachers.heft.HeftRuleTeacher`'s or
:class:`~placegym.teachers.critical_path.CriticalPathTeacher`'s per-state answers, first
of each tie set, exactly as :func:`placegym.teachers.base.complete` does through
:class:`~placegym.envs.mdp.state.PlacementState`: the same float64 operations in the same
order, the same tie tolerance, the same insertion search (``bisect_right`` over the
finishes, then the first gap that fits). :class:`~placegym.teachers.lookahead.
LookaheadTeacher` uses it for its completions; ``tests/test_rule_kernel.py`` compares
the two placement for placement.

Rules (``kind``): :data:`HEFT_RULE` (SEL: the frontier node of largest b-level; PLC: the
legal device of earliest insertion-based finish) and :data:`CRITICAL_PATH` (same SEL;
PLC: the legal device of earliest list-schedule start).

Legal devices are the state's (:meth:`~placegym.envs.mdp.state.PlacementState.place_mask`):
a node whose co-location group has a member placed goes to that member's device; else,
with the memory mask on, the devices whose resident parameters plus the node's (its
whole group's, when it opens the group) fit, every device when none does. Groups come
as *units* (:func:`placegym.envs.analysis.room.units`: a group is one unit, every other
node its own). Under memory pressure (``room``) PLC chooses among the legal devices with
room, as :func:`placegym.teachers._memory.room_ties` does: the least score among the
legal devices with room (checked in ascending score), the first of its tie set among
those with room; the whole tie set when none has room. A device has room when, with the
node's unit there, the resident bytes of every unit not yet opened still pack
(:func:`~placegym.envs.analysis.room.packs`: a counting bound, then worst-fit
decreasing, then first-fit decreasing) into each device's ``capacity`` (memory less the
rule's tensor reserve) less its placed and still-pending resident bytes. The byte sums
run in placement order where the Python path sums by node id: equal whenever bytes are
integers (the suites' and importers' are), else possibly one ulp apart at a packing
boundary.

Everything compiled here lives in this one file (numba's disk cache is invalidated per
source file), but for the room's packing check, which is the analysis band's
(:mod:`placegym.envs.analysis._memory_kernel`, whose docstring says how to recompile).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from placegym.envs.analysis._memory_kernel import fits_on, live_room, room_state

#: ``kind`` of :func:`complete_candidates`: HEFT's rule with insertion.
HEFT_RULE = 0
#: ``kind`` of :func:`complete_candidates`: the critical-path rule (earliest start).
CRITICAL_PATH = 1

#: The teachers' tie tolerance (relative), defined here so that numba freezes it into
#: the cached kernels; :mod:`placegym.teachers._common` imports it.
TIE_RTOL = 1e-9


@njit(cache=True, inline="always")
def _tol(target):
    a = abs(target)
    return TIE_RTOL * (a if a > 1e-300 else 1e-300)


@njit(cache=True)
def _bisect_right(a, hi, x):
    """``bisect.bisect_right(a[:hi], x)``, the same probes (so the same answer on any list)."""
    lo = 0
    while lo < hi:
        mid = (lo + hi) // 2
        if x < a[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True)
def _earliest_fit(starts, finishes, count, ready, dur):
    """:meth:`placegym.envs.mdp.state.Timeline.earliest_fit` on one device's intervals."""
    i = _bisect_right(finishes, count, ready)
    prev_end = ready
    for j in range(i, count):
        if prev_end + dur <= starts[j]:
            return prev_end
        if finishes[j] > prev_end:
            prev_end = finishes[j]
    return prev_end


@njit(cache=True)
def _insert(starts, finishes, count, start, finish):
    """:meth:`placegym.envs.mdp.state.Timeline.insert` (``bisect_right`` on the starts)."""
    i = _bisect_right(starts, count, start)
    for j in range(count, i, -1):
        starts[j] = starts[j - 1]
        finishes[j] = finishes[j - 1]
    starts[i] = start
    finishes[i] = finish


@njit(cache=True)
def _arrival(v, floor, finish, device, pptr, pidx, out_bytes, latency, inv_bw, row):
    """``row`` = max of ``floor`` and each placed input's arrival on every device
    (:meth:`PlacementState._no_earlier_than`)."""
    nd = row.shape[0]
    for d in range(nd):
        row[d] = floor[d]
    for k in range(pptr[v], pptr[v + 1]):
        u = pidx[k]
        a = device[u]
        if a < 0:
            continue
        for d in range(nd):
            x = finish[u] + latency[a, d] + out_bytes[u] * inv_bw[a, d]
            if x > row[d]:
                row[d] = x


@njit(cache=True)
def _legal(v, used, unit_of, unit_bytes, unit_dev, memory, memory_mask, legal):
    """``legal`` = :meth:`PlacementState.place_mask` of ``v``; whether a group forced it."""
    nd = legal.shape[0]
    u = unit_of[v]
    if unit_dev[u] >= 0:  # the group is open: its device only
        for d in range(nd):
            legal[d] = d == unit_dev[u]
        return True
    need = unit_bytes[u]  # the node's own bytes, or its whole group's
    anyfit = False
    for d in range(nd):
        ok = (not memory_mask) or used[d] + need <= memory[d]
        legal[d] = ok
        anyfit = anyfit or ok
    if not anyfit:
        for d in range(nd):
            legal[d] = True
    return False


@njit(cache=True)
def complete_candidates(
    kind,
    prefix,
    selected,
    candidates,
    blevel,
    duration,
    pptr,
    pidx,
    sptr,
    sidx,
    out_bytes,
    param_bytes,
    memory,
    memory_mask,
    latency,
    inv_bw,
    unit_of,
    unit_bytes,
    by_size,
    room,
    capacity,
    live,
    in_bytes,
    future,
    pkeep,
    pcount,
):
    """``(device, order)``, each ``(len(candidates), n)``: the partial placement
    ``prefix`` with ``selected`` awaiting a device, put on each candidate device in turn
    and completed by the rule ``kind``.

    ``prefix`` is ``(k, 2)`` int64: node and device of each placed node in selection
    order. The graph comes as ``duration (n, D)``, the producer and consumer CSR
    (``pptr, pidx``, ``sptr, sidx``, in the graph's order), ``out_bytes``,
    ``param_bytes``, ``blevel``, and its units (``unit_of (n,)``, ``unit_bytes (U,)``,
    ``by_size (U,)``: units by descending bytes); the cluster as ``memory (D,)``,
    ``latency`` and ``inv_bw`` ``(D, D)`` (0 on the diagonal). ``room``: PLC chooses
    among devices with room for the unopened units in ``capacity (D,)`` (module
    docstring); with ``live`` also for the live bytes of the partial schedule
    (:class:`~placegym.envs.analysis.room.Room` with ``live``: ``in_bytes``, ``future``
    ``(n,)`` and ``pkeep``, ``pcount``, per entry of ``pidx``, are its ``in_bytes``,
    :attr:`~placegym.envs.analysis.room.Room.future`, ``keeps`` and ``counts``).
    The state (list-schedule estimates, insertion timelines, resident
    parameters, open groups, frontier) is rebuilt from ``prefix`` as
    :class:`~placegym.envs.mdp.state.PlacementState` built it.
    """
    n, nd = duration.shape
    k = prefix.shape[0]
    m = candidates.shape[0]
    nu = unit_bytes.shape[0]
    out_dev = np.empty((m, n), np.int64)
    out_ord = np.empty((m, n), np.int64)
    zero = np.zeros(nd)
    row = np.empty(nd)
    legal = np.empty(nd, np.bool_)
    score = np.empty(nd)
    # scratch of the room checks
    free = np.empty(nd)
    f = np.empty(nd)
    work = np.empty(nd)
    items = np.empty(nu)
    checked = np.zeros(nd, np.bool_)
    fit = np.zeros(nd, np.bool_)
    extra = np.zeros(nd)
    waits = np.empty(nd)
    local = np.empty(nd)

    # the shared prefix state
    device0 = np.full(n, -1, np.int64)
    finish0 = np.full(n, np.nan)  # est_finish (critical path) or insertion finish (HEFT)
    free0 = np.zeros(nd)
    used0 = np.zeros(nd)
    starts0 = np.empty((nd, n + 1))
    fins0 = np.empty((nd, n + 1))
    count0 = np.zeros(nd, np.int64)
    unit_dev0 = np.full(nu, -1, np.int64)
    unit_done0 = np.zeros(nu)
    waiting0 = np.zeros(n, np.int64)  # kept consumer edges not yet placed, per producer
    if live:
        for w in range(n):
            for j in range(pptr[w], pptr[w + 1]):
                if pkeep[j]:
                    waiting0[pidx[j]] += 1
    for i in range(k):
        v = prefix[i, 0]
        d = prefix[i, 1]
        dur = duration[v, d]
        if kind == HEFT_RULE:
            _arrival(v, zero, finish0, device0, pptr, pidx, out_bytes, latency, inv_bw, row)
            s = _earliest_fit(starts0[d], fins0[d], count0[d], row[d], dur)
            _insert(starts0[d], fins0[d], count0[d], s, s + dur)
            count0[d] += 1
        else:
            _arrival(v, free0, finish0, device0, pptr, pidx, out_bytes, latency, inv_bw, row)
            s = row[d]
            free0[d] = s + dur
        finish0[v] = s + dur
        device0[v] = d
        used0[d] += param_bytes[v]
        u = unit_of[v]
        if unit_dev0[u] < 0:
            unit_dev0[u] = d
        unit_done0[u] += param_bytes[v]
        if live:
            for j in range(pptr[v], pptr[v + 1]):
                if pkeep[j]:
                    waiting0[pidx[j]] -= 1
    left0 = np.empty(n, np.int64)
    for v in range(n):
        left0[v] = pptr[v + 1] - pptr[v]
    for i in range(k):
        v = prefix[i, 0]
        for j in range(sptr[v], sptr[v + 1]):
            left0[sidx[j]] -= 1
    front0 = np.empty(n, np.int64)  # the frontier, unordered
    nf0 = 0
    for v in range(n):
        if left0[v] == 0 and device0[v] < 0 and v != selected:
            front0[nf0] = v
            nf0 += 1

    for c in range(m):
        device = device0.copy()
        finish = finish0.copy()
        free_at = free0.copy()
        used = used0.copy()
        starts = starts0.copy()
        fins = fins0.copy()
        count = count0.copy()
        unit_dev = unit_dev0.copy()
        unit_done = unit_done0.copy()
        waiting = waiting0.copy()
        left = left0.copy()
        front = front0.copy()
        nf = nf0
        order = out_ord[c]
        for i in range(k):
            order[i] = prefix[i, 0]
        order[k] = selected
        pos = k
        v = selected
        forced = candidates[c]
        while True:
            # PLC of v
            dur_row = duration[v]
            if kind == HEFT_RULE:
                _arrival(v, zero, finish, device, pptr, pidx, out_bytes, latency, inv_bw, row)
                for d in range(nd):
                    row[d] = _earliest_fit(starts[d], fins[d], count[d], row[d], dur_row[d])
            else:
                _arrival(v, free_at, finish, device, pptr, pidx, out_bytes, latency, inv_bw, row)
            if forced >= 0:
                best = forced
                forced = -1
            else:
                grouped = _legal(
                    v, used, unit_of, unit_bytes, unit_dev, memory, memory_mask, legal
                )
                nlegal = 0
                for d in range(nd):
                    # what PLC minimises: the finish (HEFT's rule) or the start
                    score[d] = row[d] + dur_row[d] if kind == HEFT_RULE else row[d]
                    if legal[d]:
                        nlegal += 1
                best = -1
                if room and memory_mask and not grouped and nlegal > 1:
                    # room_ties: the least score among the legal devices with room
                    cnt, need = room_state(
                        v,
                        used,
                        unit_of,
                        unit_bytes,
                        unit_dev,
                        unit_done,
                        by_size,
                        capacity,
                        free,
                        items,
                    )
                    if live:
                        live_room(
                            v,
                            device,
                            unit_of,
                            unit_dev,
                            waiting,
                            out_bytes,
                            in_bytes,
                            future,
                            pptr,
                            pidx,
                            pcount,
                            free,
                            extra,
                            waits,
                            local,
                        )
                    for d in range(nd):
                        checked[d] = False
                    target = np.nan
                    for _ in range(nlegal):
                        at = -1
                        low = np.inf
                        for d in range(nd):  # ascending score, stable by id
                            if legal[d] and not checked[d]:
                                x = score[d]
                                if at < 0 or x < low:
                                    at = d
                                    low = x
                        checked[at] = True
                        fit[at] = fits_on(at, need + extra[at], free, items, cnt, f, work)
                        if fit[at]:
                            target = score[at]
                            break
                    if not np.isnan(target):
                        tol = _tol(target)
                        for d in range(nd):
                            if legal[d]:
                                x = score[d]
                                if abs(x - target) <= tol:
                                    if not checked[d]:
                                        checked[d] = True
                                        fit[d] = fits_on(
                                            d, need + extra[d], free, items, cnt, f, work
                                        )
                                    if fit[d]:
                                        best = d
                                        break
                if best < 0:
                    target = np.inf
                    for d in range(nd):
                        if legal[d]:
                            x = score[d]
                            if x < target:
                                target = x
                    tol = _tol(target)
                    for d in range(nd):
                        if legal[d]:
                            x = score[d]
                            if abs(x - target) <= tol:
                                best = d
                                break
            s = row[best]
            f_end = s + dur_row[best]
            if kind == HEFT_RULE:
                _insert(starts[best], fins[best], count[best], s, f_end)
                count[best] += 1
            else:
                free_at[best] = f_end
            finish[v] = f_end
            device[v] = best
            used[best] += param_bytes[v]
            u = unit_of[v]
            if unit_dev[u] < 0:
                unit_dev[u] = best
            unit_done[u] += param_bytes[v]
            if live:
                for j in range(pptr[v], pptr[v + 1]):
                    if pkeep[j]:
                        waiting[pidx[j]] -= 1
            for j in range(sptr[v], sptr[v + 1]):
                w = sidx[j]
                left[w] -= 1
                if left[w] == 0:
                    front[nf] = w
                    nf += 1
            pos += 1
            if pos == n:
                break
            # SEL: the frontier node of largest b-level, smallest id of the tie set
            target = -np.inf
            for i in range(nf):
                if blevel[front[i]] > target:
                    target = blevel[front[i]]
            tol = _tol(target)
            at = -1
            for i in range(nf):
                u = front[i]
                if abs(blevel[u] - target) <= tol and (at < 0 or u < front[at]):
                    at = i
            v = front[at]
            nf -= 1
            front[at] = front[nf]
            order[pos] = v
        out_dev[c] = device
    return out_dev, out_ord
