"""Simulator speed (``make bench``): figures are printed, ratios measured in the same run.

Targets:
- ``simulate`` (full :class:`Schedule`: per-node times, transfer trace, peak memory) >= 20x
  an independent plain-Python heapq implementation of DESIGN §3
  (:mod:`benchmarks.plain_sim`) on a 230-node / 290-edge graph on 4 devices and on
  DOPPLER-sized graphs (75-370 nodes); ``simulate_makespan`` is the lean path;
- ``simulate_batch`` >= 50,000 placements/s of the 230-node graph on a 2-core machine,
  threads against one thread in the same run, results bit-identical;
- <= 20 ms for a 10,000-node / 30,000-edge graph on 64 devices.

Placements are random devices with the topological order as priority (many transfers:
the costly case). Single calls are timed in CPU time of the calling thread, best of
interleaved rounds; batches in wall-clock time (threads run at once).
"""

import numpy as np
import pytest
from benchmarks.plain_sim import plain_simulate
from benchmarks.timing import cpu_per_call, load_note, wall_per_call

from placegym.envs import Graph, Placement, load_cluster, simulate, simulate_batch
from placegym.envs.sim.simulator import default_threads, simulate_makespan
from placegym.envs.workloads import make_graph

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


def random_placement(g: Graph, num_devices: int, rng: np.random.Generator) -> Placement:
    return Placement(device=rng.integers(0, num_devices, g.num_nodes), order=g.topological_order)


def bench_graphs() -> list[Graph]:
    graphs = [layered_dag(230, 290, seed=0)]
    graphs += [make_graph(w) for w in ("chainmm", "ffnn", "llama_block", "llama_layer")]
    graphs += [make_graph("random_dag", nodes=n, seed=1) for n in (75, 370)]
    return graphs


def time_single_calls(g: Graph, c, p: Placement) -> dict[str, float]:
    """CPU seconds per call of the plain implementation, simulate and simulate_makespan:
    the best of three interleaved rounds."""
    calls = {
        "plain": (lambda: plain_simulate(g, c, p.device, p.order), 10),
        "simulate": (lambda: simulate(g, c, p), 300),
        "makespan": (lambda: simulate_makespan(g, c, p), 300),
    }
    best = dict.fromkeys(calls, np.inf)
    for _ in range(3):
        for key, (fn, repeat) in calls.items():
            best[key] = min(best[key], cpu_per_call(fn, repeat))
    return best


def test_simulate_vs_plain_python():
    c = load_cluster("p100x4")
    rng = np.random.default_rng(0)
    rows, ratios = [], {}
    for g in bench_graphs():
        p = random_placement(g, c.num_devices, rng)
        s = simulate(g, c, p)
        plain = plain_simulate(g, c, p.device, p.order)
        assert s.makespan == plain[0]  # same rules, same arithmetic
        np.testing.assert_allclose(s.peak_memory, plain[4], rtol=1e-12)
        assert simulate_makespan(g, c, p) == s.makespan
        best = time_single_calls(g, c, p)
        ratios[g.name] = best["plain"] / best["simulate"]
        rows.append(
            f"| {g.name} | {g.num_nodes} / {g.num_edges} | {len(s.transfers)} | "
            f"{best['plain'] * 1e6:,.0f} µs | {best['simulate'] * 1e6:.1f} µs | "
            f"**{ratios[g.name]:.1f}x** | {best['makespan'] * 1e6:.1f} µs | "
            f"{best['plain'] / best['makespan']:.1f}x |"
        )
    print(f"\n\nsimulator: one call, CPU time per call, best of 3x5 rounds ({load_note()})")
    print("random devices on p100x4, topological priority; target simulate >= 20x plain")
    print(
        "| graph | nodes / edges | transfers | plain Python (heapq) | simulate | ratio | "
        "simulate_makespan | ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    doppler = [r for name, r in ratios.items() if name != "bench-230"]
    geomean = float(np.exp(np.mean(np.log(doppler))))
    worst = min(ratios, key=ratios.get)
    print(
        f"DOPPLER-sized graphs: geometric mean {geomean:.1f}x, lowest {ratios[worst]:.1f}x "
        f"({worst})"
    )
    assert ratios["bench-230"] >= 20, f"simulate is {ratios['bench-230']:.1f}x plain on 230 nodes"
    assert geomean >= 20, f"simulate is {geomean:.1f}x plain on DOPPLER-sized graphs"


def test_batch_throughput_threads_vs_one_thread():
    g = layered_dag(230, 290, seed=0)
    c = load_cluster("p100x4")
    rng = np.random.default_rng(1)
    b = 2048
    devs = rng.integers(0, c.num_devices, (b, g.num_nodes))
    orders = np.tile(g.topological_order, (b, 1))
    threads = default_threads()
    one = simulate_batch(g, c, devs, orders, threads=1)
    many = simulate_batch(g, c, devs, orders, threads=threads)
    assert (one.makespan == many.makespan).all() and (one.peak_memory == many.peak_memory).all()
    assert one.makespan[0] == simulate(g, c, Placement(device=devs[0], order=orders[0])).makespan
    rate: dict[tuple[int, bool], float] = {}
    for _ in range(3):  # interleaved rounds
        for th in (1, threads):
            for memory in (False, True):
                t = wall_per_call(
                    lambda th=th, memory=memory: simulate_batch(
                        g, c, devs, orders, memory=memory, threads=th
                    ),
                    1,
                    rounds=3,
                )
                rate[th, memory] = max(rate.get((th, memory), 0.0), b / t)
    print(f"\n\nsimulate_batch: {b} random placements of {g.name} on p100x4 ({load_note()})")
    print("placements/s, wall clock, best of 3x3 rounds; target >= 50,000/s on 2 cores")
    print("| memory | 1 thread | threads | speed-up |")
    print("|---|---|---|---|")
    for memory in (False, True):
        r1, rn = rate[1, memory], rate[threads, memory]
        print(f"| {memory} | {r1:,.0f}/s | {threads}: **{rn:,.0f}/s** | {rn / r1:.2f}x |")


def test_10k_node_graph_on_64_devices():
    big = layered_dag(10_000, 30_000, seed=1)
    c64 = load_cluster("tpuv4-fattree-64")
    rng = np.random.default_rng(2)
    pb = random_placement(big, c64.num_devices, rng)
    s = simulate(big, c64, pb)
    t_big = cpu_per_call(lambda: simulate(big, c64, pb), 5, rounds=3)
    t_plain = cpu_per_call(lambda: plain_simulate(big, c64, pb.device, pb.order), 1, rounds=1)
    print(f"\n\nsimulator: 10,000 nodes / 30,000 edges on tpuv4-fattree-64 ({load_note()})")
    print("| plain Python | simulate | ratio | transfers |")
    print("|---|---|---|---|")
    print(
        f"| {t_plain * 1e3:.0f} ms | **{t_big * 1e3:.2f} ms** | {t_plain / t_big:.1f}x | "
        f"{len(s.transfers)} |"
    )
    assert t_big <= 0.020, f"10k-node graph took {t_big * 1e3:.1f} ms"
