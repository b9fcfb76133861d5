"""Communication-to-computation ratio (CCR) of a graph on a cluster, and rescaling to one.

Definition (the classic one of the DAG-scheduling literature, e.g. the random-graph
benchmarks of HEFT, Topcuoglu et al. 2002)::

    CCR = mean over edges (u, v) of the transfer time of u's output at the fastest link level
          / mean over nodes v of the mean over devices d of v's duration on d

- Transfer time of ``b`` bytes at level ``l``: ``latency_l + b / bandwidth_l`` (DESIGN
  §3.2). The *fastest link level* is, among the levels that join some pair of distinct
  devices, the one of largest bandwidth (lowest latency among equals).
- Duration of ``v`` on ``d``: DESIGN §3.1 without noise, ``max(flops_v / flops_d, io_v /
  mem_bandwidth_d) + launch_overhead_d``, where ``io_v`` counts ``v``'s output, params and
  inputs (or the profiled cost where the cluster has one, :mod:`placegym.envs.core.costs`:
  it does not change with the tensor bytes).
- An edge is counted once however many consumers share a transfer in a schedule; the CCR
  is a property of the graph and the cluster, not of a placement.

A graph without edges or a one-device cluster has no communication: its CCR is
undefined (``ValueError``).

DOPPLER's files give each node a communication cost 4× its compute cost; on
``doppler-unit-4`` (1e10 FLOP/s and B/s, no latency, no roofline) their CCR is 4 × (the
mean compute cost of the edges' producers) / (the mean compute cost of a node): 4 when a
node's fan-out does not depend on its cost.

Rescaling (:func:`scale_to_ccr`) multiplies every ``out_bytes`` by one factor ``s >= 0``
(``flops`` and ``param_bytes`` unchanged). The mean transfer time is affine in ``s``,
``T(s) = lat + s·B``. With ``mem_bandwidth`` the tensors also enter the durations through
``io_v``, so the mean duration ``C(s)`` is piecewise linear and convex in ``s`` (a mean of
``max(a, s·x + p)`` terms), and ``T(s) − target·C(s)`` is concave. The factor returned is
the smallest ``s >= 0`` where it is zero, found exactly: the breakpoints of ``C`` are
sorted, and the linear equation is solved on the first segment holding a root. So the
rescaled graph's CCR equals the target up to floating-point rounding. Targets that no
``s`` reaches raise ``ValueError`` with the reachable limit (with a roofline term the
ratio is bounded: a tensor cannot take longer to send than a fixed multiple of the time
to read it from memory).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from placegym.envs.core.cluster import Cluster
from placegym.envs.core.costs import cost_table
from placegym.envs.core.graph import Graph

__all__ = [
    "ccr",
    "fastest_level",
    "mean_compute_time",
    "mean_transfer_time",
    "scale_to_ccr",
]


def fastest_level(cluster: Cluster) -> int:
    """Index of the fastest level joining two distinct devices (see the module docstring).

    Raises:
        ValueError: the cluster has one device (no links).
    """
    if cluster.num_devices < 2:
        raise ValueError(
            f"cluster: CCR needs at least two devices, {cluster.name!r} has {cluster.num_devices}"
        )
    used = np.unique(cluster.pair_level[~np.eye(cluster.num_devices, dtype=bool)]).tolist()
    return min(used, key=lambda k: (-cluster.levels[k].bandwidth, cluster.levels[k].latency))


def mean_transfer_time(graph: Graph, cluster: Cluster) -> float:
    """Mean over edges of the producer's output transfer time at the fastest level.

    Raises:
        ValueError: no edges, or one device.
    """
    if graph.num_edges == 0:
        raise ValueError(f"graph: CCR needs at least one edge, {graph.name!r} has none")
    level = cluster.levels[fastest_level(cluster)]
    mean_bytes = float(graph.out_bytes[graph.edges[:, 0]].mean())
    return level.latency + mean_bytes / level.bandwidth


def mean_compute_time(graph: Graph, cluster: Cluster) -> float:
    """Mean over nodes and devices of the rule-1 duration (no noise)."""
    from placegym.envs.analysis.levels import durations_on

    if graph.num_nodes == 0:
        raise ValueError(f"graph: CCR needs at least one node, {graph.name!r} has none")
    return float(durations_on(graph, cluster).mean())


def ccr(graph: Graph, cluster: Cluster) -> float:
    """The communication-to-computation ratio of ``graph`` on ``cluster`` (module docstring).

    Raises:
        ValueError: no edges, one device, or a zero mean duration.
    """
    t = mean_transfer_time(graph, cluster)
    c = mean_compute_time(graph, cluster)
    if c <= 0:
        raise ValueError(f"graph: CCR needs a positive mean duration, {graph.name!r} has {c}")
    return t / c


def _profiles(cluster: Cluster, dclass: np.ndarray) -> tuple[np.ndarray, ...]:
    """Distinct ``(flops, mem_bandwidth, launch, cost class)`` device profiles and their
    counts (``dclass``: each device's column of the cost table)."""
    rows = np.stack([cluster.flops, cluster.mem_bandwidth, cluster.launch_overhead], axis=1)
    rows = np.concatenate([rows, dclass[:, None].astype(np.float64)], axis=1)
    uniq, counts = np.unique(rows, axis=0, return_counts=True)
    return uniq[:, 0], uniq[:, 1], uniq[:, 2], uniq[:, 3].astype(np.int64), counts.astype(float)


def _compute_pieces(graph: Graph, cluster: Cluster):
    """``C(s) = const + Σ_k max(a_k, s·x_k + p_k)`` weights, as flat arrays over the
    (node, device profile) pairs whose memory term depends on ``s``.

    Returns ``(const, a, x, p)``, every term already divided by ``n · D``.
    """
    table, dclass = cost_table(graph, cluster)
    flops, mbw, launch, kind, count = _profiles(cluster, dclass)
    scale = count / (graph.num_nodes * cluster.num_devices)  # (P,)
    x = graph.out_bytes + graph.in_bytes  # io bytes that scale with s
    a = graph.flops[:, None] / flops[None, :]  # (n, P)
    p = graph.param_bytes[:, None] / mbw[None, :]
    xs = x[:, None] / mbw[None, :]
    const = float((launch * count).sum() / cluster.num_devices)
    fixed = xs == 0  # no roofline (inf bandwidth) or no tensors: never depends on s
    own = np.maximum(a, p)
    if table.size:  # a measured time does not depend on the tensor bytes
        prof = np.where(kind >= 0, table[:, np.maximum(kind, 0)], np.nan)
        fixed |= ~np.isnan(prof)
        own = np.where(np.isnan(prof), own, prof)
    const += float((own * scale[None, :])[fixed].sum())
    w = np.broadcast_to(scale[None, :], a.shape)[~fixed]
    return const, a[~fixed] * w, xs[~fixed] * w, p[~fixed] * w


def _solve_scale(lat: float, slope_t: float, target: float, pieces) -> float | None:
    """Smallest ``s >= 0`` with ``lat + s·slope_t = target · C(s)``, or None."""
    const, a, x, p = pieces
    bp = (a - p) / x  # s beyond which the memory term wins
    order = np.argsort(bp)
    bp, a, x, p = bp[order], a[order], x[order], p[order]
    first = int(np.searchsorted(bp, 0.0, side="right"))  # pieces already linear at s = 0
    # Segment j (j = 0..m) spans [lo_j, hi_j] with the pieces first+0..first+j-1 linear.
    lows = np.concatenate([[0.0], bp[first:]])
    highs = np.concatenate([bp[first:], [math.inf]])
    lin_x = np.concatenate([[0.0], np.cumsum(x[first:])]) + x[:first].sum()
    lin_p = np.concatenate([[0.0], np.cumsum(p[first:])]) + p[:first].sum()
    const_a = a[first:].sum() - np.concatenate([[0.0], np.cumsum(a[first:])])
    alpha = const + const_a + lin_p  # C(s) = alpha_j + beta_j · s on segment j
    beta = lin_x
    num = target * alpha - lat
    den = slope_t - target * beta
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(den != 0, num / den, np.where(num == 0, lows, np.nan))
    tol = 1e-12 * np.maximum(1.0, np.abs(highs))
    ok = np.isfinite(s) & (s >= lows - tol) & (s <= highs + tol) & (s >= 0)
    if not ok.any():
        return None
    return float(max(s[int(np.argmax(ok))], 0.0))


def _ends(lat: float, slope_t: float, pieces) -> str:
    """The CCR at zero tensor bytes and its limit as they grow, for error messages."""
    const, a, x, p = pieces
    c0 = const + float(np.maximum(a, p).sum())
    at_zero = lat / c0 if c0 > 0 else math.inf
    limit = slope_t / float(x.sum()) if x.sum() > 0 else math.inf
    return f"{at_zero:.6g} with no tensor bytes, tending to {limit:.6g} as they grow"


def scale_to_ccr(
    graph: Graph, cluster: Cluster, target: float, *, name: str | None = None
) -> Graph:
    """A copy of ``graph`` whose tensor sizes are scaled to CCR ``target`` on ``cluster``.

    Every ``out_bytes`` is multiplied by one factor (see the module docstring for the
    exact solve); ``flops``, ``param_bytes``, ``spec`` and the structure are unchanged, so
    the specs' shapes no longer match ``out_bytes`` (the simulator reads ``out_bytes``).

    Args:
        graph: the graph to rescale.
        cluster: the cluster the CCR is measured on.
        target: the CCR wanted, > 0.
        name: the copy's name (default: ``"<graph name>-ccr<target>"``).

    Returns:
        The rescaled :class:`Graph`; ``ccr(result, cluster) == target`` up to rounding.

    Raises:
        ValueError: ``target`` not a positive finite number, no edges, one device, no
            tensor bytes to scale, or a target no factor reaches (naming the limit).
    """
    try:
        goal = float(target)
    except (TypeError, ValueError):
        raise ValueError(f"ccr: must be a finite number > 0, got {target!r}") from None
    if not (math.isfinite(goal) and goal > 0):
        raise ValueError(f"ccr: must be a finite number > 0, got {target!r}")
    edge_bytes = float(graph.out_bytes[graph.edges[:, 0]].mean()) if graph.num_edges else 0.0
    level = cluster.levels[fastest_level(cluster)]
    if graph.num_edges == 0 or edge_bytes == 0:
        raise ValueError(f"graph: no tensor bytes on any edge of {graph.name!r} to scale to a CCR")
    pieces = _compute_pieces(graph, cluster)
    slope_t = edge_bytes / level.bandwidth
    s = _solve_scale(level.latency, slope_t, goal, pieces)
    if s is None:
        raise ValueError(
            f"ccr: {goal:g} is not reachable for {graph.name!r} on {cluster.name!r} by "
            f"scaling tensor sizes (the CCR is {_ends(level.latency, slope_t, pieces)})"
        )
    return dataclasses.replace(
        graph, out_bytes=graph.out_bytes * s, name=name or f"{graph.name}-ccr{goal:g}"
    )
