"""The compiled part of :meth:`Room._state <placegym.envs.analysis.room.Room>` (numba,
cached on disk): the capacity each device has left for a live room, in the same float64
operations and order as the numpy path it replaces, so the mask is unchanged."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def live_free(
    v, device, unit_of, unit_bytes, param_bytes, capacity, param_used, out_bytes,
    future, src, ptr, keeps, counts, live, by_size, unit_dev, free, items,
):  # pragma: no cover - compiled  # fmt: skip
    """Write each unit's device into ``unit_dev (U,)`` (-1: unopened) and into ``free
    (D,)`` each device's capacity less its placed and pending resident bytes (units'
    bytes summed by ascending node, pending by ascending unit), and with ``live`` less
    the held outputs (placed nodes with a kept edge to an unplaced consumer, by ascending
    node), then less the largest working set to come of an unplaced node (not ``v``) of
    an open unit on its unit's device, less its counted inputs already there (``src``,
    ``ptr``: the producer CSR). Returns how many unopened units' bytes (but ``v``'s unit,
    > 0, in ``by_size`` order) it wrote into ``items``."""
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
    for w in range(n):
        e = unit_dev[unit_of[w]]
        if w == v or device[w] >= 0 or e < 0:
            continue
        x = future[w]
        for k in range(ptr[w], ptr[w + 1]):
            if counts[k] and device[src[k]] == e:
                x = x - out_bytes[src[k]]
        if x > waits[e]:
            waits[e] = x
    for d in range(nd):
        free[d] = free[d] - held[d] - waits[d]
    return count
