"""The compiled step of :func:`~placegym.teachers.heft.successor_finish` (numba, cached
on disk): one implementation for the ``heft_lookahead`` teacher, the policy's
``successors`` columns and the one-pass decode, so all three agree bit for bit; with the
inputs' arrival kernel that the one-pass decode reads too (what a compiled function
calls lives in its file: numba's disk cache is invalidated per source file)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def arrival_kernel(ptr, idx, v, device, finish, nbytes, latency, inv_bw, out):  # pragma: no cover
    """``out (D,)``: the arrival on each device of every placed input of ``v``,
    ``finish[u] + latency[a] + nbytes[u] * inv_bw[a]`` from producer ``u`` on ``a``,
    their max with 0 (``PlacementState._no_earlier_than`` with a zero floor): ``ptr, idx``
    the producer CSR."""
    d = out.shape[0]
    for k in range(d):
        out[k] = 0.0
    for j in range(ptr[v], ptr[v + 1]):
        u = idx[j]
        a = device[u]
        if a < 0:
            continue
        f, b = finish[u], nbytes[u]
        for k in range(d):
            x = f + latency[a, k] + b * inv_bw[a, k]
            if x > out[k]:
                out[k] = x


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


@njit(cache=True)
def successor_columns_kernel(
    v,
    succ_ptr,
    succ_idx,
    pred_ptr,
    pred_idx,
    device,
    ins_finish,
    nbytes,
    latency,
    inv_bw,
    latency_t,
    inv_bw_t,
    dur,
    tail,
    width,
    finish,
    iv_finish,
    iv_off,
    iv_size,
    scale,
    feature_max,
    rtol,
    out,
):  # pragma: no cover - compiled
    """``out (D, 2)`` float32: the ``successors`` columns of node ``v`` whose insertion-
    based finish on each device is ``finish``, from an insertion schedule kept as arrays
    (each placed node's finish ``ins_finish``, each device's busy intervals' finishes
    ``iv_finish[iv_off[k] : iv_off[k] + iv_size[k]]``, sorted): each successor's ready
    time is the later of its placed inputs' arrival (``PlacementState.input_arrival``
    with ``insertion``) and the device's last finish, then :func:`successor_kernel`;
    the columns are the lead over the least, / ``scale``, capped at ``feature_max``, and
    whether it is within ``rtol`` of the least (the same float64 operations as
    :func:`~placegym.agents.doppler.features.successor_features`)."""
    nd = finish.shape[0]
    lo, hi = succ_ptr[v], succ_ptr[v + 1]
    m = hi - lo
    score = np.empty(nd)
    if m == 0:
        for k in range(nd):
            score[k] = finish[k]
    else:
        succ = succ_idx[lo:hi]
        ready = np.empty((m, nd))
        for i in range(m):
            row = ready[i]
            arrival_kernel(
                pred_ptr, pred_idx, succ[i], device, ins_finish, nbytes, latency, inv_bw, row
            )
            for k in range(nd):  # no earlier than the device's last finish
                if iv_size[k] > 0:
                    row[k] = max(row[k], iv_finish[iv_off[k] + iv_size[k] - 1])
        successor_kernel(
            finish, succ, ready, dur, latency_t, inv_bw_t, nbytes[v], tail, width, score
        )
    first = score.min()
    for k in range(nd):
        lead = score[k] - first
        out[k, 0] = min(lead / scale, feature_max)
        out[k, 1] = 1.0 if lead <= rtol * abs(first) else 0.0
