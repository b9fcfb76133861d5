"""Compiled kernels of NEST's stage costs (:mod:`placegym.teachers._nest_cost`), numba,
cached on disk; each equals, bit for bit, the numpy formulation it replaces (the tests
keep that one as the oracle)."""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["channel_max_kernel"]


@njit(cache=True)
def channel_max_kernel(u, src, dst, nbytes, lat, bw, d):  # pragma: no cover - compiled
    """The largest total transfer time over channels, one transfer per (producer ``u``,
    destination device): each transfer ``lat[a, b] + nbytes[u] / bw[a, b]``, a channel's
    transfers added from zero in ascending producer, the first edge of each (producer,
    destination) taken; 0 where no edge crosses devices."""
    m = u.shape[0]
    key = np.empty(m, dtype=np.int64)
    k = 0
    for i in range(m):
        if src[i] != dst[i]:
            key[k] = u[i] * d + dst[i]
            k += 1
    if k == 0:
        return 0.0
    pos = np.empty(k, dtype=np.int64)
    k = 0
    for i in range(m):
        if src[i] != dst[i]:
            pos[k] = i
            k += 1
    key = key[:k]
    order = np.argsort(key, kind="mergesort")
    chan = np.empty(k, dtype=np.int64)
    prod = np.empty(k, dtype=np.int64)
    time = np.empty(k)
    c = 0
    for j in range(k):
        r = order[j]
        if j > 0 and key[r] == key[order[j - 1]]:
            continue
        i = pos[r]
        a, b = src[i], dst[i]
        chan[c] = a * d + b
        prod[c] = u[i]
        time[c] = lat[a, b] + nbytes[u[i]] / bw[a, b]
        c += 1
    span = 0
    for j in range(c):
        if prod[j] + 1 > span:
            span = prod[j] + 1
    key2 = np.empty(c, dtype=np.int64)
    for j in range(c):
        key2[j] = chan[j] * span + prod[j]
    order2 = np.argsort(key2, kind="mergesort")
    best = -np.inf
    total = 0.0
    cur = -1
    for j in range(c):
        r = order2[j]
        if chan[r] != cur:
            if cur >= 0 and total > best:
                best = total
            cur = chan[r]
            total = 0.0
        total += time[r]
    if total > best:
        best = total
    return best
