"""What per-kind node times and recomputation cost (``make bench``), each beside the path
it extends, measured in the same run:

- per-kind times: ``simulate`` on the 230-node bench graph with one measured time per
  node next to the same times given per device kind (``{"gpu": t, "cpu": 2t}``) on
  p100x4 whose devices are of kind ``gpu``: the same durations, so the same schedule; the
  cost is the cost table's extra column, paid once per (graph, cluster) and cached;
- recomputation: ``simulate`` of a training step (``to_training_step`` of the bench graph)
  without a recompute set next to the same placement recomputing every other forward
  node (its extended graph is built per call).
"""

import dataclasses

import numpy as np
import pytest
from benchmarks.test_sim_speed import bench_graphs, random_placement
from benchmarks.timing import cpu_per_call, load_note

from placegym.envs import Graph, Placement, load_cluster, simulate
from placegym.envs.workloads import to_training_step

pytestmark = pytest.mark.benchmark


def _best(fn, n: int = 100, rounds: int = 3) -> float:
    return min(cpu_per_call(fn, n) for _ in range(rounds))


def test_per_kind_times_next_to_scalar_times():
    base = load_cluster("p100x4")
    cluster = dataclasses.replace(
        base, devices=tuple(dataclasses.replace(d, kind="gpu") for d in base.devices)
    )
    g = bench_graphs()[0]
    t = 1e-5 * (1 + np.arange(g.num_nodes) % 7)
    scalar = dataclasses.replace(g, time=t, kind_time={})
    per_kind = dataclasses.replace(
        g, time=np.full(g.num_nodes, np.nan), kind_time={"gpu": t, "cpu": 2 * t}
    )
    p = random_placement(g, cluster.num_devices, np.random.default_rng(0))
    assert simulate(scalar, cluster, p).makespan == simulate(per_kind, cluster, p).makespan
    a = _best(lambda: simulate(scalar, cluster, p))
    b = _best(lambda: simulate(per_kind, cluster, p))
    print(
        f"\n\nsimulate, {g.num_nodes} nodes on p100x4 ({load_note()}): scalar times "
        f"{a * 1e6:.1f} µs, per-kind times {b * 1e6:.1f} µs: **{b / a:.2f}x**"
    )
    assert b / a < 2.0


def test_recomputation_next_to_none():
    cluster = load_cluster("p100x4")
    g: Graph = to_training_step(bench_graphs()[0])
    n = g.num_nodes // 2
    rng = np.random.default_rng(0)
    p = random_placement(g, cluster.num_devices, rng)
    device = p.device.copy()
    device[n:] = device[:n]  # each backward node with its forward node (their group)
    plain = Placement(device=device, order=p.order)
    forward = [v for v in range(n) if g.spec[v].get("kind") != "input"]
    recompute = Placement(device=device, order=p.order, recompute=np.array(forward[::2]))
    a = _best(lambda: simulate(g, cluster, plain), 50)
    b = _best(lambda: simulate(g, cluster, recompute), 50)
    sa, sb = simulate(g, cluster, plain), simulate(g, cluster, recompute)
    print(
        f"\n\nsimulate, a {g.num_nodes}-node training step on p100x4 ({load_note()}): "
        f"without recomputation {a * 1e6:.1f} µs, recomputing {len(forward[::2])} nodes "
        f"{b * 1e6:.1f} µs: **{b / a:.2f}x**; makespan {sb.makespan / sa.makespan:.3f}x, "
        f"peak memory {sb.peak_memory.max() / sa.peak_memory.max():.3f}x"
    )
