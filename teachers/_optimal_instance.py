"""Static tables of one instance for :mod:`placegym.teachers._optimal_search`.

Durations and transfer times with the simulator kernel's own arithmetic, the device and
node symmetries of the instance, and whether its arithmetic is exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations

import numpy as np

from placegym.envs.analysis.levels import b_level
from placegym.envs.core.cluster import Cluster
from placegym.envs.core.costs import cost_table
from placegym.envs.core.graph import Graph
from placegym.envs.sim import _kernel

__all__ = [
    "MAX_SYMMETRY_DEVICES",
    "InstanceTables",
    "allowed_devices",
    "device_automorphisms",
    "make_instance",
    "node_twins",
    "resident",
    "speed_weights",
]

#: Symmetry breaking enumerates all device permutations; above this many devices it is off.
MAX_SYMMETRY_DEVICES = 6


@dataclass(frozen=True)
class InstanceTables:
    """Static tables of one (graph, cluster) pair, as Python lists for fast scalar access.

    Attributes:
        n, nd: node and device counts.
        dur: ``dur[v][d]``, rule-1 duration of ``v`` on ``d`` (the kernel's arithmetic).
        comm: ``comm[v][a * nd + b]``, rule-2 transfer time of ``v``'s output on ``(a, b)``.
        cons, prods: consumers / producers of each node (ascending ids).
        topo: a topological order.
        dur_min: fastest duration of each node.
        tail: longest path after ``v`` finishes, fastest durations, free communication.
        prio: dispatch heuristic (b-level), only orders the branches.
        new_devices: ``new_devices[used]`` for a bit mask ``used`` of devices holding some
            node: the devices a node may be given (all used ones plus one representative
            of each orbit of unused devices under the automorphisms fixing ``used``).
        twins_before: ``twins_before[v]``, bit mask of the nodes ``u < v`` that are
            interchangeable with ``v`` (same producers, consumers, durations and transfer
            times); ``v`` may not start in an earlier round than any of them.
        weight: ``None`` on identical devices, else ``weight[d]`` proportional to the
            speed of ``d`` (1 / its total duration over all nodes, the slowest 1): the
            weighted average of device loads bounds the makespan (:func:`speed_weights`).
        weighted_min: ``min over d of weight[d] * dur[v][d]`` (the fastest duration when
            ``weight`` is None).
        exact: every duration and transfer time is a multiple of one power of two and all
            sums fit the 53-bit mantissa, so every addition is exact (no tolerance).
    """

    n: int
    nd: int
    dur: list[list[float]]
    comm: list[list[float]]
    cons: list[tuple[int, ...]]
    prods: list[tuple[int, ...]]
    topo: list[int]
    dur_min: list[float]
    tail: list[float]
    prio: list[float]
    new_devices: list[tuple[int, ...]]
    twins_before: list[int]
    weight: list[float] | None
    weighted_min: list[float]
    exact: bool
    mates: list[tuple[int, ...]]
    param: list[float]
    memory: list[float] | None


def _tables(graph: Graph, cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
    """``(n, D)`` durations and ``(n, D, D)`` transfer times with the kernel's arithmetic."""
    n, nd = graph.num_nodes, cluster.num_devices
    ones = np.ones(n)
    dur = np.empty((n, nd))
    for d in range(nd):
        dur[:, d] = _kernel.durations(
            graph.flops,
            graph.io_bytes,
            cluster.flops,
            cluster.mem_bandwidth,
            cluster.launch_overhead,
            np.full(n, d, dtype=np.int64),
            ones,
            *cost_table(graph, cluster),
        )
    ob = graph.out_bytes[:, None, None]
    comm = cluster.pair_latency[None] + ob / cluster.pair_bandwidth[None]
    comm[:, np.arange(nd), np.arange(nd)] = 0.0  # no transfer within a device
    return dur, comm


def device_automorphisms(dur: np.ndarray, comm: np.ndarray) -> list[tuple[int, ...]]:
    """Device permutations that leave every duration and transfer time unchanged.

    Relabelling the devices of a placement by such a permutation gives exactly the same
    start and finish times (device indices only break ties between independent channels
    and devices), so only one placement per orbit needs searching. Only the identity is
    returned above :data:`MAX_SYMMETRY_DEVICES` devices.
    """
    nd = dur.shape[1]
    if nd > MAX_SYMMETRY_DEVICES:  # nd! candidates: skip (correct, only slower)
        return [tuple(range(nd))]
    out = []
    for p in permutations(range(nd)):
        pi = np.array(p)
        if np.array_equal(dur[:, pi], dur) and np.array_equal(comm[:, pi][:, :, pi], comm):
            out.append(p)
    return out


def _new_devices(autos: list[tuple[int, ...]], nd: int) -> list[tuple[int, ...]]:
    table = []
    for used in range(1 << nd):
        fixing = [p for p in autos if all(p[d] == d for d in range(nd) if used >> d & 1)]
        keep = [d for d in range(nd) if used >> d & 1 or d == min(p[d] for p in fixing)]
        table.append(tuple(keep))
    return table


def node_twins(
    dur: np.ndarray,
    comm: np.ndarray,
    prods: list[tuple[int, ...]],
    cons: list[tuple[int, ...]],
    group: np.ndarray | None = None,
    param: np.ndarray | None = None,
) -> list[int]:
    """For each node, the bit mask of lower-numbered nodes interchangeable with it.

    Swapping two nodes with the same producers, consumers, durations and (when they have
    consumers) transfer times is a graph automorphism that preserves every cost, so it
    maps a schedule to one with the same times (ranks swap with the nodes). Every
    schedule therefore has an image in which interchangeable nodes start in index order
    (by round; a device relabelling keeps rounds), and the search only builds those.
    With ``group`` and ``param``, twins also share their co-location group (or both have
    none) and resident bytes, so the swap keeps the constraints too.
    """
    n = len(prods)
    extra = [
        (-1 if group is None else int(group[v]), 0.0 if param is None else float(param[v]))
        for v in range(n)
    ]
    keys = [
        (prods[v], cons[v], dur[v].tobytes(), comm[v].tobytes() if cons[v] else b"", extra[v])
        for v in range(n)
    ]
    return [sum(1 << u for u in range(v) if keys[u] == keys[v]) for v in range(n)]


def _is_exact(dur: np.ndarray, comm: np.ndarray) -> bool:
    """Whether every sum the search and simulator form is exact in float64.

    True when all durations and transfer times are multiples of ``2**-shift`` and
    ``nd + 8`` times the longest conceivable schedule (every node at its slowest, every
    transfer at its slowest, one after another) stays below ``2**53 * 2**-shift``: every
    time, and every bound the search adds up (a few such spans, or ``nd`` of them), is
    then an exact multiple of that grid.
    """
    nd = dur.shape[1]
    off = ~np.eye(nd, dtype=bool)
    values = np.concatenate([dur.ravel(), comm[:, off].ravel()])
    if not np.isfinite(values).all():
        return False
    shift = 0
    for x in np.unique(values).tolist():
        shift = max(shift, x.as_integer_ratio()[1].bit_length() - 1)
    total = dur.max(axis=1).sum() + (comm[:, off].max(axis=1).sum() * nd if nd > 1 else 0.0)
    return shift < 1000 and bool((nd + 8) * total * 2.0**shift < 2.0**53)


def speed_weights(dur: np.ndarray) -> np.ndarray | None:
    """Device weights for the weighted load bound, or None when devices are identical.

    For any weights ``w_d > 0``: the makespan is at least every device's load ``L_d``,
    so ``sum_d w_d M >= sum_d w_d L_d``, and a node ``v`` not yet placed adds at least
    ``min_d w_d dur[v][d]`` to the right side wherever it goes. With ``w = 1`` that is
    the average load; weighting by speed makes it tight on related machines (a slow
    device cannot take a fair share).
    """
    if dur.size == 0:
        return None
    total = dur.sum(axis=0)
    if (total <= 0).any() or (total == total[0]).all():
        return None
    return total.min() / total


def make_instance(graph: Graph, cluster: Cluster, memory: bool = False) -> InstanceTables:
    """Precompute the tables of the search for ``graph`` on ``cluster``; with ``memory``,
    constrain resident bytes where some placement's could exceed a device's memory."""
    n, nd = graph.num_nodes, cluster.num_devices
    dur, comm = _tables(graph, cluster)
    cons = [tuple(graph.successors(v).tolist()) for v in range(n)]
    prods = [tuple(graph.predecessors(v).tolist()) for v in range(n)]
    topo = graph.topological_order.tolist()
    dur_min = dur.min(axis=1).tolist() if nd else [0.0] * n
    weight = speed_weights(dur)
    tail = [0.0] * n
    for v in reversed(topo):
        tail[v] = max((dur_min[c] + tail[c] for c in cons[v]), default=0.0)
    mates: list[tuple[int, ...]] = [() for _ in range(n)]
    for nodes in graph.groups.values():
        for v in nodes.tolist():
            mates[v] = tuple(u for u in nodes.tolist() if u != v)
    tight = memory and n > 0 and float(graph.param_bytes.sum()) > float(cluster.memory.min())
    autos = device_automorphisms(dur, comm)
    if tight:  # a relabelling must also keep every device's memory
        mem = cluster.memory
        autos = [p for p in autos if np.array_equal(mem[list(p)], mem)]
    return InstanceTables(
        n=n,
        nd=nd,
        dur=dur.tolist(),
        comm=comm.reshape(n, nd * nd).tolist(),
        cons=cons,
        prods=prods,
        topo=topo,
        dur_min=dur_min,
        tail=tail,
        prio=b_level(graph, cluster).tolist(),
        new_devices=_new_devices(autos, nd),
        twins_before=node_twins(
            dur, comm, prods, cons, graph.group, graph.param_bytes if tight else None
        ),
        weight=None if weight is None else weight.tolist(),
        weighted_min=dur_min if weight is None else (dur * weight).min(axis=1).tolist(),
        exact=_is_exact(dur, comm),
        mates=mates,
        param=graph.param_bytes.tolist(),
        memory=cluster.memory.tolist() if tight else None,
    )


def resident(inst: InstanceTables, dev: list[int]) -> list[float]:
    """Resident bytes per device of the nodes with a device in ``dev`` (-1: none)."""
    used = [0.0] * inst.nd
    for v, d in enumerate(dev):
        if d >= 0:
            used[d] += inst.param[v]
    return used


def allowed_devices(
    inst: InstanceTables, dev: list[int], v: int, cands: tuple[int, ...]
) -> tuple[int, ...]:
    """The devices of ``cands`` node ``v`` may take when the others have ``dev``: its
    group's device once a mate has one; with memory constrained (``inst.memory``), only
    those whose resident bytes, with the unplaced mates of open groups where their group
    is, plus ``v``'s and its unplaced mates' (who follow it) fit."""
    need = inst.param[v]
    for u in inst.mates[v]:
        if dev[u] >= 0:
            return (dev[u],) if dev[u] in cands else ()
        need += inst.param[u]
    if inst.memory is None:
        return cands
    used = resident(inst, dev)
    for u in range(inst.n):
        if dev[u] < 0 and u != v:
            for w in inst.mates[u]:
                if dev[w] >= 0:
                    used[dev[w]] += inst.param[u]
                    break
    return tuple(d for d in cands if used[d] + need <= inst.memory[d])
