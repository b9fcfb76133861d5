"""The compiled twins of :mod:`placegym.envs.analysis.room`'s packing check and room (its
live part too), and the compiled capacity left that the room's own mask reads
(:func:`live_free`).

The compiled rule completions (:mod:`placegym.teachers._rule_kernel`) call these inside
their own kernels; :func:`placegym.envs.analysis.room.packs` is :func:`packs_into` too,
so the packing rule has one definition. numba caches a kernel per source file and does not
track calls into other files: after changing this file, remove the ``__pycache__``
folders of ``envs/analysis`` and ``teachers`` (``make clean`` does) so the rule kernels
compile again.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["fits_on", "live_free", "live_room", "packs_into", "room_state", "waits_into"]


@njit(cache=True)
def packs_into(items, count, free, work):
    """Whether ``items[:count]`` (bytes > 0, descending) pack into devices of ``free``
    bytes (>= 0): :func:`placegym.envs.analysis.room.packs` (``work``: scratch ``(D,)``)."""
    if count == 0:
        return True
    nd = free.shape[0]
    total = 0.0
    for i in range(count):
        total += items[i]
    room = 0.0
    for d in range(nd):
        room += free[d]
    if total > room:
        return False
    spare = 0.0
    for d in range(nd):
        spare += max(free[d] - items[0], 0.0)
    if total <= spare:
        return True
    # worst fit (the multiset of free bytes decides, not which of equal devices)
    for d in range(nd):
        work[d] = free[d]
    ok = True
    for i in range(count):
        top = 0
        for d in range(1, nd):
            if work[d] > work[top]:
                top = d
        if items[i] > work[top]:
            ok = False
            break
        work[top] = work[top] - items[i]
    if ok:
        return True
    # first fit
    for d in range(nd):
        work[d] = free[d]
    for i in range(count):
        placed = False
        for d in range(nd):
            if work[d] >= items[i]:
                work[d] = work[d] - items[i]
                placed = True
                break
        if not placed:
            return False
    return True


@njit(cache=True)
def room_state(v, used, unit_of, unit_bytes, unit_dev, unit_done, by_size, capacity, free, items):
    """:meth:`Room.checker <placegym.envs.analysis.room.Room.checker>`'s state for
    ``v``: ``free`` (capacity less placed and pending resident bytes per device) and
    the unopened units' bytes (descending, > 0) in ``items``; returns
    ``(count, need)``."""
    nd = free.shape[0]
    for d in range(nd):
        free[d] = 0.0
    for u in range(unit_bytes.shape[0]):
        if unit_dev[u] >= 0:
            free[unit_dev[u]] += unit_bytes[u] - unit_done[u]
    for d in range(nd):
        free[d] = capacity[d] - used[d] - free[d]
    mine = unit_of[v]
    count = 0
    for i in range(by_size.shape[0]):
        u = by_size[i]
        if unit_dev[u] < 0 and u != mine and unit_bytes[u] > 0:
            items[count] = unit_bytes[u]
            count += 1
    return count, unit_bytes[mine]


@njit(cache=True)
def fits_on(d, need, free, items, count, f, work):
    """:meth:`Room.checker <placegym.envs.analysis.room.Room.checker>`'s ``fits(d)``
    (``f``, ``work``: scratch ``(D,)``)."""
    nd = free.shape[0]
    for e in range(nd):
        f[e] = free[e]
    f[d] -= need
    if need > 0 and f[d] < 0:
        return False
    for e in range(nd):
        if f[e] < 0.0:
            f[e] = 0.0
    return packs_into(items, count, f, work)


@njit(cache=True)
def live_room(
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
):
    """The live part of :meth:`Room.checker <placegym.envs.analysis.room.Room.checker>`
    for ``v`` (``Room(live=True)``): ``free`` (from :func:`room_state`) less the held
    outputs (placed nodes with ``waiting`` > 0 kept consumers unplaced) and the largest
    working set to come per device; ``extra`` = ``v``'s working set per device, at least
    that of the rest of its unit when ``v`` opens it (``waits``, ``local``: scratch
    ``(D,)``). The same float operations in the same order as the Python path."""
    nd = free.shape[0]
    n = device.shape[0]
    for d in range(nd):
        extra[d] = 0.0
        waits[d] = 0.0
    for u in range(n):  # held, summed by ascending node
        if device[u] >= 0 and waiting[u] > 0:
            extra[device[u]] += out_bytes[u]
    mine = unit_of[v]
    waits_into(v, device, unit_of, unit_dev, future, out_bytes, pptr, pidx, pcount, waits)
    for d in range(nd):
        free[d] = free[d] - extra[d] - waits[d]
    for d in range(nd):  # v's working set
        local[d] = 0.0
    for k in range(pptr[v], pptr[v + 1]):
        u = pidx[k]
        local[device[u]] += out_bytes[u]
    for d in range(nd):
        extra[d] = out_bytes[v] + in_bytes[v] - local[d]
    if unit_dev[mine] < 0:  # v opens its unit: the rest of it will run there
        for w in range(n):
            if w == v or unit_of[w] != mine:
                continue
            for d in range(nd):
                local[d] = 0.0
            for k in range(pptr[w], pptr[w + 1]):
                u = pidx[k]
                if pcount[k] and device[u] >= 0:
                    local[device[u]] += out_bytes[u]
            for d in range(nd):
                x = future[w] - local[d]
                if x > extra[d]:
                    extra[d] = x


@njit(cache=True)
def waits_into(
    v, device, unit_of, unit_dev, future, out_bytes, pptr, pidx, pcount, waits
):  # pragma: no cover - compiled
    """Raise ``waits (D,)`` to the largest working set to come on each device: of each
    unplaced node but ``v`` of an open unit (on its unit's device ``unit_dev``), its
    ``future`` bytes less its counted inputs (``pcount``) already on that device."""
    for w in range(device.shape[0]):
        if w == v or device[w] >= 0:
            continue
        e = unit_dev[unit_of[w]]
        if e < 0:
            continue
        x = future[w]
        for k in range(pptr[w], pptr[w + 1]):
            if pcount[k] and device[pidx[k]] == e:
                x = x - out_bytes[pidx[k]]
        if x > waits[e]:
            waits[e] = x


@njit(cache=True)
def live_free(
    v, device, unit_of, unit_bytes, param_bytes, capacity, param_used, out_bytes,
    future, src, ptr, keeps, counts, live, by_size, unit_dev, free, items,
):  # pragma: no cover - compiled  # fmt: skip
    """:meth:`Room._state <placegym.envs.analysis.room.Room>`'s capacity left, in the
    float64 operations and order of its numpy definition (:meth:`Room.held` and
    bincounts; ``tests/test_live_room.py`` compares the two), so the mask is unchanged.
    Writes each unit's device into ``unit_dev (U,)`` (-1: unopened) and into ``free
    (D,)`` each device's capacity less its placed and pending resident bytes (units'
    bytes summed by ascending node, pending by ascending unit), and with ``live`` less
    the held outputs (placed nodes with a kept edge to an unplaced consumer, by
    ascending node), then less the largest working set to come (:func:`waits_into`;
    ``src``, ``ptr``: the producer CSR). Returns how many unopened units' bytes (but
    ``v``'s unit, > 0, in ``by_size`` order) it wrote into ``items``."""
    n, nu, nd = device.shape[0], unit_bytes.shape[0], free.shape[0]
    done = np.zeros(nu)
    for u in range(nu):
        unit_dev[u] = -1
    for w in range(n):
        if device[w] >= 0:
            unit_dev[unit_of[w]] = device[w]
            done[unit_of[w]] += param_bytes[w]
    pending = np.zeros(nd)
    for u in range(nu):
        if unit_dev[u] >= 0:
            pending[unit_dev[u]] += unit_bytes[u] - done[u]
    for d in range(nd):
        free[d] = capacity[d] - param_used[d] - pending[d]
    mine, count = unit_of[v], 0
    for i in range(nu):
        u = by_size[i]
        if unit_dev[u] < 0 and u != mine and unit_bytes[u] > 0:
            items[count] = unit_bytes[u]
            count += 1
    if not live:
        return count
    waiting = np.zeros(n, dtype=np.bool_)
    for w in range(n):
        if device[w] < 0:
            for k in range(ptr[w], ptr[w + 1]):
                if keeps[k] and device[src[k]] >= 0:
                    waiting[src[k]] = True
    held = np.zeros(nd)
    for w in range(n):
        if waiting[w]:
            held[device[w]] += out_bytes[w]
    waits = np.zeros(nd)
    waits_into(v, device, unit_of, unit_dev, future, out_bytes, ptr, src, counts, waits)
    for d in range(nd):
        free[d] = free[d] - held[d] - waits[d]
    return count
