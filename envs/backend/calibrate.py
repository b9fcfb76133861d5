"""Calibration: measure a machine through the real backend and write its cluster JSON.

Everything is measured through :class:`~placegym.envs.backend.executor.TorchExecutor`
itself, so per-node and per-copy overheads of the runtime are part of the figures:

- per device: FLOP/s from a chain of square matmuls (``2 m³`` FLOP each), memory
  bandwidth from a chain of large elementwise sums (3 × size bytes each), and the launch
  overhead as the intercept of a least-squares fit of node time against work;
- per ordered device pair: bursts of copies through the channel for several tensor
  sizes; the channel's time per copy is fitted as ``latency + bytes / bandwidth``;
- pairs are grouped into levels by bandwidth (sorted, split where consecutive
  bandwidths differ by more than ``level_gap``), written as a ``level_matrix``.

:func:`rank_check` reports the Spearman rank correlation between simulated and measured
makespans of random placements (``placegym calibrate --check``).
"""

from __future__ import annotations

import numpy as np

from placegym.envs.backend.devices import parse_devices
from placegym.envs.backend.executor import TorchExecutor
from placegym.envs.cluster import Cluster, Device, Level
from placegym.envs.graph import Graph
from placegym.envs.placement import Placement

__all__ = ["calibrate", "rank_check", "spearman"]


def _chain(kind: str, size: int, count: int) -> Graph:
    """``count`` independent kernels of one kind: square matmuls or elementwise sums."""
    from placegym.envs.workloads.builder import GraphBuilder

    b = GraphBuilder()
    for _ in range(count):
        x = b.input([size, size])
        if kind == "matmul":
            b.einsum(
                "ik,kj->ij",
                [{"node": x}, {"param": [size, size]}],
                [size, size],
                0,
                [[size, size], [size, size]],
            )
        else:
            b.add(
                "sum",
                flops=size * size,
                shape=[size, size],
                layer=0,
                args=[{"node": x}, {"node": x}],
            )
    return b.build(f"calibrate-{kind}")


def _measure(graph: Graph, devices: str, device: np.ndarray, repeats: int):
    ex = TorchExecutor(graph, devices, warmup=1, repeats=repeats)
    return ex.run(Placement(device=device, order=np.arange(graph.num_nodes)))


def _device_rates(devices: str, d: int, size: int, repeats: int) -> tuple[float, float, float]:
    """(FLOP/s, bytes/s, launch overhead s) of device ``d``.

    The launch overhead is the time per node of many tiny nodes (the runtime's dispatch
    cost, gaps included); FLOP/s and bytes/s come from kernel times, with the bytes the
    simulator counts for a sum (output + each distinct input once).
    """
    tiny = _chain("sum", 4, 32)
    launch = _measure(tiny, devices, np.full(tiny.num_nodes, d), repeats).makespan
    launch /= tiny.num_nodes
    mm = _chain("matmul", size, 6)
    m = _measure(mm, devices, np.full(mm.num_nodes, d), repeats)
    flops = 2.0 * size**3 / max(float(np.median((m.finish - m.start)[1::2])), 1e-9)
    big = 4 * size
    add = _chain("sum", big, 6)
    m = _measure(add, devices, np.full(add.num_nodes, d), repeats)
    bandwidth = 2.0 * big * big * 4 / max(float(np.median((m.finish - m.start)[1::2])), 1e-9)
    return flops, bandwidth, launch


def _pair_cost(
    devices: str, a: int, b: int, sizes: list[int], repeats: int
) -> tuple[float, float]:
    """(latency s, bandwidth B/s) of channel ``a -> b``: ``burst`` producers on ``a`` each
    feed a consumer on ``b``; the channel copies their outputs back to back, and its time
    per copy (first copy start to last arrival, over the copies) is fitted as
    ``latency + bytes / bandwidth`` across tensor sizes. This is the channel's occupancy,
    which is what a FIFO channel of the simulator models; thread wake-ups that overlap
    other work are not part of it."""
    from placegym.envs.workloads.builder import GraphBuilder

    burst = 8
    nbytes, per_copy = [], []
    for size in sizes:
        bld = GraphBuilder()
        for _ in range(burst):
            x = bld.input([size, size])
            bld.add(
                "sum",
                flops=size * size,
                shape=[size, size],
                layer=0,
                args=[{"node": x}, {"node": x}],
            )
        g = bld.build("calibrate-copy")
        m = _measure(g, devices, np.array([a, b] * burst), repeats)
        tr = m.transfers
        nbytes.append(size * size * 4.0)
        per_copy.append((tr[:, 4].max() - tr[:, 3].min()) / len(tr))
    slope, intercept = np.polyfit(np.array(nbytes), np.array(per_copy), 1)
    bandwidth = 1.0 / slope if slope > 0 else float(max(nbytes) / max(max(per_copy), 1e-9))
    return max(float(intercept), 0.0), float(bandwidth)


def calibrate(
    devices: str = "cpu#2",
    *,
    size: int = 256,
    copy_sizes: tuple[int, ...] = (64, 256, 512, 1024),
    repeats: int = 5,
    level_gap: float = 0.25,
    memory: float | None = None,
    name: str | None = None,
) -> Cluster:
    """Measure ``devices`` and return the fitted :class:`Cluster` (module docstring).

    Args:
        devices: the backend devices (``cpu#k``, ``cuda:i``, ``cuda:i#k``, comma lists).
        size: side of the calibration matmuls (elementwise sums use twice it).
        copy_sizes: sides of the square tensors sent between devices.
        repeats: timed runs per measurement.
        level_gap: relative bandwidth difference under which device pairs share a level.
        memory: bytes per device (default: the GPU's memory, or host RAM / device count).
        name: the cluster's name (default ``calibrated-<devices>``).
    """
    vds = parse_devices(devices)
    rates = [_device_rates(devices, d, size, repeats) for d in range(len(vds))]
    mem = memory or _default_memory(vds)
    k = len(vds)
    lat = np.zeros((k, k))
    bw = np.full((k, k), np.inf)
    for a in range(k):
        for b in range(k):
            if a != b:
                lat[a, b], bw[a, b] = _pair_cost(devices, a, b, list(copy_sizes), repeats)
    levels, matrix = _group_levels(lat, bw, level_gap)
    depth = len(levels) - 1
    devs = tuple(
        Device(v.name, flops=f, memory=mem, mem_bandwidth=m, launch_overhead=o, path=(0,) * depth)
        for v, (f, m, o) in zip(vds, rates, strict=True)
    )
    return Cluster(
        devices=devs,
        levels=levels,
        level_matrix=matrix if k > 1 else None,
        name=name or f"calibrated-{devices}",
    )


def _default_memory(vds) -> float:
    if vds[0].is_cuda:
        import torch

        return float(torch.cuda.get_device_properties(vds[0].torch_device).total_memory)
    import psutil

    return float(psutil.virtual_memory().total) / len(vds)


def _group_levels(lat: np.ndarray, bw: np.ndarray, gap: float):
    """Levels from pair bandwidths: fastest first, a new level where bandwidth drops by
    more than ``gap``; each level's figures are the means of its pairs."""
    k = lat.shape[0]
    pairs = [(a, b) for a in range(k) for b in range(k) if a != b]
    if not pairs:
        return (Level("local", 1e12, 0.0),), None
    order = sorted(pairs, key=lambda p: -bw[p])
    groups: list[list[tuple[int, int]]] = [[order[0]]]
    for p in order[1:]:
        prev = groups[-1][-1]
        if bw[p] < bw[prev] * (1 - gap):
            groups.append([p])
        else:
            groups[-1].append(p)
    matrix = np.zeros((k, k), dtype=np.int64)
    levels = []
    for i, grp in enumerate(groups):
        for p in grp:
            matrix[p] = i
        levels.append(
            Level(
                f"level{i}",
                float(np.mean([bw[p] for p in grp])),
                float(np.mean([lat[p] for p in grp])),
            )
        )
    return tuple(levels), matrix.tolist()


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman rank correlation (average ranks for ties)."""

    def ranks(a: np.ndarray) -> np.ndarray:
        order = np.argsort(a, kind="mergesort")
        r = np.empty(len(a))
        r[order] = np.arange(len(a))
        for val in np.unique(a):  # average ties
            idx = a == val
            r[idx] = r[idx].mean()
        return r

    rx, ry = ranks(np.asarray(x, float)), ranks(np.asarray(y, float))
    if rx.std() == 0 or ry.std() == 0:
        return 0.0
    return float(np.corrcoef(rx, ry)[0, 1])


def rank_check(
    graph: Graph,
    cluster: Cluster,
    devices: str,
    *,
    placements: int = 20,
    seed: int = 0,
    repeats: int = 3,
) -> tuple[float, np.ndarray, np.ndarray]:
    """(Spearman, simulated, measured) over random placements with topological orders.

    Each placement draws device shares ``w ~ Dirichlet(1)`` and then every node's device
    from ``w``, so the sample spans balanced and lopsided placements (uniform devices
    would give near-identical makespans whose ranking is only noise).

    Measurements are interleaved to cancel drift (the machine warming up, other load):
    one untimed round over all placements, then ``repeats`` timed rounds, each running
    every placement once; a placement's measured makespan is its median over the rounds.
    """
    from placegym.envs.simulator import simulate

    rng = np.random.default_rng(seed)
    ex = TorchExecutor(graph, devices, warmup=0, repeats=1)
    d = cluster.num_devices
    chosen = [
        Placement(
            device=rng.choice(d, size=graph.num_nodes, p=rng.dirichlet(np.ones(d))),
            order=graph.topological_order.copy(),
        )
        for _ in range(placements)
    ]
    sim = np.array([simulate(graph, cluster, p).makespan for p in chosen])
    for p in chosen:
        ex.run(p)
    rounds = np.array([[ex.run(p).makespan for p in chosen] for _ in range(repeats)])
    real = np.median(rounds, axis=0)
    return spearman(sim, real), sim, real
