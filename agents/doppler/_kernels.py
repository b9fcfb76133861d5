"""Compiled kernels of the dual policy's per-state inputs (numba, cached on disk).

An episode step asks for these inputs over the states of a few dozen environments, and
scoring a PPO minibatch over thousands of states at once. Written as ``torch`` ops they
cost a dozen small calls per step of the episodes and, in scoring, gather one embedding
row per (state, placed node) pair (``S · n · H`` floats, 33 MB for 16 episodes of 128
nodes at ``H = 64``), which made them the largest costs of an update. The kernels below
compute the same values from the same operands and are **bit for bit** equal to those
``torch`` formulations (the tests keep them as oracles), so training with either gives
the same weights:

- maxima and minima are exact in any order;
- sums add their terms one by one, from zero, in the order in which ``index_add`` (and
  the ``index_put`` of its gradient) adds them on one CPU thread, training's setting:
  ascending entry index. (On several threads ``torch`` accumulates with atomic adds in
  no fixed order; the kernels keep theirs.)
- every operation is in the operands' precision (float32 stays float32).

:mod:`placegym.agents.doppler.features` holds the functions the policy calls
(:func:`~placegym.agents.doppler.features.placed_sums`, ``sibling_share``,
``sel_context``) and documents what they compute. Everything compiled lives in this one
file: numba's disk cache is invalidated per source file.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "Intervals",
    "device_sum_kernel",
    "greedy_pick_kernel",
    "hint_counts_kernel",
    "insert_interval_kernel",
    "insertion_columns_kernel",
    "insertion_kernel",
    "placed_sums_grad_kernel",
    "placed_sums_kernel",
    "plc_columns_kernel",
    "readiness_kernel",
    "sel_columns_kernel",
    "sibling_kernel",
]


@njit(cache=True)
def placed_sums_kernel(placed, values, d):  # pragma: no cover - compiled
    """``(S, D, H)`` sums of ``values[v]`` per state and device, in ascending ``v``, the
    ``(S, D)`` counts (in ``values``' dtype) and whether every device in ``placed (S, n)``
    is below ``d`` (negative: unplaced); on False the sums are incomplete."""
    s, n = placed.shape
    h = values.shape[1]
    sums = np.zeros((s, d, h), dtype=values.dtype)
    count = np.zeros((s, d), dtype=values.dtype)
    for st in range(s):
        for v in range(n):
            dev = placed[st, v]
            if dev >= d:
                return sums, count, False
            if dev >= 0:
                count[st, dev] += 1
                for k in range(h):
                    sums[st, dev, k] += values[v, k]
    return sums, count, True


@njit(cache=True)
def hint_counts_kernel(groups, node, placed, d):  # pragma: no cover - compiled
    """Per state and device, how many placed nodes share each hint group with the state's
    node, ``(S, D, K)``, and how many nodes it holds, ``(S, D)`` (int64 both), from
    ``groups (n, K)``, ``node (S,)`` and ``placed (S, n)`` (negative: unplaced); and
    whether every device in ``placed`` is below ``d`` (on False the counts are
    incomplete). The counts of ``hints.hint_share``'s one-hot products, in ``O(S · n · K)``
    time and no ``(S, n, D)`` array."""
    s, n = placed.shape
    k = groups.shape[1]
    on = np.zeros((s, d, k), dtype=np.int64)
    count = np.zeros((s, d), dtype=np.int64)
    for st in range(s):
        u = node[st]
        for v in range(n):
            dev = placed[st, v]
            if dev >= d:
                return on, count, False
            if dev >= 0:
                count[st, dev] += 1
                for j in range(k):
                    if groups[v, j] == groups[u, j]:
                        on[st, dev, j] += 1
    return on, count, True


@njit(cache=True)
def placed_sums_grad_kernel(placed, grad):  # pragma: no cover - compiled
    """``(n, H)``: each node's sum of ``grad[s, placed[s, v]]`` over the states ``s``
    where it is placed, in ascending ``s`` (the gradient of :func:`placed_sums_kernel`)."""
    s, n = placed.shape
    h = grad.shape[2]
    out = np.zeros((n, h), dtype=grad.dtype)
    for st in range(s):
        for v in range(n):
            dev = placed[st, v]
            if dev >= 0:
                for k in range(h):
                    out[v, k] += grad[st, dev, k]
    return out


@njit(cache=True)
def sibling_kernel(ptr, idx, weight, node, placed, d):  # pragma: no cover - compiled
    """``(S, D)`` shares of the siblings' weight placed on each device, for the node of
    each state: ``ptr, idx, weight`` the sibling CSR (weights in the result's dtype),
    ``node (S,)``, ``placed (S, n)``. Sums run in CSR order; the total is clamped at
    ``1e-12``. Also whether every node id is in range and every device below ``d``; on
    False the shares are incomplete."""
    s = node.shape[0]
    share = np.zeros((s, d), dtype=weight.dtype)
    tiny = weight.dtype.type(1e-12)
    for st in range(s):
        v = node[st]
        if v < 0 or v >= ptr.shape[0] - 1:
            return share, False
        total = weight.dtype.type(0.0)
        for e in range(ptr[v], ptr[v + 1]):
            w = weight[e]
            total += w
            dev = placed[st, idx[e]]
            if dev >= d:
                return share, False
            if dev >= 0:
                share[st, dev] += w
        total = max(total, tiny)
        for k in range(d):
            share[st, k] = share[st, k] / total
    return share, True


@njit(cache=True)
def readiness_kernel(est, src, dst, comm, step, node):  # pragma: no cover - compiled
    """``(K, 3)`` readiness of the pairs ``(step[k], node[k])`` (see
    :func:`~placegym.agents.doppler.features.sel_context`): ``est (S, n)`` estimated finishes,
    ``src, dst (E,)`` the edges (ids below ``n``), ``comm (E,)`` their transfer times.
    Also whether every pair indexes ``est``; on False the result is incomplete."""
    s, n = est.shape
    k_pairs = step.shape[0]
    zero = est.dtype.type(0.0)
    for k in range(k_pairs):
        if step[k] < 0 or step[k] >= s or node[k] < 0 or node[k] >= n:
            return np.zeros((k_pairs, 3), dtype=est.dtype), False
    # producers' edges of every node (CSR over dst; the order is immaterial to a max)
    ptr = np.zeros(n + 1, dtype=np.int64)
    for e in range(dst.shape[0]):
        ptr[dst[e] + 1] += 1
    for v in range(n):
        ptr[v + 1] += ptr[v]
    fill = ptr[:-1].copy()
    into = np.empty(dst.shape[0], dtype=np.int64)
    for e in range(dst.shape[0]):
        into[fill[dst[e]]] = e
        fill[dst[e]] += 1
    now = np.zeros(s, dtype=est.dtype)
    for st in range(s):
        if n:
            now[st] = est[st].max()
    local = np.empty(k_pairs, dtype=est.dtype)
    remote = np.empty(k_pairs, dtype=est.dtype)
    first = np.full(s, np.inf, dtype=est.dtype)
    for k in range(k_pairs):
        st, v = step[k], node[k]
        loc, rem = zero, zero
        for j in range(ptr[v], ptr[v + 1]):
            e = into[j]
            f = est[st, src[e]]
            loc = max(loc, f)
            rem = max(rem, f + comm[e])
        local[k], remote[k] = loc, rem
        first[st] = min(first[st], loc)
    out = np.zeros((k_pairs, 3), dtype=est.dtype)
    for k in range(k_pairs):
        st = step[k]
        out[k, 0] = local[k] - now[st]
        out[k, 1] = remote[k] - now[st]
        out[k, 2] = local[k] - first[st]
    return out, True


# ---------------------------------------------------------------------- one-pass decode
# The incremental bookkeeping of :mod:`placegym.agents.doppler.onepass`: each kernel
# reproduces, bit for bit, a quantity that the step-by-step decode recomputes per state.


@njit(cache=True, inline="always")
def _bisect_right(a, lo, hi, x):  # pragma: no cover - compiled
    """CPython's ``bisect_right`` on ``a[lo:hi]``, as an index into ``a``."""
    while lo < hi:
        mid = (lo + hi) // 2
        if x < a[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True, inline="always")
def _earliest_fit(ts, tf, lo, hi, ready, dur):  # pragma: no cover - compiled
    """``Timeline.earliest_fit`` on the intervals ``ts[lo:hi]``, ``tf[lo:hi]``."""
    i = _bisect_right(tf, lo, hi, ready)
    prev_end = ready
    for j in range(i, hi):
        if prev_end + dur <= ts[j]:
            return prev_end
        if tf[j] > prev_end:
            prev_end = tf[j]
    return prev_end


@njit(cache=True)
def insertion_kernel(ts, tf, off, size, ready, dur, out):  # pragma: no cover - compiled
    """``out (D,)``: per device ``k`` the earliest start >= ``ready[k]`` of an idle gap of
    ``dur[k]`` among its busy intervals ``ts, tf[off[k] : off[k] + size[k]]``
    (``PlacementState.insertion_start``)."""
    for k in range(out.shape[0]):
        lo = off[k]
        out[k] = _earliest_fit(ts, tf, lo, lo + size[k], ready[k], dur[k])


@njit(cache=True)
def insert_interval_kernel(ts, tf, off, size, k, start, finish):  # pragma: no cover - compiled
    """Insert ``[start, finish)`` into device ``k``'s intervals (``Timeline.insert``:
    after those of an equal start); its block must have a free slot."""
    lo, hi = off[k], off[k] + size[k]
    i = _bisect_right(ts, lo, hi, start)
    for j in range(hi, i, -1):
        ts[j] = ts[j - 1]
        tf[j] = tf[j - 1]
    ts[i] = start
    tf[i] = finish
    size[k] += 1


@njit(cache=True)
def device_sum_kernel(placed, values, d, out):  # pragma: no cover - compiled
    """``out (H,)``: the sum of ``values[v]`` over the nodes placed on device ``d``, added
    one by one in ascending ``v`` from zero (one row of :func:`placed_sums_kernel`)."""
    for k in range(out.shape[0]):
        out[k] = 0.0
    for v in range(placed.shape[0]):
        if placed[v] == d:
            for k in range(out.shape[0]):
                out[k] += values[v, k]


@njit(cache=True)
def insertion_columns_kernel(start, dur, scale, fmax, rtol, out):  # pragma: no cover
    """``out (D, 3)``: ``features.insertion_features`` of the insertion-based starts
    ``start (D,)`` of a node of durations ``dur (D,)``: the same float64 operations, each
    rounded once to ``out``'s float32."""
    d = start.shape[0]
    first = np.inf
    for k in range(d):
        first = min(first, start[k] + dur[k])
    tol = rtol * abs(first)
    for k in range(d):
        lead = (start[k] + dur[k]) - first
        out[k, 0] = min(start[k] / scale, fmax)
        out[k, 1] = min(lead / scale, fmax)
        out[k, 2] = 1.0 if lead <= tol else 0.0


@njit(cache=True)
def plc_columns_kernel(
    x,
    hv,
    sums,
    count,
    dirty,
    dev,
    col_dev,
    col_lead,
    sib,
    col_hint,
    mates,
    mates_total,
    g,
    col_rule,
    rtol,
):  # pragma: no cover - compiled
    """Write the element-wise columns of ``inputs.plc_columns`` for one state into
    ``x (D, W)`` float32: the node's embedding ``hv``, the mean device embedding
    ``sums / max(count, 1)`` (on device ``dirty`` only, every device if it is < 0: the
    others are the previous state's), the device rows ``dev (D, F)`` at ``col_dev``, the lead in
    estimated start at ``col_lead`` and the sibling share ``sib`` after it; with
    ``col_hint >= 0`` the hint shares of ``hints.hint_share`` from the placed nodes per
    (hint, hint device, device) ``mates`` and per (hint, hint device) ``mates_total`` of
    the node's hint devices ``g``; with ``col_rule >= 0`` ``features.plc_rules`` (float32
    ``rtol``). Every value is one correctly rounded float32 operation on the same
    operands as the ``torch`` formulation (float32 sums, differences and quotients of
    exact values), hence the same bits."""
    d, h = sums.shape
    f = dev.shape[1]
    one = np.float32(1.0)
    first = dev[0, 0]
    for k in range(1, d):
        first = min(first, dev[k, 0])
    tol = np.float32(rtol * np.float32(abs(first)))
    for k in range(d):
        c = max(count[k], one)
        for j in range(h):
            x[k, j] = hv[j]
        if dirty < 0 or k == dirty:
            for j in range(h):
                x[k, h + j] = sums[k, j] / c
        for j in range(f):
            x[k, col_dev + j] = dev[k, j]
        lead = dev[k, 0] - first
        x[k, col_lead] = lead
        x[k, col_lead + 1] = sib[k]
        if col_rule >= 0:
            x[k, col_rule] = 1.0 if lead <= tol else 0.0
        if col_hint >= 0:
            for i in range(g.shape[0]):
                on = np.float32(mates[i, g[i], k])
                placed = np.float32(mates_total[i, g[i]])
                x[k, col_hint + 3 * i] = on / max(placed, one)
                x[k, col_hint + 3 * i + 1] = (count[k] - on) / c
                x[k, col_hint + 3 * i + 2] = 1.0 if placed > 0 else 0.0


@njit(cache=True)
def sel_columns_kernel(x, nodes, dyn, local, remote, now, b, rules, rtol):  # pragma: no cover
    """Write ``inputs.sel_columns`` of the frontier ``nodes (K,)`` into ``x (K, W)``
    float32: each node's ``dyn`` row, its readiness (``features.sel_context``: ``local``
    and ``remote`` arrival less ``now``, ``local`` less the frontier's least) and, with
    ``rules``, ``features.sel_rules`` of the b-levels ``b (K,)`` (float32 ``rtol``).
    Every value is one correctly rounded float32 operation on the ``torch``
    formulation's operands, hence the same bits."""
    k_pairs = nodes.shape[0]
    first = local[nodes[0]]
    top = b[0]
    for i in range(1, k_pairs):
        first = min(first, local[nodes[i]])
        top = max(top, b[i])
    tol = np.float32(rtol * np.float32(abs(top)))
    for i in range(k_pairs):
        v = nodes[i]
        for j in range(dyn.shape[1]):
            x[i, j] = dyn[v, j]
        c = dyn.shape[1]
        x[i, c] = local[v] - now
        x[i, c + 1] = remote[v] - now
        x[i, c + 2] = local[v] - first
        if rules:
            gap = top - b[i]
            x[i, c + 3] = gap
            x[i, c + 4] = 1.0 if gap <= tol else 0.0


class Intervals:
    """The busy intervals of every device (``Timeline`` s of HEFT's insertion rule) in
    one pool: device ``k``'s ``size[k]`` intervals, sorted by start, at ``off[k]``, in a
    block of ``cap[k]`` slots (moved to the pool's end, twice as large, when full)."""

    def __init__(self, d: int, cap: int = 8) -> None:
        self.ts = np.zeros(d * cap)
        self.tf = np.zeros(d * cap)
        self.off = np.arange(d, dtype=np.int64) * cap
        self.size = np.zeros(d, dtype=np.int64)
        self.cap = np.full(d, cap, dtype=np.int64)
        self.end = d * cap

    def insert(self, k: int, start: float, finish: float) -> None:
        if self.size[k] == self.cap[k]:
            cap = int(2 * self.cap[k])
            if self.end + cap > len(self.ts):
                grow = max(len(self.ts), cap)
                self.ts = np.concatenate([self.ts, np.zeros(grow)])
                self.tf = np.concatenate([self.tf, np.zeros(grow)])
            lo, m = int(self.off[k]), int(self.size[k])
            self.ts[self.end : self.end + m] = self.ts[lo : lo + m]
            self.tf[self.end : self.end + m] = self.tf[lo : lo + m]
            self.off[k], self.cap[k] = self.end, cap
            self.end += cap
        insert_interval_kernel(self.ts, self.tf, self.off, self.size, k, start, finish)


@njit(cache=True)
def greedy_pick_kernel(logits, tie_key, tol):  # pragma: no cover - compiled
    """:func:`~placegym.agents.doppler.episodes.greedy_pick`: the index of the largest
    of ``logits``; those at least ``max - tol`` (``tol`` in the logits' precision, the
    subtraction too) are tied, and the first tied index of least ``tie_key`` wins. -1
    where there is no maximum: no logits, or a NaN among them."""
    if logits.shape[0] == 0:
        return -1
    top = logits[0]
    for i in range(logits.shape[0]):
        if logits[i] != logits[i]:
            return -1
        if logits[i] > top:
            top = logits[i]
    floor = top - tol
    best = -1
    for i in range(logits.shape[0]):
        if logits[i] >= floor and (best < 0 or tie_key[i] < tie_key[best]):
            best = i
    return best
