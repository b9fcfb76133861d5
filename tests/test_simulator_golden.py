"""Hand-solved schedules: exact makespans, start times and transfers.

Unless said otherwise the cluster is :func:`simcases.unit_cluster`: 1 FLOP/s devices, no
roofline, no launch overhead, one level of bandwidth 1 B/s, so a node's duration is its
flops and a transfer takes latency + bytes.
"""

import networkx as nx
import numpy as np
import pytest
from simcases import graph, placement, unit_cluster

from placegym.envs import Cluster, Device, Graph, Level, simulate
from placegym.envs.sim.oracle import simulate_oracle

SIMULATORS = [simulate, simulate_oracle]


@pytest.fixture(params=SIMULATORS, ids=["compiled", "oracle"])
def sim(request):
    return request.param


def test_empty_graph_has_zero_makespan(sim):
    s = sim(graph([], []), unit_cluster(1), placement([], []))
    assert s.makespan == 0.0
    assert len(s.transfers) == 0
    assert s.peak_memory.tolist() == [0.0]


def test_chain_on_one_device_is_serial(sim):
    g = graph([1, 2, 3], [[0, 1], [1, 2]], out_bytes=[4, 4, 4])
    s = sim(g, unit_cluster(2), placement([0, 0, 0], [0, 1, 2]))
    assert s.makespan == 6.0
    assert s.start.tolist() == [0.0, 1.0, 3.0]
    assert s.finish.tolist() == [1.0, 3.0, 6.0]
    assert len(s.transfers) == 0


@pytest.mark.parametrize(("latency", "expected"), [(0.0, 10.0), (0.5, 10.5)])
def test_chain_split_pays_one_transfer(sim, latency, expected):
    g = graph([1, 2, 3], [[0, 1], [1, 2]], out_bytes=[4, 4, 4])
    s = sim(g, unit_cluster(2, latency=latency), placement([0, 0, 1], [0, 1, 2]))
    assert s.makespan == expected
    assert s.transfers.node.tolist() == [1]
    assert (s.transfers.src.tolist(), s.transfers.dst.tolist()) == ([0], [1])
    assert s.transfers.start.tolist() == [3.0]
    assert s.transfers.arrival.tolist() == [7.0 + latency]
    assert s.start[2] == 7.0 + latency


def test_fork_join(sim):
    # s -> {x, y} -> j ; y alone on device 1
    g = graph([1, 2, 3, 1], [[0, 1], [0, 2], [1, 3], [2, 3]], out_bytes=[1, 1, 2, 0])
    s = sim(g, unit_cluster(2), placement([0, 0, 1, 0], [0, 1, 2, 3]))
    assert s.start.tolist() == [0.0, 1.0, 2.0, 7.0]
    assert s.finish.tolist() == [1.0, 3.0, 5.0, 8.0]
    assert s.makespan == 8.0
    assert s.transfers.node.tolist() == [0, 2]
    assert s.transfers.start.tolist() == [1.0, 5.0]
    assert s.transfers.arrival.tolist() == [2.0, 7.0]


def test_diamond_one_transfer_serves_all_consumers_on_a_device(sim):
    # a -> b, a -> c, b -> d, c -> d with b and c both on device 1: a's output is sent once.
    g = graph([1, 1, 1, 1], [[0, 1], [0, 2], [1, 3], [2, 3]], out_bytes=[2, 1, 1, 0])
    s = sim(g, unit_cluster(2), placement([0, 1, 1, 0], [0, 1, 2, 3]))
    assert s.transfers.node.tolist() == [0, 1, 2]
    # a 0-1, send 1-3; b 3-4, c 4-5 on device 1; b's output 4-5, c's 5-6; d 6-7.
    assert s.start.tolist() == [0.0, 3.0, 4.0, 6.0]
    assert s.transfers.arrival.tolist() == [3.0, 5.0, 6.0]
    assert s.makespan == 7.0


def test_diamond_priority_order_decides_the_middle(sim):
    g = graph([1, 1, 2, 1], [[0, 1], [0, 2], [1, 3], [2, 3]])
    s = sim(g, unit_cluster(1), placement([0, 0, 0, 0], [0, 2, 1, 3]))
    assert s.start.tolist() == [0.0, 3.0, 1.0, 4.0]
    assert s.makespan == 5.0


def test_fifo_channel_contention(sim):
    # p (10 B) and q (2 B) on device 0 both feed device 1; q's transfer waits for p's.
    g = graph([1, 1, 1, 1], [[0, 2], [1, 3]], out_bytes=[10, 2, 0, 0])
    s = sim(g, unit_cluster(2), placement([0, 0, 1, 1], [0, 1, 2, 3]))
    assert s.transfers.node.tolist() == [0, 1]
    assert s.transfers.start.tolist() == [1.0, 11.0]
    assert s.transfers.arrival.tolist() == [11.0, 13.0]
    assert s.start.tolist() == [0.0, 1.0, 11.0, 13.0]
    assert s.makespan == 14.0


def test_channels_are_independent_per_ordered_pair(sim):
    # device 0 sends to 1 and to 2 at the same time; 1 -> 0 runs beside 0 -> 1.
    g = graph([1, 1, 1, 1, 1], [[0, 1], [0, 2], [3, 4]], out_bytes=[5, 0, 0, 5, 0])
    s = sim(g, unit_cluster(3), placement([0, 1, 2, 1, 0], [0, 1, 2, 3, 4]))
    assert sorted(
        zip(
            s.transfers.src.tolist(),
            s.transfers.dst.tolist(),
            s.transfers.start.tolist(),
            s.transfers.arrival.tolist(),
        )
    ) == [(0, 1, 1.0, 6.0), (0, 2, 1.0, 6.0), (1, 0, 1.0, 6.0)]
    assert s.makespan == 7.0


def test_priority_and_fifo_dispatch_differ(sim):
    # device 0: a (rank 0) then either c (rank 1, ready at 1) or b (rank 2, ready at 0).
    # c feeds the long node d on device 1.
    g = graph([1, 1, 1, 10], [[0, 2], [2, 3]])
    p = placement([0, 0, 0, 1], [0, 2, 1, 3])
    pri = sim(g, unit_cluster(2), p)
    fifo = sim(g, unit_cluster(2), p, dispatch="fifo")
    assert pri.start.tolist() == [0.0, 2.0, 1.0, 2.0]
    assert pri.makespan == 12.0
    assert fifo.start.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert fifo.makespan == 13.0


def test_fifo_breaks_equal_ready_times_by_rank(sim):
    g = graph([1, 1, 1], [])
    s = sim(g, unit_cluster(1), placement([0, 0, 0], [2, 0, 1]), dispatch="fifo")
    assert s.start.tolist() == [1.0, 2.0, 0.0]


def test_zero_delay_events_are_handled_after_the_dispatch(sim):
    # At t=1, u finishes on device 1 (w becomes ready) and a finishes on device 0 with a
    # zero-time transfer to device 1 (for y, rank 0). Rule 7: the arrival is handled after
    # the dispatch at t=1, so device 1 starts w first and y waits.
    g = graph([1, 1, 3, 1], [[0, 3], [1, 2]])  # a=0, u=1, w=2, y=3
    s = sim(g, unit_cluster(2), placement([0, 1, 1, 1], [0, 3, 2, 1]))
    assert s.transfers.arrival.tolist() == [1.0]
    assert s.start.tolist() == [0.0, 0.0, 1.0, 4.0]
    assert s.makespan == 5.0


def test_zero_duration_node_finishes_in_a_later_round(sim):
    # z takes no time; its consumer y (rank 0) still beats x (rank 2) at t=0.
    g = graph([0, 5, 1], [[0, 2]])  # z=0, x=1, y=2
    s = sim(g, unit_cluster(1), placement([0, 0, 0], [0, 2, 1]))
    assert s.start.tolist() == [0.0, 1.0, 0.0]
    assert s.makespan == 6.0


def test_roofline_and_launch_overhead():
    # io = out 4 + params 2 + inputs 3 = 9 bytes at 3 B/s = 3 s > 1 FLOP / 1 FLOP/s.
    g = graph([1, 1], [[0, 1]], out_bytes=[3, 4], param_bytes=[0, 2])
    c = unit_cluster(1, mem_bandwidth=3.0, launch=0.5)
    for sim in SIMULATORS:
        s = sim(g, c, placement([0, 0], [0, 1]))
        # node 0: io = 3 B -> 1 s, flops 1 s; + 0.5 launch
        assert s.finish.tolist() == [1.5, 1.5 + 3.0 + 0.5]


def test_memory_peak_on_one_device(sim):
    # a (out 10, params 5) -> b (out 20) -> c (out 1): live sets 10, 30, 21 (+5 params).
    g = graph([1, 1, 1], [[0, 1], [1, 2]], out_bytes=[10, 20, 1], param_bytes=[5, 0, 0])
    p = placement([0, 0, 0], [0, 1, 2])
    assert sim(g, unit_cluster(1, memory=35), p).peak_memory.tolist() == [35.0]
    assert not sim(g, unit_cluster(1, memory=35), p).oom
    assert sim(g, unit_cluster(1, memory=34.5), p).oom


def test_memory_of_sent_and_received_tensors(sim):
    # a (out 10) on 0 -> b (out 3) on 1. a's output lives on 0 until its transfer arrives
    # at 11; the copy lives on 1 from 1 until b finishes at 12; b's output [11, 12).
    g = graph([1, 1], [[0, 1]], out_bytes=[10, 3], param_bytes=[2, 7])
    s = sim(g, unit_cluster(2), placement([0, 1], [0, 1]))
    assert s.peak_memory.tolist() == [12.0, 20.0]


def test_level_matrix_overrides_the_tree():
    levels = (Level("fast", 4.0, 0.0), Level("mid", 2.0, 0.0), Level("slow", 1.0, 0.0))
    devs = tuple(Device(f"d{i}", flops=1.0, memory=1e9, path=(0, 0)) for i in range(3))
    tree = Cluster(devices=devs, levels=levels)
    mesh = Cluster(devices=devs, levels=levels, level_matrix=[[0, 2, 1], [2, 0, 0], [1, 0, 0]])
    assert tree.pair_level.tolist() == [[0, 0, 0]] * 3
    g = graph([1, 1, 1], [[0, 1], [0, 2]], out_bytes=[4, 0, 0])
    p = placement([0, 1, 2], [0, 1, 2])
    for sim in SIMULATORS:
        s = sim(g, mesh, p)
        assert s.transfers.arrival.tolist() == [5.0, 3.0]  # level 2: 4 B at 1 B/s; level 1
        assert s.makespan == 6.0
        assert sim(g, tree, p).makespan == 3.0


def test_pair_level_from_paths():
    devs = tuple(
        Device(f"d{i}", 1.0, 1.0, path=p) for i, p in enumerate([(0, 0), (0, 0), (0, 1), (1, 0)])
    )
    c = Cluster(devices=devs, levels=(Level("a", 1), Level("b", 1), Level("c", 1)))
    assert c.pair_level.tolist() == [[0, 0, 1, 2], [0, 0, 1, 2], [1, 1, 0, 2], [2, 2, 2, 0]]


# ---------------------------------------------------------------- analytic oracles
def _random_graph(seed: int, n: int = 40, p: float = 0.1) -> Graph:
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    edges = [
        (int(perm[i]), int(perm[j])) for i in range(n) for j in range(i + 1, n) if rng.random() < p
    ]
    return Graph(flops=rng.uniform(0, 10, n), out_bytes=rng.uniform(0, 5, n), edges=edges)


@pytest.mark.parametrize("seed", range(5))
def test_one_device_is_the_serial_sum(sim, seed):
    g = _random_graph(seed)
    rng = np.random.default_rng(seed)
    c = unit_cluster(3, launch=0.1, flops=2.0)
    s = sim(g, c, placement(np.full(g.num_nodes, 1), rng.permutation(g.num_nodes)))
    assert s.makespan == pytest.approx(float(np.sum(g.flops / 2.0 + 0.1)), rel=1e-12)
    assert len(s.transfers) == 0


@pytest.mark.parametrize("seed", range(5))
def test_free_communication_and_enough_devices_give_the_critical_path(sim, seed):
    g = _random_graph(seed)
    g = Graph(flops=g.flops, out_bytes=np.zeros(g.num_nodes), edges=g.edges)
    n = g.num_nodes
    c = unit_cluster(n, latency=0.0)
    rng = np.random.default_rng(seed)
    s = sim(g, c, placement(np.arange(n), rng.permutation(n)))
    nxg = nx.DiGraph(g.edges.tolist())
    nxg.add_nodes_from(range(n))
    earliest, longest = {}, {}
    for v in nx.topological_sort(nxg):
        earliest[v] = max((longest[u] for u in nxg.predecessors(v)), default=0.0)
        longest[v] = earliest[v] + g.flops[v]
    assert s.makespan == max(longest.values())
    assert s.start.tolist() == [earliest[v] for v in range(n)]
