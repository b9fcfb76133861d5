"""Builders and hypothesis strategies for simulator tests."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from placegym.envs import Cluster, Device, Graph, Level, Placement


def unit_cluster(
    num_devices: int = 2,
    *,
    bandwidth: float = 1.0,
    latency: float = 0.0,
    launch: float = 0.0,
    flops: float = 1.0,
    memory: float = 1e18,
    mem_bandwidth: float | None = None,
) -> Cluster:
    """Devices of ``flops`` FLOP/s on one node, one level: durations = flops, transfers =
    latency + bytes / bandwidth. Easy to solve by hand."""
    devs = tuple(
        Device(
            f"d{i}",
            flops=flops,
            memory=memory,
            mem_bandwidth=mem_bandwidth,
            launch_overhead=launch,
        )
        for i in range(num_devices)
    )
    return Cluster(devices=devs, levels=(Level("net", bandwidth, latency),), name="unit")


def graph(flops, edges, out_bytes=None, param_bytes=None) -> Graph:
    n = len(flops)
    return Graph(
        flops=flops,
        out_bytes=out_bytes if out_bytes is not None else [0] * n,
        param_bytes=param_bytes,
        edges=edges,
    )


def fork_join() -> Graph:
    """0 -> {1, 2, 3, 4} -> 5 with equal branches (the training tests' small graph);
    spreading the branches over two devices beats one device once the transfers are
    paid."""
    return graph(
        [1.0, 2.0, 2.0, 2.0, 2.0, 1.0],
        [(0, 1), (0, 2), (0, 3), (0, 4), (1, 5), (2, 5), (3, 5), (4, 5)],
        out_bytes=[0.5] * 6,
    )


def diamond_graph() -> Graph:
    """0 -> {1, 2} -> 3 -> 4, no tensor bytes."""
    return graph([1.0, 3.0, 1.0, 2.0, 1.0], [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4)])


def placement(device, order) -> Placement:
    return Placement(device=np.asarray(device), order=np.asarray(order))


@st.composite
def dags(draw, max_nodes: int = 12) -> Graph:
    """Random DAGs with small integer costs (many exact ties) and shuffled ids."""
    n = draw(st.integers(0, max_nodes))
    perm = draw(st.permutations(range(n))) if n else []
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=3 * n)) if pairs else []
    edges = [(perm[i], perm[j]) for i, j in chosen]
    small = st.sampled_from([0.0, 1.0, 2.0, 3.0, 0.5])
    flops = draw(st.lists(small, min_size=n, max_size=n))
    out_b = draw(st.lists(small, min_size=n, max_size=n))
    par_b = draw(st.lists(st.sampled_from([0.0, 1.0, 4.0]), min_size=n, max_size=n))
    return Graph(flops=flops, out_bytes=out_b, param_bytes=par_b, edges=edges, name="hyp")


@st.composite
def clusters(draw, max_devices: int = 4) -> Cluster:
    """Random small clusters: paths of depth 0-2, optional level_matrix, roofline or not,
    zero or positive latency and launch overhead."""
    nd = draw(st.integers(1, max_devices))
    depth = draw(st.integers(0, 2))
    devs = []
    for i in range(nd):
        path = tuple(draw(st.lists(st.integers(0, 1), min_size=depth, max_size=depth)))
        devs.append(
            Device(
                f"d{i}",
                flops=draw(st.sampled_from([1.0, 2.0, 4.0])),
                memory=draw(st.sampled_from([3.0, 10.0, 1e9])),
                mem_bandwidth=draw(st.sampled_from([None, 1.0, 8.0])),
                launch_overhead=draw(st.sampled_from([0.0, 0.25])),
                path=path,
            )
        )
    levels = tuple(
        Level(
            f"l{k}", draw(st.sampled_from([1.0, 2.0, 0.5])), draw(st.sampled_from([0.0, 0.5, 1.0]))
        )
        for k in range(depth + 1)
    )
    matrix = None
    if draw(st.booleans()):
        matrix = [[draw(st.integers(0, depth)) for _ in range(nd)] for _ in range(nd)]
    return Cluster(devices=tuple(devs), levels=levels, level_matrix=matrix, name="hyp")


@st.composite
def problems(draw, max_nodes: int = 12, max_devices: int = 4):
    """(graph, cluster, placement) triples."""
    g = draw(dags(max_nodes))
    c = draw(clusters(max_devices))
    n = g.num_nodes
    dev = draw(st.lists(st.integers(0, c.num_devices - 1), min_size=n, max_size=n))
    order = draw(st.permutations(range(n))) if n else []
    return g, c, placement(np.array(dev, dtype=np.int64), np.array(order, dtype=np.int64))
