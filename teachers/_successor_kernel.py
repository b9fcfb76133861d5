"""The compiled step of :func:`~placegym.teachers.heft.successor_scores` (numba, cached
on disk): one implementation for the ``heft_lookahead`` teacher, the policy's
``successors`` columns and the one-pass decode, so all three agree bit for bit."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _least(key, width, idx, val):  # pragma: no cover - compiled
    """Write into ``idx[:width]`` the indices of the ``width`` least ``key`` values,
    ties by index (the set of a stable argsort's first ``width``)."""
    m = 0
    for k in range(key.shape[0]):
        x = key[k]
        if m == width and x >= val[m - 1]:
            continue
        p = m if m < width else width - 1
        while p > 0 and val[p - 1] > x:  # equal keys stay ahead: smaller index
            val[p], idx[p] = val[p - 1], idx[p - 1]
            p -= 1
        val[p], idx[p] = x, k
        if m < width:
            m += 1


@njit(cache=True)
def successor_kernel(
    finish, succ, ready, dur, latency_t, inv_bw_t, out_bytes, tail, width, out
):  # pragma: no cover - compiled
    """``out (D,)``: per device ``k`` the node goes on, the largest over the successors
    ``c = succ[i]`` of ``min over r' of max(finish[k] + latency[k, r'] + out_bytes *
    inv_bw[k, r'], ready[i, r']) + dur[c, r']``, plus ``tail[c]``; ``latency_t`` and
    ``inv_bw_t`` are the transposed link tables (``[r', k]``, read row by row). ``r'``
    ranges over every device when there are at most ``width``, else over ``k`` and the
    ``width`` devices of least ``ready[i] + dur[c]`` (ties by index)."""
    nd = finish.shape[0]
    best = np.empty(nd)
    every = nd <= width
    cand = np.arange(nd) if every else np.empty(width, dtype=np.int64)
    val = np.empty(width)
    for k in range(nd):
        out[k] = -np.inf
    for i in range(succ.shape[0]):
        c = succ[i]
        r = ready[i]
        if not every:
            _least(r + dur[c], width, cand, val)
        for k in range(nd):  # the successor beside the node
            best[k] = max(finish[k], r[k]) + dur[c, k]
        for j in cand:  # the successor on r' = j
            lat, ibw, rj, dj = latency_t[j], inv_bw_t[j], r[j], dur[c, j]
            for k in range(nd):
                x = max(finish[k] + (lat[k] + out_bytes * ibw[k]), rj) + dj
                if x < best[k]:
                    best[k] = x
        t = tail[c]
        for k in range(nd):
            x = best[k] + t
            if x > out[k]:
                out[k] = x
