"""The compiled twins of :mod:`placegym.envs.analysis.memory`'s packing check and room.

The compiled rule completions (:mod:`placegym.teachers._rule_kernel`) call these inside
their own kernels; :func:`placegym.envs.analysis.memory.packs` is :func:`packs_into` too,
so the packing rule has one definition. numba caches a kernel per source file and does not
track calls into other files: after changing this file, remove the ``__pycache__``
folders of ``envs/analysis`` and ``teachers`` (``make clean`` does) so the rule kernels
compile again.
"""

from __future__ import annotations

from numba import njit

__all__ = ["fits_on", "packs_into", "room_state"]


@njit(cache=True)
def packs_into(items, count, free, work):
    """Whether ``items[:count]`` (bytes > 0, descending) pack into devices of ``free``
    bytes (>= 0): :func:`placegym.envs.analysis.memory.packs` (``work``: scratch ``(D,)``)."""
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
    """:meth:`Room.checker <placegym.envs.analysis.memory.Room.checker>`'s state for
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
    """:meth:`Room.checker <placegym.envs.analysis.memory.Room.checker>`'s ``fits(d)``
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
