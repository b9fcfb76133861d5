"""Simulator speed (``make bench``): figures are printed, ratios measured in the same run.

Targets: >= 20x the plain heapq reference on a ~230-node / 290-edge graph on 4 devices;
<= 20 ms for a 10,000-node / 30,000-edge graph on 64 devices.
"""

import time

import numpy as np
import pytest

from placegym.envs import Graph, Placement, load_cluster, simulate, simulate_batch
from placegym.envs.reference import simulate_reference

pytestmark = pytest.mark.benchmark


def layered_dag(n: int, e: int, seed: int) -> Graph:
    """A random DAG with exactly ``n`` nodes and ``e`` edges, every node reachable in
    layers of ~sqrt(n) nodes, costs in the range of DOPPLER's block kernels."""
    rng = np.random.default_rng(seed)
    width = max(2, int(np.sqrt(n)))
    layer = np.arange(n) // width
    edges: set[tuple[int, int]] = set()
    for v in range(width, n):  # one producer from the previous layer each
        lo = (layer[v] - 1) * width
        edges.add((int(rng.integers(lo, lo + width)), v))
    while len(edges) < e:
        u, v = sorted(rng.integers(0, n, 2).tolist())
        if layer[u] < layer[v]:
            edges.add((u, v))
    return Graph(
        flops=rng.uniform(1e8, 5e10, n),
        out_bytes=rng.uniform(1e5, 4e7, n),
        param_bytes=rng.uniform(0, 1e7, n),
        edges=sorted(edges),
        layer=layer,
        name=f"bench-{n}",
    )


def per_call(fn, repeat: int, rounds: int = 5) -> float:
    """Best of ``rounds`` mean times of ``repeat`` calls, in seconds."""
    best = np.inf
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter() - t) / repeat)
    return best


def test_speed_vs_reference_and_10k_graph():
    g = layered_dag(230, 290, seed=0)
    c = load_cluster("p100x4")
    rng = np.random.default_rng(0)
    p = Placement(device=rng.integers(0, 4, g.num_nodes), order=g.topological_order.copy())
    fast, ref = simulate(g, c, p), simulate_reference(g, c, p)
    assert fast.makespan == pytest.approx(ref.makespan, rel=1e-12)
    t_fast = per_call(lambda: simulate(g, c, p), 500)
    t_ref = per_call(lambda: simulate_reference(g, c, p), 30)
    devs = rng.integers(0, 4, (256, g.num_nodes))
    orders = np.tile(g.topological_order, (256, 1))
    t_batch = per_call(lambda: simulate_batch(g, c, devs, orders, memory=False), 3) / 256

    big = layered_dag(10_000, 30_000, seed=1)
    c64 = load_cluster("tpuv4-fattree-64")
    pb = Placement(device=rng.integers(0, 64, big.num_nodes), order=big.topological_order.copy())
    simulate(big, c64, pb)
    t_big = per_call(lambda: simulate(big, c64, pb), 5, rounds=3)
    t_big_ref = per_call(lambda: simulate_reference(big, c64, pb), 1, rounds=1)

    ratio = t_ref / t_fast
    print("\n\nsimulator speed (best of 5 rounds)")
    print(
        "| graph | devices | reference (heapq) | simulate | ratio | simulate_batch per placement |"
    )
    print("|---|---|---|---|---|---|")
    print(
        f"| {g.num_nodes} nodes / {g.num_edges} edges | 4 | {t_ref * 1e6:.0f} µs | "
        f"{t_fast * 1e6:.1f} µs | **{ratio:.1f}x** | {t_batch * 1e6:.1f} µs |"
    )
    print(
        f"| {big.num_nodes} nodes / {big.num_edges} edges | 64 | {t_big_ref * 1e3:.0f} ms | "
        f"**{t_big * 1e3:.2f} ms** | {t_big_ref / t_big:.1f}x | |"
    )
    assert ratio >= 20, f"simulate is only {ratio:.1f}x faster than the reference"
    assert t_big <= 0.020, f"10k-node graph took {t_big * 1e3:.1f} ms"
