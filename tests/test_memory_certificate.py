"""The certificate that no placement fits in memory (``bounds.memory_infeasibility``):
hand-checked cases, and on random graphs, every placement of a certified instance is over
memory in the simulator."""

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from simcases import dags, graph, placement, unit_cluster

from placegym.envs import Graph, simulate
from placegym.envs.analysis.memory import memory_infeasibility


def test_a_node_whose_input_and_output_exceed_every_device():
    # 0 -> 1: node 1 holds its 6-byte input and its 5-byte output while it runs
    g = graph([1, 1], [(0, 1)], out_bytes=[6, 5])
    assert memory_infeasibility(g, unit_cluster(2, memory=11)) is None
    why = memory_infeasibility(g, unit_cluster(2, memory=10.5))
    assert why is not None and why.startswith("node 1 (") and "needs 11 bytes" in why
    for dev in itertools.product(range(2), repeat=2):
        assert simulate(g, unit_cluster(2, memory=10.5), placement(dev, [0, 1])).oom


def test_total_and_group_resident_bytes():
    g = Graph(flops=[1, 1, 1], out_bytes=[0, 0, 0], param_bytes=[4, 4, 4], edges=[])
    assert "total device memory 10" in memory_infeasibility(g, unit_cluster(2, memory=5))
    grouped = Graph(
        flops=[1, 1, 1], out_bytes=[0, 0, 0], param_bytes=[4, 4, 1], edges=[], group=[0, 0, -1]
    )
    why = memory_infeasibility(grouped, unit_cluster(3, memory=7))
    assert why == "group 0 holds 8 resident bytes, more than the largest device memory 7"
    assert memory_infeasibility(grouped, unit_cluster(3, memory=8)) is None


def test_unbounded_memory_and_empty_graphs_have_no_certificate():
    g = graph([1, 1], [(0, 1)], out_bytes=[6, 5])
    assert memory_infeasibility(g, unit_cluster(2)) is None
    assert memory_infeasibility(graph([], []), unit_cluster(2, memory=1)) is None


@settings(max_examples=300, deadline=None)
@given(dags(max_nodes=7), st.sampled_from([1.0, 2.0, 4.0, 6.0, 9.0]), st.integers(0, 2**31))
def test_a_certified_instance_has_no_placement_in_memory(g, memory, seed):
    cluster = unit_cluster(2, memory=memory)
    if g.num_nodes == 0 or memory_infeasibility(g, cluster) is None:
        return
    rng = np.random.default_rng(seed)
    for _ in range(8):
        dev = rng.integers(0, 2, g.num_nodes)
        order = rng.permutation(g.num_nodes)
        assert simulate(g, cluster, placement(dev, order)).oom
