"""Compiled transitions of the SEL/PLC process for a batch of environments (numba).

Each function loops over the ``B`` environments of :class:`placegym.envs.mdp.vector.
PlacementVectorEnv` and reproduces, number for number, what :class:`placegym.envs.mdp.env.
PlacementEnv` computes through :class:`~placegym.envs.mdp.state.PlacementState`,
:class:`~placegym.envs.mdp.observation.ObservationBuilder` and
:class:`~placegym.envs.mdp.reward.NestPotential`: the same float64 operations in the same
order, stored to float32 where the observation is float32 (the tests compare the two
step by step). Sums that numpy computes pairwise (``ndarray.sum``) are either computed by
numpy once per graph or by :func:`_np_sum`, numpy's pairwise summation.

Nothing here simulates, so a cluster's ``links`` (``"pair"`` or ``"port"``) need no
support: the estimated starts of the observation ignore link contention under either
model, as :class:`~placegym.envs.mdp.observation.ObservationBuilder`'s do, and the episode's
makespan comes from :func:`placegym.envs.simulate`, which applies the cluster's links.

Packed arguments (tuples of arrays, unpacked once per call):

- ``g`` per-slot graph data: ``n (B,)``, successor CSR ``sptr (B, N+1)``, ``sidx (B, E)``,
  predecessor CSR ``pptr``, ``pidx``, ``flops``, ``io``, ``out_bytes``, ``param_bytes``,
  ``in_total`` (sum of the producers' out_bytes, numpy's sum) ``(B, N)``, ``cp (B,)``
  (the observation's time scale), ``ref (B,)`` (the reference makespan);
- ``c`` the cluster: ``flops``, ``mem_bandwidth``, ``launch``, ``memory``, ``inv_memory``
  ``(D,)``, ``latency``, ``inv_bandwidth`` ``(D, D)`` (0 on the diagonal), ``slowest``
  ``(1,)`` (the smallest level bandwidth);
- ``s`` the state: ``device``, ``rank``, ``order``, ``unplaced`` ``(B, N)`` int64,
  ``frontier (B, N)`` bool, ``est_finish (B, N)``, ``device_free``, ``load``,
  ``param_used``, ``est_row`` ``(B, D)`` (the selected node's estimated starts),
  ``selected``, ``num_selected``, ``num_placed`` ``(B,)`` int64, ``cut``, ``phi`` ``(B,)``,
  ``dyn (B, N, 6)`` and ``dev (B, D, 7)`` float32 (the observation's dynamic parts).
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Upper bound of every float feature of the observation (values are clipped to it; only
#: absurd inputs reach it). Defined here because numba freezes it into the cached kernels
#: and recompiles them only when this file changes; :mod:`placegym.envs.mdp.observation`
#: imports it.
FEATURE_MAX = 1e6


@njit(cache=True, inline="always")
def _block_sum(a, lo, hi):
    """Numpy-exact pairwise sum of at most 128 entries (8 accumulators)."""
    n = hi - lo
    if n < 8:
        res = 0.0
        for i in range(lo, hi):
            res += a[i]
        return res
    r = a[lo : lo + 8].copy()
    i = lo + 8
    while i < hi - (n % 8):
        for j in range(8):
            r[j] += a[i + j]
        i += 8
    res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
    while i < hi:
        res += a[i]
        i += 1
    return res


@njit(cache=True)
def _np_sum(a, lo, hi):
    """``a[lo:hi].sum()`` exactly as numpy computes it: blocks of at most 128 entries,
    halves (cut at a multiple of 8) added recursively. The recursion runs on an explicit
    stack (numba's disk cache breaks recursive functions)."""
    los = np.empty(64, np.int64)
    his = np.empty(64, np.int64)
    waiting = np.zeros(64, np.int64)  # 0: new, 1: left half pending, 2: right half pending
    left = np.empty(64)
    top = 0
    los[0], his[0] = lo, hi
    while True:
        n = his[top] - los[top]
        if n > 128 and waiting[top] == 0:
            half = n // 2 - (n // 2) % 8
            waiting[top] = 1
            los[top + 1], his[top + 1], waiting[top + 1] = los[top], los[top] + half, 0
            top += 1
            continue
        val = _block_sum(a, los[top], his[top])
        while True:  # hand the value up until a right half is still to do
            top -= 1
            if top < 0:
                return val
            if waiting[top] == 1:
                left[top] = val
                waiting[top] = 2
                n = his[top] - los[top]
                half = n // 2 - (n // 2) % 8
                los[top + 1], his[top + 1], waiting[top + 1] = los[top] + half, his[top], 0
                top += 1
                break
            val = left[top] + val


@njit(cache=True)
def reset_rows(rows, g, c, s):
    """Back to the empty assignment in the environments ``rows`` (their graph data in
    ``g`` already written): sources in the frontier, devices empty."""
    n_of, pptr = g[0], g[3]
    flops = c[0]
    device, rank, order, unplaced, frontier, est_finish = s[0], s[1], s[2], s[3], s[4], s[5]
    device_free, load, param_used, est_row = s[6], s[7], s[8], s[9]
    selected, num_selected, num_placed, cut, phi, dyn, dev = s[10:17]
    fmax = flops.max()
    for i in rows:
        n = n_of[i]
        device[i, :] = -1
        rank[i, :] = -1
        order[i, :] = -1
        est_finish[i, :] = np.nan
        device_free[i, :] = 0.0
        load[i, :] = 0.0
        param_used[i, :] = 0.0
        est_row[i, :] = 0.0
        selected[i] = -1
        num_selected[i] = 0
        num_placed[i] = 0
        cut[i] = 0.0
        phi[i] = 0.0
        dyn[i] = 0.0
        dev[i] = 0.0
        frontier[i, :] = False
        for v in range(n):
            unplaced[i, v] = pptr[i, v + 1] - pptr[i, v]
            frontier[i, v] = unplaced[i, v] == 0
            dyn[i, v, 2] = 1.0 if frontier[i, v] else 0.0
        for d in range(flops.shape[0]):
            dev[i, d, 5] = 1.0
            dev[i, d, 6] = flops[d] / fmax


@njit(cache=True, inline="always")
def _fits(param_used, need, memory, d):
    return param_used[d] + need <= memory[d]


@njit(cache=True)
def legal(i, a, g, c, s, memory_mask):
    """Whether action ``a`` is legal in environment ``i`` (``PlacementState.is_legal``)."""
    n, param_bytes, memory = g[0][i], g[8], c[3]
    frontier, param_used, selected = s[4], s[8], s[10]
    if selected[i] < 0:
        return 0 <= a < n and frontier[i, a]
    ndev = memory.shape[0]
    if not 0 <= a < ndev:
        return False
    if not memory_mask:
        return True
    need = param_bytes[i, selected[i]]
    if _fits(param_used[i], need, memory, a):
        return True
    for d in range(ndev):  # noqa: SIM110 - numba compiles no generator expressions
        if _fits(param_used[i], need, memory, d):
            return False
    return True


@njit(cache=True)
def masks(g, c, s, memory_mask, out):
    """The action mask of every environment into ``out (B, A)`` int8 (``action_masks``)."""
    n_of, param_bytes, memory = g[0], g[8], c[3]
    frontier, param_used, selected = s[4], s[8], s[10]
    ndev = memory.shape[0]
    out[:] = 0
    for i in range(out.shape[0]):
        v = selected[i]
        if v < 0:
            for u in range(n_of[i]):
                out[i, u] = frontier[i, u]
            continue
        anyfit = False
        for d in range(ndev):
            fit = (not memory_mask) or _fits(param_used[i], param_bytes[i, v], memory, d)
            out[i, d] = fit
            anyfit = anyfit or fit
        if not anyfit:
            out[i, :ndev] = 1


@njit(cache=True)
def _select(i, v, g, c, s):
    """SEL: ``PlacementState.select`` then ``ObservationBuilder.on_select``."""
    n, pptr, pidx, out_bytes, in_total, cp = g[0][i], g[3], g[4], g[7], g[9], g[10][i]
    latency, inv_bw = c[5], c[6]
    device, rank, order, frontier, est_finish = s[0], s[1], s[2], s[4], s[5]
    device_free, est_row, selected, num_selected, dyn, dev = s[6], s[9], s[10], s[11], s[15], s[16]
    frontier[i, v] = False
    rank[i, v] = num_selected[i]
    order[i, num_selected[i]] = v
    num_selected[i] += 1
    selected[i] = v
    dyn[i, v, 2] = 0.0
    dyn[i, v, 3] = 1.0
    dyn[i, v, 4] = (rank[i, v] + 1) / n
    ndev = device_free.shape[1]
    lo, hi = pptr[i, v], pptr[i, v + 1]
    for d in range(ndev):  # earliest start: max(device free, inputs arrived)
        arr = -np.inf
        for q in range(lo, hi):
            u = pidx[i, q]
            a = device[i, u]
            x = est_finish[i, u] + latency[a, d] + out_bytes[i, u] * inv_bw[a, d]
            arr = x if x > arr else arr
        if hi == lo:
            arr = 0.0
        est_row[i, d] = device_free[i, d] if device_free[i, d] >= arr else arr
        dev[i, d, 0] = min(est_row[i, d] / cp, FEATURE_MAX)
        dev[i, d, 1] = 0.0
    total = in_total[i, v]
    if hi > lo and total > 0:  # share of the input bytes already on each device
        share = np.zeros(ndev)
        for q in range(lo, hi):
            u = pidx[i, q]
            share[device[i, u]] += out_bytes[i, u]
        for d in range(ndev):
            dev[i, d, 1] = share[d] / total


@njit(cache=True)
def _place(i, d, g, c, s, nest, gamma):
    """PLC: ``PlacementState.place``, ``ObservationBuilder.on_place`` and the NEST
    shaping term (``NestPotential.on_place``, 0 without ``nest``)."""
    n, sptr, sidx, pptr, pidx = g[0][i], g[1], g[2], g[3], g[4]
    flops, io, out_bytes, param_bytes, cp, ref = g[5], g[6], g[7], g[8], g[10][i], g[11][i]
    dflops, dmembw, dlaunch, memory, inv_mem, latency, inv_bw, slowest = c[0:8]
    device, unplaced, frontier, est_finish = s[0], s[3], s[4], s[5]
    device_free, load, param_used, est_row = s[6], s[7], s[8], s[9]
    selected, num_placed, cut, phi, dyn, dev = s[10], s[12], s[13], s[14], s[15], s[16]
    v = selected[i]
    start = est_row[i, d]
    a_ = flops[i, v] / dflops[d]
    b_ = io[i, v] / dmembw[d]
    dur = (a_ if a_ >= b_ else b_) + dlaunch[d]
    device[i, v] = d
    est_finish[i, v] = start + dur
    device_free[i, d] = start + dur
    load[i, d] += dur
    param_used[i, d] += param_bytes[i, v]
    selected[i] = -1
    num_placed[i] += 1
    for q in range(sptr[i, v], sptr[i, v + 1]):
        w = sidx[i, q]
        unplaced[i, w] -= 1
        if unplaced[i, w] == 0:
            frontier[i, w] = True
    ndev = memory.shape[0]
    dyn[i, v, 0] = 1.0
    dyn[i, v, 1] = (d + 1) / ndev
    dyn[i, v, 3] = 0.0
    dyn[i, v, 5] = min(est_finish[i, v] / cp, FEATURE_MAX)
    for q in range(sptr[i, v], sptr[i, v + 1]):
        if frontier[i, sidx[i, q]]:
            dyn[i, sidx[i, q], 2] = 1.0
    used = param_used[i, d] * inv_mem[d]
    dev[i, d, 2] = min(load[i, d] / cp, FEATURE_MAX)
    dev[i, d, 3] = min(device_free[i, d] / cp, FEATURE_MAX)
    dev[i, d, 4] = min(used, FEATURE_MAX)
    dev[i, d, 5] = max(1.0 - used, 0.0)
    dev[i, :, 0] = 0.0
    dev[i, :, 1] = 0.0
    if not nest:
        return 0.0
    for q in range(pptr[i, v], pptr[i, v + 1]):
        u = pidx[i, q]
        a = device[i, u]
        if a >= 0 and a != d:
            cut[i] += latency[a, d] + out_bytes[i, u] * inv_bw[a, d]
    for q in range(sptr[i, v], sptr[i, v + 1]):
        w = sidx[i, q]
        b = device[i, w]
        if b >= 0 and b != d:
            cut[i] += latency[d, b] + out_bytes[i, v] * inv_bw[d, b]
    old = phi[i]
    if num_placed[i] == n:
        phi[i] = 0.0
    else:
        excess = np.maximum(param_used[i] - memory, 0.0)
        penalty = 1.0 * _np_sum(excess, 0, ndev) / slowest[0]
        phi[i] = -(load[i].max() + cut[i] + penalty) / ref
    return gamma * phi[i] - old


@njit(cache=True)
def step_rows(actions, g, c, s, memory_mask, nest, gamma, reward, illegal):
    """One step of every environment: ``reward`` (without the terminal term) and
    ``illegal`` (the action was illegal: state unchanged, reward -1) into the outputs."""
    selected, phi = s[10], s[14]
    for i in range(actions.shape[0]):
        a = actions[i]
        if not legal(i, a, g, c, s, memory_mask):
            illegal[i] = True
            reward[i] = -1.0
            continue
        illegal[i] = False
        r = 0.0
        if selected[i] < 0:
            _select(i, a, g, c, s)
        else:
            r += _place(i, a, g, c, s, nest, gamma)
        if nest and selected[i] >= 0:
            r += (gamma - 1.0) * phi[i]
        reward[i] = r
