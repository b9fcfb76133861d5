"""Balanced min-cut partitioning with METIS (via pymetis)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import ClassVar

import numpy as np
import pymetis

from placegym.envs.analysis.levels import b_level, mean_durations
from placegym.envs.analysis.memory import memory_may_bind, units
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.graph import Graph
from placegym.envs.core.placement import Placement
from placegym.envs.sim.simulator import simulate, simulate_batch
from placegym.teachers._common import priority_order, repair_memory
from placegym.teachers._memory import make_feasible
from placegym.teachers.base import PlanTeacher

__all__ = ["MetisTeacher", "metis_parts"]

#: METIS weights are C integers: each weight family is scaled to sum to about this much.
_WEIGHT_TOTAL = 1e8
#: Largest device count for which the topology-aware part-to-device swap pass runs.
_SWAP_MAX_DEVICES = 64
#: Fewest nodes per part: METIS fails (and prints to stdout) when asked for parts of
#: fewer nodes, and such parts would only multiply transfers.
_MIN_NODES_PER_PART = 4


def _int_weights(w: np.ndarray) -> np.ndarray:
    """Positive integers proportional to ``w`` (>= 0), summing to about ``_WEIGHT_TOTAL``."""
    total = float(w.sum())
    if total <= 0 or not np.isfinite(total):
        return np.ones(len(w), dtype=np.int64)
    return np.maximum(1, np.rint(w / total * _WEIGHT_TOTAL)).astype(np.int64)


def _csr(n: int, u: np.ndarray, v: np.ndarray, w: np.ndarray):
    """Symmetric CSR (``xadj``, ``adjncy``, weights) of the undirected edges ``u - v``."""
    src = np.concatenate([u, v])
    dst = np.concatenate([v, u])
    wts = np.concatenate([w, w])
    perm = np.lexsort((dst, src))
    xadj = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))])
    return xadj, dst[perm], wts[perm]


def _contract(graph: Graph, vweight: np.ndarray):
    """Co-location groups as single vertices: ``(of, vertex weights, u, v, edge
    weights)``, the edges between distinct units merged (their bytes summed)."""
    un = units(graph)
    of, k = un.of, un.count
    e = graph.edges
    a, b = of[e[:, 0]], of[e[:, 1]]
    keep = a != b
    lo, hi = np.minimum(a[keep], b[keep]), np.maximum(a[keep], b[keep])
    pair, inv = np.unique(lo * k + hi, return_inverse=True)
    w = np.bincount(inv.reshape(-1), weights=graph.out_bytes[e[keep, 0]], minlength=len(pair))
    return of, np.bincount(of, weights=vweight, minlength=k), pair // k, pair % k, w


@contextlib.contextmanager
def _quiet_c_output() -> Iterator[None]:
    """Silence the METIS C library's own prints (``***Cannot bisect a graph with 0
    vertices!`` when one vertex outweighs a part: the partition it returns is used all
    the same) by pointing file descriptors 1 and 2 at ``/dev/null`` for the call."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


def metis_parts(
    graph: Graph,
    cluster: Cluster,
    nparts: int,
    seed: int = 0,
    share: np.ndarray | None = None,
    weight: np.ndarray | None = None,
) -> np.ndarray:
    """``(n,)`` part of each node: METIS k-way partition of the undirected graph.

    Vertex weights are ``weight`` (default: mean compute times), edge weights the
    producer's ``out_bytes`` (both scaled to integers); ``share`` (``(nparts,)``,
    optional) is each part's target fraction of the total vertex weight. Each
    co-location group is contracted into one vertex first (weights summed, its edges to
    another vertex merged), so a group lands in one part.
    """
    n = graph.num_nodes
    if nparts <= 1 or n <= 1:
        return np.zeros(n, dtype=np.int64)
    vw = mean_durations(graph, cluster) if weight is None else np.asarray(weight, dtype=float)
    e = graph.edges
    of = None
    if graph.groups:
        of, vw, u, v, w = _contract(graph, vw)
        n = len(vw)
    else:
        u, v, w = e[:, 0], e[:, 1], graph.out_bytes[e[:, 0]]
    xadj, adjncy, wts = _csr(n, u, v, w)
    tpwgts = None if share is None else (np.asarray(share) / np.sum(share)).tolist()
    if hasattr(pymetis, "CSRAdjacency"):  # pymetis >= 2025.2
        graph_arg = {"adjacency": pymetis.CSRAdjacency(xadj.tolist(), adjncy.tolist())}
    else:
        graph_arg = {"xadj": xadj.tolist(), "adjncy": adjncy.tolist()}
    with _quiet_c_output():
        result = pymetis.part_graph(  # type: ignore[call-overload]  # either pymetis API
            nparts,
            **graph_arg,
            vweights=_int_weights(vw).tolist(),
            eweights=_int_weights(wts).tolist() if len(wts) else None,
            tpwgts=tpwgts,
            options=pymetis.Options(seed=seed),
        )
    part = np.asarray(result.vertex_part, dtype=np.int64)
    return part if of is None else part[of]


def _swap_pass(cut: np.ndarray, cost: np.ndarray, kind: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Pairwise-swap the devices of parts of the same device kind while that lowers
    ``sum cut[p, q] * cost[m[p], m[q]]`` (first improvement, at most 20 sweeps)."""
    m = m.copy()

    def total(x: np.ndarray) -> float:
        return float((cut * cost[np.ix_(x, x)]).sum())

    best = total(m)
    for _ in range(20):
        improved = False
        for p in range(len(m)):
            for q in range(p + 1, len(m)):
                if kind[m[p]] != kind[m[q]]:
                    continue
                m[[p, q]] = m[[q, p]]
                t = total(m)
                if t < best - 1e-12 * abs(best):
                    best, improved = t, True
                else:
                    m[[p, q]] = m[[q, p]]
        if not improved:
            break
    return m


class MetisTeacher(PlanTeacher):
    """METIS balanced min-cut partition, one part per device.

    Rule:
        - **Partition**: ``min(D, n // 4)`` parts (at least one; parts of fewer than four
          nodes only multiply transfers) of the undirected graph with METIS
          (``pymetis.part_graph``, fixed seed): vertex weight = mean compute time, edge
          weight = bytes of the producer's output, both scaled to integers. On clusters of
          unequal device speed each part's target weight is proportional to a device's
          FLOP/s. One part (``D == 1`` or one node) puts everything on the fastest device.
        - **Parts to devices**: parts are interchangeable, so heavier parts go to faster
          devices (parts by descending weight, devices by descending FLOP/s, lowest index
          first). Then, for ``D <= 64``, parts on devices of the same kind swap devices
          while that lowers ``sum over part pairs of cut bytes / pair bandwidth``, so
          parts that exchange many bytes sit close in the network hierarchy.
        - **Groups**: each co-location group is contracted into one vertex before
          partitioning (vertex weights summed, edges to another vertex merged), so a
          group lands whole in one part, hence on one device.
        - **Memory**: a node whose device breaks the memory rule of
          :class:`~placegym.envs.mdp.state.PlacementState` when its turn comes moves to the
          legal device with the least resident params (a group follows its first
          member). Under memory pressure, when that plan's simulated peak exceeds a
          device's memory, two more partitions balance resident bytes as well: vertex
          weight = share of the total compute time plus share of the total resident
          bytes, then resident bytes alone, over up to ``D`` parts (at most one per
          two groups or nodes), each part's target its device's share of their memory
          (largest memories first); the fastest feasible of the three plans (simulated)
          is kept; when none fits, the first that a repair
          (:func:`~placegym.teachers._memory.make_feasible`) makes fit, else the
          compute-balanced plan. METIS's multi-constraint
          balance (``ncon`` > 1) would balance both at once, but the installed pymetis
          (2025.2) passes one constraint to METIS whatever ``vweights`` holds, hence
          the two single-weight partitions. Without memory pressure, or when the
          compute-balanced plan fits, the plan is that plan.
        - **Priority order**: descending b-level, ties by topological position (a
          topological order, the critical-path teacher's selection order).

    Per-state answers follow the plan (:class:`~placegym.teachers.base.PlanTeacher`).

    Args:
        seed: METIS's random seed (the partition is deterministic given it).
    """

    name: ClassVar[str] = "metis"

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"seed: must be an integer >= 0, got {seed!r}")
        self.seed = int(seed)

    def plan(self, graph: Graph, cluster: Cluster) -> Placement:
        """The METIS partition with a critical-path order (see the class docstring)."""
        order = priority_order(graph, b_level(graph, cluster))
        placement = Placement(device=self._devices(graph, cluster, order), order=order)
        if not memory_may_bind(graph, cluster) or not simulate(graph, cluster, placement).oom:
            return placement
        # over memory: partitions that balance resident bytes (with work, then alone)
        time, nbytes = mean_durations(graph, cluster), graph.param_bytes
        blend = time / max(time.sum(), 1e-300) + nbytes / max(nbytes.sum(), 1e-300)
        cands = [placement]
        for weight in (blend, nbytes):
            dev = self._devices(graph, cluster, order, weight)
            cands.append(Placement(device=dev, order=order))
        devices = np.stack([c.device for c in cands])
        res = simulate_batch(graph, cluster, devices, np.tile(order, (len(cands), 1)))
        fits = np.flatnonzero(~np.asarray(res.oom, dtype=bool))
        if len(fits):  # the fastest that fits
            return cands[int(fits[np.argmin(res.makespan[fits])])]
        for cand in cands:  # else the first one a repair makes fit, else the plan itself
            fixed = make_feasible(graph, cluster, cand)
            if fixed is not cand:
                return fixed
        return placement

    def _devices(
        self, graph: Graph, cluster: Cluster, order: np.ndarray, weight: np.ndarray | None = None
    ) -> np.ndarray:
        """The device map: parts of balanced mean compute time on the fastest devices (no
        ``weight``), or of balanced ``weight`` in shares of the devices' memory; then the
        state's memory rule."""
        n, nd = graph.num_nodes, cluster.num_devices
        if weight is None:
            # Fastest devices first; parts sized in proportion to their speed.
            parts = min(nd, max(1, n // _MIN_NODES_PER_PART))
            by_speed = np.lexsort((np.arange(nd), -cluster.flops))[:parts]
            speeds = cluster.flops[by_speed]
            share = None if np.all(speeds == speeds[0]) else speeds
            part = metis_parts(graph, cluster, len(by_speed), self.seed, share)
            k = len(by_speed)
            load = np.bincount(part, weights=mean_durations(graph, cluster), minlength=k)
            m = np.empty(k, dtype=np.int64)
            m[np.lexsort((np.arange(k), -load))] = by_speed
        else:
            # largest memories first, part i sized to device i's share of their memory
            parts = min(nd, max(1, units(graph).count // 2))
            m = np.lexsort((np.arange(nd), -cluster.memory))[:parts]
            mem = cluster.memory[m]
            share = None if np.all(mem == mem[0]) else mem
            part = metis_parts(graph, cluster, len(m), self.seed, share, weight)
            k = len(m)
        if 1 < k <= _SWAP_MAX_DEVICES and graph.num_edges:
            m = self._place_parts(graph, cluster, part, m)
        return repair_memory(graph, cluster, m[part], order)

    @staticmethod
    def _place_parts(graph: Graph, cluster: Cluster, part: np.ndarray, m: np.ndarray):
        k = len(m)
        e = graph.edges
        cut = np.zeros((k, k))
        np.add.at(cut, (part[e[:, 0]], part[e[:, 1]]), graph.out_bytes[e[:, 0]])
        cost = 1.0 / cluster.pair_bandwidth
        np.fill_diagonal(cost, 0.0)
        kinds = cluster.device_traits
        _, kind = np.unique(kinds, axis=0, return_inverse=True)
        return _swap_pass(cut, cost, kind.reshape(-1), m)

    def __repr__(self) -> str:
        return f"MetisTeacher(seed={self.seed})"
