"""PlacementState (the SEL/PLC process) and the static analysis it relies on."""

import numpy as np
import pytest
from simcases import graph, unit_cluster

from placegym.envs import Cluster, Device, Level, load_cluster, simulate
from placegym.envs.analysis.levels import (
    b_level,
    critical_path_length,
    durations_on,
    mean_comm,
    mean_durations,
    t_level,
)
from placegym.envs.mdp.state import PlacementState
from placegym.envs.workloads import ffnn, llama_layer


def diamond():
    # a -> b, a -> c, b -> d, c -> d; flops 1, 2, 3, 1; out_bytes 4, 1, 1, 0
    return graph([1, 2, 3, 1], [[0, 1], [0, 2], [1, 3], [2, 3]], out_bytes=[4, 1, 1, 0])


def test_levels_by_hand():
    g = diamond()
    c = unit_cluster(2, latency=0.5)  # comm of b bytes = 0.5 + b
    assert mean_durations(g, c).tolist() == [1, 2, 3, 1]
    assert mean_comm(g, c).tolist() == [4.5, 1.5, 1.5, 0.5]
    # b-level: d = 1; c = 3 + 1.5 + 1 = 5.5; b = 2 + 1.5 + 1 = 4.5; a = 1 + 4.5 + 5.5 = 11
    assert b_level(g, c).tolist() == [11.0, 4.5, 5.5, 1.0]
    # t-level: a = 0; b = c = 1 + 4.5 = 5.5; d = max(5.5 + 2 + 1.5, 5.5 + 3 + 1.5) = 10
    assert t_level(g, c).tolist() == [0.0, 5.5, 5.5, 10.0]
    assert critical_path_length(g, c) == 11.0
    assert (t_level(g, c) + b_level(g, c)).max() == 11.0
    one = unit_cluster(1)
    assert mean_comm(g, one).tolist() == [0, 0, 0, 0]
    assert critical_path_length(graph([], []), one) == 0.0


def test_durations_on_heterogeneous_devices():
    devs = (
        Device("slow", 1.0, 1e9, mem_bandwidth=2.0, launch_overhead=0.5),
        Device("fast", 4.0, 1e9),
    )
    c = Cluster(devices=devs, levels=(Level("l", 1.0),))
    g = graph([8, 1], [[0, 1]], out_bytes=[6, 0])
    # node 0: slow max(8, 6/2) + 0.5 = 8.5, fast 2; node 1: io = 6 -> slow max(1, 3) + .5
    assert durations_on(g, c).tolist() == [[8.5, 2.0], [3.5, 0.25]]
    assert durations_on(g, c, 1).tolist() == [3.5, 0.25]


def test_sel_plc_alternate_and_frontier_grows():
    g = diamond()
    s = PlacementState(g, unit_cluster(2))
    assert s.phase == "select" and s.frontier().tolist() == [0]
    assert not s.place_mask().any()
    s.select(0)
    assert s.phase == "place" and not s.select_mask().any()
    assert s.place_mask().tolist() == [True, True]
    s.place(1)
    assert s.frontier().tolist() == [1, 2]
    s.select(2)
    s.place(0)
    assert s.frontier().tolist() == [1]  # d still waits for b
    s.select(1)
    s.place(1)
    s.select(3)
    s.place(0)
    assert s.done and s.order == [0, 2, 1, 3]
    p = s.to_placement()
    assert p.device.tolist() == [1, 1, 0, 0] and p.rank.tolist() == [0, 2, 1, 3]


def test_illegal_transitions_raise_with_context():
    s = PlacementState(diamond(), unit_cluster(2))
    with pytest.raises(ValueError, match=r"select: node 3 is not in the frontier \(1 legal"):
        s.select(3)
    with pytest.raises(ValueError, match=r"place: phase is 'select'"):
        s.place(0)
    s.select(0)
    with pytest.raises(ValueError, match=r"select: phase is 'place' \(node 0 awaits"):
        s.select(1)
    with pytest.raises(ValueError, match=r"place: device 2 is not legal for node 0 \(2 legal"):
        s.place(2)
    with pytest.raises(ValueError, match=r"to_placement: 0 of 4 nodes placed"):
        s.to_placement()


def test_list_schedule_estimates_by_hand():
    g = diamond()
    c = unit_cluster(2, latency=0.5)
    s = PlacementState(g, c)
    s.select(0)
    assert s.earliest_start().tolist() == [0.0, 0.0]
    s.place(0)  # a: 0-1 on device 0
    s.select(2)
    # c on device 0 starts at 1; on device 1 after a's 4 bytes: 1 + 0.5 + 4
    assert s.earliest_start().tolist() == [1.0, 5.5]
    assert s.inputs_present().tolist() == [1.0, 0.0]
    s.place(1)  # c: 5.5-8.5
    s.select(1)
    s.place(0)  # b: 1-3
    s.select(3)
    # d's inputs: b on 0 at 3 (on 1 at 3 + 1.5), c on 1 at 8.5 (on 0 at 8.5 + 1.5)
    assert s.input_arrival().tolist() == [10.0, 8.5]
    assert s.earliest_finish().tolist() == [11.0, 9.5]
    assert s.inputs_present().tolist() == [0.5, 0.5]
    s.place(1)
    assert s.est_finish.tolist() == [1.0, 3.0, 8.5, 9.5]
    assert s.load.tolist() == [3.0, 4.0]
    # without contention and with this order the estimate equals the simulation here
    assert simulate(g, c, s.to_placement()).makespan == 9.5


def test_memory_mask_and_its_fallback():
    g = graph([1, 1, 1], [], param_bytes=[6, 6, 20])
    c = unit_cluster(2, memory=10)
    s = PlacementState(g, c)
    s.select(0)
    s.place(0)
    s.select(1)
    assert s.place_mask().tolist() == [False, True]
    s.place(1)
    s.select(2)  # fits nowhere: every device is legal and the OOM shows when simulated
    assert s.place_mask().tolist() == [True, True]
    s.place(0)
    assert s.param_used.tolist() == [26, 6]
    assert simulate(g, c, s.to_placement()).oom
    off = PlacementState(g, c, memory_mask=False)
    off.select(0)
    off.place(0)
    off.select(1)
    assert off.place_mask().tolist() == [True, True]


def test_unbounded_says_when_memory_never_narrows_the_mask():
    g = graph([1, 1, 1], [], param_bytes=[6, 6, 20])  # 32 resident bytes, no outputs
    assert not PlacementState(g, unit_cluster(2, memory=31)).unbounded  # may bind
    assert PlacementState(g, unit_cluster(2, memory=31), memory_mask=False).unbounded
    roomy = PlacementState(g, unit_cluster(2, memory=40))
    assert roomy.unbounded
    for v in range(3):  # every device stays legal, as place_mask says
        roomy.select(v)
        assert roomy.place_mask().tolist() == [True, True]
        roomy.place(1)
    # at the bound itself, rounding could tip param_used + need over: not claimed
    assert not PlacementState(g, unit_cluster(2, memory=32)).unbounded


def test_copy_is_independent():
    s = PlacementState(diamond(), unit_cluster(2))
    s.select(0)
    t = s.copy()
    t.place(1)
    assert s.phase == "place" and s.device[0] == -1
    assert t.phase == "select" and t.device[0] == 1
    assert t.frontier().tolist() == [1, 2] and s.frontier().tolist() == []


def test_a_full_episode_on_a_workload_gives_a_valid_placement():
    g = ffnn()
    c = unit_cluster(4, bandwidth=1e10, flops=1e12)
    s = PlacementState(g, c)
    rng = np.random.default_rng(0)
    steps = 0
    while not s.done:
        s.select(int(rng.choice(s.frontier())))
        s.place(int(rng.choice(np.flatnonzero(s.place_mask()))))
        steps += 2
    assert steps == 2 * g.num_nodes
    p = s.to_placement()
    p.check(g, c)
    # selection order is a topological order
    pos = np.empty(g.num_nodes, dtype=int)
    pos[p.order] = np.arange(g.num_nodes)
    assert (pos[g.edges[:, 0]] < pos[g.edges[:, 1]]).all()


def test_estimates_equal_their_vectorised_definitions_on_every_node():
    """input_arrival / earliest_start / inputs_present, computed per producer (few inputs)
    or in one pass (many: llama_layer has nodes with 17), equal the whole-array formulas
    exactly, for placed, frontier and not-yet-ready nodes, along a random episode."""
    g, c = llama_layer(), load_cluster("h100-2x8")
    s = PlacementState(g, c)
    rng = np.random.default_rng(0)
    lat, inv_bw, out = s.costs.latency, s.costs.inv_bandwidth, g.out_bytes
    checked = 0
    while not s.done:
        s.select(int(rng.choice(s.frontier())))
        s.place(int(rng.choice(np.flatnonzero(s.place_mask()))))
        if s.num_placed % 20:
            continue
        for v in range(g.num_nodes):
            preds = g.predecessors(v)
            placed = preds[s.device[preds] >= 0]
            dev = s.device[placed]
            arrival = (
                s.est_finish[placed][:, None] + lat[dev] + out[placed][:, None] * inv_bw[dev]
            ).max(axis=0, initial=0.0)
            share = np.bincount(dev, weights=out[placed], minlength=c.num_devices)
            total = out[preds].sum()
            assert np.array_equal(s.input_arrival(v), arrival)
            assert np.array_equal(s.earliest_start(v), np.maximum(s.device_free, arrival))
            expected = share / total if len(preds) and total > 0 else np.zeros(c.num_devices)
            assert np.array_equal(s.inputs_present(v), expected)
            checked += 1
    assert checked >= 9 * g.num_nodes
